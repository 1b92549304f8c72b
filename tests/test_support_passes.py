"""The streaming support passes against NumPy's bincount and gather, and a build's declared
cost (what the service checks before a build starts)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pmwcm.engine.build_cost import BuildRefused, build_cost, check_build_cost
from pmwcm.engine.practical import PMWConfig
from pmwcm.kernels.backend import support_bytes
from pmwcm.kernels.clique_table import cell_codes
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.support_passes import (
    CHUNK_MIN_RECORDS,
    ChildDraws,
    CliqueLayout,
    clique_marginals,
    columns_of,
    descent_step,
)
from pmwcm.mechanisms.priors.support import (
    FIT_WORK,
    FIT_WORK_CAP,
    PRECISE_FIT_SIGMA,
    support_fit_budget,
    support_iterations,
)

DOMAIN = Domain.from_sizes({"a": 3, "b": 7, "c": 2, "d": 11})
CLIQUES = [("a",), *itertools.combinations(DOMAIN.names, 2)]
#: A measured update's or an announced clique's: any length (the Horner kernels).
WIDE_CLIQUES = [*CLIQUES, ("a", "b", "c"), ("a", "b", "c", "d"), ("b", "d", "c")]


@pytest.mark.parametrize("cliques", [CLIQUES, WIDE_CLIQUES], ids=["pairs", "wide"])
@pytest.mark.parametrize("size", [1000, CHUNK_MIN_RECORDS + 17])  # one chunk, and several
def test_the_passes_equal_bincount_and_gather(size: int, cliques: list[tuple[str, ...]]) -> None:
    rng = np.random.default_rng(size)
    records = np.stack([rng.integers(0, s, size) for s in DOMAIN.sizes], axis=1)
    log_w = rng.normal(size=size)
    layout = CliqueLayout(DOMAIN, cliques)
    columns = columns_of(records.astype(np.uint8))
    shift = float(log_w.max())
    flat, total = clique_marginals(columns, log_w, layout, shift=shift)
    p = np.exp(log_w - shift)
    codes = [
        cell_codes(records, DOMAIN.axes(c), shape)
        for c, shape in zip(cliques, layout.shapes, strict=True)
    ]
    for table, code, shape in zip(layout.split(flat), codes, layout.shapes, strict=True):
        expected = np.bincount(code, weights=p, minlength=int(np.prod(shape))).reshape(shape)
        np.testing.assert_allclose(table, expected, rtol=1e-12)
    assert total == pytest.approx(float(p.sum()), rel=1e-12)
    residuals = [rng.normal(size=shape) for shape in layout.shapes]
    step = 0.7
    upper = shift - step * sum(float(r.min()) for r in residuals)
    moved, top, tables, moved_total = descent_step(
        columns, log_w, layout.join(residuals), layout, step, shift=upper
    )
    gradient = sum(r.reshape(-1)[code] for r, code in zip(residuals, codes, strict=True))
    np.testing.assert_allclose(moved, log_w - step * gradient, rtol=1e-12, atol=1e-12)
    assert top == float(moved.max()) and top <= upper
    again, again_total = clique_marginals(columns, moved, layout, shift=upper)
    np.testing.assert_allclose(tables, again, rtol=1e-12)
    assert moved_total == pytest.approx(again_total, rel=1e-12)


def test_a_clique_of_three_takes_the_horner_rows_not_the_pair_ones() -> None:
    layout = CliqueLayout(DOMAIN, [("b",), ("a", "c", "d")])
    with pytest.raises(ValueError, match="one or two attributes"):
        layout.pairs()
    axes, sizes = layout.horner()
    assert axes.tolist() == [[4, 4, 1], [0, 2, 3]]  # "b" padded with the zero slot m = 4
    assert sizes.tolist() == [[1, 1, 7], [3, 2, 11]]


@pytest.mark.parametrize("sigma", [None, 1e-2, PRECISE_FIT_SIGMA, 4e-4, 1e-6, 0.0])
def test_the_fit_budget_caps_the_whole_fit(sigma: float | None) -> None:
    for size, cliques in [(2**14, 91), (2**16, 136), (2**18, 91), (2**23, 91), (10**6, 1431)]:
        iterations, continuation = support_fit_budget(size, cliques, sigma=sigma)
        base = support_iterations(size, cliques)
        assert 30 <= base <= 300 and continuation >= 1
        assert base <= iterations <= max(base, FIT_WORK // (cliques * size))
        assert iterations * continuation * cliques * size <= max(
            FIT_WORK_CAP, iterations * cliques * size
        )


def test_a_more_precise_prior_earns_a_longer_fit_as_one_over_sigma_squared() -> None:
    size, cliques = 2**16, 136  # TV16's support and pairs: room for 2,243 iterations
    base = support_iterations(size, cliques)
    assert base == 300
    # at or above the cut, the base budget, whatever the noise
    for sigma in (PRECISE_FIT_SIGMA, 2 * PRECISE_FIT_SIGMA, 1.0):
        assert support_iterations(size, cliques, sigma=sigma) == base
    assert support_iterations(size, cliques, sigma=PRECISE_FIT_SIGMA / 2) == 4 * base
    lengths = [support_iterations(size, cliques, sigma=s) for s in np.geomspace(2e-3, 1e-5, 30)]
    assert lengths == sorted(lengths)  # never shorter for a more precise prior
    assert lengths[-1] == FIT_WORK // (cliques * size)  # and never past the work budget
    # a support already at the work budget's floor gains nothing
    assert support_iterations(10**6, 1431, sigma=1e-6) == support_iterations(10**6, 1431)


WIDE = Domain.from_sizes({f"x{i}": 100 for i in range(14)})


def test_the_declared_cost_reads_the_configuration_and_grows_with_the_support() -> None:
    small = build_cost(WIDE, PMWConfig(epsilon=1.0, delta=1e-6, support_size=2**16), n=10**5)
    large = build_cost(WIDE, PMWConfig(epsilon=1.0, delta=1e-6, support_size=2**22), n=10**5)
    tables = 24 * 100 * 100 * 91  # the released pair tables, three floats per cell
    assert small.memory_bytes == support_bytes(WIDE, 2**16) + tables
    assert large.memory_bytes == support_bytes(WIDE, 2**22) + tables
    assert small.seconds > 0 and large.field == "support_size"
    uniform = build_cost(WIDE, PMWConfig(epsilon=1.0, delta=1e-6, prior="uniform"), n=10**5)
    assert uniform.seconds < small.seconds and uniform.memory_bytes < small.memory_bytes


def test_a_cost_over_a_limit_is_refused_naming_the_field_and_the_limit() -> None:
    cost = build_cost(WIDE, PMWConfig(epsilon=1.0, delta=1e-6, support_size=2**22))
    check_build_cost(cost, max_memory=cost.memory_bytes, max_seconds=cost.seconds)
    with pytest.raises(BuildRefused, match=r"^support_size: .*memory limit of 1 MiB"):
        check_build_cost(cost, max_memory=2**20, max_seconds=cost.seconds)
    with pytest.raises(BuildRefused, match=r"^support_size: .*time limit of 10 s"):
        check_build_cost(cost, max_memory=cost.memory_bytes, max_seconds=10.0)


@pytest.mark.parametrize("values", [1, 2, 3, 7, 64, 257])
def test_the_guided_draw_is_the_first_value_whose_cdf_reaches_u(values: int) -> None:
    """``ChildDraws`` against ``searchsorted(side="left")`` on each row, capped at the last
    value: rows with empty values, uniforms equal to a CDF value, and uniforms past the
    row's total (rounding) included."""
    rng = np.random.default_rng(values)
    weights = rng.dirichlet(np.ones(values), size=5)
    weights[:, rng.random(values) < 0.3] = 0.0
    cdf = np.cumsum(weights, axis=1)
    parents = rng.integers(0, 5, 5000).astype(np.uint8)
    uniforms = rng.random(5000)
    uniforms[:500] = cdf[parents[:500], rng.integers(0, values, 500)]  # exact ties
    uniforms[500:510], uniforms[510:520] = 1.0 + 1e-12, 0.0
    expected = np.array([
        min(int(np.searchsorted(cdf[r, :-1], u, side="left")), values - 1)
        for r, u in zip(parents, uniforms, strict=True)
    ])  # fmt: skip
    out = np.empty(5000, dtype=np.uint16)
    ChildDraws(cdf).draw(parents, uniforms, out)
    np.testing.assert_array_equal(out, expected)


