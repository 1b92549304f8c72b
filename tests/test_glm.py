"""The GLM arithmetic of :mod:`pmwcm.kernels.glm`: its two forms agree, and both are derivatives.

On random designs (a dense matrix with rows of norm at most 1, and a block design
of one-hot, ordinal and intercept blocks), random labels of the loss's kind and
random weights on the simplex:

* every loss with a compiled form (logistic; squared; Huber at three ``delta``)
  gives the same value, gradient and data Hessian in the compiled form as in the
  NumPy form, to ``1e-12`` relative, with and without ``l2``; the vectorised
  signed-logistic slopes and the paired slope are the NumPy slopes; the Newton
  solve's one pass gives the value, gradient and Hessian of the three passes bit for
  bit;
* for every catalogue loss, and the Moreau envelope of each non-smooth one, the
  NumPy gradient is the central difference of the objective, and the data
  Hessian (smooth losses) the central difference of the gradient, at points
  drawn away from a kink of ``f'`` or ``f''`` (a difference straddling a kink
  measures no derivative).

A planted bug must fail these: ``test_a_wrong_slope_fails_the_difference_check``
shifts the logistic slope by 1% and checks that the gradient check rejects it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest
from numpy.typing import NDArray

from pmwcm.kernels import glm
from pmwcm.kernels.design import BlockDesign, DenseDesign, Design
from pmwcm.kernels.losses import GLMLoss, Logistic, make_loss

FloatArray = NDArray[np.float64]

ROWS, DIM = 60, 6
#: Every catalogue loss (name, loss_param); the non-smooth ones also by their envelope.
CATALOGUE = [
    ("logistic", None),
    ("squared", None),
    ("huber", 0.3),
    ("huber", 1.0),
    ("huber", 4.0),
    ("smoothed_hinge", 0.5),
    ("smoothed_hinge", 2.0),
    ("hinge", None),
    ("quantile", 0.2),
    ("quantile", 0.5),
    ("absolute", None),
]
COMPILED = [case for case in CATALOGUE if glm.loss_kind(make_loss(*case)) is not None]
DESIGNS = ["dense", "block"]


def _losses() -> list[tuple[str, GLMLoss]]:
    cases = []
    for name, param in CATALOGUE:
        loss = make_loss(name, param)
        cases.append((f"{name}-{param}", loss))
        if loss.smoothness is None:
            cases.append((f"{name}-{param}-moreau", loss.moreau(0.05)))
    return cases


def _design(kind: str, rng: np.random.Generator) -> Design:
    """A dense ``ROWS x DIM`` matrix (rows of norm at most 1), or a block design of
    a one-hot block of width 3, two ordinal blocks and an intercept (``DIM`` columns)."""
    if kind == "dense":
        matrix = rng.normal(size=(ROWS, DIM))
        matrix /= np.maximum(1.0, np.linalg.norm(matrix, axis=1))[:, None]
        return DenseDesign(matrix)
    onehot = rng.integers(0, 3, size=ROWS)
    columns = np.stack([onehot, np.full(ROWS, 3), np.full(ROWS, 4), np.full(ROWS, 5)])
    values = np.stack([np.ones(ROWS), rng.uniform(-1, 1, ROWS), rng.uniform(-1, 1, ROWS)])
    values = np.vstack([values, np.ones((1, ROWS))]) / 2.0
    return BlockDesign(
        columns=columns.astype(np.int64), values=values, width=DIM, block_widths=(3, 1, 1, 1)
    )


def _labels(loss: GLMLoss, rng: np.random.Generator) -> FloatArray:
    if loss.label_kind == "binary":
        return rng.choice([-1.0, 1.0], size=ROWS)
    return rng.uniform(-1.0, 1.0, size=ROWS)


def _away_from_kinks(
    loss: GLMLoss, design: Design, labels: FloatArray, rng: np.random.Generator
) -> FloatArray:
    """A ``theta`` (norm about 2) at which no row's ``z`` is within ``1e-3`` of a jump of
    ``f''`` (smooth losses) or of ``f'`` (non-smooth ones). Drawn from ``rng`` until one
    is found; a point is found within a few draws (the kinks are a null set)."""
    step = 1e-3
    for _ in range(1000):
        theta = rng.normal(size=DIM)
        theta *= 2.0 / np.linalg.norm(theta)
        z = design.matvec(theta)
        if loss.smoothness is None:
            jump = loss.derivative(z + step, labels) - loss.derivative(z - step, labels)
        else:
            jump = loss.second_derivative(z + step, labels) - loss.second_derivative(
                z - step, labels
            )
        if np.max(np.abs(jump)) < 1e-2:  # continuous parts move by O(step) only
            return theta
    raise AssertionError("no point away from the kinks in 1000 draws")


def _difference_gradient(
    value: Callable[[FloatArray], float], theta: FloatArray, h: float = 1e-6
) -> FloatArray:
    """Central differences of ``value`` at ``theta``, one coordinate at a time."""
    basis = np.eye(theta.size)
    return np.array([(value(theta + h * e) - value(theta - h * e)) / (2 * h) for e in basis])


@pytest.mark.parametrize("design_kind", DESIGNS)
@pytest.mark.parametrize(("name", "param"), COMPILED, ids=[f"{n}-{p}" for n, p in COMPILED])
@pytest.mark.parametrize("l2", [0.0, 0.7])
def test_compiled_and_numpy_forms_agree(
    design_kind: str, name: str, param: float | None, l2: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    loss = make_loss(name, param)
    kind = glm.loss_kind(loss)
    assert kind is not None
    design = _design(design_kind, rng)
    assert isinstance(design, DenseDesign | BlockDesign)
    columns, values = design.row_major
    labels = _labels(loss, rng)
    weights = rng.dirichlet(np.ones(ROWS))
    for scale in (0.1, 3.0, 200.0):  # inside the ball, and far outside (overflow territory)
        theta = rng.normal(size=DIM) * scale
        expected = glm.objective(loss, design, labels, weights, theta, l2)
        value = glm.glm_objective(columns, values, labels, weights, theta, l2, *kind)
        assert value == pytest.approx(expected, rel=1e-12, abs=1e-300)
        out = np.empty(DIM)
        got = glm.glm_gradient(columns, values, labels, weights, theta, l2, *kind, out)
        reference = glm.gradient(loss, design, labels, weights, theta, l2)
        np.testing.assert_allclose(got, reference, rtol=1e-12, atol=1e-15)
        fused = np.empty(DIM)
        both = glm.glm_objective_and_gradient(
            columns, values, labels, weights, theta, l2, *kind, fused
        )
        assert both == value
        np.testing.assert_array_equal(fused, got)
        hessian = glm.data_hessian(loss, design, labels, weights, theta)
        assert hessian is not None
        compiled = glm.glm_hessian(columns, values, labels, weights, theta, *kind)
        np.testing.assert_allclose(compiled, hessian, rtol=1e-12, atol=1e-15)
        # The Newton solve's one pass: the three results above, bit for bit.
        pass_gradient, pass_hessian = np.full(DIM, np.nan), np.full((DIM, DIM), np.nan)
        one_pass = glm.glm_value_gradient_hessian(
            columns, values, labels, weights, theta, l2, *kind, pass_gradient, pass_hessian
        )
        assert one_pass == value
        np.testing.assert_array_equal(pass_gradient, got)
        np.testing.assert_array_equal(pass_hessian, compiled)


@pytest.mark.parametrize("design_kind", DESIGNS)
def test_logistic_fast_slopes_are_the_numpy_slopes(design_kind: str, seed: int) -> None:
    """The vectorised signed-logistic slopes and the paired slope, used by the FISTA
    fast paths, are ``w f'(z, y)`` of the NumPy form (labels exactly ``+-1``)."""
    rng = np.random.default_rng(seed)
    loss = Logistic()
    design = _design(design_kind, rng)
    labels = rng.choice([-1.0, 1.0], size=ROWS)
    weights = rng.dirichlet(np.ones(ROWS))
    theta = rng.normal(size=DIM) * 5.0
    expected = weights * glm.cell_slopes(loss, design, labels, theta)
    margins = labels * design.matvec(theta)
    got = glm.signed_logistic_slopes(margins, -labels * weights, np.empty(ROWS))
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-300)
    z = design.matvec(theta)
    for r in range(ROWS - 1):
        pair = glm.paired_logistic_slope(z[r], weights[r], weights[r + 1])
        minus, plus = loss.derivative(np.array([z[r], z[r]]), np.array([-1.0, 1.0]))
        assert pair == pytest.approx(weights[r] * minus + weights[r + 1] * plus, rel=1e-13)


