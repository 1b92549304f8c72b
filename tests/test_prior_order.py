"""The paid dense prior's cliques: all pairs, or all triples where their noise is small
(:func:`pmwcm.mechanisms.priors.marginals.prior_order`, ``PMWConfig.prior_cliques``).

The rule reads public inputs only (the schema, ``n``, the plan's multiplier); the
triples are the same Gaussian event as the pairs, so the ledger does not move.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pmwcm.data.bundled import load_adult
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.plan import plan_budget
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.domain import Domain
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.priors.marginals import TRIPLE_NOISE_CUT, prior_order
from pmwcm.mechanisms.private_data import PrivateData

ADULT = load_adult()
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


def test_the_workload_start_and_the_support_keep_the_pairs() -> None:
    cliques = [("income>50K", "male", "white", "age>=37"), ("income>50K", "married", "husband")]
    announced = config(4.0, announced_queries=1000)
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
