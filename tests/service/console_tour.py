"""Driving the web console in a real headless Chromium: the browser, and the steps of a tour.

The browser is Debian's ``chromium`` (Playwright's own browser download cannot run
on these machines), driven by Playwright's Python package through
``executable_path``. :func:`chromium_executable` installs the package with
``apt-get`` when it is missing, as :mod:`postgres_cluster` relies on Debian's
PostgreSQL: nothing is mocked, and a browser that cannot be had fails the test.

The steps (:class:`Console`) are shared by ``tests/service/test_console_browser.py``
and ``scripts/console_screenshots.py``; each checks what the page shows and can
save a screenshot of it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page, Playwright

#: Seconds a page may take to show what a step waits for (the session build included).
STEP_TIMEOUT_MS = 30_000
CURATOR_PAGES = ("sessions", "create", "tokens", "answers", "refusals", "audit")


def chromium_executable() -> str:
    """Debian's ``chromium``, installed with ``apt-get`` first if it is missing.

    Concurrent test workers take a file lock, so only one runs ``apt-get`` at a time.

    Raises:
        RuntimeError: it is missing and cannot be installed (not root, no package).
    """
    found = shutil.which("chromium")
    if found:
        return found
    lock = Path(tempfile.gettempdir()) / "pmwcm-chromium-install.lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        found = shutil.which("chromium")
        if found:
            return found
        if os.geteuid() != 0:
            raise RuntimeError("chromium is not installed: run 'apt-get install -y chromium'.")
        env = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
        for argv in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
            done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    found = shutil.which("chromium")
    if found is None:
        raise RuntimeError("apt-get installed chromium, yet it is not on PATH.")
    return found


def launch(playwright: Playwright) -> Browser:
    """Headless Debian chromium (no sandbox: the tests run as root in a container)."""
    return playwright.chromium.launch(
        executable_path=chromium_executable(), headless=True, args=["--no-sandbox"]
    )


def spent(page: Page) -> float:
    """The epsilon spent that the budget card shows."""
    return float(page.inner_text("#spent"))


@dataclass
class Console:
    """One browser tab on the console at ``url``; screenshots go to ``shots`` (if set)."""

    page: Page
    url: str
    shots: Path | None = None
    taken: list[Path] = field(default_factory=list)

    def shot(self, name: str) -> None:
        """Saves a full-page screenshot ``console-NAME.png``."""
        if self.shots is None:
            return
        path = self.shots / f"console-{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        self.taken.append(path)

    def open(self, page: str, query: str = "") -> None:
        self.page.goto(f"{self.url}/ui/{page}.html{query}")

    def status(self) -> str:
        """The page's status line (errors included), once it shows one."""
        self.page.wait_for_selector("#status p", timeout=STEP_TIMEOUT_MS)
        return self.page.inner_text("#status")

    def sign_in(self, token: str, *, shot: bool = False) -> None:
        """Signs in with the keyboard alone: the token field has the focus; Enter submits."""
        self.page.goto(f"{self.url}/ui/")
        if shot:
            self.shot("sign-in")
        self.page.keyboard.type(token)
        self.page.keyboard.press("Enter")
        self.page.wait_for_url(re.compile(r"/ui/(sessions|analyst)\.html"), timeout=STEP_TIMEOUT_MS)

    def sign_out(self) -> None:
        self.page.get_by_role("button", name="Sign out").click()
        self.page.wait_for_url(re.compile(r"/ui/index\.html"))

    def review_plan(self, body: dict[str, Any]) -> str:
        """Fills in the new-session form, asks for its plan; returns the plan's text."""
        self.open("create")
        page = self.page
        page.wait_for_selector("#create")
        page.fill("#name", body["name"])
        page.fill("#data_path", body["data_path"])
        page.fill("#schema_path", body["schema_path"])
        page.fill("#epsilon", str(body["epsilon"]))
        page.fill("#delta", str(body["delta"]))
        assert page.is_disabled("#confirm"), "Confirm must wait for the plan"
        page.click("#review")
        page.wait_for_selector("#plan-title", timeout=STEP_TIMEOUT_MS)
        sent = json.loads(page.inner_text("#create-body"))
        assert {k: sent[k] for k in ("name", "epsilon", "delta")} == {
            k: body[k] for k in ("name", "epsilon", "delta")
        }
        return page.inner_text("#plan")

    def confirm(self, name: str) -> None:
        """Confirms the plan on screen; waits for the session to exist."""
        self.page.click("#confirm")
        self.page.wait_for_selector("#done .note", timeout=STEP_TIMEOUT_MS)
        assert f"Session {name} is created." in self.page.inner_text("#done")

    def issue_token(self, session: str, label: str) -> str:
        """Issues an analyst token on the tokens page; returns it (shown once)."""
        self.open("tokens", f"?session={session}")
        self.page.wait_for_selector("#tokens table")
        self.page.fill("#label", label)
        self.page.get_by_role("button", name="Issue an analyst token").click()
        self.page.wait_for_selector("#new-token", timeout=STEP_TIMEOUT_MS)
        token = self.page.input_value("#new-token")
        assert re.fullmatch(r"[0-9a-f]{16}\.[A-Za-z0-9_-]+", token), "not a token"
        return token

    def build_query(self, *, loss: str, target: str, features: list[str], radius: float) -> Any:
        """Fills in the query builder; returns the spec it shows it will send."""
        page = self.page
        page.wait_for_selector("#builder", timeout=STEP_TIMEOUT_MS)
        page.select_option("#loss", loss)
        page.select_option("#target", target)
        for box in page.query_selector_all("input[name=feature]"):
            if box.is_enabled():
                box.set_checked(box.get_attribute("value") in features)
        page.fill("#radius", str(radius))
        return json.loads(page.inner_text("#spec"))

    def ask(self, *, keyboard: bool = False) -> str:
        """Presses Ask (or, with ``keyboard``, Enter in the radius field); returns the status
        line once the page shows the outcome."""
        if keyboard:
            self.page.focus("#radius")
            self.page.keyboard.press("Enter")
        else:
            self.page.click("#ask")
        self.page.wait_for_function(
            "() => { const t = document.getElementById('status').innerText;"
            " return t.length > 0 && !t.includes('Asking'); }",
            timeout=STEP_TIMEOUT_MS,
        )
        return self.page.inner_text("#status")
