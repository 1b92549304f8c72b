"""Contract tests for the GLM loss catalogue ``f(z, y)`` and its Moreau envelopes.

One registry of cases (every catalogue loss at a few parameters, and the Moreau
envelope of each at two smoothing levels) is parametrized across every
contract: derivative against central differences (a valid subgradient at the
kinks), second derivative against differences of the derivative where smooth,
convexity in ``z``, the declared derivative bound ``G``, the declared
smoothness, and ``0 <= f - f_mu <= mu G^2 / 2`` for the envelopes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.optimize import minimize_scalar

from pmwcm.kernels.losses import (
    LOSSES,
    Absolute,
    GLMLoss,
    Hinge,
    Huber,
    Logistic,
    Quantile,
    SmoothedHinge,
    Squared,
    make_loss,
)

FloatArray = NDArray[np.float64]

#: (catalogue name, loss_param) pairs covering every loss and its parameter range.
BASE = [
    ("logistic", None),
    ("squared", None),
    ("huber", 0.5),
    ("huber", 1.0),
    ("huber", 2.0),
    ("smoothed_hinge", 0.5),
    ("smoothed_hinge", 1.0),
    ("hinge", None),
    ("quantile", 0.2),
    ("quantile", 0.5),
    ("quantile", 0.9),
    ("absolute", None),
]
MUS = (0.05, 0.5)


@dataclass(frozen=True)
class Case:
    """A loss under test.

    Attributes:
        id: readable test id.
        loss: the loss (a catalogue loss, or the envelope of one).
        base: for an envelope case, the catalogue loss it smooths; else ``None``.
        mu: the envelope's smoothing parameter; ``None`` for a catalogue loss.
    """

    id: str
    loss: GLMLoss
    base: GLMLoss | None = None
    mu: float | None = None


def _cases() -> list[Case]:
    cases = []
    for name, param in BASE:
        loss = make_loss(name, param)
        label = name if param is None else f"{name}({param})"
        cases.append(Case(label, loss))
        cases.extend(Case(f"{label}_mu{mu}", loss.moreau(mu), loss, mu) for mu in MUS)
    return cases


CASES = _cases()
CASE_IDS = [c.id for c in CASES]
SMOOTH = [c for c in CASES if c.loss.smoothness is not None]
NON_SMOOTH = [c for c in CASES if c.loss.smoothness is None]


def breakpoints(loss: GLMLoss, mu: float | None, y: FloatArray) -> list[FloatArray]:
    """The ``z`` where ``f'`` or ``f''`` may jump, for each label in ``y``.

    Args:
        loss: the loss (for an envelope case, the envelope itself).
        mu: the envelope's smoothing parameter (``None`` for a catalogue loss).
        y: labels.

    Returns:
        Arrays shaped like ``y``; finite differences are only compared away from them.
    """
    if isinstance(loss, Logistic | Squared):
        return []
    if isinstance(loss, Huber):
        return [y - loss.delta, y + loss.delta]
    if isinstance(loss, SmoothedHinge):  # margin y z in {1, 1 - gamma}, y = +/-1
        return [y, y * (1.0 - loss.gamma)]
    if isinstance(loss, Hinge):
        return [y]
    if isinstance(loss, Quantile):  # r = y - z in {mu (tau - 1), mu tau}
        return [y] if mu is None else [y - mu * (loss.tau - 1.0), y - mu * loss.tau]
    if isinstance(loss, Absolute):  # r = z - y in {-mu, mu}
        return [y] if mu is None else [y - mu, y + mu]
    raise AssertionError(f"no breakpoints known for {loss!r}")


def draw_labels(loss: GLMLoss, n: int, rng: np.random.Generator) -> FloatArray:
    """``n`` labels from the loss's label range, including its extremes."""
    if loss.label_kind == "binary":
        return rng.choice([-1.0, 1.0], size=n)
    y = rng.uniform(-1.0, 1.0, size=n)
    y[:2] = (-1.0, 1.0)
    return y


