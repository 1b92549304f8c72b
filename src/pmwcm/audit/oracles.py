"""Auditing the single-query oracles on worst-case neighbouring datasets.

**Neighbours.** :func:`worst_case_neighbours` moves one record to the cell
that maximises the change of its gradient, ``max_{i, j} ||grad l_i - grad
l_j||``: the change of the mean data gradient then meets the bound ``2 G B / n``
both oracles calibrate to.

**The query** (:func:`hinge_problem`): hinge loss of ``y`` on a +/-1 feature
``a``, no intercept, radius ``R = 1/2``. On the ball ``|z| <= 1/2 < 1``, so the
loss is *linear* in ``theta``: gradients do not depend on ``theta``, noisy
gradient descent is a linear Gaussian mechanism of the noise sum, and the
neighbours' minimisers of the regularised loss differ by exactly ``2 G B / (n
lambda)``: the worst case of the proofs, where an audit can be tight. Output
perturbation gets ``l2 = 1``; the Jain-Thakurta oracle gets ``l2 = 0`` and adds
its own ridge weight (at ``n = 10``, ``m = 1`` it is below ``2 G B / R`` so the
regularised minimisers are interior and the neighbours' gap is the full bound).

**Vectorised trials.** A real oracle call costs milliseconds. The models here
take everything data-dependent from the *real* oracle by :func:`probe` (its
answer when the noise source returns zeros, and the noise scale it asked for)
and redo only the noise arithmetic on arrays of trials; :func:`crosscheck`
replays identical Gaussian draws into the real oracle and reports the largest
difference. The released ``theta`` is audited through its projection on the
direction between the two noiseless answers (threshold events). The claim is
the PLD epsilon of the oracle's own ``privacy_event`` at ``delta``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pmwcm.audit.auditor import claimed_epsilon
from pmwcm.audit.cases import AuditCase
from pmwcm.audit.events import ThresholdFamily
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.glm import batch_data_gradient
from pmwcm.kernels.queries import CMQuery, GLMProblem
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.oracles import (
    JainThakurtaGLM,
    NoisyGradientDescent,
    Oracle,
    OracleInput,
    OutputPerturbation,
)
from pmwcm.mechanisms.oracles.base import release_in_ball
from pmwcm.mechanisms.oracles.output_perturbation import solve_output

__all__ = [
    "BROKEN_ORACLES",
    "NoisyGDModel",
    "OutputPerturbationModel",
    "RidgeLeftOutOfSolve",
    "crosscheck_oracle",
    "hinge_problem",
    "oracle_case",
    "probe",
    "worst_case_neighbours",
]

FloatArray = NDArray[np.float64]


class _Tape:
    """A NoiseSource that returns zeros (or replayed Gaussian draws) and records requests."""

    def __init__(self, replay: FloatArray | None = None) -> None:
        self.requests: list[tuple[str, float, int]] = []
        self._replay = replay

    @property
    def name(self) -> str:
        return "tape"

    def laplace(self, scale: float, size: int) -> FloatArray:
        self.requests.append(("laplace", float(scale), size))
        return np.zeros(size)

    def gaussian(self, sigma: float, size: int) -> FloatArray:
        self.requests.append(("gaussian", float(sigma), size))
        if self._replay is None:
            return np.zeros(size)
        assert self._replay.size == size, f"replay holds {self._replay.size}, asked {size}"
        return self._replay.ravel() * sigma

    def uniform(self, size: int) -> FloatArray:
        self.requests.append(("uniform", 0.0, size))
        return np.zeros(size)


def probe(oracle: Oracle, data: OracleInput, noise_level: float) -> tuple[FloatArray, float]:
    """The oracle's noiseless answer and the Gaussian ``sigma`` it draws with.

    Raises:
        ValueError: if the oracle draws anything but one Gaussian vector.
    """
    tape = _Tape()
    answer = oracle.answer(data, noise_level=noise_level, noise=tape)
    kinds = [r[0] for r in tape.requests]
    if kinds != ["gaussian"]:
        raise ValueError(f"expected one Gaussian draw, the oracle asked for {tape.requests}.")
    return np.asarray(answer, dtype=np.float64), tape.requests[0][1]


def _project_rows(theta: FloatArray, radius: float) -> FloatArray:
    norms = np.linalg.norm(theta, axis=1, keepdims=True)
    return theta * np.minimum(1.0, radius / np.maximum(norms, 1e-300))


@dataclass(frozen=True, kw_only=True)
class OutputPerturbationModel:
    """``Proj(theta_D + sigma Z)`` with ``theta_D`` and ``sigma`` probed from the oracle.

    Serves output perturbation and :class:`~pmwcm.mechanisms.oracles.JainThakurtaGLM`
    (output perturbation of the query regularised by its public ridge weight).
    """

    oracle: Oracle
    problem: GLMProblem
    n: int
    noise_level: float

    def __call__(self, weights: Any, trials: int, rng: np.random.Generator, /) -> Any:
        """``trials`` released answers on the clique marginal ``weights``."""
        data = OracleInput(problem=self.problem, weights=np.asarray(weights), n=self.n)
        center, sigma = probe(self.oracle, data, self.noise_level)
        z = rng.standard_normal((trials, center.size))
        return self.release(center, sigma, z)

    def release(self, center: FloatArray, sigma: float, z: FloatArray) -> FloatArray:
        """The answers for standard normal draws ``z`` (trials, d)."""
        return _project_rows(center + sigma * z, self.problem.radius)


@dataclass(frozen=True, kw_only=True)
class NoisyGDModel:
    """Full-batch noisy projected gradient descent on arrays of trials (GLM queries).

    ``sigma`` is probed from the oracle; the step size must be set explicitly
    on the oracle (the cross-check confirms the model follows it).
    """

    oracle: NoisyGradientDescent
    problem: GLMProblem
    n: int
    noise_level: float

    def __call__(self, weights: Any, trials: int, rng: np.random.Generator, /) -> Any:
        """``trials`` released answers on the clique marginal ``weights``."""
        w = np.asarray(weights, dtype=np.float64)
        _, sigma = probe(self.oracle, OracleInput(problem=self.problem, weights=w, n=self.n),
                         self.noise_level)  # fmt: skip
        z = rng.standard_normal((trials, self.oracle.steps, self.problem.dim))
        return self.release(w, sigma, z)

    def release(self, weights: FloatArray, sigma: float, z: FloatArray) -> FloatArray:
        """The answers for standard normal draws ``z`` (trials, steps, d)."""
        p, steps, h = self.problem, self.oracle.steps, self.oracle.step_size
        if h is None:
            raise ValueError("NoisyGDModel needs an oracle with an explicit step_size.")
        theta = np.zeros((z.shape[0], p.dim))
        tail = np.zeros_like(theta)
        start = steps // 2
        for step in range(steps):
            data = batch_data_gradient(p.loss, p.features, p.labels, weights, theta)
            grad = data + p.l2 * theta + sigma * z[:, step]
            theta = _project_rows(theta - h * grad, p.radius)
            if step >= start:
                tail += theta
        return _project_rows(tail / (steps - start), p.radius)


def crosscheck_oracle(
    model: NoisyGDModel | OutputPerturbationModel,
    weights: Any,
    *,
    trials: int,
    rng: np.random.Generator,
) -> float:
    """Largest ``|model - real oracle|`` over ``trials`` answers on identical draws."""
    w = np.asarray(weights, dtype=np.float64)
    data = OracleInput(problem=model.problem, weights=w, n=model.n)
    center, sigma = probe(model.oracle, data, model.noise_level)
    if isinstance(model, NoisyGDModel):
        z = rng.standard_normal((trials, model.oracle.steps, model.problem.dim))
        expected = model.release(w, sigma, z)
    else:
        z = rng.standard_normal((trials, center.size))
        expected = model.release(center, sigma, z)
    worst = 0.0
    for i in range(trials):
        real = model.oracle.answer(data, noise_level=model.noise_level, noise=_Tape(z[i]))
        worst = max(worst, float(np.max(np.abs(np.asarray(real) - expected[i]))))
    return worst


def hinge_problem(*, l2: float = 0.0) -> GLMProblem:
    """Hinge loss of ``y`` on ``a`` (binary), no intercept, ``R = 1/2``: linear on the ball."""
    domain = Domain.from_sizes({"a": 2, "y": 2})
    query = CMQuery(loss="hinge", target="y", features=("a",), radius=0.5, l2=l2, intercept=False)
    return query.compile(domain)


def worst_case_neighbours(
    problem: GLMProblem, counts: Any, *, theta: FloatArray | None = None
) -> tuple[FloatArray, FloatArray]:
    """``(counts0, counts1)``: one record of ``counts`` moved to maximise its gradient change.

    Args:
        problem: the query on its clique.
        counts: records per clique cell (flattened, C-order), summing to ``n``.
        theta: where gradients are compared (default: the origin).
    """
    c0 = np.asarray(counts, dtype=np.float64).ravel()
    grads = problem.cell_gradients(np.zeros(problem.dim) if theta is None else theta)
    gaps = np.linalg.norm(grads[:, None, :] - grads[None, :, :], axis=2)
    gaps[c0 <= 0, :] = -1.0
    src, dst = np.unravel_index(int(np.argmax(gaps)), gaps.shape)
    c1 = c0.copy()
    c1[src] -= 1
    c1[dst] += 1
    return c0, c1


def oracle_case(
    oracle: Oracle, *, label: str, noise_level: float = 1.0, delta: float = 1e-2, n: int = 10
) -> AuditCase:
    """The oracle on the linear hinge query, ``n`` balanced records, worst-case neighbour."""
    problem = hinge_problem(l2=1.0 if isinstance(oracle, OutputPerturbation) else 0.0)
    cells = problem.features.shape[0]
    base = np.full(cells, n // cells, dtype=np.float64)
    base[: n - int(base.sum())] += 1
    c0, c1 = worst_case_neighbours(problem, base)
    model: NoisyGDModel | OutputPerturbationModel
    if isinstance(oracle, NoisyGradientDescent):
        model = NoisyGDModel(oracle=oracle, problem=problem, n=n, noise_level=noise_level)
    elif isinstance(oracle, OutputPerturbation | JainThakurtaGLM):
        model = OutputPerturbationModel(
            oracle=oracle, problem=problem, n=n, noise_level=noise_level
        )
    else:
        raise ValueError(f"no vectorised model for oracle {oracle.name!r}.")
    a0 = probe(oracle, OracleInput(problem=problem, weights=c0 / n, n=n), noise_level)[0]
    a1 = probe(oracle, OracleInput(problem=problem, weights=c1 / n, n=n), noise_level)[0]
    direction = (a1 - a0) / max(float(np.linalg.norm(a1 - a0)), 1e-300)
    event = oracle.privacy_event(noise_level)
    return AuditCase(
        name=f"{label} oracle",
        guarantee=f"{event}; PLD epsilon at delta={delta:g}",
        mechanism=model,
        dataset0=c0 / n,
        dataset1=c1 / n,
        events=ThresholdFamily(statistic=lambda o: np.asarray(o) @ direction, name="<theta, v>"),
        claimed_epsilon=claimed_epsilon(event, delta=delta),
        delta=delta,
    )


@dataclass(frozen=True, kw_only=True)
class RidgeLeftOutOfSolve(JainThakurtaGLM):
    """Broken (a negative control): the ridge weight is charged but not solved with.

    The noise is calibrated to ``2 G B / (n (l2 + lambda))``, the sensitivity of
    the *regularised* minimiser, but the solve minimises the query as given
    (``l2`` alone), the bug of handing the solver the caller's problem instead
    of the regularised one. On the linear hinge query the unregularised
    minimisers of neighbours lie at opposite points of the ball, far more than
    ``Delta`` apart.
    """

    name: str = "jain_thakurta, ridge left out of the solve"

    def answer(self, data: OracleInput, *, noise_level: float, noise: NoiseSource) -> FloatArray:
        """``Proj(theta_D + N(0, sigma^2 I))`` with ``theta_D`` solved without the ridge."""
        regularised = self.regularised(data.problem, data.n, noise_level)
        plan = self.solve.plan(regularised, data.n)
        sigma = self.sensitivity(data.problem, data.n, noise_level) * noise_level
        unregularised = dataclasses.replace(regularised, l2=data.problem.l2)
        theta = solve_output(unregularised, data.weights, plan)
        return release_in_ball(theta, sigma, radius=regularised.radius, noise=noise)


#: Deliberately broken oracles (negative controls of ``pmwcm audit``), by label.
BROKEN_ORACLES: dict[str, Oracle] = {"ridge left out of the solve": RidgeLeftOutOfSolve()}
