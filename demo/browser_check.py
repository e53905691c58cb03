"""Open the web inspector of the demo game's assistant in headless Chromium, and check it.

It starts the demo server (``demo/server.py``, game ``build/demo_server``) unless it runs
already, logs in through the website's own login form as the demo's builder, opens the
index of assistants and the assistant's page at 1280 and at 390 pixels wide, and checks
from the rendered DOM that the usage chart, the context window's component bars and the
compaction list are there, and that the page does not scroll sideways. Screenshots of
whole pages go to ``build/browser/``; the JSON endpoint is read through the same session.
It stops the server it started.

Usage (``make test-browser`` installs Chromium and selenium, then runs this)::

    python demo/browser_check.py [GAME_DIR]
"""

import json
import os
import sys
import tempfile

import server
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

SHOTS = os.path.join(os.path.dirname(server.DEMO_DIR), "build", "browser")
WIDTHS = (1280, 390)
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# Chromium on a closed network: no background fetches, no sandbox as root.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
# What the assistant's page must show, by CSS selector, and how many at least.
EXPECTED = {
    "the usage chart (SVG)": (".ai-chart svg", 1),
    "the chart's line of tokens": (".ai-chart svg polyline.tokens", 1),
    "the context window's component bars": (".ai-bar .ai-seg", 3),
    "the compaction list": ("#compactions ~ .card", 1),
}


class CheckFailed(Exception):
    """A check of the rendered page failed; its message says which."""


def browser(profile):
    """Return a headless Chromium driven by chromedriver, with its profile in ``profile``."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


def log_in(driver):
    """Log in through the website's login form as the demo's builder."""
    driver.get(f"{server.WEB_URL}/auth/login/")
    driver.find_element(By.NAME, "username").send_keys(server.LOGIN[0])
    driver.find_element(By.NAME, "password").send_keys(server.LOGIN[1])
    driver.find_element(By.CSS_SELECTOR, "form [type=submit]").click()
    if driver.find_elements(By.NAME, "password"):
        raise CheckFailed("the login form did not accept the demo's builder")


def screenshot(driver, width, name):
    """Save the whole page at ``width`` pixels to ``build/browser/<name>-<width>.png``."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(max(height, 600), 16000))
    path = os.path.join(SHOTS, f"{name}-{width}.png")
    driver.save_screenshot(path)
    return path


def check_page(driver, url, width, name, expected=()):
    """Open ``url`` at ``width`` pixels and save its screenshot; return what is wrong with
    it (a list of sentences, empty when nothing is)."""
    driver.set_window_size(width, 900)
    driver.get(url)
    if "/auth/login" in driver.current_url:
        return [f"{url} sent the builder to the login page"]
    wrong = []
    for what, (selector, least) in expected:
        found = len(driver.find_elements(By.CSS_SELECTOR, selector))
        if found < least:
            wrong.append(f"{name} at {width} px: {what} missing ({selector}: {found})")
    wide, view = driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    if wide > view:
        wrong.append(f"{name} at {width} px scrolls sideways ({wide} px of content)")
    print(f"screenshot: {os.path.relpath(screenshot(driver, width, name))}")
    return wrong


def assistant_url(driver):
    """Return the address of the first assistant the index lists."""
    driver.get(f"{server.WEB_URL}/ai/")
    links = driver.find_elements(By.CSS_SELECTOR, "a[href^='/ai/'][href$='/']")
    links = [link.get_attribute("href") for link in links]
    links = [href for href in links if href.rstrip("/").split("/")[-1].isdigit()]
    if not links:
        raise CheckFailed("the index of assistants lists none")
    return links[0]


def check_json(driver, page):
    """Read the assistant's JSON endpoint in the logged-in browser; check what it holds."""
    driver.get(f"{page}json/")
    data = json.loads(driver.find_element(By.TAG_NAME, "body").text)
    if not data.get("compactions") or not data.get("usage_over_time"):
        raise CheckFailed("the JSON endpoint holds no compactions or no usage over time")
    return data


def run_checks(driver):
    """Log in and check every page at every width; raise :class:`CheckFailed` naming all
    that is wrong."""
    log_in(driver)
    wrong = []
    page = assistant_url(driver)
    for width in WIDTHS:
        wrong += check_page(driver, f"{server.WEB_URL}/ai/", width, "index")
        wrong += check_page(driver, page, width, "assistant", EXPECTED.items())
    data = check_json(driver, page)
    print(f"JSON: {len(data['compactions'])} compactions, {len(data['usage_over_time'])} ticks")
    if wrong:
        raise CheckFailed("; ".join(wrong))


def main(argv):
    """Start the server if need be, check the pages, stop what was started."""
    game_dir = argv[1] if len(argv) > 1 else server.DEFAULT_GAME_DIR
    os.makedirs(SHOTS, exist_ok=True)
    started = not server.website_answers()
    if started and server.start(game_dir):
        return 1
    try:
        with tempfile.TemporaryDirectory() as profile:
            driver = browser(profile)
            try:
                run_checks(driver)
            finally:
                driver.quit()
    except (CheckFailed, WebDriverException) as failure:
        print(f"FAILED: {failure}")
        return 1
    finally:
        if started:
            server.stop(game_dir)
    print("The inspector renders: chart, component bars and compactions, at 1280 and 390 px.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
