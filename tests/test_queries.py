"""Contract tests for CM query specs and their compiled :class:`GLMProblem`.

``SPECS`` is the one registry of query specs (every catalogue loss; binary,
one-hot and ordinal features; intercept on and off; ``l2`` zero and positive;
several radii; degenerate feature bounds ``B < 1`` and ``B = 0`` from a size-1
attribute). It is parametrized across these tests and reused by
``test_solvers.py``.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.kernels.losses import LOSSES, make_loss
from pmwcm.kernels.queries import CMQuery, GLMProblem, QueryError

FloatArray = NDArray[np.float64]

DOMAIN = Domain.from_sizes({"b1": 2, "b2": 2, "t3": 3, "q4": 4, "c1": 1, "r5": 5, "y": 2})

SPECS: dict[str, CMQuery] = {
    # classification (binary target y)
    "logistic_bin": CMQuery(loss="logistic", target="y", features=("b1", "b2")),
    "logistic_onehot_ord_l2": CMQuery(
        loss="logistic",
        target="y",
        features=("t3", "q4"),
        radius=3.0,
        l2=0.1,
        encodings={"q4": "ordinal"},
    ),
    "logistic_onehot_noint": CMQuery(
        loss="logistic", target="y", features=("q4",), radius=0.5, intercept=False
    ),
    "logistic_wide": CMQuery(loss="logistic", target="y", features=("r5", "t3", "b1"), radius=2.0),
    "logistic_intercept_only": CMQuery(loss="logistic", target="y", features=()),
    "smoothed_hinge": CMQuery(
        loss="smoothed_hinge", target="y", features=("b1", "t3"), radius=2.0, loss_param=0.5
    ),
    "smoothed_hinge_ord_l2": CMQuery(
        loss="smoothed_hinge",
        target="y",
        features=("b2", "q4"),
        l2=0.5,
        intercept=False,
        encodings={"q4": "ordinal"},
    ),
    "hinge": CMQuery(loss="hinge", target="y", features=("b1", "t3")),
    "hinge_l2_noint": CMQuery(
        loss="hinge", target="y", features=("q4", "b2"), radius=4.0, l2=0.2, intercept=False
    ),
    # regression (target r5 scaled to [-1, 1], or the binary y as +/-1)
    "squared": CMQuery(loss="squared", target="r5", features=("b1", "t3")),
    "squared_ord_l2": CMQuery(
        loss="squared",
        target="r5",
        features=("q4", "t3"),
        radius=2.0,
        l2=0.05,
        encodings={"q4": "ordinal", "t3": "ordinal"},
    ),
    "squared_binary_target": CMQuery(
        loss="squared", target="y", features=("b1",), radius=0.5, intercept=False
    ),
    "huber": CMQuery(loss="huber", target="r5", features=("b1", "b2", "t3"), loss_param=0.5),
    "huber_l2_noint": CMQuery(
        loss="huber",
        target="r5",
        features=("q4",),
        radius=3.0,
        l2=0.1,
        loss_param=2.0,
        intercept=False,
    ),
    "quantile": CMQuery(loss="quantile", target="r5", features=("t3",), loss_param=0.2),
    "quantile_ord_l2": CMQuery(
        loss="quantile",
        target="r5",
        features=("b1", "q4"),
        radius=2.0,
        l2=0.3,
        loss_param=0.7,
        encodings={"q4": "ordinal"},
    ),
    "absolute": CMQuery(loss="absolute", target="r5", features=("b2", "t3")),
    "absolute_onehot_noint": CMQuery(
        loss="absolute", target="y", features=("q4",), radius=0.5, intercept=False
    ),
    # a size-1 attribute gives a zero feature block: B = sqrt(1/2) and B = 0
    "squared_const_feature": CMQuery(
        loss="squared", target="r5", features=("c1", "t3"), radius=2.0, intercept=False
    ),
    "absolute_const_feature": CMQuery(
        loss="absolute", target="r5", features=("c1", "b1"), radius=2.0, intercept=False
    ),
    "hinge_zero_features": CMQuery(loss="hinge", target="y", features=("c1",), intercept=False),
    # interactions: a binary product (parity), binary x one-hot, a 3-way group with an
    # ordinal member, and a size-1 member (a zero block)
    "logistic_parity": CMQuery(
        loss="logistic", target="y", features=("b1", "b2"), interactions=(("b1", "b2"),)
    ),
    "squared_mixed_interactions": CMQuery(
        loss="squared",
        target="r5",
        features=("b1", "t3", "q4"),
        radius=2.0,
        encodings={"q4": "ordinal"},
        interactions=(("t3", "b1"), ("b1", "t3", "q4")),
    ),
    "hinge_const_interaction": CMQuery(
        loss="hinge", target="y", features=("c1", "b2"), interactions=(("c1", "b2"),)
    ),
}
SPEC_IDS = list(SPECS)


def compiled(spec_id: str) -> GLMProblem:
    """The registry spec ``spec_id`` compiled against ``DOMAIN``."""
    return SPECS[spec_id].compile(DOMAIN)


def ball_points(rng: np.random.Generator, n: int, dim: int, radius: float) -> FloatArray:
    """``n`` points of the ball: half uniform inside it, half on its boundary sphere."""
    direction = rng.standard_normal((n, dim))
    direction /= np.maximum(np.linalg.norm(direction, axis=1, keepdims=True), 1e-300)
    r = radius * rng.random(n) ** (1.0 / dim)
    r[: n // 2] = radius
    return direction * r[:, None]


def regular_cells(problem: GLMProblem, theta: FloatArray, eps: float = 1e-5) -> NDArray[np.bool_]:
    """Cells where ``f'`` is smooth within ``eps`` of ``z = <theta, phi>``.

    A kink of ``f`` (a jump of ``f'``) or of ``f'`` (a jump of ``f''``) within
    ``eps`` makes the second difference of ``f'`` of order ``eps``; on a smooth
    piece it is ``O(eps^2)``. Finite differences are only compared on the other cells.
    """
    z, y = problem.features @ theta, problem.labels
    d = problem.loss.derivative
    second = d(z + eps, y) - 2 * d(z, y) + d(z - eps, y)
    return np.abs(second) <= 1e-9


def expected_encoding(spec: CMQuery, domain: Domain) -> tuple[FloatArray, FloatArray]:
    """``phi`` and ``y`` for every clique cell, written out from the documented rules."""
    sizes = [domain.size_of(a) for a in spec.clique]
    rows, labels = [], []
    for cell in itertools.product(*(range(s) for s in sizes)):
        blocks: list[list[float]] = []
        for attr, code in zip(spec.features, cell, strict=False):
            size = domain.size_of(attr)
            if size == 2:
                blocks.append([-1.0 if code == 0 else 1.0])
            elif size == 1:
                blocks.append([0.0])
            elif spec.encodings.get(attr, "auto") == "ordinal":
                blocks.append([2.0 * code / (size - 1) - 1.0])
            else:
                blocks.append([1.0 if k == code else 0.0 for k in range(size)])
        position = {a: i for i, a in enumerate(spec.features)}
        for group in spec.interactions:
            members = [blocks[position[a]] for a in group]
            # every choice of one coordinate per member, first member slowest
            blocks.append([math.prod(choice) for choice in itertools.product(*members)])
        if spec.intercept:
            blocks.append([1.0])
        rows.append([v / math.sqrt(len(blocks)) for block in blocks for v in block])
        t_size, t_code = sizes[-1], cell[-1]
        labels.append(2.0 * t_code / (t_size - 1) - 1.0)
    return np.array(rows), np.array(labels)


@pytest.mark.parametrize("spec_id", SPEC_IDS)
def test_encoding_follows_the_documented_contract(spec_id: str) -> None:
    spec, problem = SPECS[spec_id], compiled(spec_id)
    phi, y = expected_encoding(spec, DOMAIN)
    assert problem.clique == (*spec.features, spec.target)
    assert problem.features.shape == (math.prod(DOMAIN.project(spec.clique).sizes), problem.dim)
    np.testing.assert_allclose(problem.features, phi, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(problem.labels, y)


def test_encoding_examples() -> None:
    """Binary: first value -1, second +1; intercept last; scaled by sqrt(#blocks)."""
    p = CMQuery(loss="logistic", target="y", features=("b1", "t3")).compile(DOMAIN)
    s = 1 / math.sqrt(3)
    # cells in C order over (b1, t3, y): (0,0,0), (0,0,1), (0,1,0), ...
    np.testing.assert_allclose(p.features[0], [-s, s, 0, 0, s])
    np.testing.assert_allclose(p.features[1], [-s, s, 0, 0, s])
    np.testing.assert_allclose(p.features[2], [-s, 0, s, 0, s])
    np.testing.assert_allclose(p.features[6], [s, s, 0, 0, s])
    assert p.labels[:2].tolist() == [-1.0, 1.0]
    q = CMQuery(loss="squared", target="r5", features=("q4",), encodings={"q4": "ordinal"})
    pq = q.compile(DOMAIN)
    s2 = 1 / math.sqrt(2)
    np.testing.assert_allclose(pq.features[::5, 0], np.array([-1, -1 / 3, 1 / 3, 1]) * s2)
    np.testing.assert_allclose(pq.labels[:5], [-1, -0.5, 0, 0.5, 1])


@pytest.mark.parametrize("spec_id", SPEC_IDS)
def test_feature_norms_and_declared_constants(spec_id: str) -> None:
    spec, p = SPECS[spec_id], compiled(spec_id)
    norms = np.linalg.norm(p.features, axis=1)
    assert np.all(norms <= 1.0 + 1e-12)
    b = float(norms.max())
    assert p.feature_bound == pytest.approx(b)
    g = make_loss(spec.loss, spec.loss_param)
    assert p.derivative_bound == pytest.approx(g.derivative_bound(spec.radius * b))
    assert p.lipschitz == pytest.approx(p.derivative_bound * b)
    assert p.scale == pytest.approx(2 * spec.radius * p.derivative_bound * b)
    assert p.radius == spec.radius and p.l2 == spec.l2
    if g.smoothness is None:
        assert p.smoothness is None
    else:
        assert p.smoothness == pytest.approx(g.smoothness * b * b)


@pytest.mark.parametrize("spec_id", SPEC_IDS)
def test_gradient_bound_and_scaling_condition_on_random_draws(spec_id: str, seed: int) -> None:
    """``||grad l_x(theta)|| <= G B`` and ``|<theta - theta', grad l_x(theta)>| <= S``.

    10^5 draws of ``(theta, theta', x)``: half of the ``theta`` on the sphere,
    a quarter aligned with ``+/- phi(x)`` (the largest ``|z|``), and a quarter
    of the ``theta'`` equal to ``-theta`` (the largest ``||theta - theta'||``).
    """
    p = compiled(spec_id)
    rng = np.random.default_rng(seed)
    n, cells = 100_000, p.features.shape[0]
    c = rng.integers(0, cells, size=n)
    phi, y = p.features[c], p.labels[c]
    theta = ball_points(rng, n, p.dim, p.radius)
    other = ball_points(rng, n, p.dim, p.radius)
    k = n // 4
    unit = phi[:k] / np.maximum(np.linalg.norm(phi[:k], axis=1, keepdims=True), 1e-300)
    theta[:k] = unit * p.radius * rng.choice([-1.0, 1.0], size=(k, 1))
    other[k : 2 * k] = -theta[k : 2 * k]
    grads = p.loss.derivative(np.einsum("ij,ij->i", phi, theta), y)[:, None] * phi
    assert np.all(np.linalg.norm(grads, axis=1) <= p.lipschitz * (1 + 1e-12) + 1e-300)
    inner = np.abs(np.einsum("ij,ij->i", theta - other, grads))
    assert np.all(inner <= p.scale * (1 + 1e-12) + 1e-300)
    # the vectorised gradient above is the problem's own cell_gradients
    np.testing.assert_allclose(grads[0], p.cell_gradients(theta[0])[c[0]], rtol=1e-13)


@pytest.mark.parametrize("spec_id", SPEC_IDS)
def test_cell_gradients_match_finite_differences(spec_id: str, seed: int) -> None:
    p = compiled(spec_id)
    rng = np.random.default_rng(seed)
    h = 1e-7
    for theta in ball_points(rng, 4, p.dim, p.radius):
        ok = regular_cells(p, theta) if p.loss.smoothness is None else np.ones(p.labels.shape, bool)
        fd = np.stack(
            [
                (p.cell_losses(theta + h * e) - p.cell_losses(theta - h * e)) / (2 * h)
                for e in np.eye(p.dim)
            ],
            axis=1,
        )
        np.testing.assert_allclose(p.cell_gradients(theta)[ok], fd[ok], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("spec_id", SPEC_IDS)
def test_data_gradient_and_gradient_match_finite_differences(spec_id: str, seed: int) -> None:
    p = compiled(spec_id)
    rng = np.random.default_rng(seed)
    h = 1e-7
    for theta in ball_points(rng, 4, p.dim, p.radius):
        w = rng.dirichlet(np.ones(p.labels.size))
        w[~regular_cells(p, theta)] = 0.0  # no kink within reach of the differences
        np.testing.assert_allclose(
            p.data_gradient(theta, w), w @ p.cell_gradients(theta), rtol=1e-12, atol=1e-15
        )
        assert p.objective(theta, w) == pytest.approx(
            float(w @ p.cell_losses(theta)) + 0.5 * p.l2 * float(theta @ theta), rel=1e-14
        )
        fd = np.array(
            [
                (p.objective(theta + h * e, w) - p.objective(theta - h * e, w)) / (2 * h)
                for e in np.eye(p.dim)
            ]
        )
        np.testing.assert_allclose(p.gradient(theta, w), fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("spec_id", SPEC_IDS)
def test_data_hessian_matches_finite_differences(spec_id: str, seed: int) -> None:
    p = compiled(spec_id)
    rng = np.random.default_rng(seed)
    h = 1e-7
    for theta in ball_points(rng, 4, p.dim, p.radius):
        w = rng.dirichlet(np.ones(p.labels.size))
        w[~regular_cells(p, theta)] = 0.0
        hess = p.data_hessian(theta, w)
        if p.loss.smoothness is None:
            assert hess is None
            continue
        assert hess is not None
        fd = np.stack(
            [
                (p.data_gradient(theta + h * e, w) - p.data_gradient(theta - h * e, w)) / (2 * h)
                for e in np.eye(p.dim)
            ],
            axis=1,
        )
        np.testing.assert_allclose(hess, fd, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(hess, hess.T, atol=1e-15)
        assert np.linalg.eigvalsh(hess).min() >= -1e-12


@pytest.mark.parametrize("mu", [1e-3, 0.1])
@pytest.mark.parametrize("spec_id", SPEC_IDS)
def test_smoothed_surrogate_is_within_its_declared_slack(
    spec_id: str, mu: float, seed: int
) -> None:
    """``F - c <= F_mu <= F`` for weights summing to one, and ``c = mu G^2 / 2``."""
    p = compiled(spec_id)
    surrogate, c = p.smoothed(mu)
    if p.smoothness is not None:
        assert surrogate is p and c == 0.0
        return
    assert c == pytest.approx(mu * p.derivative_bound**2 / 2)
    assert surrogate.smoothness == pytest.approx(p.feature_bound**2 / mu)
    assert (surrogate.radius, surrogate.l2, surrogate.clique) == (p.radius, p.l2, p.clique)
    rng = np.random.default_rng(seed)
    for theta in ball_points(rng, 20, p.dim, p.radius):
        w = rng.dirichlet(np.ones(p.labels.size))
        diff = p.objective(theta, w) - surrogate.objective(theta, w)
        assert -1e-12 <= diff <= c + 1e-12


@pytest.mark.parametrize("spec_id", ["logistic_onehot_ord_l2", "squared", "hinge_l2_noint"])
def test_objective_on_the_marginal_equals_the_mean_over_records(spec_id: str, seed: int) -> None:
    """docs/design.md's key observation: ``L_D`` needs only the clique's marginal table."""
    spec, p = SPECS[spec_id], compiled(spec_id)
    rng = np.random.default_rng(seed)
    records = np.stack([rng.integers(0, s, size=500) for s in DOMAIN.sizes], axis=1)
    hist = DenseHistogram.from_records(DOMAIN, records)
    weights = hist.marginal(list(spec.clique)).ravel()
    theta = ball_points(rng, 1, p.dim, p.radius)[0]
    # the same loss evaluated record by record, cells located by their clique codes
    sub = [DOMAIN.size_of(a) for a in spec.clique]
    cell = np.ravel_multi_index(tuple(records[:, DOMAIN.axes(spec.clique)].T), sub)
    direct = float(p.cell_losses(theta)[cell].mean()) + 0.5 * spec.l2 * float(theta @ theta)
    assert p.objective(theta, weights) == pytest.approx(direct, rel=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "bad"),
    [
        ({"loss": "svm", "target": "y", "features": ("b1",)}, "'svm'"),
        ({"loss": "logistic", "target": "y", "features": ("b1",), "radius": 0}, "radius=0"),
        ({"loss": "logistic", "target": "y", "features": ("b1",), "radius": -1.5}, "-1.5"),
        ({"loss": "logistic", "target": "y", "features": ("b1",), "radius": math.inf}, "inf"),
        ({"loss": "logistic", "target": "y", "features": ("b1",), "radius": math.nan}, "nan"),
        ({"loss": "logistic", "target": "y", "features": ("b1",), "l2": -0.25}, "l2=-0.25"),
        ({"loss": "logistic", "target": "y", "features": ("b1",), "l2": math.nan}, "nan"),
        ({"loss": "logistic", "target": "y", "features": ("b1", "y")}, "'y'"),
        ({"loss": "logistic", "target": "y", "features": ("b1", "b1")}, "'b1', 'b1'"),
        ({"loss": "logistic", "target": "y", "features": (), "intercept": False}, "feature"),
        ({"loss": "huber", "target": "r5", "features": ("b1",), "loss_param": -2.0}, "-2.0"),
        ({"loss": "logistic", "target": "y", "features": ("b1",), "loss_param": 3.0}, "3.0"),
        (
            {"loss": "logistic", "target": "y", "features": ("t3",), "encodings": {"t3": "bin"}},
            "'bin'",
        ),
        (
            {"loss": "logistic", "target": "y", "features": ("t3",), "encodings": {"q4": "onehot"}},
            "'q4'",
        ),
        (
            {"loss": "logistic", "target": "y", "features": ("b1",), "interactions": [("b1",)]},
            "['b1']",
        ),
        (
            {
                "loss": "logistic",
                "target": "y",
                "features": ("b1",),
                "interactions": [("b1", "b1")],
            },
            "['b1', 'b1']",
        ),
        (
            {
                "loss": "logistic",
                "target": "y",
                "features": ("b1",),
                "interactions": [("b1", "b2")],
            },
            "['b2']",
        ),
        (
            {
                "loss": "logistic",
                "target": "y",
                "features": ("b1", "b2"),
                "interactions": [("b1", "b2"), ("b2", "b1")],
            },
            "['b2', 'b1'] is listed twice",
        ),
    ],
)
def test_invalid_specs_raise_query_error_quoting_the_value(
    kwargs: dict[str, object], bad: str
) -> None:
    with pytest.raises(QueryError) as info:
        CMQuery(**kwargs)  # type: ignore[arg-type]
    assert bad in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("spec", "bad"),
    [
        (CMQuery(loss="logistic", target="y", features=("age",)), "'age'"),
        (CMQuery(loss="logistic", target="income", features=("b1",)), "'income'"),
        (CMQuery(loss="logistic", target="r5", features=("b1",)), "'r5'"),
        (CMQuery(loss="hinge", target="t3", features=("b1",)), "'t3'"),
        (CMQuery(loss="smoothed_hinge", target="c1", features=("b1",)), "'c1'"),
    ],
)
def test_compile_errors_quote_the_attribute(spec: CMQuery, bad: str) -> None:
    with pytest.raises(QueryError) as info:
        spec.compile(DOMAIN)
    assert bad in str(info.value)


@pytest.mark.parametrize(
    ("spec", "bad"),
    [
        ({"loss": "logistic", "target": "y", "features": ["b1"], "raduis": 1.0}, "'raduis'"),
        ({"loss": "logistic", "target": "y", "features": "b1"}, "'b1'"),
        ({"loss": "logistic", "features": ["b1"]}, "'target'"),
        (
            {"loss": "logistic", "target": "y", "features": ["b1", "b2"], "interactions": "b1*b2"},
            "'b1*b2'",
        ),
        (
            {"loss": "logistic", "target": "y", "features": ["b1"], "interactions": [["b1", 2]]},
            "[['b1', 2]]",
        ),
    ],
)
def test_from_dict_errors_quote_the_field(spec: dict[str, object], bad: str) -> None:
    with pytest.raises(QueryError) as info:
        CMQuery.from_dict(spec)
    assert bad in str(info.value)


@pytest.mark.parametrize("spec_id", SPEC_IDS)
def test_to_dict_from_dict_round_trip(spec_id: str) -> None:
    spec = SPECS[spec_id]
    wire = json.loads(json.dumps(spec.to_dict()))
    assert CMQuery.from_dict(wire) == spec
    assert CMQuery.from_dict({**wire, "id": "q-17"}) == spec
    again = CMQuery.from_dict(wire).compile(DOMAIN)
    np.testing.assert_array_equal(again.features, compiled(spec_id).features)


@st.composite
def random_specs(draw: st.DrawFn) -> CMQuery:
    """Any valid catalogue spec over ``DOMAIN``."""
    loss = draw(st.sampled_from(sorted(LOSSES)))
    binary = LOSSES[loss]().label_kind == "binary"
    target = "y" if binary else draw(st.sampled_from(["r5", "y", "t3", "c1"]))
    pool = [a for a in DOMAIN.names if a != target]
    features = tuple(draw(st.lists(st.sampled_from(pool), unique=True, max_size=4)))
    intercept = draw(st.booleans()) if features else True
    encodings = {
        a: draw(st.sampled_from(["auto", "onehot", "ordinal"]))
        for a in features
        if draw(st.booleans())
    }
    groups: list[tuple[str, ...]] = [
        g for g in itertools.combinations(features, 2) if draw(st.booleans())
    ]
    if len(features) >= 3 and draw(st.booleans()):
        groups.append(features[:3])
    param = {
        "huber": st.floats(0.05, 5.0),
        "smoothed_hinge": st.floats(0.05, 5.0),
        "quantile": st.floats(0.01, 0.99),
    }.get(loss)
    return CMQuery(
        loss=loss,
        target=target,
        features=features,
        radius=draw(st.floats(0.01, 100.0)),
        l2=draw(st.sampled_from([0.0, 1e-3, 1.0])),
        intercept=intercept,
        loss_param=None if param is None else draw(param),
        encodings=encodings,
        interactions=tuple(groups),
    )


@settings(derandomize=True, deadline=None, max_examples=150)
@given(spec=random_specs(), draw_seed=st.integers(0, 2**32 - 1))
def test_any_spec_compiles_within_its_declared_constants(spec: CMQuery, draw_seed: int) -> None:
    """For any valid spec: ``||phi|| <= 1``, and ``G B``, ``S`` bound 2,000 sampled draws."""
    assert CMQuery.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    p = spec.compile(DOMAIN)
    assert np.all(np.linalg.norm(p.features, axis=1) <= 1 + 1e-12)
    assert np.all(np.abs(p.labels) <= 1.0)
    rng = np.random.default_rng(draw_seed)
    n = 2000
    c = rng.integers(0, p.labels.size, size=n)
    phi, y = p.features[c], p.labels[c]
    theta = ball_points(rng, n, p.dim, p.radius)
    other = -theta[::-1]
    grads = p.loss.derivative(np.einsum("ij,ij->i", phi, theta), y)[:, None] * phi
    assert np.all(np.linalg.norm(grads, axis=1) <= p.lipschitz * (1 + 1e-12) + 1e-300)
    inner = np.abs(np.einsum("ij,ij->i", theta - other, grads))
    assert np.all(inner <= p.scale * (1 + 1e-12) + 1e-300)


def test_interaction_of_binaries_is_their_parity() -> None:
    """A product of +/-1 features: +1 where an even number of them take the first value."""
    spec = CMQuery(loss="logistic", target="y", features=("b1", "b2"), interactions=(("b1", "b2"),))
    p = spec.compile(DOMAIN)
    scale = math.sqrt(4)  # b1, b2, the interaction, the intercept
    cells = np.indices((2, 2, 2)).reshape(3, -1).T
    parity = np.where(cells[:, 0] == cells[:, 1], 1.0, -1.0)
    np.testing.assert_allclose(p.features[:, 2] * scale, parity)
    assert spec.clique == ("b1", "b2", "y") and p.dim == 4


def test_specs_without_interactions_serialise_as_before() -> None:
    """Queries (and their keys in snapshots and services) predating interactions are unchanged."""
    plain = CMQuery(loss="logistic", target="y", features=("b1",))
    assert "interactions" not in plain.to_dict()
    assert CMQuery.from_dict({**plain.to_dict(), "interactions": []}) == plain


@pytest.mark.parametrize("radius", [5e-324, 1e-300, 9.99e-7])
def test_a_radius_too_small_for_float64_is_refused_from_the_spec(radius: float) -> None:
    """Schemathesis sent radius 5e-324: the solve's gap (a fraction of S / n, S ~ R)
    underflowed to 0 inside the engine and the service answered 500."""
    with pytest.raises(QueryError, match="radius must be at least 1e-06"):
        CMQuery(loss="hinge", target="y", features=(), radius=radius)
    assert CMQuery(loss="hinge", target="y", features=(), radius=1e-6).radius == 1e-6
