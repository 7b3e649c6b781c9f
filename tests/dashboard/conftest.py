"""Dashboard fixtures: a fixture library (SQLite or PostgreSQL), the app served from a thread on
it (read-only), and Debian's chromium driven by Playwright.

Chromium cannot be downloaded here, so Playwright drives Debian's chromium through
``executable_path`` (found by tests/report/browser.py: without it the browser tests skip, except
under CI, where .ci/run installs it, so a missing browser is a defect and they fail).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from evokernel.dashboard import open_library, running
from tests.dashboard.fixture_library import Fixture, build
from tests.report.browser import chromium_path


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
    executable = chromium_path()  # skips (fails under CI) without playwright or Debian's chromium
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium refuses to sandbox as root
    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=executable, args=args)
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
