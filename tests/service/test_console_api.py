"""The web console's read-only routes (:mod:`pmwcm.service.console`), in process.

Each releases nothing more than the API already gives the same role: the
schema to the session's analysts and the curator, an analyst's own answers to
that analyst only, a plan that creates and spends nothing, refusals of
authenticated analysts only, the audit report's verdict as ``pmwcm audit``
judges it.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from pmwcm.service import SQLiteStore, bootstrap_curator, create_app
from pmwcm.service.console import CONTENT_SECURITY_POLICY
from pmwcm.service.console_audit import parse_report
from service.svc_support import BUILD_WAIT, Service, TestClient

REPORT = Path(__file__).parents[1] / "data" / "audit-report.md"


def test_the_schema_is_open_to_the_curator_and_the_sessions_analysts(service: Service) -> None:
    assert service.create("s").status_code == 201
    assert service.create("t").status_code == 201
    analyst = service.analyst("s")
    for token in (service.curator, analyst):
        got = service.client.get("/v1/sessions/s/schema", headers=service.auth(token))
        assert got.status_code == 200
        attributes = {a["name"]: a["values"] for a in got.json()["attributes"]}
        assert attributes == {"a": ["no", "yes"], "b": ["no", "yes"], "c": ["lo", "mid", "hi"],
                              "y": ["no", "yes"]}  # fmt: skip
        assert str(service.data.parent) not in got.text  # no server path
    other = service.client.get("/v1/sessions/t/schema", headers=service.auth(analyst))
    assert other.status_code == 403
    assert service.client.get("/v1/sessions/s/schema").status_code == 401
    missing = service.client.get("/v1/sessions/nope/schema", headers=service.auth())
    assert missing.status_code == 404


def test_an_analyst_sees_only_their_own_answers(service: Service) -> None:
    assert service.create("s").status_code == 201
    alice, bob = service.analyst("s"), service.analyst("s")
    answered = service.ask(alice, features=["a", "c"]).json()
    assert service.ask(bob, features=["b"]).status_code == 200
    mine = service.client.get("/v1/sessions/s/my-answers", headers=service.auth(alice)).json()
    assert len(mine) == 1
    assert mine[0]["query"]["features"] == ["a", "c"]
    for key in ("theta", "coefficients", "source", "epsilon_spent", "epsilon_remaining"):
        assert mine[0][key] == answered[key]
    theirs = service.client.get("/v1/sessions/s/my-answers", headers=service.auth(bob)).json()
    assert [a["query"]["features"] for a in theirs] == [["b"]]
    curator = service.client.get("/v1/sessions/s/my-answers", headers=service.auth())
    assert curator.status_code == 403


def test_the_plan_is_the_one_the_session_gets_and_creates_nothing(service: Service) -> None:
    body = {"name": "p", "data_path": str(service.data), "schema_path": str(service.schema),
            "epsilon": 1.0, "delta": 1e-6}  # fmt: skip
    planned = service.client.post("/v1/console/plan", json=body, headers=service.auth())
    assert planned.status_code == 200, planned.text
    plan = planned.json()
    assert (plan["n"], plan["attributes"], plan["prior"]) == (300, 4, "marginals")
    assert sum(plan["shares"].values()) == pytest.approx(1.0)
    assert service.client.get("/v1/sessions", headers=service.auth()).json() == []
    created = service.client.post(
        "/v1/sessions", json=body, headers=service.auth(), params={"wait": BUILD_WAIT}
    )
    assert created.status_code == 201
    status = service.client.get("/v1/sessions/p", headers=service.auth()).json()
    assert status["max_updates"] == plan["max_updates"]
    ledger = service.client.get("/v1/sessions/p/ledger", headers=service.auth()).json()
    prior = ledger["entries"][0]["epsilon_after"]  # the paid prior's debit alone
    assert 0 < prior <= plan["epsilons"]["prior"] * (1 + 1e-6)


def test_a_bad_plan_request_names_the_field_and_an_analyst_gets_403(service: Service) -> None:
    body = {"name": "p", "data_path": "/etc/passwd", "schema_path": str(service.schema),
            "epsilon": 1.0, "delta": 1e-6}  # fmt: skip
    refused = service.client.post("/v1/console/plan", json=body, headers=service.auth())
    assert refused.status_code == 422 and "data_path" in refused.text
    assert "/etc/passwd" not in refused.text
    assert service.create("s").status_code == 201
    analyst = service.analyst("s")
    body["data_path"] = str(service.data)
    denied = service.client.post("/v1/console/plan", json=body, headers=service.auth(analyst))
    assert denied.status_code == 403


def test_refusals_of_analysts_are_kept_with_their_public_reasons(service: Service) -> None:
    assert service.create("s").status_code == 201
    analyst = service.analyst("s")
    assert service.ask(analyst, features=["zz"]).status_code == 422
    assert service.ask(analyst, radius=1000.0).status_code == 422
    assert service.ask(analyst).status_code == 200  # an answer is no refusal
    # Without a valid token nothing is written into the curator's view.
    forged = {"Authorization": f"Bearer {analyst.split('.')[0]}.forged"}
    body = {"loss": "logistic", "target": "y", "features": ["zz"]}
    assert service.client.post("/v1/sessions/s/queries", json=body, headers=forged).status_code
    kept = service.client.get("/v1/console/refusals", headers=service.auth()).json()
    assert [r["status"] for r in kept] == [422, 422]
    assert "radius" in kept[0]["reason"] and "Unknown attribute 'zz'" in kept[1]["reason"]
    assert {r["token_id"] for r in kept} == {analyst.split(".")[0]}
    only = service.client.get("/v1/console/refusals?session=other", headers=service.auth())
    assert only.json() == []
    denied = service.client.get("/v1/console/refusals", headers=service.auth(analyst))
    assert denied.status_code == 403


def _app_with_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, report: Path | None) -> Any:
    if report is None:
        monkeypatch.delenv("PMWCM_AUDIT_REPORT", raising=False)
    else:
        monkeypatch.setenv("PMWCM_AUDIT_REPORT", str(report))
    store = SQLiteStore(tmp_path / "state")
    curator = bootstrap_curator(store)
    bundled = Path(str(resources.files("pmwcm.data.bundled").joinpath("files")))
    return create_app(store, data_dirs=[bundled]), curator


@pytest.mark.parametrize(
    ("edit", "passed", "failures"),
    [
        (None, True, 0),
        (("| consistent | 0 |\n| Gaussian", "| violation | 0 |\n| Gaussian"), False, 1),
        (("| 0.909093 | yes |", "| 1.2 | NO |"), False, 1),
    ],
)
def test_the_audit_verdict_is_the_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Any, passed: bool, failures: int
) -> None:
    text = REPORT.read_text(encoding="utf-8")
    if edit is not None:  # a planted failure the console must show
        assert edit[0] in text
        text = text.replace(edit[0], edit[1], 1)
    report = tmp_path / "audit.md"
    report.write_text(text, encoding="utf-8")
    app, curator = _app_with_report(tmp_path, monkeypatch, report)
    with TestClient(app) as client:
        got = client.get("/v1/console/audit", headers={"Authorization": f"Bearer {curator}"})
    body = got.json()
    assert (body["found"], body["passed"], body["failures"]) == (True, passed, failures)
    assert [len(t["rows"]) for t in body["tables"]] == [11, 9, 56]
    assert body["command"].startswith("pmwcm audit --trials 1000")


def test_a_must_catch_control_that_is_not_caught_fails_the_audit() -> None:
    controls = """## Negative controls

