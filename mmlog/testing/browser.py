"""A headless Debian chromium driven by selenium, for the console's browser tests and screenshots; the tests
skip, saying why, when selenium, chromium or chromedriver is missing."""

from __future__ import annotations

import shutil
import time

CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
DRIVER = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")


def _first(paths, name: str) -> str | None:
    for path in paths:
        if shutil.which(path):
            return path
    return shutil.which(name)


def missing() -> str | None:
    """Why no browser test can run here (None: they can)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed"
    if _first(CHROMIUM, "chromium") is None:
        return "Debian's chromium is not installed (/usr/bin/chromium)"
    if _first(DRIVER, "chromedriver") is None:
        return "chromedriver is not installed (/usr/bin/chromedriver)"
    return None


def chromium(width: int = 1280, height: int = 900):
    """A new headless chromium (the caller quits it)."""
    reason = missing()
    if reason:
        import pytest

        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = _first(CHROMIUM, "chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(_first(DRIVER, "chromedriver")), options=options)


def log_in(driver, console_url: str, user: str, password: str) -> None:
    """Open the console and log in through its form."""
    from selenium.webdriver.common.by import By

    driver.get(console_url)
    user_box = wait_for(lambda: driver.find_element(By.CSS_SELECTOR, "#login input[name=user]"))
    user_box.send_keys(user)
    driver.find_element(By.CSS_SELECTOR, "#login input[name=password]").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
    wait_for(lambda: driver.find_element(By.ID, "who").text == user)


def wait_for(probe, timeout: float = 20.0, every: float = 0.1):
    """probe()'s first truthy answer (exceptions count as not yet); AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            found = probe()
            if found:
                return found
        except Exception as exc:  # noqa: BLE001 - the page is still drawing
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {timeout} s (last: {last!r})")
        time.sleep(every)
