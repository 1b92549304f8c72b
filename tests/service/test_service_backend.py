"""The hypothesis backend in the service: parameters, refusals, status, and a support
hypothesis surviving a restart bit for bit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pmwcm.kernels.histogram_codec import encode_histogram
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.service import SQLiteStore
from pmwcm.service.build import session_config
from pmwcm.service.models import MAX_HYPOTHESIS_MEMORY
from pmwcm.service.sessions import LiveSession, SessionManager
from service.svc_support import Service

WIDE = Path(__file__).parents[1] / "data"
WIDE_DATA, WIDE_SCHEMA = WIDE / "loans-wide.csv", WIDE / "loans-wide.schema.json"
TARGET = "interest_rate>=12"


def _detail(response: Any) -> str:
    return str(response.json()["detail"])


@pytest.mark.parametrize(
    ("parameters", "needles"),
    [
        ({"backend": "sparse"}, ["backend", "'support'"]),  # the input itself is not echoed
        ({"hypothesis_memory": MAX_HYPOTHESIS_MEMORY + 1}, ["hypothesis_memory", "4294967296"]),
        ({"hypothesis_memory": 0}, ["hypothesis_memory"]),
        ({"hypothesis_memory": "512MiB"}, ["hypothesis_memory"]),  # strict: bytes, an integer
        ({"support_size": 10}, ["support_size", "at least 1000", "support_size=10"]),
        ({"support_size": -1}, ["support_size"]),
    ],
)
def test_bad_backend_parameters_are_a_422_naming_them(
    service: Service, parameters: dict[str, Any], needles: list[str]
) -> None:
    response = service.create(**parameters)
    assert response.status_code == 422, response.text
    for needle in needles:
        assert needle in response.text


def test_a_backend_that_does_not_fit_the_schema_is_a_422(service: Service) -> None:
    small = service.create(backend="support", hypothesis_memory=1000)
    assert small.status_code == 422 and "at least 1000 are needed" in small.text
    body = {
        "name": "wide", "data_path": str(WIDE_DATA), "schema_path": str(WIDE_SCHEMA),
        "epsilon": 1.0, "delta": 1e-6, "parameters": {"backend": "dense"},
    }  # fmt: skip
    dense = service.client.post("/v1/sessions", json=body, headers=service.auth())
    assert dense.status_code == 422 and "backend='dense' needs" in dense.text


def test_the_status_reports_the_backend(service: Service) -> None:
    assert service.create().status_code == 201
    dense = service.client.get("/v1/sessions/s", headers=service.auth()).json()["backend"]
    assert dense["kind"] == "dense" and dense["support_size"] == 0
    assert dense["reason"].startswith("dense: |X| = 24 cells")
    created = service.create("t", backend="support", support_size=1000)
    assert created.status_code == 201, created.text
    parameters = created.json()["parameters"]
    assert (parameters["backend"], parameters["support_size"]) == ("support", 1000)
    support = service.client.get("/v1/sessions/t", headers=service.auth()).json()["backend"]
    assert support["kind"] == "support" and support["support_size"] == 1000
    assert "requested" in support["reason"]


def _engine(live: LiveSession) -> Any:
    live.status()  # loads
    return live._engine


def test_a_support_session_restarts_identically(tmp_path: Path, seed: int) -> None:
    config = session_config(
        data_path=str(WIDE_DATA),
        schema_path=str(WIDE_SCHEMA),
        epsilon=1.0,
        delta=1e-6,
        # The fixed split's T = 10: at this n the budget rule gives T = 1, and the
        # low threshold would halt the stream after its first update.
        parameters={"backend": "support", "support_size": 2000, "threshold": 0.5,
                    "budget_rule": "fixed"},
    )  # fmt: skip
    store = SQLiteStore(tmp_path / "state")
    manager = SessionManager(store, noise_factory=lambda: NumpyNoise(seed=seed))
    manager.create("s", config)
    stream = [
        CMQuery(loss="logistic", target=TARGET, features=("grade", "term")),
        CMQuery(loss="logistic", target=TARGET, features=("annual_income", "homeownership")),
        CMQuery(loss="squared", target="loan_amount", features=("term", "verified_income")),
    ]
    first = [manager.get("s").ask(query, token_id=None) for query in stream]
    before = _engine(manager.get("s"))
    assert isinstance(before.hypothesis, SupportHistogram) and before.hypothesis.size == 2000
    blob, spent = encode_histogram(before.hypothesis), before.ledger.spent_epsilon()
    synthetic = before.synthetic_records(50, rng=np.random.default_rng(0))
    store.close()

    store = SQLiteStore(tmp_path / "state")  # a restart: nothing kept in memory
    manager = SessionManager(store, noise_factory=lambda: NumpyNoise(seed=seed + 1))
    after = _engine(manager.get("s"))
    assert encode_histogram(after.hypothesis) == blob  # records and log-weights, bit for bit
    assert after.ledger.spent_epsilon() == spent
    assert after.backend == before.backend and after.backend.kind == "support"
    np.testing.assert_array_equal(
        after.synthetic_records(50, rng=np.random.default_rng(0)), synthetic
    )
    again = [manager.get("s").ask(query, token_id=None) for query in stream]
    assert all(a.repeated for a in again)
    assert [a.value.tolist() for a in again] == [a.value.tolist() for a in first]
    store.close()


def test_a_session_stored_before_the_budget_rule_keeps_the_fixed_split() -> None:
    from pmwcm.service.build import _parts

    config = session_config(
        data_path=str(WIDE_DATA), schema_path=str(WIDE_SCHEMA), epsilon=1.0, delta=1e-6,
        parameters={},
    )  # fmt: skip
    assert config["parameters"]["budget_rule"] == "signal"  # new sessions store the rule
    _, pmw, _ = _parts(config, None, creating=True)
    assert pmw.budget_rule == "signal"
    old = dict(config, parameters={
        k: v for k, v in config["parameters"].items() if k != "budget_rule"
    })  # fmt: skip
    _, pmw, _ = _parts(old, None, creating=False)
    assert pmw.budget_rule == "fixed" and pmw.resolved_for(10**4, 20) == pmw


@pytest.mark.parametrize(
    ("key", "today", "before"),
    [
        ("sweep_window", 10, None),  # sessions from before the window replay every update
        ("refit_iterations", 3, 0),  # and those from before the refit do not refit
        ("prior_cliques", "auto", "pairs"),  # nor measure the triples
    ],
)
def test_a_session_stored_before_a_setting_existed_keeps_running_without_it(
    key: str, today: int | str, before: int | str | None
) -> None:
    from pmwcm.service.build import _parts

    config = session_config(
        data_path=str(WIDE_DATA), schema_path=str(WIDE_SCHEMA), epsilon=1.0, delta=1e-6,
        parameters={},
    )  # fmt: skip
    assert config["parameters"][key] == today  # new sessions store the setting
    _, pmw, _ = _parts(config, None, creating=True)
    assert getattr(pmw, key) == today
    old = dict(config, parameters={k: v for k, v in config["parameters"].items() if k != key})
    _, pmw, _ = _parts(old, None, creating=False)
    assert getattr(pmw, key) == before
