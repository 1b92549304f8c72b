"""Regenerates the web console's screenshots in ``docs/img/console-*.png`` (the README shows them).

Starts a real ``pmwcm serve`` on a fresh state directory over the bundled UCI
Adult data, then drives Debian's headless ``chromium`` (installed with apt-get
if missing; tests/service/console_tour.py) through every page: the curator
reviews a session's budget plan and creates it, issues a token; the analyst
asks a few queries (one refused) from the builder; the curator looks at the
sessions, tokens, answer log, refusals and the audit report
(``tests/data/audit-report.md``, a real ``pmwcm audit`` run); an analyst's
token on a curator page is shown the API's 403. Needs the ``dev`` extra.

    python scripts/console_screenshots.py [--out docs/img]

The answers are private (fresh noise each run), so the pictures change from run to run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from playwright.sync_api import sync_playwright  # noqa: E402

from service.console_tour import Console, launch  # noqa: E402
from service.svc_support import curator_token, pmwcm_serve  # noqa: E402

BUNDLED = ROOT / "src" / "pmwcm" / "data" / "bundled" / "files"
AUDIT_REPORT = ROOT / "tests" / "data" / "audit-report.md"
TARGET = "income>50K"
QUERIES = (  # (loss, features, radius): the last one is the answer on the analyst's page
    ("squared", ["age>=37", "male"], 1.0),
    ("logistic", ["married", "hours>=40"], 2.0),
    ("logistic", ["age>=37", "education-num>=10", "male", "married", "hours>=40"], 3.0),
)


def tour(console: Console, curator: str, data: Path) -> None:
    """Every page, in the order a curator and an analyst meet them, each photographed."""
    page = console.page
    console.sign_in(curator, shot=True)
    body = {"name": "adult", "data_path": str(data / "adult.csv"),
            "schema_path": str(data / "adult-binary.schema.json"),
            "epsilon": 1.0, "delta": 1e-6}  # fmt: skip
    console.review_plan(body)
    console.shot("create")
    console.confirm("adult")
    analyst = console.issue_token("adult", "alice")
    console.sign_out()

    console.sign_in(analyst)
    console.build_query(loss="logistic", target=TARGET, features=["male"], radius=1000)
    console.ask()  # refused: over the radius limit
    for loss, features, radius in QUERIES:
        console.build_query(loss=loss, target=TARGET, features=features, radius=radius)
        console.ask()
    page.wait_for_selector("#answer")
    console.shot("analyst")
    console.open("history")
    page.wait_for_selector("table tbody tr td")
    console.shot("history")
    console.open("sessions")
    console.status()
    console.shot("analyst-on-curator-page")
    console.sign_out()

    console.sign_in(curator)
    page.wait_for_selector("#content section.card svg.plot")
    console.shot("sessions")
    for name, ready in (("tokens", "#tokens table"), ("answers", "#log table"),
                        ("refusals", "table"), ("audit", ".badge")):  # fmt: skip
        console.open(name, "?session=adult")
        page.wait_for_selector(ready)
        console.shot(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pmwcm-console-") as tmp:
        data = Path(tmp) / "data"  # the paths the pictures show: no checkout's
        data.mkdir()
        for name in ("adult.csv", "adult-binary.schema.json"):
            shutil.copyfile(BUNDLED / name, data / name)
        serve_args = ["--state", str(Path(tmp) / "state"), "--data-dir", str(data)]
        env = {"PMWCM_AUDIT_REPORT": str(AUDIT_REPORT)}
        with pmwcm_serve(serve_args, Path(tmp) / "serve.log", env=env) as (url, lines):
            curator = curator_token(lines)
            if curator is None:
                raise SystemExit("pmwcm serve printed no curator token")
            with sync_playwright() as playwright:
                browser = launch(playwright)
                context = browser.new_context(viewport={"width": 1200, "height": 800})
                console = Console(context.new_page(), url, shots=args.out)
                tour(console, curator, data)
                browser.close()
    for path in console.taken:
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


if __name__ == "__main__":
    main()