@pytest.mark.parametrize("design_kind", DESIGNS)
@pytest.mark.parametrize(("label", "loss"), _losses(), ids=[label for label, _ in _losses()])
def test_numpy_gradient_and_hessian_are_finite_differences(
    design_kind: str, label: str, loss: GLMLoss, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    design = _design(design_kind, rng)
    labels = _labels(loss, rng)
    weights = rng.dirichlet(np.ones(ROWS))
    l2 = 0.3
    theta = _away_from_kinks(loss, design, labels, rng)

    def value(t: FloatArray) -> float:
        return glm.objective(loss, design, labels, weights, t, l2)

    grad = glm.gradient(loss, design, labels, weights, theta, l2)
    np.testing.assert_allclose(grad, _difference_gradient(value, theta), rtol=1e-6, atol=1e-8)
    hessian = glm.data_hessian(loss, design, labels, weights, theta)
    assert (hessian is None) == (loss.smoothness is None)
    if hessian is None:
        return

    def component(t: FloatArray, j: int) -> float:
        return float(glm.gradient(loss, design, labels, weights, t, 0.0)[j])

    columns = [_difference_gradient(functools.partial(component, j=j), theta) for j in range(DIM)]
    np.testing.assert_allclose(hessian, np.array(columns), rtol=1e-5, atol=1e-7)


def test_a_wrong_slope_fails_the_difference_check(seed: int) -> None:
    """The planted bug: a logistic slope 1% too large is caught by the check above."""

    class Skewed(Logistic):
        def derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
            return 1.01 * super().derivative(z, y)

    rng = np.random.default_rng(seed)
    loss, design = Skewed(), _design("dense", rng)
    labels = _labels(loss, rng)
    weights = rng.dirichlet(np.ones(ROWS))
    theta = _away_from_kinks(loss, design, labels, rng)

    def value(t: FloatArray) -> float:
        return glm.objective(loss, design, labels, weights, t, 0.0)

    grad = glm.gradient(loss, design, labels, weights, theta, 0.0)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(grad, _difference_gradient(value, theta), rtol=1e-6, atol=1e-8)
