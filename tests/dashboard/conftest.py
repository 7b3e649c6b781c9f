"""Dashboard fixtures: a fixture library (SQLite or PostgreSQL), the app served from a thread on
it (read-only), and Debian's chromium driven by Playwright.

Chromium cannot be downloaded here, so Playwright drives /usr/bin/chromium through
``executable_path``; without it the browser tests skip, except under CI (env var CI set), where
.ci/run installs it, so a missing browser is a defect and they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evokernel.dashboard import open_library, running
from tests.conftest import _in_ci
from tests.dashboard.fixture_library import Fixture, build

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def fixture_library(library_url: str) -> tuple[str, Fixture]:
    return library_url, build(library_url)


@pytest.fixture
def served(fixture_library: tuple[str, Fixture]) -> Iterator[tuple[str, Fixture, str]]:
    """(base URL of the dashboard, the fixture's ids, the library's writable URL)."""
    url, fx = fixture_library
    lib = open_library(url)
    try:
        # 0.2 s polls: tests see updates quickly; the CLI default is 1 s.
        with running(lib, poll_s=0.2) as base:
            yield base, fx, url
    finally:
        lib.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (dev extra)")
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is missing: apt-get install -y chromium"
        if _in_ci():
            pytest.fail(f"{reason} (CI is set: .ci/run must install it)", pytrace=False)
        pytest.skip(reason)
    args = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium refuses to sandbox as root
    with sync_api.sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=str(CHROMIUM), args=args)
        yield instance
        instance.close()


class Console:
    """Every console error and uncaught page exception of one page."""

    def __init__(self, page: Any) -> None:
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))


@pytest.fixture
def page(browser: Any) -> Iterator[tuple[Any, Console]]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    console = Console(pg)
    yield pg, console
    context.close()
    assert console.errors == [], console.errors
