"""Non-smooth catalogue losses run through the engine and pay their real-data solve's gap."""

from __future__ import annotations

import numpy as np
import pytest

from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.private_data import PrivateData

DOMAIN = Domain.from_sizes({"a": 2, "b": 2, "c": 3, "y": 2})


@pytest.mark.parametrize("loss", ["hinge", "quantile", "absolute"])
def test_nonsmooth_queries_are_answered_and_pay_their_tolerance(loss: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    records = np.stack([rng.integers(0, s, size=3000) for s in DOMAIN.sizes], axis=1)
    data = PrivateData.from_records(DOMAIN, records)
    config = PMWConfig(epsilon=1.0, delta=1e-6, prior="uniform", max_updates=5)
    engine = build_engine(data, config, noise=NumpyNoise(seed=seed))
    query = CMQuery(loss=loss, target="y", features=("a", "c"))
    round_ = engine.cm_round(query)
    assert round_.hypothesis_tol == engine.settings.nonsmooth_tol
    # the real-data solve's a-priori gap is part of the sensitivity the sparse vector uses
    tau = engine.settings.data_gap_fraction * 2 * round_.scale / data.n
    assert round_.tau == pytest.approx(tau)
    assert round_.sensitivity(data.n) == pytest.approx(2 * round_.scale / data.n + tau)
    answer = engine.answer(query)
    assert answer.source in ("hypothesis", "oracle")
    assert np.linalg.norm(answer.value) <= query.radius + 1e-9


def test_smooth_queries_keep_the_tight_tolerance(seed: int) -> None:
    rng = np.random.default_rng(seed)
    records = np.stack([rng.integers(0, s, size=500) for s in DOMAIN.sizes], axis=1)
    engine = build_engine(
        PrivateData.from_records(DOMAIN, records),
        PMWConfig(epsilon=1.0, delta=1e-6, prior="uniform"),
        noise=NumpyNoise(seed=seed),
    )
    round_ = engine.cm_round(CMQuery(loss="logistic", target="y", features=("a",)))
    assert round_.hypothesis_tol == engine.settings.solver_tol
