"""The below-threshold round's fast paths give the reference numbers (issue 18).

* the compiled ellipsoid method (:func:`~pmwcm.kernels.ellipsoid.fixed_ellipsoid`)
  is the NumPy loop (:func:`~pmwcm.kernels.ellipsoid._ellipsoid_reference`) up
  to rounding: the objective values of the two returned points agree to ``1e-4``
  of the planned gap (the ellipsoid's cuts amplify the last bits of its small
  matrix products into different but equally good centres), and both lie within
  the planned gap of the minimum (a certified Newton solve to ``1e-12``);
* the ellipsoid's one-pass value and gradient are the separate kernels' bit for bit;
* the hypothesis solve's compiled Newton (:func:`~pmwcm.kernels.newton.newton_solve`)
  takes the NumPy loop's steps, to rounding: same iterations and outcome, same
  value to 1e-12 and point to 1e-9 (where the minimiser is unique); its
  trust-region step likewise, hard case included;
* the real-data FISTA of a small dense logistic table (one exp per label pair)
  is the scalar compiled loop up to rounding (1e-12);
* a dense compile's feature bound, read off its first cell, is the corner's;
* a query's canonical form and key are memoised per domain, never stale;
* a dense histogram's cached marginals are the planned passes' bit for bit;
* :func:`~pmwcm.kernels.threads.blas_threads` skips its set-and-restore only
  when every BLAS already runs at most the threads asked for;
* the sparse vector's query noise, drawn in blocks from OpenDP, is used in the
  order drawn, each draw once (the bit is exactly the comparison with it).

No timing here: ``benchmarks/throughput.py`` measures the speed.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from conftest import RecordingNoise
from pmwcm.kernels.ball import (
    JACOBI_MAX_DIM,
    ball_quadratic_min,
    numpy_ball_quadratic_min,
    symmetric_eigen,
)
from pmwcm.kernels.dense_marginal import planned_marginal
from pmwcm.kernels.design import BlockDesign, DenseDesign
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.ellipsoid import _ellipsoid_reference, ellipsoid
from pmwcm.kernels.evaluator import evaluator
from pmwcm.kernels.fista import fixed_fista
from pmwcm.kernels.fixed_budget import (
    FixedSolve,
    _ellipsoid_iterations,
    _paired_form,
    fixed_budget_minimize,
    fixed_budget_minimum,
    oscillation_bound,
    plan_solve,
)
from pmwcm.kernels.glm import (
    LOGISTIC,
    glm_gradient,
    glm_objective,
    glm_objective_and_gradient,
    loss_kind,
)
from pmwcm.kernels.histogram import CACHED_MARGINAL_CELLS, DenseHistogram, MarginalCache
from pmwcm.kernels.losses import make_loss, resolved_loss_param
from pmwcm.kernels.lru import CellBudgetCache
from pmwcm.kernels.paired_logistic import (
    _paired_fista_dense,
    _paired_fista_sparse,
    fixed_fista_paired_logistic,
    paired_logistic_rows,
)
from pmwcm.kernels.queries import CMQuery, GLMProblem, QueryError
from pmwcm.kernels.solvers import (
    _compiled_newton,
    _newton,
    frank_wolfe_gap,
    minimize,
)
from pmwcm.kernels.threads import blas_threads
from pmwcm.kernels.workload import random_queries
from pmwcm.mechanisms.noise import OpenDPNoise
from pmwcm.mechanisms.sparse_vector import QUERY_NOISE_BLOCK, DworkRothSparse, LyuSuLiSparse

DOMAIN = Domain.from_sizes({"a": 2, "b": 2, "c": 3, "d": 2, "y": 2, "z": 4})
N = 48_842


@pytest.mark.parametrize(
    ("loss", "target", "features", "l2"),
    [
        ("logistic", "y", ("a", "b"), 0.0),
        ("logistic", "y", ("a", "c", "d"), 0.0),
        ("logistic", "y", ("c",), 0.05),
        ("squared", "z", ("a", "b", "d"), 0.0),
        ("huber", "z", ("c", "y"), 0.01),
    ],
)
def test_compiled_ellipsoid_is_the_numpy_loop_up_to_rounding(
    loss: str, target: str, features: tuple[str, ...], l2: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    query = CMQuery(loss=loss, target=target, features=features, l2=l2, radius=1.5)
    problem = query.compile(DOMAIN)
    gap = 0.2 * problem.scale / N  # the engine's tau at its defaults
    iterations = _ellipsoid_iterations(problem.dim, oscillation_bound(problem) / gap)
    assert problem.dim >= 2
    for concentration in (0.05, 0.5, 5.0):
        weights = rng.gamma(concentration, 1.0, problem.design.rows)
        weights /= weights.sum()
        fast = ellipsoid(problem, weights, iterations)
        reference = _ellipsoid_reference(problem, weights, iterations)
        fast_value = problem.objective(fast, weights)
        reference_value = problem.objective(reference, weights)
        assert abs(fast_value - reference_value) <= 1e-4 * gap
        best = minimize(problem, weights, tol=1e-12, max_iter=200).value
        assert fast_value - best <= gap
        assert np.linalg.norm(fast) <= problem.radius * (1 + 1e-12)


def test_the_engine_solve_takes_the_compiled_ellipsoid_for_a_compiled_loss(seed: int) -> None:
    """fixed_budget_minimize runs the compiled loop: bit for bit what ellipsoid returns."""
    rng = np.random.default_rng(seed)
    problem = CMQuery(loss="logistic", target="y", features=("a", "b")).compile(DOMAIN)
    # plan_solve would take FISTA here (cheaper); the ellipsoid's plan for the same gap.
    gap = 0.2 * problem.scale / N
    iterations = _ellipsoid_iterations(problem.dim, oscillation_bound(problem) / gap)
    plan = FixedSolve(method="ellipsoid", iterations=iterations, gap=gap)
    weights = rng.dirichlet(np.ones(problem.design.rows))
    np.testing.assert_array_equal(
        fixed_budget_minimize(problem, weights, plan), ellipsoid(problem, weights, plan.iterations)
    )


class _RecordedOpenDP(OpenDPNoise):
    """The production source, recording every Laplace draw it hands out."""

    def __init__(self) -> None:
        super().__init__()
        self.draws: list[tuple[float, list[float]]] = []

    def laplace(self, scale: float, size: int) -> np.ndarray:
        out = super().laplace(scale, size)
        self.draws.append((scale, out.tolist()))
        return out


@pytest.mark.parametrize("kind", ["lyu_su_li", "dwork_roth"])
def test_sparse_vector_uses_each_block_drawn_query_noise_once_in_order(kind: str) -> None:
    """With OpenDP the query noises come QUERY_NOISE_BLOCK per call, and query i's bit is
    exactly ``value_i + nu_i >= threshold + rho`` with nu_i the i-th noise drawn: none
    skipped, none used twice; a seeded source still draws one per query."""
    noise = _RecordedOpenDP()
    sv: LyuSuLiSparse | DworkRothSparse
    if kind == "lyu_su_li":
        sv = LyuSuLiSparse.from_total(50.0, 10_000, noise=noise)
    else:
        sv = DworkRothSparse(epsilon_per_run=50.0, cutoff=10_000, noise=noise)
    rng = np.random.default_rng(0)
    values = rng.normal(0.0, 3.0 * sv.query_scale, 3 * QUERY_NOISE_BLOCK + 5)
    bits = [sv.above(float(v), threshold=0.25) for v in values]
    rho_scale, query_scale = sv.threshold_scale, sv.query_scale
    assert rho_scale != query_scale
    nus = [x for scale, block in noise.draws if scale == query_scale for x in block]
    blocks = [len(block) for scale, block in noise.draws if scale == query_scale]
    assert blocks == [QUERY_NOISE_BLOCK] * 4
    rhos = iter(block[0] for scale, block in noise.draws if scale == rho_scale)
    rho = next(rhos)
    for value, nu, bit in zip(values, nus, bits, strict=False):
        assert bit == (value + nu >= 0.25 + rho)
        if bit and kind == "dwork_roth":
            rho = next(rhos)  # a fresh run after each positive
    assert 0 < sum(bits) < len(bits)

    seeded = RecordingNoise(seed=0)
    sv = LyuSuLiSparse.from_total(1.0, 10, noise=seeded)
    for v in values[:5]:
        sv.above(float(v), threshold=1e9)
    assert [d.size for d in seeded.calls] == [1] * 6


def test_cached_hypothesis_marginals_are_the_planned_ones_bit_for_bit(seed: int) -> None:
    """A marginal served from the histogram's cache (any clique order, after reweights,
    normalisation and copies) is exactly what the planned passes return for the
    current values, and never an array a caller can change the cache through."""
    rng = np.random.default_rng(seed)
    domain = Domain.from_sizes({f"x{i}": int(s) for i, s in enumerate(rng.integers(1, 4, 9))})
    histogram = DenseHistogram(domain, rng.gamma(1.0, 1.0, domain.shape))
    names = domain.names
    for step in range(60):
        k = int(rng.integers(0, 5))
        attrs = [names[int(i)] for i in rng.permutation(len(names))[:k]]
        got = histogram.marginal(attrs)
        expected = planned_marginal(histogram.to_array(), domain.axes(attrs))
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
        got[...] = -1.0  # a caller's copy
        np.testing.assert_array_equal(histogram.marginal(attrs), expected)
        if step % 7 == 3:
            factor = rng.normal(0.0, 0.3, tuple(domain.size_of(a) for a in attrs))
            histogram.reweight(attrs, factor)
        elif step % 11 == 5:
            histogram = histogram.copy()
        elif step % 13 == 6:
            histogram.normalize()


def test_compile_takes_the_corner_bound_from_its_own_first_cell(seed: int) -> None:
    """A dense compile reads ``B`` off its first (all-zero) cell instead of compiling the
    corner again: the same ``B``, design and labels, bit for bit, for every encoding,
    interactions and intercept choice."""
    rng = np.random.default_rng(seed)
    domain = Domain.from_sizes({"a": 2, "b": 3, "c": 5, "d": 1, "e": 4, "y": 2, "z": 6})
    features = ["a", "b", "c", "d", "e"]
    for _ in range(40):
        chosen = tuple(str(f) for f in rng.permutation(features)[: int(rng.integers(1, 5))])
        encodings = {f: str(rng.choice(["onehot", "ordinal", "auto"])) for f in chosen}
        interactions = (chosen[:2],) if len(chosen) >= 2 and rng.random() < 0.5 else ()
        loss, target = ("logistic", "y") if rng.random() < 0.5 else ("squared", "z")
        query = CMQuery(
            loss=loss,
            target=target,
            features=chosen,
            encodings=encodings,
            interactions=interactions,
            intercept=bool(rng.random() < 0.7),
        )
        problem = query.compile(domain)
        sub = domain.project(query.clique)
        corner, _ = query._features(sub, np.zeros((1, len(sub)), dtype=np.int64))
        assert problem.feature_bound == float(corner.row_norms()[0])
        cells = np.indices(sub.shape).reshape(len(sub), -1).T
        design, labels = query._features(sub, cells)
        np.testing.assert_array_equal(problem.design.dense(), design.dense())
        assert type(problem.design) is type(design)
        np.testing.assert_array_equal(problem.labels, labels)


def test_a_dense_compile_is_its_layouts_problem_with_its_own_query_and_clique(
    seed: int,
) -> None:
    """Queries of one layout, loss and ball share one compiled problem, copied with
    their own query and clique: every field and constant is what the dataclass's
    constructor gives from the same arguments, and the copies are independent."""
    rng = np.random.default_rng(seed)
    domain = Domain.from_sizes({"a": 2, "b": 2, "c": 3, "e": 3, "y": 2, "z": 2, "w": 4})
    for _ in range(30):
        loss = str(rng.choice(["logistic", "huber", "hinge", "squared"]))
        target = "w" if loss in ("huber", "squared") and rng.random() < 0.5 else "y"
        twins = [("a", "c"), ("b", "e")]  # the same sizes, so the same layout
        radius, l2 = float(rng.choice([1.0, 2.5])), float(rng.choice([0.0, 0.1]))
        problems = [
            CMQuery(loss=loss, target=target, features=f, radius=radius, l2=l2).compile(domain)
            for f in twins
        ]
        for features, problem in zip(twins, problems, strict=True):
            query = problem.query
            assert query is not None and query.features == features
            assert problem.clique == (*features, target) == query.clique
            sub = domain.project(problem.clique)
            cells = np.indices(sub.shape).reshape(len(sub), -1).T
            design, labels = query._features(sub, cells)
            reference = GLMProblem(
                query=query, clique=query.clique, sizes=sub.sizes, loss=make_loss(loss),
                design=design, labels=labels, radius=radius, l2=l2,
            )  # fmt: skip
            assert problem.sizes == reference.sizes and problem.loss == reference.loss
            assert (problem.radius, problem.l2) == (reference.radius, reference.l2)
            np.testing.assert_array_equal(problem.design.dense(), design.dense())
            np.testing.assert_array_equal(problem.labels, labels)
            for constant in ("feature_bound", "lipschitz", "scale", "smoothness", "dim"):
                assert getattr(problem, constant) == getattr(reference, constant), constant
        first, second = problems
        assert first.design is second.design and first.query is not second.query
        assert first.clique != second.clique


def test_blas_threads_already_at_the_limit_is_left_alone_and_otherwise_limited() -> None:
    """The shortcut (nothing to set when every BLAS is already that low) is exact:
    inside the block no BLAS runs more threads than asked, and after it each has
    its own count back."""

    def counts() -> set[int]:
        return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}

    for outer in (1, 2, 3):
        with threadpool_limits(limits=outer, user_api="blas"):
            for inner in (1, 2):
                with blas_threads(inner):
                    assert counts() == {min(outer, inner)}
                assert counts() == {outer}


@pytest.mark.parametrize(
    ("loss", "target", "features"),
    [
        ("logistic", "y", ("a",)),
        ("logistic", "y", ("a", "c", "d")),  # the paired form: solve and value in one call
        ("logistic", "y", ("b", "c", "d", "z")),
        ("squared", "z", ("a", "c")),  # no paired form: the evaluator
        ("hinge", "y", ("a", "b")),  # the ellipsoid
    ],
)
def test_fixed_budget_minimum_is_the_evaluators_objective_at_the_solves_point_bit_for_bit(
    loss: str, target: str, features: tuple[str, ...], seed: int
) -> None:
    """The round's ``q`` reads the solve's value and objective from
    ``fixed_budget_minimum``; the sensitivity audit models them with the evaluator,
    apart. They must be the same numbers, on degenerate weights too."""
    rng = np.random.default_rng(seed)
    problem = CMQuery(loss=loss, target=target, features=features, l2=0.05).compile(DOMAIN)
    plan = plan_solve(problem, gap=1e-4, max_iterations=100_000)
    assert (_paired_form(problem) is not None) is (loss == "logistic")
    cells = int(np.prod(problem.sizes))
    for trial in range(6):
        weights = rng.random(cells) ** 3
        if trial == 1:
            weights[rng.random(cells) < 0.7] = 0.0
            weights[0] += 1e-3
        if trial == 2:
            weights = np.eye(cells)[int(rng.integers(cells))]
        weights /= weights.sum()
        value, objective = fixed_budget_minimum(problem, weights, plan)
        reference = evaluator(problem, weights).objective
        assert value == reference(fixed_budget_minimize(problem, weights, plan))
        answer = rng.normal(size=problem.dim)
        assert objective(answer) == reference(answer)


@pytest.mark.parametrize(
    "features", [("a",), ("a", "b"), ("a", "c", "d"), ("b", "c", "d", "z"), ("c", "z")]
)
def test_small_logistic_fista_is_the_scalar_loop_up_to_rounding(
    features: tuple[str, ...], seed: int
) -> None:
    """The paired logistic FISTA, which the real-data solve takes on a small dense
    table, is the scalar compiled loop up to rounding (1e-12), intercept and ridge
    or not, on degenerate weights too."""
    rng = np.random.default_rng(seed)
    for l2, intercept in ((0.0, True), (0.3, False)):
        problem = CMQuery(
            loss="logistic", target="y", features=features, l2=l2, intercept=intercept
        ).compile(DOMAIN)
        plan = plan_solve(problem, gap=0.2 * problem.scale / N, max_iterations=100_000)
        fista = FixedSolve(
            method="fista",
            iterations=300,
            gap=plan.gap,
            smoothness=float(problem.smoothness or 0.0) + l2,
        )
        assert isinstance(problem.design, BlockDesign | DenseDesign)
        columns, values = problem.design.row_major
        for weights in (
            rng.dirichlet(np.full(problem.design.rows, 0.3)),
            np.eye(problem.design.rows)[0],
        ):
            fast = fixed_budget_minimize(problem, weights, fista)
            assert fista.smoothness is not None
            reference = fixed_fista(
                columns, values, problem.labels, weights, problem.dim, l2, LOGISTIC, 0.0,
                problem.radius, 1.0 / fista.smoothness, fista.iterations,
            )  # fmt: skip
            np.testing.assert_allclose(fast, reference, rtol=1e-12, atol=1e-13)
            paired = fixed_fista_paired_logistic(
                columns, values, weights, problem.dim, l2,
                problem.radius, 1.0 / fista.smoothness, fista.iterations,
            )  # fmt: skip
            assert paired_logistic_rows(columns, values, problem.labels)
            np.testing.assert_array_equal(fast, paired)
    # A design whose rows do not pair up is never read as pairs.
    problem = CMQuery(loss="logistic", target="y", features=features).compile(DOMAIN)
    assert isinstance(problem.design, DenseDesign)
    columns, values = problem.design.row_major
    assert not paired_logistic_rows(columns[1:], values[1:], problem.labels[1:])
    assert not paired_logistic_rows(columns, values, -problem.labels)
    swapped = values.copy()
    swapped[1, 0] = -swapped[1, 0]
    assert not paired_logistic_rows(columns, swapped, problem.labels)


@pytest.mark.parametrize(("features", "dense"), [(("a", "b", "d"), True), (("c", "z"), False)])
def test_paired_fista_takes_its_dense_or_row_major_loop_and_both_agree(
    features: tuple[str, ...], dense: bool, seed: int
) -> None:
    """Binary features touch every coordinate (the dense ``dim x pairs`` loop); one-hot
    blocks touch few (the row-major loop). The two loops are one FISTA up to rounding."""
    problem = CMQuery(loss="logistic", target="y", features=features, l2=0.2).compile(DOMAIN)
    assert isinstance(problem.design, DenseDesign)
    columns, values = problem.design.row_major
    assert (problem.dim <= 2 * columns.shape[1]) is dense
    weights = np.random.default_rng(seed).dirichlet(np.full(columns.shape[0], 0.4))
    args = (0.2, problem.radius, 1.0 / (float(problem.smoothness or 0.0) + 0.2), 200)
    features_matrix = np.zeros((problem.dim, columns.shape[0] // 2))
    for p in range(features_matrix.shape[1]):
        np.add.at(features_matrix[:, p], columns[2 * p], values[2 * p])
    by_matrix = _paired_fista_dense(features_matrix, weights, *args)
    by_rows = _paired_fista_sparse(
        np.ascontiguousarray(columns[::2]), np.ascontiguousarray(values[::2]), weights,
        problem.dim, *args,
    )  # fmt: skip
    np.testing.assert_allclose(by_matrix, by_rows, rtol=1e-12, atol=1e-13)
    taken = fixed_fista_paired_logistic(columns, values, weights, problem.dim, *args)
    np.testing.assert_array_equal(taken, by_matrix if dense else by_rows)


def test_symmetric_eigen_is_lapacks_decomposition_up_to_rounding(seed: int) -> None:
    """Jacobi's eigenvalues equal LAPACK's to rounding relative to ``||A||``, and its
    vectors are orthonormal and rebuild ``A``: on spread, repeated and zero spectra,
    up to JACOBI_MAX_DIM and past it (where LAPACK itself runs). A rotation with the
    wrong sign or an unsorted result fails the first check; a missed sweep the second."""
    rng = np.random.default_rng(seed)
    for trial in range(200):
        dim = int(rng.integers(1, JACOBI_MAX_DIM + 3))
        basis = np.linalg.qr(rng.normal(size=(dim, dim)))[0]
        spectrum = rng.gamma(0.5, 1.0, dim) * 10.0 ** rng.uniform(-6, 3)
        if trial % 4 == 0:
            spectrum[: dim // 2] = spectrum[-1]  # a repeated eigenvalue
        if trial % 4 == 1:
            spectrum[: (dim + 1) // 2] = 0.0  # singular
        matrix = (basis * spectrum) @ basis.T
        matrix = 0.5 * (matrix + matrix.T)
        values, vectors = symmetric_eigen(matrix)
        size = max(float(np.linalg.norm(matrix)), 1e-300)
        assert np.all(np.diff(values) >= 0)
        np.testing.assert_allclose(values, np.linalg.eigvalsh(matrix), rtol=0, atol=1e-13 * size)
        np.testing.assert_allclose(vectors.T @ vectors, np.eye(dim), rtol=0, atol=1e-13)
        np.testing.assert_allclose((vectors * values) @ vectors.T, matrix, atol=1e-13 * size)
    # A diagonal matrix needs no rotation; an entry far below the diagonal's spread
    # (|tau| beyond 1e150) takes the overflow-free angle and is still zeroed.
    np.testing.assert_array_equal(symmetric_eigen(np.diag([3.0, 1.0, 2.0]))[0], [1.0, 2.0, 3.0])
    lopsided = np.array([[1e200, 1e30], [1e30, 0.0]])
    values, vectors = symmetric_eigen(lopsided)
    np.testing.assert_allclose(values, np.linalg.eigvalsh(lopsided), rtol=0, atol=1e-15 * 1e200)
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(2), atol=1e-15)


def test_compiled_trust_region_step_is_the_numpy_one_up_to_rounding(seed: int) -> None:
    """Interior, boundary and hard-case (b orthogonal to the bottom eigenvector) steps."""
    rng = np.random.default_rng(seed)
    for trial in range(60):
        dim = int(rng.integers(1, 8))
        basis = np.linalg.qr(rng.normal(size=(dim, dim)))[0]
        spectrum = rng.gamma(0.5, 1.0, dim) * (trial % 3 != 0)  # singular H a third of the time
        hess = (basis * spectrum) @ basis.T
        hess = 0.5 * (hess + hess.T)
        lin = rng.normal(0.0, 10.0 ** rng.uniform(-3, 1), dim)
        if trial % 5 == 0:
            lin -= basis[:, np.argmin(spectrum)] * (basis[:, np.argmin(spectrum)] @ lin)
        radius = float(10.0 ** rng.uniform(-1, 1))
        fast = ball_quadratic_min(hess, lin, radius)
        reference = numpy_ball_quadratic_min(hess, lin, radius)
        np.testing.assert_allclose(fast, reference, rtol=1e-9, atol=1e-9 * radius)


@pytest.mark.parametrize("loss", ["logistic", "squared", "huber"])
def test_compiled_newton_is_the_numpy_newton_up_to_rounding(loss: str, seed: int) -> None:
    """The hypothesis solve's compiled Newton takes the NumPy loop's steps: the same
    iteration count and outcome, the same point to 1e-9 (both stop at a certified
    gap), on spread, concentrated and one-cell weights."""
    rng = np.random.default_rng(seed)
    target = "y" if loss == "logistic" else "z"
    for features, l2, radius in ((("a", "b"), 0.0, 1.0), (("a", "c", "d"), 0.1, 3.0)):
        problem = CMQuery(
            loss=loss, target=target, features=features, l2=l2, radius=radius
        ).compile(DOMAIN)
        rows = problem.design.rows
        for weights in (
            rng.dirichlet(np.full(rows, 2.0)),
            rng.dirichlet(np.full(rows, 0.1)),
            np.eye(rows)[int(rng.integers(rows))],
        ):
            start = np.zeros(problem.dim)
            fast = _compiled_newton(problem, weights, start, 1e-8, 1000)
            slow = _newton(
                problem, evaluator(problem, weights), start, 1e-8, 1000,
                start_hessian=evaluator(problem, weights).hessian(start),
            )  # fmt: skip
            assert fast[1:] == slow[1:]
            # Both stop at a certified gap <= 1e-8; where the minimiser is not unique
            # (one cell, no ridge) rounding may move the point along the flat.
            fast_value = problem.objective(fast[0], weights)
            assert abs(fast_value - problem.objective(slow[0], weights)) <= 1e-12
            gradient = problem.gradient(fast[0], weights)
            assert frank_wolfe_gap(gradient, fast[0], problem.radius) <= 1e-8
            if weights.max() < 1.0:
                np.testing.assert_allclose(fast[0], slow[0], rtol=1e-9, atol=1e-9)
            solution = minimize(problem, weights, tol=1e-8, max_iter=1000)
            np.testing.assert_array_equal(solution.theta, fast[0])


def test_canonical_form_and_key_are_memoised_per_domain_and_follow_the_encodings() -> None:
    """The memo answers only for the same domain and the same encodings: a changed
    encodings dict or another domain gets its own canonical form and key."""
    domain = Domain.from_sizes({"a": 2, "c": 3, "y": 2})
    other = Domain.from_sizes({"a": 2, "c": 4, "y": 2})
    query = CMQuery(loss="logistic", target="y", features=("a", "c"), encodings={"c": "onehot"})
    first = query.canonical(domain)
    assert query.canonical(domain) is first
    key = query.canonical_json(domain)
    assert key == json.dumps(first.to_dict(), sort_keys=True)
    assert query.canonical(other) is not first
    assert query.canonical(other) == CMQuery.from_dict(query.to_dict()).canonical(other)
    encodings = query.encodings
    assert isinstance(encodings, dict)
    encodings["c"] = "ordinal"  # a frozen query's dict can still be changed
    assert query.canonical(domain).encodings == {"c": "ordinal"}
    assert query.canonical_json(domain) != key
    assert query == CMQuery(
        loss="logistic", target="y", features=("a", "c"), encodings={"c": "ordinal"}
    )


def test_canonical_key_is_the_canonical_spec_as_sorted_json(seed: int) -> None:
    """``canonical_json`` builds the key from the resolved fields without building the
    canonical query: it must be the canonical query's spec as sorted-key JSON, for
    every field that canonicalisation resolves (int radius, default loss parameter,
    auto and explicit encodings, interactions), asked first or after ``canonical``."""
    domain = Domain.from_sizes({"a": 2, "b": 2, "c": 3, "d": 5, "y": 2, "z": 4})
    specs: list[dict[str, Any]] = [
        {"loss": "logistic", "target": "y", "features": ["a", "c"]},
        {"loss": "huber", "target": "z", "features": ["d", "a"], "radius": 2, "l2": 1},
        {"loss": "huber", "target": "z", "features": ["c"], "loss_param": 0.5},
        {"loss": "quantile", "target": "z", "features": ["c", "d"], "encodings": {"d": "ordinal"}},
        {"loss": "squared", "target": "z", "features": ["a", "b", "c"], "intercept": False,
         "encodings": {"c": "auto", "a": "ordinal"}, "interactions": [["a", "c"]]},
    ]  # fmt: skip
    specs += [q.to_dict() for q in random_queries(domain, 40, rng=np.random.default_rng(seed))]
    for spec in specs:
        expected = json.dumps(CMQuery.from_dict(spec).canonical(domain).to_dict(), sort_keys=True)
        assert CMQuery.from_dict(spec).canonical_json(domain) == expected  # asked first
        query = CMQuery.from_dict(spec)
        query.canonical(domain)
        assert query.canonical_json(domain) == expected == query.canonical_json(domain)


def test_canonical_form_skips_the_checks_but_is_what_the_checked_constructor_builds(
    seed: int,
) -> None:
    """The canonical form is built without re-running ``__post_init__``: field for
    field it is the query the checked constructor makes from the same values, of the
    same type, with its own encodings dict; an encoding made invalid after the
    checks (the dict can be changed) is still refused, naming it."""
    rng = np.random.default_rng(seed)
    domain = Domain.from_sizes({"a": 2, "b": 3, "c": 4, "y": 2, "z": 5})
    for _ in range(40):
        features = tuple(rng.permutation(["a", "b", "c"])[: int(rng.integers(1, 4))])
        loss = str(rng.choice(["logistic", "huber", "hinge", "squared"]))
        query = CMQuery(
            loss=loss,
            target="y" if loss in ("logistic", "hinge") else "z",
            features=features,
            radius=int(rng.integers(1, 4)),
            l2=float(rng.choice([0, 0.5])),
            encodings={f: str(rng.choice(["auto", "ordinal", "onehot"])) for f in features},
            interactions=(features[:2],) if len(features) > 1 else (),
        )
        canonical = query.canonical(domain)
        checked = CMQuery(
            **{name: getattr(canonical, name) for name in CMQuery.__dataclass_fields__}
        )
        assert type(canonical) is CMQuery and canonical == checked
        assert canonical.to_dict() == checked.to_dict()
        assert canonical.encodings is not query.encodings
        by_position = domain.names.index  # the canonical order of features (issue 33)
        expected = CMQuery(
            loss=query.loss,
            target=query.target,
            features=tuple(sorted(query.features, key=by_position)),
            radius=float(query.radius),
            l2=float(query.l2),
            loss_param=resolved_loss_param(query.loss, None),
            encodings={
                f: "onehot" if e == "auto" else e
                for f, e in query.encodings.items()
                if domain.size_of(f) > 2
            },
            interactions=tuple(tuple(sorted(g, key=by_position)) for g in query.interactions),
        )
        assert canonical == expected and isinstance(canonical.radius, float)
    query = CMQuery(loss="logistic", target="y", features=("a", "c"))
    encodings = query.encodings
    assert isinstance(encodings, dict)
    encodings["c"] = "sparse"
    with pytest.raises(QueryError, match="Unknown encoding 'sparse' for 'c'"):
        query.canonical(domain)


def test_cell_budget_cache_evicts_the_oldest_and_counts_cells() -> None:
    cache = CellBudgetCache[str, int](budget=10)
    cache.put("a", 1, 4)
    cache.put("b", 2, 4)
    cache.put("a", 3, 4)  # stored again: replaced, counted once, now the newest
    assert cache.cells == 8 and cache.get("a") == 3 and len(cache) == 2
    cache.put("c", 4, 4)  # needs room: the oldest (b) goes
    assert cache.get("b") is None and (cache.get("a"), cache.get("c")) == (3, 4)
    assert cache.cells == 8
    cache.put("big", 5, 11)  # larger than the whole budget: not stored, nothing evicted
    assert cache.get("big") is None and len(cache) == 2 and cache.cells == 8
    cache.clear()
    assert cache.cells == 0 and len(cache) == 0
    with pytest.raises(ValueError, match="budget=0"):
        CellBudgetCache(0)


@pytest.mark.parametrize("shape", [(4,) * 7, (4,) * 8], ids=["one pass", "planned passes"])
def test_marginal_cache_stays_within_its_budget_and_exact(
    shape: tuple[int, ...], seed: int
) -> None:
    """Past its budget the cache drops its oldest tables; what it serves stays exact
    (each kernel's own numbers: the compiled pass below ONE_PASS_MAX_CELLS, the
    planned passes above) and fresh on every hit."""
    rng = np.random.default_rng(seed)
    values = rng.random(shape)
    cache = MarginalCache(budget=CACHED_MARGINAL_CELLS)
    for _ in range(80):
        axes = tuple(int(a) for a in rng.permutation(len(shape))[: int(rng.integers(1, 6))])
        first, again = cache.marginal(values, axes), cache.marginal(values, axes)
        np.testing.assert_array_equal(first, planned_marginal(values, axes))
        np.testing.assert_array_equal(again, first)
        assert again.flags.writeable and not np.may_share_memory(again, first)
        shared = cache.table(values, axes)  # what a round's clique table reads: no copy
        np.testing.assert_array_equal(shared, first)
        if axes == tuple(sorted(axes)) and shared.size <= CACHED_MARGINAL_CELLS:
            assert not shared.flags.writeable  # the cache's own table
            assert np.shares_memory(shared, cache.table(values, axes))
        else:
            assert shared.flags.writeable  # a fresh transposed (or uncached) table
        held = [table for table, _ in cache._tables._entries.values()]
        assert cache._tables.cells == sum(t.size for t in held) <= CACHED_MARGINAL_CELLS


@pytest.mark.parametrize(("loss", "target"), [("logistic", "y"), ("squared", "z"), ("huber", "z")])
def test_fused_objective_and_gradient_are_the_separate_kernels_bit_for_bit(
    loss: str, target: str, seed: int
) -> None:
    """The ellipsoid's one-pass value and gradient equal glm_objective and glm_gradient."""
    rng = np.random.default_rng(seed)
    problem = CMQuery(loss=loss, target=target, features=("a", "c", "d"), l2=0.1).compile(DOMAIN)
    assert isinstance(problem.design, BlockDesign | DenseDesign)
    columns, values = problem.design.row_major
    labels = np.ascontiguousarray(problem.labels, dtype=np.float64)
    kind = loss_kind(problem.loss)
    assert kind is not None
    weights = rng.dirichlet(np.full(problem.design.rows, 0.5))
    for scale in (0.1, 1.0, 300.0):  # 300: exp overflows on the far side
        theta = rng.normal(0.0, scale, problem.dim)
        fused = np.empty(problem.dim)
        value = glm_objective_and_gradient(
            columns, values, labels, weights, theta, 0.1, kind[0], kind[1], fused
        )
        assert value == glm_objective(columns, values, labels, weights, theta, 0.1, *kind)
        separate = glm_gradient(
            columns, values, labels, weights, theta, 0.1, kind[0], kind[1], np.empty(problem.dim)
        )
        np.testing.assert_array_equal(fused, separate)


def test_paired_form_only_for_a_full_dense_compile() -> None:
    """The paired FISTA is taken for a problem compiled on every cell (and remembered
    for its design), never for one on other cells, nor a squared loss."""
    query = CMQuery(loss="logistic", target="y", features=("a", "c"))
    full = query.compile(DOMAIN)
    form = _paired_form(full)
    assert form is not None and _paired_form(full) is form
    cells = np.array([[0, 0, 1], [1, 2, 0], [0, 1, 1], [0, 0, 0]])
    assert _paired_form(query.compile(DOMAIN, cells=cells)) is None
    squared = CMQuery(loss="squared", target="y", features=("a", "c")).compile(DOMAIN)
    assert _paired_form(squared) is None
