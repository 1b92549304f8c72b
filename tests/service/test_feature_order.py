"""A canonical feature order (issue 33 item 4): ``features: [a, b]`` and ``[b, a]`` are one
problem with permuted coordinates, so they share one key and one answer (the second is a
repeat: no sparse-vector test, no oracle draw, no spend), and each spelling gets ``theta``
and its coefficient names in its own order: in the library, the command line and the service.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from pmwcm.cli import app
from pmwcm.engine.online import query_key
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.coefficients import coefficient_names
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.private_data import PrivateData
from service.svc_support import Service

DOMAIN = Domain.from_sizes({"a": 2, "b": 3, "c": 4, "y": 2})
SPELLINGS = [
    (
        CMQuery(loss="logistic", target="y", features=("a", "b")),
        CMQuery(loss="logistic", target="y", features=("b", "a")),
    ),
    (
        CMQuery(loss="squared", target="y", features=("a", "b", "c"), interactions=(("a", "c"),)),
        CMQuery(loss="squared", target="y", features=("c", "b", "a"), interactions=(("c", "a"),)),
    ),
    (
        CMQuery(loss="huber", target="y", features=("b", "c"), interactions=(("b", "c"),),
                encodings={"c": "ordinal"}),
        CMQuery(loss="huber", target="y", features=("c", "b"), interactions=(("c", "b"),),
                encodings={"c": "ordinal"}, intercept=True),
    ),
]  # fmt: skip


def _data(seed: int = 0, n: int = 2000) -> PrivateData:
    rng = np.random.default_rng(seed)
    x = np.stack([rng.integers(0, s, n) for s in DOMAIN.sizes[:-1]], axis=1)
    y = (x[:, 0] + (x[:, 1] > 0) + rng.integers(0, 2, n) >= 2).astype(np.int64)
    return PrivateData.from_records(DOMAIN, np.column_stack([x, y]))


@pytest.mark.parametrize(("first", "other"), SPELLINGS)
def test_a_permuted_spelling_is_the_same_problem_in_permuted_coordinates(
    first: CMQuery, other: CMQuery
) -> None:
    """``<phi_other(x), theta[order]> == <phi_first(x), theta>`` on every cell, for the
    order :meth:`CMQuery.coordinate_order` gives (so returning ``theta[order]`` answers
    the problem the analyst posed)."""
    assert query_key(first, DOMAIN) == query_key(other, DOMAIN)
    canonical = first.canonical(DOMAIN)
    assert canonical == other.canonical(DOMAIN)
    rng = np.random.default_rng(1)
    records = np.stack([rng.integers(0, s, 50) for s in DOMAIN.sizes], axis=1)
    for query in (first, other):
        order = query.coordinate_order(DOMAIN)
        column = [DOMAIN.names.index(a) for a in canonical.clique]
        ours = [DOMAIN.names.index(a) for a in query.clique]
        base = canonical.compile(DOMAIN, cells=records[:, column])
        mine = query.compile(DOMAIN, cells=records[:, ours])
        theta = rng.normal(size=base.dim)
        asked = theta if order is None else theta[list(order)]
        np.testing.assert_allclose(mine.features @ asked, base.features @ theta, atol=1e-12)
        if order is not None and not query.interactions:  # (interactions name "c * a")
            canonical_names = coefficient_names(canonical, DOMAIN)
            permuted = tuple(canonical_names[i] for i in order)
            assert coefficient_names(query, DOMAIN) == permuted != canonical_names


@pytest.mark.parametrize(("first", "other"), SPELLINGS)
@pytest.mark.parametrize("threshold", [-1e9, 1e9])  # the oracle, then the hypothesis
def test_the_second_spelling_is_a_free_repeat_in_its_own_order(
    first: CMQuery, other: CMQuery, threshold: float
) -> None:
    config = PMWConfig(epsilon=1.0, delta=1e-6, prior="uniform", threshold=threshold)
    engine = build_engine(_data(), config, noise=NumpyNoise(seed=2))
    answer = engine.ask(first)
    spent, updates = engine.ledger.entries, len(engine.updates)
    again = engine.ask(other)
    assert again.repeated and again.source == answer.source
    assert engine.ledger.entries == spent and len(engine.updates) == updates  # nothing spent
    for query, given in ((first, answer), (other, again)):
        order = query.coordinate_order(DOMAIN)
        recorded = np.asarray(engine.recorded(given).value)  # the canonical order
        expected = recorded if order is None else recorded[list(order)]
        np.testing.assert_array_equal(np.asarray(given.value), expected)
    assert first.coordinate_order(DOMAIN) != other.coordinate_order(DOMAIN)


def _cli_lines() -> list[dict[str, Any]]:
    return [
        {"id": "ab", "loss": "logistic", "target": "y", "features": ["a", "c"]},
        {"id": "ba", "loss": "logistic", "target": "y", "features": ["c", "a"]},
    ]


def test_the_cli_answers_each_spelling_in_its_own_order(service: Service, tmp_path: Path) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps(line) + "\n" for line in _cli_lines()))
    args = ["run", "--data", str(service.data), "--schema", str(service.schema),
            "--queries", str(queries), "--epsilon", "1", "--delta", "1e-6",
            "--insecure-seeded-noise", "5", "-o", str(tmp_path / "out.jsonl")]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    ab, ba = (json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines())
    assert (ab["source"], ab["updates"], ab["epsilon_spent"]) == (
        ba["source"], ba["updates"], ba["epsilon_spent"],
    )  # fmt: skip
    by_name = dict(zip(ab["coefficients"], ab["theta"], strict=True))
    assert ba["coefficients"] != ab["coefficients"]
    assert sorted(ba["coefficients"]) == sorted(ab["coefficients"])
    assert [by_name[name] for name in ba["coefficients"]] == ba["theta"]


def test_the_service_answers_each_spelling_in_its_own_order(service: Service) -> None:
    assert service.create().status_code == 201
    analyst = service.analyst()
    ab = service.ask(analyst, features=["a", "c"]).json()
    ba = service.ask(analyst, features=["c", "a"]).json()
    assert ba["repeated"] and not ab["repeated"]
    assert ba["epsilon_spent"] == ab["epsilon_spent"]
    by_name = dict(zip(ab["coefficients"], ab["theta"], strict=True))
    assert ba["coefficients"] != ab["coefficients"]
    assert [by_name[name] for name in ba["coefficients"]] == ba["theta"]
    # The curator's log keeps the canonical problem with theta in its order (the spec
    # and theta agree), so the session restores the same released answer for both.
    log = service.client.get("/v1/sessions/s/answers", headers=service.auth()).json()
    assert log[0]["query"]["features"] == ["a", "c"] and log[0]["theta"] == ab["theta"]


def test_a_round_compiled_in_the_asked_order_never_serves_the_canonical_one() -> None:
    """``cm_round`` of a permuted spelling (the audit and the certificate compile queries
    as given) is cached apart from the canonical round the door uses."""
    config = PMWConfig(epsilon=1.0, delta=1e-6, prior="uniform", threshold=-1e9)
    engine = build_engine(_data(), config, noise=NumpyNoise(seed=2))
    first, other = SPELLINGS[1]
    permuted = engine.cm_round(other)
    assert permuted.problem.clique == other.clique
    canonical = engine.cm_round(first.canonical(DOMAIN))
    assert canonical is not permuted and canonical.problem.clique == first.canonical(DOMAIN).clique
    answer = engine.ask(other)  # the door: the canonical round, returned in other's order
    order = other.coordinate_order(DOMAIN)
    assert order is not None
    np.testing.assert_array_equal(
        np.asarray(answer.value), np.asarray(engine.recorded(answer).value)[list(order)]
    )
