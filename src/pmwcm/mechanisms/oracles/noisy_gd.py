"""Noisy projected gradient descent, full batch (Bassily, Smith, Thakurta 2014).

**Algorithm.** ``N`` steps of ``theta <- Proj_Theta(theta - h (grad L_D(theta) +
Z))``, ``Z ~ N(0, sigma^2 I)``, from ``theta = 0``; the answer is the average of
the last half of the iterates (projected, a post-processing).

**Guarantee.** Under replace-one, the mean data gradient ``(1/n) sum_i grad
l(theta; x_i)`` moves by at most ``Delta = 2 G B / n`` in L2 (the regulariser is
data-independent). With ``sigma = Delta m sqrt(N)`` each step is a Gaussian
mechanism with noise multiplier ``m sqrt(N)``; ``N`` adaptively composed
Gaussian mechanisms are exactly a Gaussian mechanism with multiplier ``m``
(Dong, Roth, Su 2022, Cor. 3.3: ``mu = sqrt(sum mu_i^2)``), so one call is
``(1/m)``-GDP and ``rho = N Delta^2 / (2 sigma^2) = 1/(2 m^2)``-zCDP
(Bun, Steinke 2016, Prop. 1.6; docs/design.md section 4). BST14 (Alg. 1,
Theorem 2.4) analyse the stochastic variant; the full-batch variant's privacy
follows from the composition above and does not depend on the step size.

**Floating point.** The proof above treats every noisy gradient as a released
value, so the values actually computed must be safe releases: with
:class:`~pmwcm.mechanisms.noise.OpenDPNoise` each step's noisy gradient is formed by
:func:`~pmwcm.mechanisms.noise.add_gaussian` (the sum ``grad + Z`` exact, rounded once;
``pmwcm.mechanisms.noise``'s rule), and the iterates, their average and the projections are
post-processing of those releases. The shortcut "only the final projected
average is released, so the iterates' rounding cannot leak" does not hold: with
``N = 1`` the answer is ``Proj(-h fl(grad + Z))``, a scaled float release of
``grad + Z``, which is exactly the case of Mironov's (2012) attack, and nothing
shows that averaging more iterates erases the pattern of low bits. The cost is
small because OpenDP's cost is per value drawn (~40 us), not per call (~50 us of
overhead): measured on Adult queries (``N = 100``, same process), 66 ms per answer
with one batched draw against 73 ms step by step at ``d = 17`` (300 cells), 21
against 26 ms at ``d = 5``; NumPy noise takes ~1 ms either way. Any other source
is not floating-point safe (``add_gaussian`` itself falls back to the float64
sum for it), so there the noise of all steps is drawn in one batch of ``N d``
values and added by the same float64 sum, one draw instead of ``N``.

**Never raising.** :meth:`NoisyGradientDescent.check` refuses, from the spec,
constants that overflow float64; a public noise scale beyond float64's reach
releases the data-free limit of the mechanism
(:func:`~pmwcm.mechanisms.oracles.base.data_free_answer`); projections
(:func:`~pmwcm.mechanisms.oracles.strongly_convex.project_rows`) take norms without
overflow, so huge noisy iterates stay finite.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import dp_accounting
import numpy as np

from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.mechanisms.noise import NoiseSource, OpenDPNoise, add_gaussian
from pmwcm.mechanisms.oracles.base import (
    MAX_NOISE_SCALE,
    OracleInput,
    OracleRefused,
    check_noise_level,
    data_free_answer,
)
from pmwcm.mechanisms.oracles.strongly_convex import project_rows


def check_gradient_constants(problem: ConvexProblem) -> None:
    """What noisy gradient descent needs of a problem's public constants: a positive
    gradient bound, and ``G B``, ``lambda R``, ``S`` and ``beta + lambda`` finite.

    Raises:
        OracleRefused: naming the constant that fails.
    """
    lipschitz = problem.lipschitz  # each constant read once: the engine checks every round
    if not lipschitz > 0:
        raise OracleRefused(f"noisy_gd needs a positive gradient bound, got {lipschitz}.")
    constants = (
        ("G B", lipschitz),
        ("lambda R", problem.l2 * problem.radius),
        ("S", problem.scale),
        ("beta + lambda", (problem.smoothness or 0.0) + problem.l2),
    )
    for label, value in constants:
        if not math.isfinite(value):
            raise OracleRefused(
                f"noisy_gd needs finite constants, got {label} = {value} (radius "
                f"{problem.radius:g}, l2 {problem.l2:g}); use a smaller radius or l2."
            )


@dataclass(frozen=True, kw_only=True)
class NoisyGradientDescent:
    """Full-batch noisy projected gradient descent.

    Attributes:
        steps: ``N``, the number of noisy gradient steps.
        step_size: ``h``; ``None`` picks ``1 / (beta + lambda)`` for smooth losses
            and ``R / (G B sqrt(N))`` otherwise.
    """

    steps: int = 100
    step_size: float | None = None
    name: str = "noisy_gd"

    def __post_init__(self) -> None:
        if not (isinstance(self.steps, int) and self.steps >= 1):
            raise ValueError(f"steps must be a positive integer, got steps={self.steps!r}.")
        if self.step_size is not None and not (
            math.isfinite(self.step_size) and self.step_size > 0
        ):
            raise ValueError(f"step_size must be positive, got step_size={self.step_size}.")

    def privacy_event(self, noise_level: float) -> dp_accounting.DpEvent:
        check_noise_level(noise_level)
        return dp_accounting.GaussianDpEvent(noise_level)

    def check(self, problem: ConvexProblem) -> None:
        check_gradient_constants(problem)

    def _step_size(self, problem: ConvexProblem) -> float:
        if self.step_size is not None:
            return self.step_size
        beta = problem.smoothness
        if beta is not None and beta + problem.l2 > 0:
            return 1.0 / (beta + problem.l2)
        return problem.radius / (problem.lipschitz * math.sqrt(self.steps))

    def answer(self, data: OracleInput, *, noise_level: float, noise: NoiseSource) -> FloatArray:
        check_noise_level(noise_level)
        problem = data.problem
        self.check(problem)
        sensitivity = 2.0 * problem.lipschitz / data.n
        sigma = sensitivity * noise_level * math.sqrt(self.steps)
        h = self._step_size(problem)
        if not (sigma <= MAX_NOISE_SCALE and h * sigma <= MAX_NOISE_SCALE):
            # Public: more noise than float64 carries; decided before the data is read.
            return data_free_answer(problem.dim, problem.radius, noise)
        noisy = _noisy_gradients(noise, sigma, self.steps, problem.dim)
        theta = np.zeros(problem.dim)
        tail = np.zeros(problem.dim)
        start = self.steps // 2
        for step in range(self.steps):
            grad = noisy(step, problem.gradient(theta, data.weights))
            theta = project_rows(theta - h * grad, problem.radius)
            if step >= start:
                tail += theta
        return project_rows(tail / (self.steps - start), problem.radius)


def _noisy_gradients(
    noise: NoiseSource, sigma: float, steps: int, dim: int
) -> Callable[[int, FloatArray], FloatArray]:
    """``(step, grad) -> grad + N(0, sigma^2 I)``, the release of one step's noisy gradient.

    With OpenDP, one floating-point-safe :func:`~pmwcm.mechanisms.noise.add_gaussian` per
    step. Any other source gets the float64 sum ``add_gaussian`` would fall back
    to, with all ``steps * dim`` values drawn at once (the noise does not depend
    on the iterates).
    """
    if isinstance(noise, OpenDPNoise):
        return lambda _step, grad: add_gaussian(grad, sigma, noise=noise)
    draws = noise.gaussian(sigma, steps * dim).reshape(steps, dim)
    return lambda step, grad: grad + draws[step]
