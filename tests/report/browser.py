"""Open a page in Debian's headless chromium through Playwright (no browser download needed)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser")


def _missing(reason: str) -> None:
    # Like PostgreSQL (tests/conftest.py): under CI, .ci/run installs the browser, so its absence
    # is a defect, not a skip.
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"{reason} (CI is set: .ci/run must install it)", pytrace=False)
    pytest.skip(reason)


def chromium_path() -> str:
    """The chromium binary, or a clean skip naming what is missing."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _missing("playwright (Python package) is not installed: pip install playwright")
    for path in (*CHROMIUM_PATHS, shutil.which("chromium") or ""):
        if path and Path(path).exists():
            return path
    _missing("no chromium binary (apt-get install -y chromium): the HTML report test needs a real browser")
    raise AssertionError("unreachable")


@dataclass
class PageVisit:
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)


def visit(url: str, screenshot: Path, script: str) -> PageVisit:
    """Load ``url`` offline, evaluate ``script`` (a JS arrow function returning facts), screenshot."""
    from playwright.sync_api import sync_playwright

    seen = PageVisit()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.on("console", lambda m: seen.console_errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: seen.page_errors.append(str(e)))
            # Offline: any request leaving the file would fail the "self-contained" promise.
            page.route("http*://**", lambda route: route.abort())
            page.goto(url, wait_until="load")
            seen.facts = page.evaluate(script)
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    return seen


FACTS = """() => ({
  images: Array.from(document.images).map(i => [i.alt, i.complete && i.naturalWidth > 0, i.naturalWidth]),
  sweepRows: document.querySelectorAll('#sweep-table tr').length,
  taskRows: document.querySelectorAll('table.tasks tr').length,
  lineageRows: document.querySelectorAll('table.lineage tr').length,
  usageRows: document.querySelectorAll('table.usage tr').length,
  failureRows: document.querySelectorAll('table.failures tr').length,
  title: document.title,
})"""


def check_in_browser(html: Path, screenshot: Path) -> dict[str, Any]:
    """Open a report, fail on any console or page error or undecoded plot; returns the page's facts."""
    seen = visit(html.resolve().as_uri(), screenshot, FACTS)
    assert seen.console_errors == [] and seen.page_errors == []
    assert seen.facts["images"] and all(ok for _alt, ok, _w in seen.facts["images"]), seen.facts["images"]
    assert screenshot.stat().st_size > 10_000
    return seen.facts
