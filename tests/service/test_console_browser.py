"""The web console in a real headless Chromium against a real ``pmwcm serve`` (issue 38).

A curator signs in, reviews a new session's budget plan, creates it and issues
a token; the analyst signs in, builds a query, and gets a labelled answer
while the budget moves; the curator then sees the answer, the refusal and the
audit. An analyst's token opening a curator page is shown the API's 403.
Every page fits a 640-pixel-wide window (a 1280-pixel window at 200% zoom)
without scrolling sideways. Screenshots of every page are saved under the
test's temporary directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, sync_playwright

from service.console_tour import CURATOR_PAGES, Console, launch, spent
from service.svc_support import curator_token, pmwcm_serve, write_tiny

AUDIT_REPORT = Path(__file__).parents[1] / "data" / "audit-report.md"


@dataclass
class Served:
    """A running ``pmwcm serve``, its curator token, one session and an analyst token."""

    url: str
    curator: str
    analyst: str
    data: Path
    schema: Path
    log: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("console")
    data, schema = write_tiny(root)
    args = ["--state", str(root / "state"), "--data-dir", str(root)]
    env = {"PMWCM_AUDIT_REPORT": str(AUDIT_REPORT)}
    with pmwcm_serve(args, root / "serve.log", env=env) as (url, lines):
        curator = curator_token(lines)
        assert curator is not None
        auth = {"Authorization": f"Bearer {curator}"}
        body = {"name": "base", "data_path": str(data), "schema_path": str(schema),
                "epsilon": 1.0, "delta": 1e-6, "parameters": {"prior": "uniform"}}  # fmt: skip
        made = httpx.post(f"{url}/v1/sessions", json=body, headers=auth, timeout=60)
        assert made.status_code in (201, 202), made.text
        issued = httpx.post(f"{url}/v1/sessions/base/tokens", json={}, headers=auth, timeout=60)
        assert issued.status_code == 201, issued.text
        yield Served(url, curator, issued.json()["token"], data, schema, root / "serve.log")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = launch(playwright)
        yield launched
        launched.close()


@pytest.fixture
def console(browser: Browser, served: Served, tmp_path: Path) -> Iterator[Console]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield Console(context.new_page(), served.url, shots=tmp_path)
    finally:
        context.close()


def test_curator_plans_and_creates_a_session_and_the_analyst_gets_a_labelled_answer(
    console: Console, served: Served
) -> None:
    page = console.page
    console.sign_in(served.curator, shot=True)
    body = {"name": "tour", "data_path": str(served.data), "schema_path": str(served.schema),
            "epsilon": 1.0, "delta": 1e-6}  # fmt: skip
    plan = console.review_plan(body)
    assert "Budget plan" in plan and "300, 4" in plan  # n and d, public
    assert re.search(r"oracle calls\s*\d", plan) and "sparse vector" in plan
    console.shot("create")
    console.confirm("tour")
    analyst = console.issue_token("tour", "alice")
    console.sign_out()

    console.sign_in(analyst)
    assert page.url.endswith("/ui/analyst.html")  # no token in any address
    attributes = page.inner_text("#schema table")
    assert "lo, mid, hi" in attributes  # the schema's values of c
    spec = console.build_query(loss="logistic", target="y", features=["a", "c"], radius=2)
    assert spec == {"loss": "logistic", "target": "y", "features": ["a", "c"], "radius": 2,
                    "l2": 0, "intercept": True}  # fmt: skip
    before = spent(page)
    assert console.ask().startswith("Answered from the")
    coefficients = page.inner_text("#answer table")
    for name in ("a=yes", "c=mid", "c=hi", "intercept"):
        assert name in coefficients
    rows = page.locator("#answer table tbody tr").count()
    assert rows >= 4 and page.locator("#answer svg.plot rect.bar").count() == rows  # one bar each
    assert spent(page) > before  # the budget moved, and the page says by how much
    assert "This answer cost epsilon" in page.inner_text("#moved")
    assert re.search(r"certificate\s*(Certified|A fresh private)", page.inner_text("#answer"))
    console.shot("analyst")

    console.build_query(loss="logistic", target="y", features=["a"], radius=1000)
    refused = console.ask(keyboard=True)  # no mouse needed
    assert refused.startswith("422") and "radius" in refused
    console.open("history")
    page.wait_for_selector("table tbody tr td")
    assert "a=yes" in page.inner_text("table") and "intercept" in page.inner_text("table")
    console.shot("history")
    console.sign_out()

    console.sign_in(served.curator)
    page.wait_for_selector("#content section.card svg.plot")
    assert "tour" in page.inner_text("#content")
    console.shot("sessions")
    console.open("answers", "?session=tour")
    page.wait_for_selector("#log table")
    assert "1 of 1 answers shown." in page.inner_text("#log")
    page.select_option("#f-source", "synthetic")  # nothing halted: no synthetic answer
    assert "0 of 1 answers shown." in page.inner_text("#log")
    page.select_option("#f-source", "")
    page.select_option("#f-token", analyst.split(".")[0])
    assert "1 of 1 answers shown." in page.inner_text("#log")
    console.shot("answers")
    console.open("refusals", "?session=tour")
    page.wait_for_selector("table")
    assert "Refused before any budget was spent" in page.inner_text("table")
    console.shot("refusals")
    console.open("tokens", "?session=tour")
    page.wait_for_selector("#tokens table")
    assert "alice" in page.inner_text("#tokens") and "curator" in page.inner_text("#tokens")
    console.shot("tokens")
    console.open("audit")
    page.wait_for_selector(".badge")
    assert page.inner_text(".badge") == "passed"
    assert "Laplace mechanism (NumPy)" in page.inner_text("details[open] table")
    assert page.locator("details").count() == 3  # mechanisms, cross-checks, sensitivity
    console.shot("audit")
    assert len(console.taken) == 9  # every page of the tour
    log = served.log.read_text()
    for token in (served.curator, analyst):
        assert token.split(".")[1] not in log  # never in the server's log


def test_an_analyst_token_cannot_open_curator_pages(console: Console, served: Served) -> None:
    console.sign_in(served.analyst)
    for name in CURATOR_PAGES:
        console.open(name)
        shown = console.status()
        assert shown.startswith("403 "), (name, shown)
        assert "not open to your token" in shown
        assert console.page.locator("#content table").count() == 0  # nothing of the curator's
    console.shot("analyst-on-curator-page")


def test_every_page_reads_at_200_percent_zoom_without_sideways_scrolling(
    browser: Browser, served: Served
) -> None:
    context = browser.new_context(viewport={"width": 640, "height": 900})
    page = context.new_page()
    try:
        narrow = Console(page, served.url)
        page.goto(f"{served.url}/ui/")
        assert page.evaluate("document.documentElement.scrollWidth") <= 640, "sign-in"
        narrow.sign_in(served.curator)
        for name in CURATOR_PAGES:
            narrow.open(name, "?session=base")
            page.wait_for_selector("#nav a")
            page.wait_for_load_state("networkidle")
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 640, (name, width)
        narrow.sign_out()
        narrow.sign_in(served.analyst)
        for name in ("analyst", "history"):
            narrow.open(name)
            page.wait_for_selector("#budget")
            assert page.evaluate("document.documentElement.scrollWidth") <= 640, name
    finally:
        context.close()


def test_the_pages_load_nothing_from_elsewhere(console: Console, served: Served) -> None:
    requested: list[str] = []
    console.page.on("request", lambda request: requested.append(request.url))
    console.sign_in(served.curator)
    for name in CURATOR_PAGES:
        console.open(name)
        console.page.wait_for_load_state("networkidle")
    assert requested and all(url.startswith(served.url + "/") for url in requested)
    headers = httpx.get(f"{served.url}/ui/sessions.html").headers
    assert "default-src 'none'" in headers["content-security-policy"]
    assert os.path.basename(httpx.get(f"{served.url}/ui", follow_redirects=True).url.path) == ""
