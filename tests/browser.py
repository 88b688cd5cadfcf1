"""Headless Chromium for the page tests: the Debian package's binary (CI installs it,
.ci/run), driven by Playwright; no browser download."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# CI containers often have a small /dev/shm, which crashes Chromium's renderer.
CHROMIUM_ARGS = ["--autoplay-policy=no-user-gesture-required", "--disable-dev-shm-usage"]


def chromium_or_skip() -> str:
    if CHROMIUM is None:
        if os.environ.get("FOLEY_REQUIRE_BROWSER"):
            pytest.fail("FOLEY_REQUIRE_BROWSER is set but there is no chromium")
        pytest.skip("needs the chromium package (apt install chromium; .ci/run installs it)")
    return CHROMIUM


def watched_page(browser, problems: list[str], **options):
    """A new page whose console errors and uncaught exceptions land in `problems`."""
    page = browser.new_page(**options)
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    return page
