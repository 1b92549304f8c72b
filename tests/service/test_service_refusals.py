"""Refusals are public: decided from the spec before the data or the budget is touched.

Also: the noise source in a session's status, drafted schemas at session
creation, and ``pmwcm serve`` / ``pmwcm ask`` without the ``service`` extra.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pmwcm.cli import app
from pmwcm.errors import InvalidQuery
from pmwcm.kernels.queries import CMQuery
from service.svc_support import BUILD_WAIT, Service, TestClient

ADULT = resources.files("pmwcm.data.bundled").joinpath("files")
#: Squared loss at radius 1e8: its objective varies by ~2e16 over the ball.
FAR: dict[str, Any] = {
    "loss": "squared",
    "target": "married",
    "features": ["husband"],
    "radius": 1e8,
}
#: Logistic with a strong ridge at the service's largest radius (100): V / tau ~ 4e13 on
#: 300 rows, past float64 (radius 1e10 is now refused by the service's public limit first).
COSTLY: dict[str, Any] = {
    "loss": "logistic",
    "target": "y",
    "features": ["a"],
    "l2": 1e10,
    "radius": 100.0,
}


def _ledger(service: Service, session: str = "s") -> Any:
    response = service.client.get(f"/v1/sessions/{session}/ledger", headers=service.auth())
    assert response.status_code == 200, response.text
    return response.json()


def _status(service: Service, token: str, session: str = "s") -> Any:
    response = service.client.get(f"/v1/sessions/{session}", headers=service.auth(token))
    assert response.status_code == 200, response.text
    return response.json()


def test_status_names_the_noise_source(service: Service) -> None:
    assert service.create().status_code == 201
    assert _status(service, service.analyst())["noise"] == "opendp"


def test_a_query_too_costly_to_solve_is_refused_before_any_budget_is_spent(
    service: Service,
) -> None:
    assert service.create().status_code == 201
    analyst = service.analyst()
    first = service.ask(analyst)
    assert first.status_code == 200, first.text
    ledger, status = _ledger(service), _status(service, analyst)
    refused = service.ask(analyst, **COSTLY)
    assert refused.status_code == 422, refused.text
    message = refused.json()["detail"][0]["msg"]
    assert message.startswith("Refused before any budget was spent")
    assert "radius" in message and "float64" in message
    assert _ledger(service) == ledger  # not one debit, not one sparse-vector test
    assert _status(service, analyst) == status
    again = service.ask(analyst)  # the session goes on, its released answer intact
    assert again.json()["repeated"] is True and again.json()["theta"] == first.json()["theta"]


def test_a_refusal_is_the_same_on_neighbouring_datasets(service: Service, tmp_path: Path) -> None:
    """A far-radius query on Adult and on Adult with one marital status changed.

    Both get the same status and the same body shape; no number computed from
    the data appears (a released theta is the engine's private answer).
    """
    with resources.as_file(ADULT.joinpath("adult.csv")) as csv:
        lines = csv.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    column = header.index("marital-status")
    row = lines[1].split(",")
    row[column] = "2" if row[column] == "0" else "0"  # married <-> not married
    neighbour = tmp_path / "adult-neighbour.csv"
    neighbour.write_text("\n".join([lines[0], ",".join(row), *lines[2:]]) + "\n", encoding="utf-8")
    outcomes = []
    with resources.as_file(ADULT.joinpath("adult-binary.schema.json")) as schema:
        for name, data in (("adult", csv), ("neighbour", neighbour)):
            body = {
                "name": name,
                "data_path": str(data),
                "schema_path": str(schema),
                "epsilon": 1.0,
                "delta": 1e-6,
                "parameters": {"prior": "uniform", "max_updates": 5},
            }
            created = service.client.post(
                "/v1/sessions", json=body, headers=service.auth(), params={"wait": BUILD_WAIT}
            )
            assert created.status_code == 201, created.text
            response = service.ask(service.analyst(name), name, **FAR)
            outcomes.append((response.status_code, response.json()))
    (status_a, body_a), (status_b, body_b) = outcomes
    assert status_a == status_b
    assert set(body_a) == set(body_b)
    if status_a != 200:
        assert body_a == body_b  # a refusal's text depends on public inputs only
    else:
        assert len(body_a["theta"]) == len(body_b["theta"]) == 2


def test_an_unexpected_error_on_the_data_side_is_a_bare_500(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing that reads the data should raise; if it does, its text never leaves."""
    from pmwcm.engine.online import OnlinePMW

    assert service.create().status_code == 201
    analyst = service.analyst()
    first = service.ask(analyst).json()

    def leak(self: OnlinePMW, *round_: object) -> None:  # the round of a new query
        raise ValueError("the data's loss is 0.3141592")

    monkeypatch.setattr(OnlinePMW, "_run", leak)
    quiet = TestClient(service.client.app, raise_server_exceptions=False)
    body = {"loss": "logistic", "target": "y", "features": ["b"]}
    response = quiet.post("/v1/sessions/s/queries", json=body, headers=service.auth(analyst))
    assert response.status_code == 500
    assert "0.314" not in response.text and "loss" not in response.text
    monkeypatch.undo()
    assert service.ask(analyst).json()["theta"] == first["theta"]  # reloaded from the store


def _drafted(service: Service) -> Path:
    schema = json.loads(service.schema.read_text())
    drafted = service.schema.with_name("drafted.json")
    drafted.write_text(json.dumps({**schema, "name": "draft"}))
    return drafted


def test_a_drafted_schema_is_refused_unless_accepted(service: Service) -> None:
    body = {
        "name": "s",
        "data_path": str(service.data),
        "schema_path": str(_drafted(service)),
        "epsilon": 1.0,
        "delta": 1e-6,
        "parameters": {"prior": "uniform"},
    }
    refused = service.client.post("/v1/sessions", json=body, headers=service.auth())
    assert refused.status_code == 422, refused.text
    message = refused.json()["detail"][0]["msg"]
    assert "drafted from the data" in message and '"accept_drafted_schema": true' in message
    assert service.client.get("/v1/sessions", headers=service.auth()).json() == []
    body["accept_drafted_schema"] = True
    created = service.client.post(
        "/v1/sessions", json=body, headers=service.auth(), params={"wait": BUILD_WAIT}
    )
    assert created.status_code == 201, created.text
    assert created.json()["drafted_schema_accepted"] is True
    assert service.create("plain").json()["drafted_schema_accepted"] is False


def test_serve_refuses_a_drafted_schema_unless_accepted(service: Service, tmp_path: Path) -> None:
    state = tmp_path / "serve-state"
    base = ["serve", "--state", str(state), "--data", str(service.data)]
    base += ["--schema", str(_drafted(service)), "--epsilon", "1", "--delta", "1e-6"]
    result = CliRunner().invoke(app, base)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--accept-drafted-schema" in lines[0], result.stderr


@pytest.mark.parametrize(
    ("command", "module"),
    [
        (["serve", "--state", "{tmp}/state"], "fastapi"),
        (["ask", "--token", "x.y", "{{}}"], "httpx"),
    ],
)
def test_serve_and_ask_without_the_service_extra_say_which_to_install(
    tmp_path: Path, command: list[str], module: str
) -> None:
    """The extra's module is simulated missing (``sys.modules[name] = None``)."""
    argv = ["pmwcm", *(c.format(tmp=tmp_path) for c in command)]
    code = (
        f"import sys; sys.modules[{module!r}] = None; sys.argv = {argv!r}; "
        "from pmwcm.cli import main; main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and f"'{module}'" in lines[0]
    assert "pip install 'pmwcm[service]'" in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "state").exists()


#: Specs near a good one on the tiny schema: fields set to any JSON value, required ones dropped.
_GOOD: dict[str, Any] = {"loss": "logistic", "target": "y", "features": ["a"]}
_FIELDS = [
    "loss", "target", "features", "radius", "l2", "intercept", "loss_param", "encodings",
    "interactions", "code",
]  # fmt: skip
_VALUES = st.sampled_from(
    [
        "x", "squared", "huber", "a", "y", 0, 1, 2.5, -1.0, True, False, None, [], ["a"],
        ["a", "b"], ["a", 1], {}, {"a": "onehot"}, {"a": "magic"}, [["a", "b"]], [["a"]], "a*b",
    ]
)  # fmt: skip
_SPECS = st.builds(
    lambda changes, dropped: {k: v for k, v in ({**_GOOD, **changes}).items() if k not in dropped},
    st.dictionaries(st.sampled_from(_FIELDS), _VALUES, max_size=3),
    st.sets(st.sampled_from(["loss", "target", "features"]), max_size=1),
)


def _from_dict_decision(spec: dict[str, Any]) -> str | None:
    try:
        CMQuery.from_dict(spec)
    except InvalidQuery as exc:
        return str(exc)
    return None


def test_the_service_rejects_exactly_what_from_dict_rejects(service: Service) -> None:
    """Accept/reject and the message come from ``CMQuery.from_dict`` (422, nothing spent)."""
    assert service.create().status_code == 201
    analyst = service.analyst()
    path, headers = "/v1/sessions/s/queries", service.auth(analyst)

    @settings(
        max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(spec=_SPECS)
    def run(spec: dict[str, Any]) -> None:
        expected = _from_dict_decision(spec)
        if expected is None:
            return  # accepted specs are answered elsewhere; here nothing may be spent
        response = service.client.post(path, json=spec, headers=headers)
        assert response.status_code == 422, (spec, response.text)
        assert response.json()["detail"][0]["msg"] == expected

    run()
    assert _ledger(service)["entries"] == []
    for spec in ({**_GOOD, "id": "q1"}, {**_GOOD, "features": ["a", "b"], "loss_param": None}):
        assert _from_dict_decision(spec) is None
        assert service.client.post(path, json=spec, headers=headers).status_code == 200


def test_the_refusal_table_keeps_each_status() -> None:
    from pmwcm.errors import BudgetExhausted, Halted, Refused
    from pmwcm.service.http_errors import REFUSALS

    assert {k: v[0] for k, v in REFUSALS.items()} == {
        InvalidQuery: 422,
        Refused: 422,
        BudgetExhausted: 409,
        Halted: 409,
    }


@pytest.mark.parametrize("error", [ValueError, TypeError, KeyError, RuntimeError])
def test_a_programming_error_is_a_bare_500_never_a_refusal(
    tmp_path: Path, tiny: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, error: type
) -> None:
    from pmwcm.service import SQLiteStore, bootstrap_curator, create_app
    from pmwcm.service.sessions import LiveSession

    def bug(self: LiveSession, query: CMQuery, **_: object) -> None:
        raise error("the data's loss at theta is 0.3141592")

    monkeypatch.setattr(LiveSession, "respond", bug)
    store = SQLiteStore(tmp_path / "state")
    curator = bootstrap_curator(store)
    assert curator is not None
    app = create_app(store, data_dirs=[tiny[0].parent])
    with TestClient(app, raise_server_exceptions=False) as client:
        service = Service(client, curator, tiny[0], tiny[1], tmp_path / "state")
        assert service.create().status_code == 201
        response = service.ask(service.analyst())
    assert response.status_code == 500
    assert "0.314" not in response.text and "efused" not in response.text
    assert response.json() == {"detail": "Internal server error."}


def test_the_clients_budget_error_is_the_librarys() -> None:
    from pmwcm import errors
    from pmwcm.service.client import BudgetExhausted, ServiceError

    err = BudgetExhausted(409, "Privacy budget exhausted: spent")
    assert isinstance(err, errors.BudgetExhausted) and isinstance(err, ServiceError)
    assert isinstance(err, errors.PmwcmError)
