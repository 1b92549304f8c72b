"""Contract tests every single-query oracle ``M'`` must pass (``pmwcm.mechanisms.oracles``).

One registry of catalogue losses is parametrized across the oracles:

* **accuracy** at a tiny noise level (epsilon -> infinity): the answer's excess
  risk against the certified non-private optimum is below 1e-3 for smooth
  losses (measured <= 5.4e-5 over seeds 0..99), and within the subgradient
  method's ``O(R G B / sqrt(N))`` for non-smooth ones (noisy gradient
  descent); output perturbation (only ``l2 > 0``) returns a point within its
  planned distance of the minimiser;
* **calibration**: the noise actually requested from the random source has the
  stated sigma -- noisy GD ``(2 G B / n) m sqrt(N)`` (one batched draw of ``N d``
  values; with OpenDP one floating-point-safe ``add_gaussian`` of ``d`` values per
  step), output perturbation ``(2 G B / (n lambda) + 2 r) m`` with ``r`` the planned
  solve's distance (``f G B / (n lambda)`` when the budget allows) -- and the
  privacy event is ``GaussianDpEvent(m)``; for output perturbation a
  chi-square test on 400 releases checks the spread of the released vector
  itself (two-sided, rejected at p < 1e-6: false-failure probability 1e-6;
  it rejects a sigma 20% off);
* **refusals**: a problem an oracle cannot serve, or a bad noise level, raises a
  clear ``ValueError`` before any noise is drawn (a recording double sees every
  draw); answers always lie in ``Theta``.
"""

from __future__ import annotations

import math
from typing import Any

import dp_accounting
import numpy as np
import pytest
from scipy import stats

from conftest import RecordingNoise
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.problem import CallableProblem, ConvexProblem, FloatArray
from pmwcm.kernels.queries import CMQuery, GLMProblem
from pmwcm.kernels.solvers import minimize
from pmwcm.mechanisms.noise import NumpyNoise, OpenDPNoise
from pmwcm.mechanisms.oracles import (
    JainThakurtaGLM,
    NoisyGradientDescent,
    ObjectivePerturbation,
    Oracle,
    OracleInput,
    OracleRefused,
    OutputPerturbation,
)
from pmwcm.mechanisms.oracles.output_perturbation import solve_output

BINARY = Domain.from_sizes({"a": 2, "b": 3, "y": 2})
REAL = Domain.from_sizes({"a": 2, "b": 3, "y": 3})
#: (loss, loss_param): the whole catalogue.
LOSSES = [
    ("logistic", None),
    ("squared", None),
    ("huber", 0.5),
    ("smoothed_hinge", 1.0),
    ("hinge", None),
    ("quantile", 0.2),
    ("absolute", None),
]
CLASSIFICATION = {"logistic", "smoothed_hinge", "hinge"}
TINY = 1e-9  # a noise level at which the privacy noise is negligible


def problem_for(
    loss: str, param: float | None, *, radius: float = 1.0, l2: float = 0.0
) -> GLMProblem:
    domain = BINARY if loss in CLASSIFICATION else REAL
    query = CMQuery(
        loss=loss, target="y", features=("a", "b"), radius=radius, l2=l2, loss_param=param
    )
    return query.compile(domain)


def reference_minimum(problem: ConvexProblem, weights: FloatArray) -> float:
    """A certified lower bound on ``min L_w`` (to 1e-10 smooth, 1e-6 non-smooth)."""
    tol = 1e-10 if problem.smoothness is not None else 1e-6
    solution = minimize(problem, weights, tol=tol, max_iter=2000)
    assert solution.converged
    return solution.value - solution.gap


def random_weights(problem: GLMProblem, rng: np.random.Generator) -> FloatArray:
    return rng.dirichlet(np.ones(problem.features.shape[0]))


# --- accuracy ----------------------------------------------------------------------------


