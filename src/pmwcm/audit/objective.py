"""Auditing objective perturbation (a pure-DP oracle) on arrays of trials.

:class:`~pmwcm.oracles.ObjectivePerturbation` releases ``Proj(theta_b)``,
``theta_b = argmin_{R^d} L_w(theta) + (mu/2)||theta||^2 + <b/n, theta>``, with
``||b|| ~ Gamma(d, 4 zeta / eps)`` in a uniform direction, ``mu = lambda +
Gamma/n`` and ``Gamma = beta / (e^{eps/2} - 1)``; it claims pure ``eps``-DP,
``eps = 1 / noise_level`` (CMS11 Thm. 9). :class:`ObjectivePerturbationModel`
draws ``b`` the same way for all trials at once and solves the ``trials``
strongly convex problems by batched damped Newton steps; the noise scale is
probed from the real oracle and :func:`crosscheck_objective` replays identical
draws into it. Neighbours: :func:`~pmwcm.audit.oracles.worst_case_neighbours`
on a logistic query (``y`` on ``a``, no intercept, ``n = 10``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pmwcm.audit.auditor import claimed_epsilon
from pmwcm.audit.cases import AuditCase
from pmwcm.audit.events import ThresholdFamily
from pmwcm.audit.oracles import _project_rows, worst_case_neighbours
from pmwcm.domain import Domain
from pmwcm.oracles import OracleInput
from pmwcm.oracles.objective_perturbation import ObjectivePerturbation
from pmwcm.queries import CMQuery, GLMProblem

__all__ = ["ObjectivePerturbationModel", "crosscheck_objective", "objective_case"]

FloatArray = NDArray[np.float64]


class _Draws:
    """Replays (or zero-fills) the oracle's Laplace and Gaussian draws; records the scale."""

    def __init__(self, laplace: FloatArray | None = None, gauss: FloatArray | None = None) -> None:
        self.scale = math.nan
        self._laplace, self._gauss = laplace, gauss

    name = "draws"

    def laplace(self, scale: float, size: int) -> FloatArray:
        self.scale = float(scale)
        return np.ones(size) if self._laplace is None else self._laplace * scale

    def gaussian(self, sigma: float, size: int) -> FloatArray:
        return np.ones(size) if self._gauss is None else self._gauss * sigma

    def uniform(self, size: int) -> FloatArray:
        raise AssertionError("unexpected uniform draw")


@dataclass(frozen=True, kw_only=True)
class ObjectivePerturbationModel:
    """Objective perturbation for a GLM query, vectorised over trials."""

    oracle: ObjectivePerturbation
    problem: GLMProblem
    n: int
    noise_level: float

    def __call__(self, weights: Any, trials: int, rng: np.random.Generator, /) -> Any:
        """``trials`` released answers on the clique marginal ``weights``."""
        d = self.problem.dim
        lap = rng.laplace(0.0, 1.0, (trials, d))
        return self.release(np.asarray(weights), lap, rng.standard_normal((trials, d)))

    def release(self, weights: FloatArray, lap: FloatArray, gauss: FloatArray) -> FloatArray:
        """Answers for unit Laplace draws ``lap`` and normal draws ``gauss`` (trials, d)."""
        p, n = self.problem, self.n
        probe = _Draws()
        self.oracle.answer(OracleInput(problem=p, weights=weights, n=n),
                           noise_level=self.noise_level, noise=probe)  # fmt: skip
        norm = np.abs(lap * probe.scale).sum(axis=1, keepdims=True)
        b = norm * gauss / np.maximum(np.linalg.norm(gauss, axis=1, keepdims=True), 1e-300)
        beta = (p.loss.smoothness or 0.0) * p.feature_bound**2
        mu = p.l2 + beta / math.expm1(1.0 / self.noise_level / 2) / n
        theta = np.zeros_like(b)
        eye = np.eye(p.dim)
        for _ in range(100):
            z = theta @ p.features.T
            grad = (p.loss.derivative(z, p.labels) * weights) @ p.features + mu * theta + b / n
            curv = p.loss.second_derivative(z, p.labels) * weights
            hess = np.einsum("tc,ci,cj->tij", curv, p.features, p.features) + mu * eye
            theta = theta - np.linalg.solve(hess, grad[..., None])[..., 0]
            if float(np.max((grad**2).sum(axis=1))) / (2 * mu) <= 1e-26:
                break
        return _project_rows(theta, p.radius)


def crosscheck_objective(
    model: ObjectivePerturbationModel, weights: Any, *, trials: int, rng: np.random.Generator
) -> float:
    """Largest ``|model - real oracle|`` over ``trials`` answers on identical draws."""
    w, d = np.asarray(weights, dtype=np.float64), model.problem.dim
    lap, gauss = rng.laplace(0.0, 1.0, (trials, d)), rng.standard_normal((trials, d))
    expected = model.release(w, lap, gauss)
    data = OracleInput(problem=model.problem, weights=w, n=model.n)
    worst = 0.0
    for i in range(trials):
        real = model.oracle.answer(data, noise_level=model.noise_level,
                                   noise=_Draws(lap[i], gauss[i]))  # fmt: skip
        worst = max(worst, float(np.max(np.abs(real - expected[i]))))
    return worst


def objective_case(
    oracle: ObjectivePerturbation, *, label: str, epsilon: float = 2.0, n: int = 10
) -> AuditCase:
    """The oracle at pure ``epsilon`` on a logistic query and its worst-case neighbour."""
    domain = Domain.from_sizes({"a": 2, "y": 2})
    query = CMQuery(loss="logistic", target="y", features=("a",), radius=5.0, intercept=False)
    problem = query.compile(domain)
    c0, c1 = worst_case_neighbours(problem, np.array([3.0, 2.0, 2.0, 3.0]) * n / 10)
    event = oracle.privacy_event(1.0 / epsilon)
    return AuditCase(
        name=f"{label} oracle",
        guarantee=f"pure DP, {event}",
        mechanism=ObjectivePerturbationModel(
            oracle=oracle, problem=problem, n=n, noise_level=1.0 / epsilon
        ),
        dataset0=c0 / n,
        dataset1=c1 / n,
        events=ThresholdFamily(statistic=lambda o: np.asarray(o)[:, 0], name="theta"),
        claimed_epsilon=claimed_epsilon(event, delta=0.0),
    )
