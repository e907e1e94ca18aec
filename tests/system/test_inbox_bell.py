"""A real browser (headless Chromium) on the demo's admin pages: the inbox bell with its count, the dropdown with each
item's time, opening an item (it is read on the page it lands on), and "mark all read" bringing the count to 0, on a
desktop and on a phone's width. Screenshots of each step go to docs/screenshots/."""

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


PHONE = (390, 844)


@pytest.mark.timeout(300)
def test_the_bell_in_the_demos_admin_counts_opens_and_marks_all_read(demo):
    from selenium.webdriver.common.by import By

    admin_url, password = demo
    driver = browser()
    SHOTS.mkdir(parents=True, exist_ok=True)
    items = lambda: driver.find_elements(By.CSS_SELECTOR, ".sluice-bell__item")  # noqa: E731
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
        wait_for(lambda: len(items()) == 3, what=lambda: f"three items in the dropdown, {len(items())} shown")
        titles = [item.find_element(By.CSS_SELECTOR, ".sluice-bell__item-title") for item in items()]
        assert "20 new comments in task «Quarterly report»" in [t.text for t in titles]  # twenty events, one item
        # A linked item is an <a> in the admin's header, whose links are white: its title keeps the bell's colour.
        colours = {t.value_of_css_property("color") for t in titles}
        assert colours == {"rgba(34, 34, 34, 1)"}, colours  # --sluice-bell-fg, #222
        # Each item shows when its newest event happened: the demo wrote them moments ago.
        times = [item.find_element(By.CSS_SELECTOR, ".sluice-bell__item-time") for item in items()]
        assert all(t.get_attribute("datetime") for t in times), [t.get_attribute("outerHTML") for t in times]
        assert {t.text for t in times} <= {"now", "1 minute ago", "2 minutes ago"}, [t.text for t in times]
        # The foot's two links, "See all" and "Settings", in the bell's accent: not the admin header's white links.
        links = driver.find_elements(By.CSS_SELECTOR, ".sluice-bell__link-text")
        assert [link.text for link in links] == ["See all", "Settings"]
        assert {link.value_of_css_property("color") for link in links} == {"rgba(192, 57, 43, 1)"}  # #c0392b
        driver.save_screenshot(str(SHOTS / "inbox-dropdown.png"))

        # Opening an item follows its link; the page it lands on already counts it read.
        budget = next(i for i in items() if "Budget review" in i.text)
        budget.click()
        wait_for(lambda: "?q=task-8" in driver.current_url, what=lambda: f"the item's link, at {driver.current_url}")
        badge = driver.find_element(By.CSS_SELECTOR, ".sluice-bell__count")
        assert badge.get_attribute("data-count") == "2"
        driver.find_element(By.CSS_SELECTOR, ".sluice-bell__button").click()
        wait_for(lambda: len(items()) == 3, what="the dropdown again")
        unread_titles = [i.text for i in driver.find_elements(By.CSS_SELECTOR, ".sluice-bell__item--unread")]
        assert len(unread_titles) == 2, unread_titles
        assert not any("Budget review" in t for t in unread_titles), unread_titles

        driver.set_window_size(*PHONE)
        panel = driver.find_element(By.CSS_SELECTOR, ".sluice-bell__panel")
        width = driver.execute_script("return document.documentElement.clientWidth")
        edges = lambda: driver.execute_script(  # noqa: E731
            "var box = arguments[0].getBoundingClientRect(); return [box.left, box.right];", panel
        )
        wait_for(
            lambda: 0 <= edges()[0] and edges()[1] <= width, what=lambda: f"the dropdown within {width}: {edges()}"
        )
        driver.save_screenshot(str(SHOTS / "inbox-dropdown-phone.png"))
        driver.set_window_size(1100, 700)

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