| broken mechanism | claimed eps | eps lower bound | event | verdict | must catch | seconds |
| --- | --- | --- | --- | --- | --- | --- |
| caught | 1.000 | 3.0 | `x` | violation | yes | 1 |
| missed | 1.000 | 0.5 | `x` | consistent | yes | 1 |
| optional | 1.000 | 0.5 | `x` | consistent | no | 1 |
"""
    report = parse_report(controls)
    assert (report.passed, report.failures) == (False, 1)
    assert not parse_report("# no tables\n").passed


def test_without_a_report_the_audit_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, curator = _app_with_report(tmp_path, monkeypatch, None)
    with TestClient(app) as client:
        got = client.get("/v1/console/audit", headers={"Authorization": f"Bearer {curator}"})
        assert got.json()["configured"] is False and got.json()["found"] is False
        page = client.get("/ui/")
    assert page.status_code == 200 and "Sign in" in page.text
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


def test_every_console_file_is_served_and_nothing_outside_it(service: Service) -> None:
    ui = Path(__file__).parents[2] / "src" / "pmwcm" / "service" / "ui"
    names = sorted(p.name for p in ui.iterdir())
    assert {"index.html", "console.js", "console.css"} <= set(names)
    for name in names:
        got = service.client.get(f"/ui/{name}")
        assert got.status_code == 200, name
        text = got.text.replace('"http://www.w3.org/2000/svg"', "")  # a name, not a fetch
        assert "http://" not in text and "https://" not in text  # nothing from elsewhere
    assert service.client.get("/ui/../app.py").status_code == 404
