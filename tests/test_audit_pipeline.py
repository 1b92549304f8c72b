"""End-to-end privacy audit of the shipped default pipeline (:mod:`pmwcm.audit.pipeline`).

The mechanism is the real ``build_engine(data, PMWConfig(epsilon=1, delta=1e-6),
noise=NumpyNoise(generator=rng))`` with every default (paid noisy 2-way-marginal
prior, Lyu-Su-Li sparse vector, ``T = 10`` noisy gradient descent, two sweeps),
asked six queries on :func:`parity_pair` (``n = 4000``; ``D1`` complements one
record). The output is the whole transcript: the build's and every query's code
(source, halted, raised) and every released ``theta``; a refusal is an output.

Audits use ``alpha = 1e-6`` and 100 final trials per input (+ 25 for the event
search; ~5 s a case): the correct pipeline is flagged with probability at most
1e-6. The broken pipeline (the pre-fix real-data solve, which certifies its gap
on the data and raises when it cannot) refuses two queries on ``D1`` and none on
``D0`` in every trial, so its code sequences are disjoint and the bound is that
of 100 vs 0 hits, 1.86 against the claim 1, for every seed. The long run is in
docs/audit.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from pmwcm.audit.cases import AuditCase
from pmwcm.audit.pipeline import (
    RAISED,
    PipelineMechanism,
    crosscheck_pipeline,
    parity_pair,
    pipeline_case,
    shipped,
)
from pmwcm.audit.pipeline_controls import (
    noiseless_triples_prior,
    refusing_solve,
    triples_prior,
)
from pmwcm.engine.practical import PMWConfig
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.oracles import BudgetTunedGradientDescent
from pmwcm.mechanisms.priors.marginals import pairwise_cliques
from pmwcm.mechanisms.sparse_vector import LyuSuLiSparse

ALPHA = 1e-6
TRIALS = 100


@pytest.fixture(scope="module")
def cases() -> dict[str, AuditCase]:
    return {
        "correct": pipeline_case(),
        "refusing": pipeline_case(build=refusing_solve, label="refusing real-data solve"),
        "triples": pipeline_case(build=triples_prior, label="triples prior"),
        "noiseless triples": pipeline_case(
            build=noiseless_triples_prior, label="noiseless triples prior"
        ),
    }


def mechanism(case: AuditCase) -> PipelineMechanism:
    assert isinstance(case.mechanism, PipelineMechanism)
    return case.mechanism


def test_the_audited_pipeline_is_the_shipped_default(cases: dict[str, AuditCase]) -> None:
    case = cases["correct"]
    m = mechanism(case)
    assert m.build is shipped and m.config == PMWConfig(epsilon=1.0, delta=1e-6)
    assert (case.claimed_epsilon, case.delta) == (1.0, 1e-6)
    engine = m.build(case.dataset0, m.config, NumpyNoise(seed=0))
    assert isinstance(engine.sparse_vector, LyuSuLiSparse)
    assert isinstance(engine.oracle, BudgetTunedGradientDescent)
    # T and the split follow the budget rule at the pair's public n and d.
    resolved = m.config.resolved_for(case.dataset0.n, len(case.dataset0.domain))
    assert engine.settings.max_updates == resolved.max_updates and engine.settings.sweeps == 2
    assert engine.settings.after_halt == "refuse"
    assert [e.label for e in engine.ledger.entries] == ["prior: noisy 2-way marginals"]


def test_the_pair_moves_every_two_way_marginal() -> None:
    d0, d1 = parity_pair()
    cliques = pairwise_cliques(d0.domain)
    gap = np.concatenate([(d1.marginal(c) - d0.marginal(c)).ravel() for c in cliques])
    assert np.linalg.norm(gap) == pytest.approx(math.sqrt(2 * len(cliques)) / d0.n)


def test_memoised_accounting_releases_the_same_transcripts(
    cases: dict[str, AuditCase], seed: int
) -> None:
    case = cases["correct"]
    assert crosscheck_pipeline(mechanism(case), case.dataset1, trials=2, seed=seed) == 0


def test_refusals_are_recorded_as_outputs(cases: dict[str, AuditCase], seed: int) -> None:
    case = cases["refusing"]
    m = mechanism(case)
    rng = np.random.default_rng(seed)
    out0, out1 = m(case.dataset0, 3, rng), m(case.dataset1, 3, rng)
    assert not np.any(out0[:, : m.codes] == RAISED)
    # The hinge and Huber queries (2nd and 4th) refuse on D1, and release nothing.
    assert np.all(out1[:, [2, 4]] == RAISED)
    assert np.all(np.isnan(out1[:, m.codes + m.dims[0] : m.codes + sum(m.dims[:2])]))


def run(case: AuditCase, seed: int) -> Any:
    return case.run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)


def test_the_default_pipeline_is_not_flagged(cases: dict[str, AuditCase], seed: int) -> None:
    r = run(cases["correct"], seed)
    assert r.verdict == "consistent", r


def test_a_data_dependent_refusal_in_the_pipeline_is_caught(
    cases: dict[str, AuditCase], seed: int
) -> None:
    r = run(cases["refusing"], seed)
    assert r.violated and r.epsilon_lower_bound > 1.8, r
    assert r.event == "something raised" and (r.count0, r.count1) == (0, TRIALS)


def test_the_triples_prior_pipeline_is_not_flagged_and_its_noiseless_twin_is_caught(
    cases: dict[str, AuditCase], seed: int
) -> None:
    """The prior that measures every triple (the rule's choice at high signal), end to
    end; the broken twin charges the same event but fits the exact triples, so the
    parity pair's changed record moves every released answer."""
    engine = triples_prior(cases["triples"].dataset0, mechanism(cases["triples"]).config,
                           NumpyNoise(seed=seed))  # fmt: skip
    assert [e.label for e in engine.ledger.entries] == ["prior: noisy 3-way marginals"]
    rng = np.random.default_rng(seed)
    assert cases["triples"].run(trials=TRIALS, rng=rng, alpha=ALPHA).verdict == "consistent"
    r = cases["noiseless triples"].run(trials=TRIALS, rng=rng, alpha=ALPHA)
    assert r.violated, r