def away_from_breaks(case: Case, z: FloatArray, y: FloatArray, margin: float) -> FloatArray:
    """Mask of the points farther than ``margin`` from every breakpoint."""
    mask = np.ones(z.shape, dtype=bool)
    for b in breakpoints(case.loss, case.mu, y):
        mask &= np.abs(z - b) > margin
    return mask


def test_catalogue_has_the_seven_losses_with_label_kinds() -> None:
    kinds = {name: LOSSES[name]().label_kind for name in LOSSES}
    assert kinds == {
        "logistic": "binary",
        "squared": "real",
        "huber": "real",
        "smoothed_hinge": "binary",
        "hinge": "binary",
        "quantile": "real",
        "absolute": "real",
    }
    assert all(make_loss(name).name == name for name in LOSSES)


@pytest.mark.parametrize(
    ("name", "param", "z", "y", "expected"),
    [
        ("logistic", None, 0.0, 1.0, math.log(2.0)),
        ("logistic", None, 2.0, -1.0, math.log1p(math.exp(2.0))),
        ("logistic", None, 800.0, 1.0, 0.0),
        ("logistic", None, -800.0, 1.0, 800.0),
        ("squared", None, 3.0, 1.0, 2.0),
        ("huber", 1.0, 1.5, 1.0, 0.125),
        ("huber", 1.0, -1.0, 1.0, 1.5),
        ("smoothed_hinge", 1.0, 2.0, 1.0, 0.0),
        ("smoothed_hinge", 1.0, -0.5, -1.0, 0.125),
        ("smoothed_hinge", 1.0, 1.0, -1.0, 1.5),
        ("hinge", None, 0.5, 1.0, 0.5),
        ("hinge", None, 0.5, -1.0, 1.5),
        ("quantile", 0.2, 0.0, 1.0, 0.2),
        ("quantile", 0.2, 1.0, 0.0, 0.8),
        ("absolute", None, -0.5, 0.5, 1.0),
    ],
)
def test_known_values(name: str, param: float | None, z: float, y: float, expected: float) -> None:
    value = make_loss(name, param).value(np.array([z]), np.array([y]))
    assert value[0] == pytest.approx(expected, rel=1e-14, abs=1e-300)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_derivative_matches_central_differences(case: Case, seed: int) -> None:
    rng = np.random.default_rng(seed)
    z = rng.uniform(-4.0, 4.0, size=5000)
    y = draw_labels(case.loss, z.size, rng)
    h = 1e-6
    fd = (case.loss.value(z + h, y) - case.loss.value(z - h, y)) / (2 * h)
    ok = away_from_breaks(case, z, y, 1e-4)
    assert ok.mean() > 0.9
    np.testing.assert_allclose(case.loss.derivative(z, y)[ok], fd[ok], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_derivative_is_a_subgradient_at_the_breakpoints(case: Case) -> None:
    y = draw_labels(case.loss, 200, np.random.default_rng(0))
    h = 1e-7
    for z in breakpoints(case.loss, case.mu, y):
        f = case.loss.value(z, y)
        left = (f - case.loss.value(z - h, y)) / h
        right = (case.loss.value(z + h, y) - f) / h
        g = case.loss.derivative(z, y)
        assert np.all(g >= left - 1e-6)
        assert np.all(g <= right + 1e-6)


@pytest.mark.parametrize("case", SMOOTH, ids=[c.id for c in SMOOTH])
def test_second_derivative_matches_differences_of_derivative(case: Case, seed: int) -> None:
    rng = np.random.default_rng(seed)
    z = rng.uniform(-4.0, 4.0, size=5000)
    y = draw_labels(case.loss, z.size, rng)
    h = 1e-6
    fd = (case.loss.derivative(z + h, y) - case.loss.derivative(z - h, y)) / (2 * h)
    ok = away_from_breaks(case, z, y, 1e-4)
    assert ok.mean() > 0.9
    np.testing.assert_allclose(case.loss.second_derivative(z, y)[ok], fd[ok], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", SMOOTH, ids=[c.id for c in SMOOTH])
def test_second_derivative_lies_in_zero_to_smoothness(case: Case, seed: int) -> None:
    rng = np.random.default_rng(seed)
    z = np.concatenate([np.linspace(-6.0, 6.0, 4001), rng.uniform(-6.0, 6.0, 4000)])
    y = draw_labels(case.loss, z.size, rng)
    curvature = case.loss.second_derivative(z, y)
    beta = case.loss.smoothness
    assert beta is not None
    assert np.all(curvature >= 0.0)
    assert np.all(curvature <= beta * (1 + 1e-12))


@pytest.mark.parametrize("case", NON_SMOOTH, ids=[c.id for c in NON_SMOOTH])
def test_non_smooth_losses_have_no_second_derivative(case: Case) -> None:
    assert case.loss.smoothness is None
    with pytest.raises(NotImplementedError, match=case.loss.name):
        case.loss.second_derivative(np.zeros(3), np.ones(3))


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_convex_in_z(case: Case, seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = [-1.0, 1.0] if case.loss.label_kind == "binary" else [-1.0, -0.3, 0.0, 0.7, 1.0]
    z = np.linspace(-6.0, 6.0, 4001)
    for y in labels:
        yy = np.full_like(z, y)
        f = case.loss.value(z, yy)
        # Discrete convexity on the grid: second differences and slope increments >= 0.
        assert np.all(f[:-2] - 2 * f[1:-1] + f[2:] >= -1e-12 * (1 + np.abs(f[1:-1])))
        assert np.all(np.diff(case.loss.derivative(z, yy)) >= -1e-12)
    # Midpoint convexity at random pairs (not on the grid).
    a, b = rng.uniform(-6.0, 6.0, size=(2, 20_000))
    y_r = draw_labels(case.loss, a.size, rng)
    mid = case.loss.value((a + b) / 2, y_r)
    chord = (case.loss.value(a, y_r) + case.loss.value(b, y_r)) / 2
    assert np.all(mid <= chord + 1e-12 * (1 + np.abs(chord)))


@pytest.mark.parametrize("z_max", [0.25, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_derivative_bound_holds_on_random_draws(case: Case, z_max: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 100_000
    z = rng.uniform(-z_max, z_max, size=n)
    z[:4] = (-z_max, z_max, -z_max, z_max)
    y = draw_labels(case.loss, n, rng)
    y[:4] = (-1.0, -1.0, 1.0, 1.0)
    bound = case.loss.derivative_bound(z_max)
    assert math.isfinite(bound)
    assert np.all(np.abs(case.loss.derivative(z, y)) <= bound + 1e-12)


def test_derivative_bounds_are_the_tabulated_constants() -> None:
    """docs/design.md section 2's table of ``G``, at ``z_max = R B = 2``."""
    expected = {
        ("logistic", None): 1.0,
        ("squared", None): 3.0,
        ("huber", 0.5): 0.5,
        ("huber", 5.0): 3.0,
        ("smoothed_hinge", 0.5): 1.0,
        ("hinge", None): 1.0,
        ("quantile", 0.2): 0.8,
        ("quantile", 0.7): 0.7,
        ("absolute", None): 1.0,
    }
    for (name, param), g in expected.items():
        assert make_loss(name, param).derivative_bound(2.0) == pytest.approx(g), name


@pytest.mark.parametrize("mu", MUS)
@pytest.mark.parametrize(("name", "param"), BASE, ids=[f"{n}({p})" for n, p in BASE])
def test_moreau_envelope_is_below_within_mu_g2_over_2(
    name: str, param: float | None, mu: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    loss = make_loss(name, param)
    env = loss.moreau(mu)
    z_max = 5.0
    z = rng.uniform(-z_max, z_max, size=100_000)
    y = draw_labels(loss, z.size, rng)
    g = loss.derivative_bound(z_max)
    diff = loss.value(z, y) - env.value(z, y)
    assert np.all(diff >= -1e-12)
    assert np.all(diff <= mu * g * g / 2 + 1e-12)
    assert env.derivative_bound(z_max) <= g
    assert env.label_kind == loss.label_kind
    if loss.smoothness is None:
        assert env.smoothness == pytest.approx(1.0 / mu)
        # The bound is tight: attained on the envelope's linear piece of slope +/-G.
        assert diff.max() >= (1 - 1e-9) * mu * g * g / 2
    else:
        assert env is loss


@pytest.mark.parametrize("mu", MUS)
@pytest.mark.parametrize("name", ["hinge", "quantile", "absolute"])
def test_moreau_envelope_matches_its_definition(name: str, mu: float, seed: int) -> None:
    """``f_mu(z) = min_w f(w) + (z - w)^2 / (2 mu)``, minimised numerically at 40 points.

    A smoothing that is below ``f`` by the right amount but is not the envelope
    (say ``f - mu G^2 / 2``) passes the gap test; it fails this one.
    """
    rng = np.random.default_rng(seed)
    loss = make_loss(name, 0.3 if name == "quantile" else None)
    env = loss.moreau(mu)
    for z, y in zip(rng.uniform(-3, 3, 40), draw_labels(loss, 40, rng), strict=True):

        def moreau_objective(w: float, z: float = z, y: float = y) -> float:
            return float(loss.value(np.array(w), np.array(y))) + (z - w) ** 2 / (2 * mu)

        res = minimize_scalar(
            moreau_objective, bounds=(z - 10, z + 10), method="bounded", options={"xatol": 1e-12}
        )
        value = float(env.value(np.array(z), np.array(y)))
        # res.fun is the objective at a feasible w, so it is never below the true minimum;
        # Brent's bounded search locates w to ~1e-8, hence the one-sided tolerance.
        assert value <= res.fun + 1e-12
        assert value >= res.fun - 1e-7


def test_hinge_envelope_is_the_smoothed_hinge() -> None:
    z = np.linspace(-3, 3, 601)
    for y in (-1.0, 1.0):
        for gamma in (0.1, 1.0):
            a = Hinge().moreau(gamma).value(z, np.full_like(z, y))
            b = SmoothedHinge(gamma=gamma).value(z, np.full_like(z, y))
            np.testing.assert_array_equal(a, b)


def test_values_broadcast_and_stay_finite_at_extreme_margins() -> None:
    z = np.array([-1e6, -50.0, 0.0, 50.0, 1e6])[:, None]
    y = np.array([-1.0, 1.0])[None, :]
    for name, param in BASE:
        loss = make_loss(name, param)
        for out in (loss.value(z, y), loss.derivative(z, y)):
            assert out.shape == (5, 2)
            assert np.all(np.isfinite(out))


@pytest.mark.parametrize(
    ("name", "param", "match"),
    [
        ("nope", None, "'nope'"),
        ("logistic", 2.0, "loss_param=2.0"),
        ("hinge", 0.5, "loss_param=0.5"),
        ("huber", 0.0, "delta=0.0"),
        ("huber", -1.0, "delta=-1.0"),
        ("huber", math.inf, "delta=inf"),
        ("smoothed_hinge", 0.0, "gamma=0.0"),
        ("smoothed_hinge", math.nan, "gamma=nan"),
        ("quantile", 0.0, "tau=0.0"),
        ("quantile", 1.0, "tau=1.0"),
        ("quantile", 1.5, "tau=1.5"),
    ],
)
def test_bad_loss_names_and_parameters_raise(name: str, param: float | None, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make_loss(name, param)
