"""Objective perturbation: its event, its refusals, its noise and its accuracy."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest

from pmwcm.accounting import EpsilonDeltaDpEvent
from pmwcm.baselines import excess_risk
from pmwcm.domain import Domain
from pmwcm.noise import NumpyNoise
from pmwcm.oracles import ObjectivePerturbation, OracleInput
from pmwcm.queries import CMQuery

DOMAIN = Domain.from_sizes({"a": 2, "b": 2, "c": 3, "y": 2})


def _data(seed: int, spec: CMQuery) -> OracleInput:
    problem = spec.compile(DOMAIN)
    weights = np.random.default_rng(seed).dirichlet(np.ones(problem.features.shape[0]))
    return OracleInput(problem=problem, weights=weights, n=10_000)


def test_event_is_pure_dp_at_one_over_level() -> None:
    event = ObjectivePerturbation().privacy_event(4.0)
    assert isinstance(event, EpsilonDeltaDpEvent)
    assert event.epsilon == pytest.approx(0.25)
    assert event.delta == 0.0
    assert not isinstance(event, dp_accounting.GaussianDpEvent)


@pytest.mark.parametrize("loss", ["squared", "hinge", "quantile", "absolute"])
def test_refuses_losses_outside_its_theorem(loss: str) -> None:
    spec = CMQuery(loss=loss, target="y", features=("a", "c"))
    with pytest.raises(ValueError, match=loss):
        ObjectivePerturbation().check(spec.compile(DOMAIN))


class _Recorder(NumpyNoise):
    """Records the scales asked for."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed=seed)
        self.laplace_scales: list[tuple[float, int]] = []

    def laplace(self, scale: float, size: int) -> np.ndarray:
        self.laplace_scales.append((scale, size))
        return super().laplace(scale, size)


def test_norm_noise_scale_is_four_zeta_over_epsilon(seed: int) -> None:
    # |b| ~ Gamma(d, 2 zeta / eps_b) with eps_b = eps / 2, drawn as d exponentials.
    spec = CMQuery(loss="logistic", target="y", features=("a", "b", "c"))
    data = _data(seed, spec)
    noise = _Recorder(seed)
    ObjectivePerturbation().answer(data, noise_level=2.0, noise=noise)
    zeta = spec.compile(DOMAIN).feature_bound  # logistic: |df/dz| <= 1 on all of R
    assert noise.laplace_scales == [(pytest.approx(4.0 * zeta / 0.5), data.problem.dim)]


@pytest.mark.parametrize("loss", ["logistic", "huber", "smoothed_hinge"])
def test_accurate_at_large_epsilon_when_optimum_is_interior(loss: str, seed: int) -> None:
    # l2 > 0 and a large radius keep the optimum inside the ball, where the
    # unconstrained minimiser is the constrained one.
    spec = CMQuery(loss=loss, target="y", features=("a", "b", "c"), radius=50.0, l2=0.05)
    data = _data(seed, spec)
    theta = ObjectivePerturbation().answer(data, noise_level=1e-3, noise=NumpyNoise(seed=seed))
    assert excess_risk(data.problem, data.weights, theta) < 1e-4
    assert float(np.linalg.norm(theta)) <= spec.radius + 1e-12


def test_noise_shrinks_with_epsilon(seed: int) -> None:
    spec = CMQuery(loss="logistic", target="y", features=("a", "c"), radius=50.0, l2=0.05)
    data = _data(seed, spec)
    risks = []
    for level in (10.0, 0.01):
        errs = [
            excess_risk(
                data.problem,
                data.weights,
                ObjectivePerturbation().answer(data, noise_level=level, noise=NumpyNoise(seed=s)),
            )
            for s in range(seed, seed + 20)
        ]
        risks.append(float(np.mean(errs)))
    assert risks[1] < risks[0]
    assert math.isfinite(risks[0])
