"""The HTTP API through FastAPI's test client: roles, validation, answers, budget, ledger."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pmwcm.service.client import BudgetExhausted, Client, ServiceError
from pmwcm.service.models import QuerySpec, SessionParameters
from service.svc_support import BUILD_WAIT, Service

ANALYST_KEYS = {
    "index",
    "theta",
    "source",
    "repeated",
    "updates",
    "epsilon_spent",
    "epsilon_remaining",
    "delta",
    "coefficients",
    "on_boundary",
    "warning",
}


def test_health_and_openapi_document_the_api(service: Service) -> None:
    assert service.client.get("/health").json() == {"status": "ok"}
    spec = service.client.get("/openapi.json").json()
    assert "/v1/sessions/{name}/queries" in spec["paths"]
    assert "HTTPBearer" in spec["components"]["securitySchemes"]
    assert "Privacy statement" in spec["info"]["description"]


def test_every_v1_route_needs_a_valid_token(service: Service) -> None:
    assert service.create().status_code == 201
    routes = [
        (method, route.path.replace("{name}", "s").replace("{token_id}", "x"))
        for route in service.client.app.routes  # type: ignore[attr-defined]
        if route.path.startswith("/v1")
        for method in route.methods
    ]
    assert len(routes) >= 10
    for method, path in routes:
        for headers in ({}, service.auth("nope"), service.auth("abc.def")):
            response = service.client.request(method, path, headers=headers, json={})
            assert response.status_code == 401, (method, path, response.text)
            assert response.headers["www-authenticate"] == "Bearer"


def test_roles_and_session_scopes(service: Service) -> None:
    assert service.create("s").status_code == 201
    assert service.create("t").status_code == 201
    analyst = service.analyst("s")
    headers = service.auth(analyst)
    client = service.client
    assert client.get("/v1/me", headers=headers).json()["role"] == "analyst"
    # curator-only routes
    for method, path in [
        ("GET", "/v1/sessions"),
        ("GET", "/v1/sessions/s/ledger"),
        ("GET", "/v1/sessions/s/answers"),
        ("GET", "/v1/sessions/s/tokens"),
        ("POST", "/v1/sessions/s/tokens"),
        ("DELETE", f"/v1/tokens/{analyst.split('.')[0]}"),
    ]:
        assert client.request(method, path, headers=headers, json={}).status_code == 403
    assert service.create("u").status_code == 201  # the curator can
    body = {"name": "v", "data_path": "x", "schema_path": "y", "epsilon": 1.0, "delta": 1e-6}
    assert client.post("/v1/sessions", json=body, headers=headers).status_code == 403
    # an analyst token is scoped to its session
    assert client.get("/v1/sessions/s", headers=headers).status_code == 200
    assert client.get("/v1/sessions/t", headers=headers).status_code == 403
    assert service.ask(analyst, "t").status_code == 403
    assert service.ask(analyst, "nosuch").status_code == 403
    # the curator reads but does not query
    assert client.get("/v1/sessions/t", headers=service.auth()).status_code == 200
    assert service.ask(service.curator, "s").status_code == 403
    assert client.get("/v1/sessions/nosuch", headers=service.auth()).status_code == 404


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": "bad name!"}, "name"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": "1"}, "epsilon"),
        ({"delta": 1.0}, "delta"),
        ({"data_path": "/nonexistent/data.csv"}, "data_path"),
        ({"parameters": {"max_updates": "5"}}, "max_updates"),
        ({"parameters": {"bogus": 1}}, "bogus"),
        ({"parameters": {"prior": "marginals", "prior_fraction": 0.9}}, "prior_fraction"),
        ({"surprise": True}, "surprise"),
        ({"parameters": {"prior": "public"}}, "public_data_path"),
        ({"public_data_path": "/nonexistent/public.csv"}, "public_data_path"),
    ],
)
def test_bad_session_requests_are_422_naming_the_field(
    service: Service, change: dict[str, object], field: str
) -> None:
    body = {
        "name": "s",
        "data_path": str(service.data),
        "schema_path": str(service.schema),
        "epsilon": 1.0,
        "delta": 1e-6,
    } | change
    response = service.client.post("/v1/sessions", json=body, headers=service.auth())
    assert response.status_code == 422, response.text
    assert field in response.text
    assert service.client.get("/v1/sessions", headers=service.auth()).json() == []


def test_public_prior_session_spends_nothing_at_creation(service: Service) -> None:
    body = {
        "name": "pub",
        "data_path": str(service.data),
        "schema_path": str(service.schema),
        "public_data_path": str(service.data),  # a stand-in file: any CSV under the schema
        "epsilon": 1.0,
        "delta": 1e-6,
    }
    created = service.client.post(
        "/v1/sessions", json=body, headers=service.auth(), params={"wait": BUILD_WAIT}
    )
    assert created.status_code == 201, created.text
    out = created.json()
    assert out["public_data_path"] == service.data.name  # relative to its data directory
    assert out["parameters"]["prior"] == "public" and out["parameters"]["max_updates"] == 10
    ledger = service.client.get("/v1/sessions/pub/ledger", headers=service.auth()).json()
    assert ledger["entries"] == [] and ledger["epsilon_spent"] == 0.0


def test_duplicate_session_is_409(service: Service) -> None:
    assert service.create().status_code == 201
    response = service.create()
    assert response.status_code == 409
    assert "exists" in response.json()["detail"]


def test_answers_repeats_and_what_analysts_see(service: Service) -> None:
    assert service.create(max_updates=5).status_code == 201
    analyst = service.analyst()
    first = service.ask(analyst, features=["a"]).json()
    assert set(first) == ANALYST_KEYS
    assert first["index"] == 0 and first["repeated"] is False and len(first["theta"]) == 2
    second = service.ask(analyst, features=["a", "c"], loss="squared").json()
    assert second["index"] == 1 and len(second["theta"]) == 5
    product = service.ask(analyst, features=["a", "b"], interactions=[["a", "b"]]).json()
    assert product["index"] == 2 and len(product["theta"]) == 4  # a, b, a*b, intercept
    assert len(product["coefficients"]) == 4 and product["coefficients"][-1] == "intercept"
    assert " * " in product["coefficients"][2]  # the interaction a*b, named
    assert isinstance(product["on_boundary"], bool)
    again = service.ask(analyst, features=["a"]).json()
    assert again["repeated"] is True and again["theta"] == first["theta"]
    assert again["source"] == first["source"]
    assert again["epsilon_spent"] == second["epsilon_spent"]  # repeats are free
    status = service.client.get("/v1/sessions/s", headers=service.auth(analyst)).json()
    assert status["answered"] == 4 and status["epsilon_spent"] == again["epsilon_spent"]
    assert status["epsilon_remaining"] == pytest.approx(1.0 - status["epsilon_spent"])


def test_responses_carry_no_internal_state(service: Service) -> None:
    assert service.create(max_updates=5).status_code == 201
    analyst = service.analyst()
    texts = [service.ask(analyst, features=f).text for f in (["a"], ["b"], ["a", "b"])]
    texts.append(service.client.get("/v1/sessions/s", headers=service.auth(analyst)).text)
    sessions = service.client.app.state.sessions  # type: ignore[attr-defined]
    state = sessions.store.load_snapshot("s").state
    rho = state["sparse_vector"]["rho"]
    assert rho is not None
    for text in texts:
        assert repr(rho) not in text and json.dumps(rho) not in text
        for secret in ("rho", 'hypothesis":', 'sparse_vector":', "data_path"):
            assert secret not in text


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"target": "zz"}, "zz"),
        ({"features": ["a", "nope"]}, "nope"),
        ({"target": "c"}, "binary target"),
        ({"features": "a"}, "features"),
        ({"loss": "crossentropy"}, "loss"),
        ({"radius": -1.0}, "radius"),
        ({"radius": "1"}, "radius"),
        ({"intercept": 1}, "intercept"),
        ({"code": "import os"}, "code"),
        ({"encodings": {"b": "onehot"}}, "encodings"),
        ({"features": ["a"], "interactions": [["a", "b"]]}, "interaction"),
        ({"features": ["a", "b"], "interactions": "a*b"}, "interactions"),
    ],
)
def test_bad_queries_are_422_and_spend_nothing(
    service: Service, spec: dict[str, Any], needle: str
) -> None:
    assert service.create().status_code == 201
    analyst = service.analyst()
    response = service.ask(analyst, **spec)
    assert response.status_code == 422, response.text
    assert needle in response.text
    ledger = service.client.get("/v1/sessions/s/ledger", headers=service.auth()).json()
    assert ledger["entries"] == [] and ledger["epsilon_spent"] == 0.0


def test_spent_budget_is_409_and_nothing_is_answered_over_it(service: Service) -> None:
    assert service.create(max_updates=2, threshold=-1e6).status_code == 201  # always "above"
    analyst = service.analyst()
    answers = [service.ask(analyst, features=f).json() for f in (["a"], ["b"])]
    assert [a["source"] for a in answers] == ["oracle", "oracle"]
    refused = service.ask(analyst, features=["c"])
    assert refused.status_code == 409
    assert "budget" in refused.json()["detail"]
    assert service.ask(analyst, features=["a"]).json()["theta"] == answers[0]["theta"]
    ledger = service.client.get("/v1/sessions/s/ledger", headers=service.auth()).json()
    assert [e["label"] for e in ledger["entries"]] == [
        "sparse vector",
        "oracle call 1",
        "oracle call 2",
    ]
    assert ledger["epsilon_spent"] <= ledger["epsilon"]
    assert [e["epsilon_after"] for e in ledger["entries"]] == sorted(
        e["epsilon_after"] for e in ledger["entries"]
    )
    status = service.client.get("/v1/sessions/s", headers=service.auth()).json()
    assert status["halted"] is True and status["updates"] == 2


def test_after_halt_synthetic_answers_are_labelled_and_free(service: Service) -> None:
    assert service.create(max_updates=1, threshold=-1e6, after_halt="synthetic").status_code == 201
    analyst = service.analyst()
    first = service.ask(analyst, features=["a"]).json()
    later = service.ask(analyst, features=["b"]).json()
    assert (first["source"], later["source"]) == ("oracle", "synthetic")
    assert later["epsilon_spent"] == first["epsilon_spent"]
    # the switch is visible where the answer is read
    assert first["warning"] is None and "NO accuracy check" in later["warning"]


def test_tokens_are_listed_without_secrets_and_revocable(service: Service) -> None:
    assert service.create().status_code == 201
    token = service.analyst()
    token_id, secret = token.split(".")
    listed = service.client.get("/v1/sessions/s/tokens", headers=service.auth()).json()
    assert [t["token_id"] for t in listed] == [token_id]
    assert secret not in json.dumps(listed) and "token" not in listed[0]
    store = service.client.app.state.store  # type: ignore[attr-defined]
    assert store.get_token(token_id).digest != secret  # stored hashed
    assert service.ask(token).status_code == 200
    delete = service.client.delete(f"/v1/tokens/{token_id}", headers=service.auth())
    assert delete.status_code == 204
    assert service.ask(token).status_code == 401
    for gone in (token_id, service.curator.split(".")[0]):  # revoked; curator tokens rotate
        assert (
            service.client.delete(f"/v1/tokens/{gone}", headers=service.auth()).status_code == 404
        )


def test_ledger_and_release_log_match_what_the_analyst_saw(service: Service) -> None:
    assert service.create(max_updates=3, threshold=0.0).status_code == 201
    analyst = service.analyst()
    seen = [service.ask(analyst, features=f).json() for f in (["a"], ["b"], ["a"], ["c"])]
    log = service.client.get("/v1/sessions/s/answers", headers=service.auth()).json()
    assert [r["theta"] for r in log] == [s["theta"] for s in seen]
    assert [r["repeated"] for r in log] == [False, False, True, False]
    assert log[0]["query"]["features"] == ["a"]
    ledger = service.client.get("/v1/sessions/s/ledger", headers=service.auth()).json()
    assert ledger["epsilon_spent"] == seen[-1]["epsilon_spent"]
    assert ledger["entries"][-1]["epsilon_after"] == ledger["epsilon_spent"]
    oracle = sum(s["source"] == "oracle" and not s["repeated"] for s in seen)
    assert sum(e["label"].startswith("oracle") for e in ledger["entries"]) == oracle
    assert not any(e["orphan"] for e in ledger["entries"])


def test_python_client_in_process(service: Service) -> None:
    curator = Client("http://testserver", service.curator, http=service.client)
    curator.create_session(
        "s",
        data_path=str(service.data),
        schema_path=str(service.schema),
        epsilon=1.0,
        delta=1e-6,
        parameters={"prior": "uniform", "max_updates": 1, "threshold": -1e6},
    )
    assert [s["name"] for s in curator.sessions()] == ["s"]
    token = curator.issue_token("s", label="alice")
    analyst = Client("http://testserver", token, http=service.client)
    assert analyst.me()["session"] == "s"
    answer = analyst.ask("s", {"loss": "logistic", "target": "y", "features": ["a"]})
    assert answer.source == "oracle" and len(answer.theta) == 2
    with pytest.raises(BudgetExhausted, match="budget"):
        analyst.ask("s", {"loss": "logistic", "target": "y", "features": ["b"]})
    with pytest.raises(ServiceError, match="features") as err:
        analyst.ask("s", {"loss": "logistic", "target": "y", "features": "b"})
    assert err.value.status == 422
    assert curator.ledger("s")["epsilon_spent"] == answer.epsilon_spent
    assert len(curator.answers("s")) == 1 and curator.tokens("s")[0]["label"] == "alice"
    curator.revoke_token(token.split(".")[0])
    with pytest.raises(ServiceError) as err:
        analyst.status("s")
    assert err.value.status == 401


def test_the_models_mirror_the_library() -> None:
    from dataclasses import fields

    from pmwcm.engine.practical import PMWConfig
    from pmwcm.kernels.losses import LOSSES
    from pmwcm.kernels.queries import CMQuery
    from pmwcm.service.build import PARAMETERS

    assert set(QuerySpec.model_json_schema()["properties"]["loss"]["enum"]) == set(LOSSES)
    assert set(QuerySpec.model_fields) == {f.name for f in fields(CMQuery)}
    assert set(SessionParameters.model_fields) == set(PARAMETERS)
    defaults = PMWConfig(epsilon=1.0, delta=1e-6)
    for name, info in SessionParameters.model_fields.items():
        if name not in ("max_updates", "expected_queries"):  # 0 = prior-dependent default
            assert info.default == getattr(defaults, name), name
