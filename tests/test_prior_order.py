"""The paid prior's cliques: all triples where their noise is small
(:func:`pmwcm.mechanisms.priors.marginals.prior_order`), else the pairs that their noise
does not swamp and the 1-ways of the attributes those leave out
(:func:`~pmwcm.mechanisms.priors.marginals.noise_limited_pairs`); ``PMWConfig.prior_cliques``
overrides either.

The rules read public inputs only (the schema, ``n``, the plan's multiplier); every clique
set is the same Gaussian event, so the ledger does not move.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from pmwcm.data.bundled import load_adult
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.plan import BudgetPlan, plan_budget
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.domain import Domain
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.priors.marginals import (
    PAIR_NOISE_CUT,
    TRIPLE_NOISE_CUT,
    noise_limited_pairs,
    pairwise_cliques,
    prior_order,
)
from pmwcm.mechanisms.private_data import PrivateData

ADULT = load_adult()
FULL = load_adult("full")
BINARY14 = Domain.from_sizes({f"a{i}": 2 for i in range(14)})


def config(epsilon: float, **kw: object) -> PMWConfig:
    return PMWConfig(epsilon=epsilon, delta=1e-6, **kw)  # type: ignore[arg-type]


def test_the_cut_reads_the_noise_per_mean_triple_cell() -> None:
    # 364 triples of 8 cells: m sqrt(728) 8 / n against the cut.
    n = 48_842
    at_cut = TRIPLE_NOISE_CUT * n / (math.sqrt(2 * 364) * 8)
    assert prior_order(BINARY14, n=n, noise_multiplier=at_cut * 0.999) == 3
    assert prior_order(BINARY14, n=n, noise_multiplier=at_cut * 1.001) == 2
    # Ten-valued attributes (1,000 cells a triple) need a hundred times the records.
    tens = Domain.from_sizes({f"a{i}": 10 for i in range(5)})
    k = math.comb(5, 3)
    needed = 1.0 * math.sqrt(2 * k) * 1000 / TRIPLE_NOISE_CUT
    assert prior_order(tens, n=int(needed * 1.01), noise_multiplier=1.0) == 3
    assert prior_order(tens, n=int(needed * 0.99), noise_multiplier=1.0) == 2
    # Fewer than three attributes, or a dense fit too large: pairs.
    assert prior_order(Domain.from_sizes({"a": 2, "b": 2}), n=10**9, noise_multiplier=1) == 2
    wide = Domain.from_sizes({f"a{i}": 2 for i in range(24)})
    assert prior_order(wide, n=10**12, noise_multiplier=1.0) == 2


@pytest.mark.parametrize(
    ("epsilon", "n", "order"),
    [(4.0, 48_842, 3), (2.0, 48_842, 3), (1.0, 48_842, 2), (4.0, 8_000, 2), (0.5, 48_842, 2)],
)
def test_the_plan_measures_triples_at_high_signal_only(epsilon: float, n: int, order: int) -> None:
    plan = plan_budget(config(epsilon, update="measure"), n=n, domain=ADULT.domain)
    assert plan.backend.kind == "dense" and plan.workload is None
    assert plan.prior_order == order and plan.to_dict()["prior_order"] == order


def test_the_triples_replace_the_workload_rounds_where_they_qualify() -> None:
    """Where ``auto`` measures every triple, announced cliques get no rounds (the triples
    prior measured better on binary Adult at eps >= 1.5: ``plan._triples_instead``); where
    the triples are too noisy (eps = 1), or the pairs are asked for, the rounds run on the
    pairs. Each plan is the one ``build_engine`` accepts for those inputs."""
    cliques = [("income>50K", "male", "white", "age>=37"), ("income>50K", "married", "husband")]

    def planned(epsilon: float, **fields: Any) -> BudgetPlan:
        announced = config(epsilon, announced_queries=1000, **fields)
        plan = plan_budget(announced, n=48_842, domain=ADULT.domain, workload=cliques)
        assert plan.matches(announced, n=48_842, domain=ADULT.domain, kind="cm", spent=(),
                            prior_supplied=False, workload=cliques)  # fmt: skip
        return plan

    triples = planned(4.0)
    assert triples.workload is None and triples.prior_order == 3
    assert triples.announced_cliques == ()
    alone = plan_budget(config(4.0, announced_queries=1000), n=48_842, domain=ADULT.domain)
    assert triples.prior_multiplier == alone.prior_multiplier
    assert triples.prior_events == alone.prior_events
    for rounds in (planned(1.0), planned(4.0, prior_cliques="pairs")):
        assert rounds.workload is not None and rounds.prior_order == 2
        assert len(rounds.announced_cliques) == 2


def test_the_workload_start_and_the_support_keep_the_pairs() -> None:
    cliques = [("income>50K", "male", "white", "age>=37"), ("income>50K", "married", "husband")]
    announced = config(4.0, announced_queries=1000, prior_cliques="pairs")
    with_rounds = plan_budget(announced, n=48_842, domain=ADULT.domain, workload=cliques)
    assert with_rounds.workload is not None and with_rounds.prior_order == 2
    support = plan_budget(config(4.0, backend="support"), n=48_842, domain=ADULT.domain)
    assert support.prior_order == 2
    with pytest.raises(ValueError, match=r"prior_cliques='triples'.*the backend is 'support'"):
        plan_budget(config(4.0, backend="support", prior_cliques="triples"), n=48_842,
                    domain=ADULT.domain)  # fmt: skip
    with pytest.raises(ValueError, match=r"prior_cliques='triples'.*workload-aware start runs"):
        plan_budget(config(4.0, announced_queries=1000, prior_cliques="triples"), n=48_842,
                    domain=ADULT.domain, workload=cliques)  # fmt: skip


def test_the_setting_overrides_the_rule_and_is_checked() -> None:
    def order(epsilon: float, setting: str) -> int:
        plan = plan_budget(config(epsilon, prior_cliques=setting), n=48_842, domain=ADULT.domain)
        return plan.prior_order

    assert order(4.0, "auto") == 3 and order(4.0, "pairs") == 2
    assert order(1.0, "auto") == 2 and order(1.0, "triples") == 3
    with pytest.raises(ValueError, match="prior_cliques must be one of"):
        config(1.0, prior_cliques="quads")
    # No paid prior: nothing to measure, whatever the setting.
    uniform = config(4.0, prior="uniform", prior_cliques="triples")
    assert plan_budget(uniform, n=48_842, domain=ADULT.domain).prior_order == 2


def test_the_triples_prior_is_the_same_event_and_fits_every_triple() -> None:
    data = PrivateData.from_records(ADULT.domain, ADULT.records)
    engines = {
        order: build_engine(data, config(4.0, prior_cliques=order), noise=NumpyNoise(seed=1))
        for order in ("pairs", "triples")
    }
    pairs, triples = engines["pairs"], engines["triples"]
    assert [e.label for e in triples.ledger.entries] == ["prior: noisy 3-way marginals"]
    assert [e.label for e in pairs.ledger.entries] == ["prior: noisy 2-way marginals"]
    assert triples.ledger.entries[0].event == pairs.ledger.entries[0].event
    assert triples.ledger.spent_epsilon() == pairs.ledger.spent_epsilon()
    measured = triples.prior_measurements
    assert len(measured) == math.comb(14, 3) and {len(m.clique) for m in measured} == {3}

    # The fit moved the start onto the triples: closer to them than the pairs' start is.
    def distance(engine: OnlinePMW) -> float:
        return float(sum(np.sum((engine.hypothesis.marginal(m.clique) - m.values) ** 2)
                         for m in measured))  # fmt: skip

    assert distance(triples) < 0.5 * distance(pairs)


def relative_noise(domain: Domain, cliques: list[tuple[str, ...]], n: int, m: float) -> float:
    """The largest clique's noise on a mean cell over that cell's mass, ``sigma(K) |C|``."""
    sigma = m * math.sqrt(2 * len(cliques)) / n
    return sigma * max(math.prod(domain.sizes_of(c)) for c in cliques)


@pytest.mark.parametrize("n", [48_842, 8_000, 2_000, 300, 50])
def test_the_pairs_kept_are_the_smallest_within_the_cut_and_cover_every_attribute(n: int) -> None:
    domain = FULL.domain
    m = 6.0
    chosen = noise_limited_pairs(domain, n=n, noise_multiplier=m)
    pairs = [c for c in chosen if len(c) == 2]
    singles = [c for c in chosen if len(c) == 1]
    every = pairwise_cliques(domain)
    assert pairs == [p for p in every if p in set(pairs)]  # in the order of all pairs
    assert {a for c in chosen for a in c} == set(domain.names)  # every attribute described
    assert not {a for (a,) in singles} & {a for p in pairs for a in p}  # a 1-way only if needed
    if pairs:
        assert relative_noise(domain, chosen, n, m) <= PAIR_NOISE_CUT
        cells = sorted(math.prod(domain.sizes_of(p)) for p in every)
        largest = max(math.prod(domain.sizes_of(p)) for p in pairs)
        assert largest in cells[: len(pairs)]  # smallest first (ties may go either way)
    if len(pairs) < len(every):  # the next pair would break the cut, at the K it makes
        following = sorted(set(every) - set(pairs), key=lambda p: math.prod(domain.sizes_of(p)))
        bigger = [*pairs, following[0]]
        held = {a for p in bigger for a in p}
        grown = bigger + [(a,) for a in domain.names if a not in held]
        assert relative_noise(domain, grown, n, m) > PAIR_NOISE_CUT
    else:
        assert relative_noise(domain, chosen, n, m) <= PAIR_NOISE_CUT


def test_a_binary_schema_keeps_every_pair_at_any_budget() -> None:
    for n, eps in ((8_000, 0.5), (48_842, 0.5), (48_842, 4.0)):
        plan = plan_budget(config(eps, update="measure"), n=n, domain=ADULT.domain)
        every = pairwise_cliques(ADULT.domain, order=plan.prior_order)  # triples at eps 4
        assert plan.prior_cliques == tuple(every)


def test_the_plan_drops_the_swamped_pairs_of_a_full_resolution_schema() -> None:
    def plan(epsilon: float, n: int, **kw: object):  # type: ignore[no-untyped-def]
        return plan_budget(config(epsilon, update="measure", **kw), n=n, domain=FULL.domain)

    low = plan(0.5, 8_000)
    assert low.backend.kind == "support" and low.prior_multiplier is not None
    assert low.prior_cliques == tuple(
        noise_limited_pairs(FULL.domain, n=8_000, noise_multiplier=low.prior_multiplier)
    )
    dropped = math.comb(14, 2) - low.to_dict()["prior_cliques"]["pairs"]
    assert dropped > 0
    everything = plan(0.5, 8_000, prior_cliques="pairs")  # the setting keeps every pair
    assert everything.prior_cliques == tuple(pairwise_cliques(FULL.domain))
    assert everything.prior_events == low.prior_events  # the same event either way
    assert len(plan(4.0, 48_842).prior_cliques) == math.comb(14, 2)  # high signal: all


def test_a_support_prior_of_pairs_and_1_ways_is_built_and_answers() -> None:
    """Where even an attribute's smallest pair is swamped, it is measured by its 1-way: the
    support's proposal draws it as a root of the Chow-Liu forest."""
    rng = np.random.default_rng(3)
    domain = Domain.from_sizes({"a": 2, "b": 2, "c": 60, "d": 60})
    records = np.stack([rng.integers(0, s, 400) for s in domain.sizes], axis=1)
    data = PrivateData.from_records(domain, records)
    settings = config(0.1, backend="support", support_size=4096, update="measure")
    plan = plan_budget(settings, n=400, domain=domain)
    assert ("c",) in plan.prior_cliques and ("d",) in plan.prior_cliques
    engine = build_engine(data, settings, noise=NumpyNoise(seed=2))
    cliques = [m.clique for m in engine.prior_measurements]
    assert cliques == list(plan.prior_cliques)
    labels = [e.label for e in engine.ledger.entries]
    assert labels[0] == "prior: noisy 2-way marginals and 2 1-way ones"
    marginal = engine.hypothesis.marginal(("c",))
    assert marginal.shape == (60,) and math.isclose(float(marginal.sum()), 1.0)