def test_the_proposal_does_not_depend_on_the_threads_drawing_it(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Chunks drawn on the pool give the records a single thread would: the uniforms are
    made in order whatever finishes first."""
    from pmwcm.mechanisms.priors import support_proposal
    from pmwcm.mechanisms.priors.marginals import Measurement

    domain = Domain.from_sizes({"a": 3, "b": 5, "c": 4})
    rng = np.random.default_rng(0)
    measured = [
        Measurement(clique=c, values=rng.dirichlet(np.ones(math.prod(domain.sizes_of(c))))
                    .reshape(domain.sizes_of(c)), sigma=1e-3)
        for c in (("a", "b"), ("b", "c"), ("a", "c"))
    ]  # fmt: skip
    monkeypatch.setattr(support_proposal, "DRAW_CHUNK", 1000)
    pooled = support_proposal.tree_proposal(
        domain, measured, size=10_500, rng=np.random.default_rng(1)
    )
    monkeypatch.setattr(support_proposal, "DRAW_AHEAD", 0)  # each chunk waited for in turn
    monkeypatch.setattr(support_proposal, "pass_pool", lambda: _InPlace())
    alone = support_proposal.tree_proposal(
        domain, measured, size=10_500, rng=np.random.default_rng(1)
    )
    np.testing.assert_array_equal(pooled, alone)


class _InPlace:
    """A pool that runs each task at once, on the calling thread."""

    def submit(self, fn, *args):  # type: ignore[no-untyped-def]
        from concurrent.futures import Future

        future: Future[None] = Future()
        future.set_result(fn(*args))
        return future
