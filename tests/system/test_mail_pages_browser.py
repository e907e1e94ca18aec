"""What people receive, in a real browser (headless Chromium), on a desktop and at a 375-pixel phone width: the digest
email and an instant email as a worker sent them (English, and a Russian user's digest), the preference page saved
and then reloaded, the inbox page, the bell with its "See all" and "Settings" links, and the unsubscribe link's page.
Sluice's own project under the chart's gunicorn command, real workers, a real SMTP server. Screenshots of each go to
docs/screenshots/."""

import json
import os
import subprocess
import sys

import pytest

from sluice_tools.processes import ROOT, WorkerProcess
from tests.smtp_capture import smtp_capture
from tests.system.test_inbox_bell import SHOTS, browser
from tests.system.test_web_server import deployed_web, up
from tests.waiting import settled, wait_for

DESKTOP, PHONE = 1100, 375
CHANNELS = {
    "email": {"backend": "notifications.channels.email.EmailChannel"},
    "push": {"backend": "notifications.channels.console.ConsoleChannel"},
    "inbox": {"backend": "notifications.inbox.channel.InboxChannel"},
}
TASK_URL = "/api/pages/inbox/?task={entity_id}"
KINDS = {
    "meeting.invitation": {"class": "critical", "channels": ["email", "inbox"], "category": "meetings"},
    "meeting.reminder": {"class": "critical", "channels": ["push", "email"], "category": "meetings"},
    "task.assigned": {"class": "routine", "channels": ["email", "push", "inbox"], "category": "tasks", "url": TASK_URL},
    "task.comment": {"class": "routine", "channels": ["email", "inbox"], "category": "tasks", "url": TASK_URL},
    "task.due_changed": {"class": "routine", "channels": ["email"], "category": "tasks", "title": "Due date moved"},
    "account.security": {"class": "critical", "channels": ["email"], "mandatory": True, "title": "Security alert"},
}
MAKE_USERS = """
from django.contrib.auth import get_user_model
from notifications import preferences
User = get_user_model()
ada = User.objects.create_user("ada", email="ada@example.com", password="a-long-password-1", first_name="Ada",
                               is_staff=True)
ivan = User.objects.create_user("ivan", email="ivan@example.com", first_name="Иван")
preferences.set_quiet_hours(ivan, "Europe/Moscow", None, None)
for user in (ada, ivan):
    preferences.set(user, kind="task.comment", channel="email", mode="digest")
    preferences.set(user, kind="task.due_changed", channel="email", mode="digest")
print(ada.pk, ivan.pk)
"""
# Each user's events: a digest's worth of comments and due dates, an instant invitation, an assigned task.
EVENTS = """
from digest.flush import run_flush
from notifications import notify
for user, title in ((%(ada)s, "Quarterly report"), (%(ivan)s, "Квартальный отчёт")):
    notify(user, "meeting.invitation", entity_id="m-3", payload={"title": "Planning, Monday 10:00"})
    notify(user, "task.assigned", entity_id="task-8", payload={"title": "Budget review"})
    for n in range(5):
        notify(user, "task.comment", entity_id="task-7", payload={"title": title, "n": n})
    for n in range(2):
        notify(user, "task.due_changed", entity_id="task-9", payload={"title": "Hiring plan", "n": n})
    notify(user, "task.comment", entity_id="task-11", payload={"title": "Launch checklist"})
"""
FLUSH = "from digest.flush import run_flush; run_flush('test')"


@pytest.fixture
def smtp():
    with smtp_capture() as server:
        yield server


def shell(env, code):
    subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True, timeout=60)


def viewport(driver, width, height):
    """Emulate a screen of ``width`` × ``height`` CSS pixels (a phone's, with its viewport meta tag, below 500)."""
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 500}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)


def shoot(driver, name, width):
    """A screenshot of the whole page at ``width`` (up to 2,400 pixels tall) in docs/screenshots/<name>.png; the page
    must fit the width."""
    viewport(driver, width, 800)
    tall = driver.execute_script("return document.documentElement.scrollHeight")
    viewport(driver, width, min(max(tall, 600), 2400))
    overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{name}: {overflow} px wider than the screen at {width}"
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