@pytest.mark.parametrize(("loss", "param"), LOSSES)
def test_noisy_gd_is_accurate_at_tiny_noise(loss: str, param: float | None, seed: int) -> None:
    rng = np.random.default_rng(seed)
    smooth = problem_for(loss, param).smoothness is not None
    steps = 300 if smooth else 1000
    oracle = NoisyGradientDescent(steps=steps)
    for radius, l2 in [(1.0, 0.0), (0.5, 0.0), (1.0, 0.1)]:
        problem = problem_for(loss, param, radius=radius, l2=l2)
        for _ in range(2):
            weights = random_weights(problem, rng)
            data = OracleInput(problem=problem, weights=weights, n=1000)
            theta = oracle.answer(data, noise_level=TINY, noise=NumpyNoise(seed=seed))
            risk = problem.objective(theta, weights) - reference_minimum(problem, weights)
            # Smooth: projected GD at step 1/beta; measured over seeds 0..99 at 300 steps:
            # <= 5.4e-5 for Huber (flat curvature outside |r| <= h), <= 1.2e-7 for the
            # others. Non-smooth: averaged subgradient steps R/(G B sqrt(N)), measured
            # <= 0.011 at 1000 steps.
            bound = 1e-3 if smooth else 3 * radius * problem.lipschitz / math.sqrt(steps)
            assert risk <= bound, (radius, l2, risk)
            assert np.linalg.norm(theta) <= radius * (1 + 1e-12)


