"""A real browser (headless Chromium) on the demo's admin pages: the inbox bell with its count, the dropdown, and
"mark all read" bringing the count to 0. Screenshots of each step go to docs/screenshots/."""

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from sluice_tools.processes import ROOT
from tests.conftest import need
from tests.waiting import wait_for

SHOTS = ROOT / "docs" / "screenshots"
CHROMEDRIVER = "/usr/bin/chromedriver"


def browser():
    """Headless Chromium through chromedriver, or skip (fail under CI=true) without them."""
    if not (shutil.which("chromium") and os.path.exists(CHROMEDRIVER)):
        need("chromium and chromium-driver (apt-get install -y chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,700"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@pytest.fixture
def demo(redis_server, redis_client, tmp_path):
    """`manage.py demo` running (no replay): yields (admin URL, password)."""
    env = {"PATH": "/usr/bin:/bin", "REDIS_URL": redis_server.url, "DATABASE_URL": f"sqlite:///{tmp_path}/demo.db"}
    env["DJANGO_SECRET_KEY"] = "demo-key-of-this-test-" + "x" * 40
    env["PYTHONUNBUFFERED"] = "1"  # the demo's lines reach the log as it writes them
    log = tmp_path / "demo.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "demo", "--scale", "0"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    try:
        wait_for(lambda: "everything stays up" in log.read_text(), timeout=150, what=lambda: log.read_text()[-3000:])
        found = re.search(r"admin\s+(http://\S+/admin/)\s+\(admin / (\S+)\)", log.read_text())
        yield found[1], found[2]
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.timeout(300)
def test_the_bell_in_the_demos_admin_counts_opens_and_marks_all_read(demo):
    from selenium.webdriver.common.by import By

    admin_url, password = demo
    driver = browser()
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        driver.get(admin_url)
        driver.find_element(By.NAME, "username").send_keys("admin")
        driver.find_element(By.NAME, "password").send_keys(password)
        driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
        wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, ".sluice-bell"), what="the bell on the admin's page")
        badge = driver.find_element(By.CSS_SELECTOR, ".sluice-bell__count")
        wait_for(lambda: badge.text == "3", what=lambda: f"the count 3, showing {badge.text!r}")
        driver.save_screenshot(str(SHOTS / "inbox-bell.png"))

        driver.find_element(By.CSS_SELECTOR, ".sluice-bell__button").click()
        items = lambda: driver.find_elements(By.CSS_SELECTOR, ".sluice-bell__item")  # noqa: E731
        wait_for(lambda: len(items()) == 3, what=lambda: f"three items in the dropdown, {len(items())} shown")
        titles = [item.find_element(By.CSS_SELECTOR, ".sluice-bell__item-title").text for item in items()]
        assert "20 new comments in task «Quarterly report»" in titles, titles  # twenty events, one item
        driver.save_screenshot(str(SHOTS / "inbox-dropdown.png"))

        driver.find_element(By.CSS_SELECTOR, ".sluice-bell__mark-all").click()
        wait_for(lambda: badge.get_attribute("data-count") == "0", what="the count at 0 after mark all read")
        wait_for(lambda: not driver.find_elements(By.CSS_SELECTOR, ".sluice-bell__item--unread"), what="all read")
        driver.save_screenshot(str(SHOTS / "inbox-all-read.png"))
        # A new page load asks the count again: still 0, from Redis.
        driver.get(admin_url)
        badge = driver.find_element(By.CSS_SELECTOR, ".sluice-bell__count")
        assert badge.get_attribute("data-count") == "0"
    finally:
        driver.quit()
