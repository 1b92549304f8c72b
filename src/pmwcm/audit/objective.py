"""Auditing objective perturbation (AMP: pure DP composed with a Gaussian step) on arrays.

:class:`~pmwcm.mechanisms.oracles.ObjectivePerturbation` releases ``Proj(theta_approx + N(0,
sigma^2 I))``: ``theta_approx`` is a fixed-budget solve, from the centre ``c = -b /
(n mu)``, of ``L_w(theta) + (mu/2)||theta - c||^2``, within an a-priori ``r`` of the
exact ``theta_b = argmin_{R^d} L_w + (mu/2)||.||^2 + <b/n, .>``; ``||b|| ~ Gamma(d,
4 zeta / eps)`` in a uniform direction, ``sigma = 2 r K m``. It claims the
composition of pure ``eps = 1 / noise_level`` (CMS11 Thm. 9) with a ``(1/(K
m))``-GDP Gaussian step (Iyengar et al. 2019, Thm. 1): its ``privacy_event``, whose
PLD epsilon at ``delta`` is the claim. :class:`ObjectivePerturbationModel` reads
every constant from the oracle's public :meth:`~pmwcm.mechanisms.oracles.ObjectivePerturbation.plan`
(so a broken plan is audited as the oracle runs it), draws ``b`` and the output
noise the same way for all trials at once and runs the *same* fixed-budget solve
(:func:`~pmwcm.mechanisms.oracles.strongly_convex.run_distance_plan`) on all trials at once;
:func:`crosscheck_objective` replays identical draws into the real oracle.
Neighbours: :func:`~pmwcm.audit.oracles.worst_case_neighbours` on a logistic
query (``y`` on ``a``, no intercept, ``n = 10``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pmwcm.audit.auditor import claimed_epsilon
from pmwcm.audit.cases import AuditCase
from pmwcm.audit.events import ThresholdFamily
from pmwcm.audit.oracles import _project_rows, worst_case_neighbours
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.glm import batch_data_gradient
from pmwcm.kernels.queries import CMQuery, GLMProblem
from pmwcm.mechanisms.oracles import OracleInput
from pmwcm.mechanisms.oracles.objective_perturbation import ObjectivePerturbation
from pmwcm.mechanisms.oracles.strongly_convex import run_distance_plan

__all__ = ["ObjectivePerturbationModel", "crosscheck_objective", "objective_case"]

FloatArray = NDArray[np.float64]


class _Draws:
    """Replays the oracle's draws: Laplace for ``|b|``, then Gaussians (direction, output).

    Replayed values are unit draws, scaled by what the oracle asks for.
    """

    name = "draws"

    def __init__(self, laplace: FloatArray, *gaussians: FloatArray) -> None:
        self._laplace = laplace
        self._gaussians = deque(gaussians)

    def laplace(self, scale: float, size: int) -> FloatArray:
        assert self._laplace.size == size, f"replay holds {self._laplace.size}, asked {size}"
        return self._laplace * scale

    def gaussian(self, sigma: float, size: int) -> FloatArray:
        draw = self._gaussians.popleft()
        assert draw.size == size, f"replay holds {draw.size}, asked {size}"
        return draw * sigma

    def uniform(self, size: int) -> FloatArray:
        raise AssertionError("unexpected uniform draw")


@dataclass(frozen=True, kw_only=True)
class ObjectivePerturbationModel:
    """Objective perturbation (AMP) for a GLM query, vectorised over trials."""

    oracle: ObjectivePerturbation
    problem: GLMProblem
    n: int
    noise_level: float

    def __call__(self, weights: Any, trials: int, rng: np.random.Generator, /) -> Any:
        """``trials`` released answers on the clique marginal ``weights``."""
        d = self.problem.dim
        lap = rng.laplace(0.0, 1.0, (trials, d))
        gauss = rng.standard_normal((trials, d))
        out = rng.standard_normal((trials, d))
        return self.release(np.asarray(weights), lap, gauss, out)

    def release(
        self, weights: FloatArray, lap: FloatArray, gauss: FloatArray, out: FloatArray
    ) -> FloatArray:
        """Answers for unit draws (trials, d): ``lap`` (Laplace), ``gauss``, ``out`` (normal)."""
        p, n = self.problem, self.n
        plan = self.oracle.plan(p, n, self.noise_level)
        norm = np.abs(lap * plan.norm_scale).sum(axis=1, keepdims=True)
        b = norm * gauss / np.maximum(np.linalg.norm(gauss, axis=1, keepdims=True), 1e-300)
        mu = plan.strong_convexity
        centre = -(b / n) / mu
        w = np.asarray(weights, dtype=np.float64).ravel()

        def gradient(theta: FloatArray) -> FloatArray:
            data = batch_data_gradient(p.loss, p.features, p.labels, w, theta)
            return data + mu * (theta - centre)

        theta = run_distance_plan(plan.solve, gradient, centre, radius=None)
        return _project_rows(theta + plan.sigma * out, p.radius)


def crosscheck_objective(
    model: ObjectivePerturbationModel, weights: Any, *, trials: int, rng: np.random.Generator
) -> float:
    """Largest ``|model - real oracle|`` over ``trials`` answers on identical draws."""
    w, d = np.asarray(weights, dtype=np.float64), model.problem.dim
    lap, gauss = rng.laplace(0.0, 1.0, (trials, d)), rng.standard_normal((trials, d))
    out = rng.standard_normal((trials, d))
    expected = model.release(w, lap, gauss, out)
    data = OracleInput(problem=model.problem, weights=w, n=model.n)
    worst = 0.0
    for i in range(trials):
        real = model.oracle.answer(data, noise_level=model.noise_level,
                                   noise=_Draws(lap[i], gauss[i], out[i]))  # fmt: skip
        worst = max(worst, float(np.max(np.abs(real - expected[i]))))
    return worst


def objective_case(
    oracle: ObjectivePerturbation,
    *,
    label: str,
    epsilon: float = 2.0,
    n: int = 10,
    delta: float = 1e-6,
) -> AuditCase:
    """The oracle at noise level ``1 / epsilon`` on a logistic query and its worst-case neighbour.

    The claim is the PLD epsilon of the oracle's composed event at ``delta``
    (``epsilon`` of the pure part plus the Gaussian step's few percent).
    """
    domain = Domain.from_sizes({"a": 2, "y": 2})
    query = CMQuery(loss="logistic", target="y", features=("a",), radius=5.0, intercept=False)
    problem = query.compile(domain)
    c0, c1 = worst_case_neighbours(problem, np.array([3.0, 2.0, 2.0, 3.0]) * n / 10)
    event = oracle.privacy_event(1.0 / epsilon)
    return AuditCase(
        name=f"{label} oracle",
        guarantee=f"{event}; PLD epsilon at delta={delta:g}",
        mechanism=ObjectivePerturbationModel(
            oracle=oracle, problem=problem, n=n, noise_level=1.0 / epsilon
        ),
        dataset0=c0 / n,
        dataset1=c1 / n,
        events=ThresholdFamily(statistic=lambda o: np.asarray(o)[:, 0], name="theta"),
        claimed_epsilon=claimed_epsilon(event, delta=delta),
        delta=delta,
    )