@pytest.mark.parametrize(("loss", "param"), LOSSES)
def test_output_perturbation_is_accurate_at_tiny_noise(
    loss: str, param: float | None, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    oracle = OutputPerturbation()
    for radius, l2 in [(1.0, 0.1), (0.5, 1.0)]:
        problem = problem_for(loss, param, radius=radius, l2=l2)
        weights = random_weights(problem, rng)
        data = OracleInput(problem=problem, weights=weights, n=1000)
        theta = oracle.answer(data, noise_level=TINY, noise=NumpyNoise(seed=seed))
        risk = problem.objective(theta, weights) - reference_minimum(problem, weights)
        # Within r of the minimiser: the excess risk is at most (G B + lambda R) r plus the
        # reference's own certificate (1e-10, or 1e-6 non-smooth) and the tiny noise.
        r = oracle.plan(problem, data.n).distance
        bound = (problem.lipschitz + l2 * radius) * r + (1e-10 if smooth(problem) else 1e-6)
        assert risk <= bound + 1e-9, (radius, l2, risk, bound)
        assert np.linalg.norm(theta) <= radius * (1 + 1e-12)


def smooth(problem: ConvexProblem) -> bool:
    return problem.smoothness is not None


# --- calibration -------------------------------------------------------------------------


@pytest.mark.parametrize("steps", [1, 50, 200])
@pytest.mark.parametrize(("n", "m"), [(100, 0.5), (48_842, 3.0)])
def test_noisy_gd_draws_the_stated_sigma(
    recording_noise: RecordingNoise, steps: int, n: int, m: float
) -> None:
    problem = problem_for("logistic", None)
    assert problem.lipschitz == pytest.approx(1.0)  # G = 1, B = 1 for the unit-norm features
    oracle = NoisyGradientDescent(steps=steps)
    weights = np.full(problem.features.shape[0], 1 / problem.features.shape[0])
    oracle.answer(
        OracleInput(problem=problem, weights=weights, n=n), noise_level=m, noise=recording_noise
    )
    [draw] = recording_noise.calls  # one batched draw for all steps
    assert draw.kind == "gaussian"
    assert draw.size == steps * problem.dim
    assert draw.scale == pytest.approx((2 * 1.0 / n) * m * math.sqrt(steps), rel=1e-12)
    assert oracle.privacy_event(m) == dp_accounting.GaussianDpEvent(m)


@pytest.mark.parametrize(
    ("l2", "fraction", "n", "m"), [(0.1, 0.01, 100, 2.0), (1.0, 0.2, 5000, 0.7)]
)
def test_output_perturbation_draws_the_stated_sigma(
    recording_noise: RecordingNoise, l2: float, fraction: float, n: int, m: float
) -> None:
    problem = problem_for("squared", None, radius=1.0, l2=l2)  # G = R B + 1 = 2
    assert problem.lipschitz == pytest.approx(2.0)
    oracle = OutputPerturbation(distance_fraction=fraction)
    weights = np.full(problem.features.shape[0], 1 / problem.features.shape[0])
    oracle.answer(
        OracleInput(problem=problem, weights=weights, n=n), noise_level=m, noise=recording_noise
    )
    [draw] = recording_noise.calls
    # A smooth query reaches the target r = f G B / (n lambda): the noise is (1 + f) times
    # what the exact minimiser would need.
    expected = (2 * 2.0 / (n * l2)) * (1 + fraction) * m
    assert (draw.kind, draw.size) == ("gaussian", problem.dim)
    assert draw.scale == pytest.approx(expected, rel=1e-12)
    assert oracle.sensitivity(problem, n) * m == pytest.approx(expected, rel=1e-12)
    assert oracle.privacy_event(m) == dp_accounting.GaussianDpEvent(m)


def test_noisy_gd_releases_each_step_through_add_gaussian_with_opendp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With OpenDP, every noisy gradient is a floating-point-safe release (mechanisms.noise)."""
    import pmwcm.mechanisms.oracles.noisy_gd as module

    calls: list[tuple[int, float]] = []

    def recording_add(values: Any, sigma: float, *, noise: Any) -> FloatArray:
        assert isinstance(noise, OpenDPNoise)
        calls.append((np.asarray(values).size, sigma))
        return np.asarray(values, dtype=np.float64)

    monkeypatch.setattr(module, "add_gaussian", recording_add)
    problem = problem_for("logistic", None)
    steps, n, m = 7, 100, 0.5
    data = OracleInput(problem=problem, weights=np.full(12, 1 / 12), n=n)
    NoisyGradientDescent(steps=steps).answer(data, noise_level=m, noise=OpenDPNoise())
    sigma = (2 * problem.lipschitz / n) * m * math.sqrt(steps)
    assert calls == [(problem.dim, pytest.approx(sigma, rel=1e-12))] * steps


def test_output_perturbation_release_has_the_stated_spread(seed: int) -> None:
    """``theta_release - theta_D ~ N(0, sigma^2 I)`` while the ball is not touched."""
    problem = problem_for("logistic", None, radius=10.0, l2=0.5)
    rng = np.random.default_rng(seed)
    weights = random_weights(problem, rng)
    oracle = OutputPerturbation()
    n, m, releases = 1000, 1.0, 400
    sigma = oracle.sensitivity(problem, n) * m
    center = solve_output(problem, weights, oracle.plan(problem, n))
    noise = NumpyNoise(seed=seed)
    data = OracleInput(problem=problem, weights=weights, n=n)
    z = np.array(
        [oracle.answer(data, noise_level=m, noise=noise) - center for _ in range(releases)]
    )
    assert np.abs(center).max() + 10 * sigma < 10.0  # projection inactive w.p. ~1
    statistic, dof = float((z**2).sum()) / sigma**2, z.size
    p_value = 2 * min(stats.chi2.cdf(statistic, dof), stats.chi2.sf(statistic, dof))
    assert p_value > 1e-6, (statistic, dof)
    # Power: the same test rejects a sigma off by 20% either way (z >= 9 on average; a
    # missing factor 2 of replace-one sensitivity would be a far larger error).
    for wrong in (0.8 * sigma, 1.2 * sigma):
        stat = float((z**2).sum()) / wrong**2
        assert 2 * min(stats.chi2.cdf(stat, dof), stats.chi2.sf(stat, dof)) < 1e-6


# --- refusals ----------------------------------------------------------------------------


class FlatProblem(ConvexProblem):
    """A degenerate problem with a zero gradient bound (noisy GD must refuse it)."""

    clique = ("a",)
    radius = 1.0
    l2 = 0.0

    @property
    def dim(self) -> int:
        return 1

    @property
    def lipschitz(self) -> float:
        return 0.0

    @property
    def scale(self) -> float:
        return 0.0

    def cell_losses(self, theta: FloatArray) -> FloatArray:
        return np.zeros(2)

    def cell_gradients(self, theta: FloatArray) -> FloatArray:
        return np.zeros((2, 1))


def callable_problem() -> CallableProblem:
    return CallableProblem(
        clique=("a",),
        sizes=(2,),
        dimension=1,
        radius=1.0,
        l2=0.0,
        lipschitz_bound=1.0,
        loss=lambda th, c: np.abs(th[0] - (2 * c[:, 0] - 1)),
        grad=lambda th, c: np.sign(th[0] - (2 * c[:, 0] - 1))[:, None],
    )


def refusals() -> list[tuple[str, Any, ConvexProblem, str]]:
    return [
        ("op-no-l2", OutputPerturbation(), problem_for("logistic", None), "l2 > 0"),
        # hinge on (a, b): d = 5, the ellipsoid needs 2 d^2 = 50 steps at any accuracy.
        (
            "op-nonsmooth-budget",
            OutputPerturbation(max_iterations=49),
            problem_for("hinge", None, l2=0.1),
            "cannot bound its solve",
        ),
        ("ngd-flat", NoisyGradientDescent(), FlatProblem(), "positive gradient bound"),
        ("objp-hinge", ObjectivePerturbation(), problem_for("hinge", None, l2=0.1), "smooth"),
        ("objp-squared", ObjectivePerturbation(), problem_for("squared", None), "bounded"),
        ("objp-callable", ObjectivePerturbation(), callable_problem(), "catalogue"),
    ]


@pytest.mark.parametrize(
    ("name", "oracle", "problem", "match"), refusals(), ids=lambda x: str(x)[:20]
)
def test_unsupported_problem_is_refused_before_any_draw(
    recording_noise: RecordingNoise, name: str, oracle: Any, problem: ConvexProblem, match: str
) -> None:
    with pytest.raises(OracleRefused, match=match):  # a refusal (PmwcmError), not a bug
        oracle.check(problem)
    weights = np.full(2 if isinstance(problem, FlatProblem | CallableProblem) else 12, 1 / 12)
    data = OracleInput(problem=problem, weights=weights, n=100)
    with pytest.raises(ValueError, match=match):
        oracle.answer(data, noise_level=1.0, noise=recording_noise)
    assert recording_noise.calls == []


ORACLES = [NoisyGradientDescent(), OutputPerturbation(), ObjectivePerturbation(), JainThakurtaGLM()]


@pytest.mark.parametrize("oracle", ORACLES, ids=lambda o: o.name)
@pytest.mark.parametrize("level", [0.0, -1.0, math.inf, math.nan])
def test_bad_noise_level_is_refused_before_any_draw(
    recording_noise: RecordingNoise, oracle: Any, level: float
) -> None:
    problem = problem_for("logistic", None, l2=0.1)
    data = OracleInput(problem=problem, weights=np.full(12, 1 / 12), n=100)
    with pytest.raises(ValueError, match="noise_level"):
        oracle.privacy_event(level)
    with pytest.raises(ValueError, match="noise_level"):
        oracle.answer(data, noise_level=level, noise=recording_noise)
    assert recording_noise.calls == []


@pytest.mark.parametrize("oracle", ORACLES, ids=lambda o: o.name)
def test_answers_lie_in_theta_even_at_huge_noise(oracle: Oracle, seed: int) -> None:
    assert isinstance(oracle, Oracle)
    rng = np.random.default_rng(seed)
    for radius in (0.3, 2.0):
        problem = problem_for("logistic", None, radius=radius, l2=0.1)
        data = OracleInput(problem=problem, weights=random_weights(problem, rng), n=10)
        theta = oracle.answer(data, noise_level=1e3, noise=NumpyNoise(seed=seed))
        assert theta.shape == (problem.dim,)
        assert np.linalg.norm(theta) <= radius * (1 + 1e-12)


def test_validation_of_oracle_inputs_and_settings() -> None:
    problem = problem_for("logistic", None)
    with pytest.raises(ValueError, match="n must be a positive"):
        OracleInput(problem=problem, weights=np.full(12, 1 / 12), n=0)
    with pytest.raises(ValueError, match="steps"):
        NoisyGradientDescent(steps=0)
    with pytest.raises(ValueError, match="step_size"):
        NoisyGradientDescent(step_size=-1.0)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="distance_fraction"):
            OutputPerturbation(distance_fraction=bad)
        with pytest.raises(ValueError, match="gaussian_factor"):
            ObjectivePerturbation(gaussian_factor=bad)
        with pytest.raises(ValueError, match="distance_fraction"):
            ObjectivePerturbation(distance_fraction=bad)
    for oracle_type in (OutputPerturbation, ObjectivePerturbation):
        with pytest.raises(ValueError, match="max_iterations"):
            oracle_type(max_iterations=0)