@pytest.mark.timeout(420)
def test_emails_pages_and_the_bell_in_a_browser(redis_server, redis_client, smtp, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    controller, received = smtp
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'web.sqlite3'}",
        "REDIS_URL": redis_server.url,
        "SLUICE_KINDS": json.dumps(KINDS),
        "SLUICE_CHANNELS": json.dumps(CHANNELS),
        "SLUICE_USER_LANGUAGE": "tests.languages.language_of",
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": controller.hostname,
        "EMAIL_PORT": str(controller.port),
        "DJANGO_SECURE_COOKIES": "0",  # plain HTTP on loopback
    }
    server, port, ada, ivan = deployed_web(env, MAKE_USERS, ready_text="Listening at")
    site = f"http://127.0.0.1:{port}"
    env["SLUICE_SITE_URL"] = site
    workers = [WorkerProcess(klass, redis_server.url, env=env) for klass in ("critical", "routine")]
    server.start()
    driver = None
    try:
        for worker in workers:
            worker.start()
        wait_for(lambda: up(port), timeout=60, what="gunicorn up")
        shell(env, EVENTS % {"ada": ada, "ivan": ivan})
        wait_for(lambda: settled("critical", "routine"), timeout=60, what="the instant sends")
        shell(env, FLUSH)
        wait_for(lambda: len(received) == 6, timeout=60, what=lambda: f"six emails, {len(received)} came")
        wait_for(lambda: settled("routine"), what="the digests sent")
        emails = {(m["To"], str(m["Subject"]).strip()): m for m in received}
        digest = emails[("ada@example.com", "8 updates in your digest")]
        instant = emails[("ada@example.com", "Invitation: Planning, Monday 10:00")]
        russian = emails[("ivan@example.com", "8 обновлений в вашей сводке")]
        driver = browser()
        driver.execute_cdp_cmd("Emulation.setScrollbarsHidden", {"hidden": True})
        SHOTS.mkdir(parents=True, exist_ok=True)
        for name, message in (("email-digest", digest), ("email-instant", instant), ("email-digest-ru", russian)):
            html = message.get_body(("html",)).get_content()
            assert "<style" not in html
            page = tmp_path / f"{name}.html"
            page.write_text(html)
            driver.get(page.as_uri())
            wait_for(
                lambda: driver.execute_script("return [...document.images].every(i => i.complete && i.naturalWidth)"),
                what="the email's logo loaded from the site",
            )
            shoot(driver, name, DESKTOP)
            shoot(driver, f"{name}-phone", PHONE)
        text = russian.get_body(("plain",)).get_content()
        assert "- Квартальный отчёт: 5 обновлений" in text
        assert "- Hiring plan: 2 обновления" in text

        # The unsubscribe link's page, as a person who follows it sees it (the GET changes nothing).
        link = str(digest["List-Unsubscribe"]).strip()[1:-1]
        driver.get(link)
        assert driver.find_element(By.TAG_NAME, "h1").text == "Unsubscribe?"
        shoot(driver, "unsubscribe-confirm", DESKTOP)
        shoot(driver, "unsubscribe-confirm-phone", PHONE)

        # Signed in as Ada: the preference page, saved, then reloaded.
        driver.get(f"{site}/admin/login/?next=/api/pages/preferences/")
        driver.find_element(By.NAME, "username").send_keys("ada")
        driver.find_element(By.NAME, "password").send_keys("a-long-password-1")
        driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
        wait_for(lambda: "/api/pages/preferences/" in driver.current_url, what="the preference page")
        choose = lambda name, value: Select(driver.find_element(By.NAME, name)).select_by_value(value)  # noqa: E731
        choose("mode:task.assigned:push", "off")
        choose("mode:task.due_changed:email", "instant")
        choose("timezone", "Europe/Berlin")
        choose("cadence", "daily")
        for name, value in (("quiet_start", "22:00"), ("quiet_end", "07:00"), ("digest_at", "08:30")):
            field = driver.find_element(By.NAME, name)
            driver.execute_script("arguments[0].value = arguments[1]", field, value)
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_for(lambda: "saved=1" in driver.current_url, what="saved, and back on the page")
        assert "Your settings are saved." in driver.page_source
        driver.get(f"{site}/api/pages/preferences/")  # reloaded
        selected = lambda name: Select(driver.find_element(By.NAME, name)).first_selected_option  # noqa: E731
        assert selected("mode:task.assigned:push").get_attribute("value") == "off"
        assert selected("mode:task.due_changed:email").get_attribute("value") == "instant"
        assert selected("timezone").text == "Europe/Berlin"
        assert driver.find_element(By.NAME, "quiet_start").get_attribute("value") == "22:00"
        shoot(driver, "preferences-page", DESKTOP)
        shoot(driver, "preferences-page-phone", PHONE)

        # The inbox page, then the bell's dropdown with its two links.
        driver.get(f"{site}/api/pages/inbox/")
        items = driver.find_elements(By.CSS_SELECTOR, ".sluice-item")
        assert len(items) == 4, [i.text for i in items]
        shoot(driver, "inbox-page", DESKTOP)
        shoot(driver, "inbox-page-phone", PHONE)
        for width, name in ((DESKTOP, "bell-links"), (PHONE, "bell-links-phone")):
            viewport(driver, width, 640)
            driver.get(f"{site}/api/pages/inbox/")
            driver.find_element(By.CSS_SELECTOR, ".sluice-bell__button").click()
            wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, ".sluice-bell__item"), what="the dropdown's items")
            links = {
                a.text: a.get_attribute("href") for a in driver.find_elements(By.CSS_SELECTOR, ".sluice-bell__link")
            }
            assert links == {"See all": f"{site}/api/pages/inbox/", "Settings": f"{site}/api/pages/preferences/"}
            panel = driver.find_element(By.CSS_SELECTOR, ".sluice-bell__panel")
            box = driver.execute_script("var b = arguments[0].getBoundingClientRect(); return [b.left, b.right]", panel)
            assert box[0] >= 0, box
            assert box[1] <= driver.execute_script("return document.documentElement.clientWidth"), box
            driver.save_screenshot(str(SHOTS / f"{name}.png"))
        driver.find_element(By.LINK_TEXT, "See all").click()
        wait_for(lambda: driver.current_url == f"{site}/api/pages/inbox/", what="the inbox page from the bell")
    finally:
        if driver is not None:
            driver.quit()
        for worker in reversed(workers):
            worker.stop()
        server.stop()
