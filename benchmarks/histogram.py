"""Benchmark the dense histogram's two full passes against a plain memory copy.

The engine touches the whole universe ``X`` in only two places: the marginal of
``Dhat`` on a query's clique, and the multiplicative-weights reweight by a
clique factor (docs/design.md section 2). Both should cost about one streaming pass,
so this script times them next to ``np.copyto`` of the same array into a
preallocated buffer, measured in the same run, and prints the ratios. The
targets (issue 18): from 2^18 cells, every marginal and reweight within 1.5x
of the copy for every clique shape; below 2^18, at most 20 us per kernel.

For each universe (binary axes, ``|X| = 2^10 .. 2^24``, one mixed-size domain,
and a small one whose last attribute has 600 values, longer than a pass's row
table) and each clique shape (leading, trailing and spread axes, 3 and 5
attributes), it reports the median over ``--repeats`` timed samples after a
warm-up; each sample loops the operation enough times to last >= 20 ms.

Reweights are timed with the clique marginal passed in (the single-pass
update the engine uses: it has the marginal from the solve) and without it
(marginal + update, two passes).

The marginal reduces dropped axes with BLAS matrix-vector products, so its
speed depends on the BLAS thread pool: on a loaded machine (other processes,
``pytest -n 2``) OpenBLAS's threads contend for the cores. The kernels are
timed under :func:`pmwcm.kernels.threads.blas_threads` (one thread, as the
engine runs them) unless ``--blas-threads default``.

``--prior-log2 M`` also times the prior fit (``fit_histogram`` on all 2-way
marginals of ``M`` binary attributes, its default iteration count) in copies
of the histogram, and its peak traced memory in histograms::

    .venv/bin/python benchmarks/histogram.py [--max-log2 24] [--repeats 7] [--prior-log2 24]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import itertools
import math
import os
import platform
import statistics
import time
import timeit
import tracemalloc
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels.dense_marginal import dense_marginal
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.kernels.threads import limit_blas_threads
from pmwcm.mechanisms.priors.marginals import (
    Measurement,
    default_iterations,
    fit_histogram,
    pairwise_cliques,
)

FloatArray = NDArray[np.float64]

MIXED_SIZES = (3, 5, 2, 4, 7, 2, 3, 6, 2, 5, 4, 3)  # |X| = 3,628,800 (~2^21.8)
#: |X| = 14,400 (one compiled pass), its last attribute longer than a row's code table
#: (``dense_marginal._ROW_CELLS``): round 3 passed its marginals one cell a row (about
#: 260 us at 9,600 cells), which no binary or mixed domain here showed.
LONG_SIZES = (2, 2, 3, 2, 600)


def clique_shapes(m: int) -> dict[str, tuple[int, ...]]:
    """Leading, trailing and evenly spread axes, with 3 and 5 attributes."""
    shapes = {}
    for k in (3, 5):
        shapes[f"lead{k}"] = tuple(range(k))
        shapes[f"trail{k}"] = tuple(range(m - k, m))
        shapes[f"spread{k}"] = tuple(round(i * (m - 1) / (k - 1)) for i in range(k))
    return shapes


def _calibrated(fn: Callable[[], object], min_sample: float) -> int:
    """Warms ``fn`` up and returns how many calls make a sample of >= ``min_sample`` s."""
    fn()
    timer, number = timeit.Timer(fn), 1
    while timer.timeit(number) < min_sample:
        number *= 2
    return number


def interleaved(
    fns: dict[str, Callable[[], object]], repeats: int, min_sample: float = 0.02
) -> dict[str, list[float]]:
    """Seconds per call of each of ``fns``, ``repeats`` rounds, timed back to back per round.

    Timing every operation within each round (rather than all samples of one,
    then all of the next) keeps per-round ratios meaningful on a shared machine
    whose load drifts.
    """
    numbers = {k: _calibrated(fn, min_sample) for k, fn in fns.items()}
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            samples[k].append(timeit.Timer(fn).timeit(numbers[k]) / numbers[k])
    return samples


#: per clique: median seconds of (copy, marginal, reweight given, reweight full), and the
#: medians of the per-round ratios of the last three to the copy.
Result = tuple[tuple[float, float, float, float], tuple[float, float, float]]


def _operations(
    hist: DenseHistogram, attrs: list[str], f: FloatArray, src: FloatArray, dst: FloatArray
) -> dict[str, Callable[[], object]]:
    """The four timed operations on one clique (``copy`` first: the ratios' denominator).

    The marginal is timed as the kernel (:func:`dense_marginal` on an array equal to
    the histogram's): ``DenseHistogram.marginal`` keeps a computed clique table until
    the values change, so timing it in a loop would time a dictionary look-up.
    """
    factors = itertools.cycle([f, -f])
    marg = hist.marginal(attrs)
    axes = tuple(hist.domain.names.index(a) for a in attrs)

    def reweight_given() -> None:
        hist.reweight(attrs, next(factors), marginal=marg)

    def reweight_full() -> None:
        hist.reweight(attrs, next(factors))

    return {
        "copy": functools.partial(np.copyto, dst, src),
        "marginal": functools.partial(dense_marginal, src, axes),
        "given": reweight_given,
        "full": reweight_full,
    }


def bench_universe(
    sizes: tuple[int, ...], repeats: int, rng: np.random.Generator
) -> dict[str, Result]:
    """Times the marginal and the two reweights of each clique shape next to a copy."""
    m = len(sizes)
    domain = Domain.from_sizes({f"a{i}": s for i, s in enumerate(sizes)})
    hist = DenseHistogram(domain, rng.random(domain.shape) + 0.5)
    src = hist.to_array()
    dst = np.empty_like(src)
    out = {}
    for name, axes in clique_shapes(m).items():
        attrs = [domain.names[a] for a in axes]  # axes are increasing: no transpose needed
        expected = hist.to_array().sum(axis=tuple(a for a in range(m) if a not in axes))
        assert np.allclose(hist.marginal(attrs), expected, rtol=1e-12, atol=0)
        # Alternate a small factor and its inverse so thousands of calls leave D as it was.
        f = 1e-3 * rng.standard_normal(tuple(sizes[a] for a in axes))
        samples = interleaved(_operations(hist, attrs, f, src, dst), repeats)
        med = {k: statistics.median(v) for k, v in samples.items()}
        ratio = {
            k: statistics.median(t / c for t, c in zip(samples[k], samples["copy"], strict=True))
            for k in ("marginal", "given", "full")
        }
        out[name] = (
            (med["copy"], med["marginal"], med["given"], med["full"]),
            (ratio["marginal"], ratio["given"], ratio["full"]),
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--min-log2", type=int, default=10)
    parser.add_argument("--max-log2", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-mixed", action="store_true", help="skip the mixed-size domain")
    parser.add_argument("--no-long", action="store_true", help="skip the long-attribute domain")
    parser.add_argument("--blas-threads", choices=("one", "default"), default="one")
    parser.add_argument("--prior-log2", type=int, default=0, help="time the prior fit at 2^M")
    args = parser.parse_args()
    if args.blas_threads == "one":
        limit_blas_threads(1)
    rng = np.random.default_rng(0)

    universes: list[tuple[str, tuple[int, ...]]] = [
        (f"2^{m}", (2,) * m) for m in range(args.min_log2, args.max_log2 + 1, 2)
    ]
    if not args.no_mixed:
        universes.append((f"mixed {math.prod(MIXED_SIZES):,}", MIXED_SIZES))
    if not args.no_long:
        universes.append((f"long {math.prod(LONG_SIZES):,}", LONG_SIZES))

    print(
        f"pmwcm histogram benchmark, {datetime.date.today()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, NumPy {np.__version__}, "
        f"median of {args.repeats} interleaved rounds, BLAS threads {args.blas_threads}, "
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, "
        f"load average at start {os.getloadavg()[0]:.1f}"
    )
    cliques = list(clique_shapes(len(MIXED_SIZES)))
    rows_m, rows_r, rows_us = [], [], []
    worst: dict[str, float] = {}
    slowest: dict[str, float] = {}
    for label, sizes in universes:
        res = bench_universe(sizes, args.repeats, rng)
        copy_ms = statistics.median(r[0][0] for r in res.values()) * 1e3
        rows_m.append(
            [label, f"{copy_ms:.3f}"]
            + [f"{res[c][0][1] * 1e3:.3f} ({res[c][1][0]:.2f}x)" for c in cliques]
        )
        rows_r.append(
            [label, f"{copy_ms:.3f}"]
            + [f"{res[c][1][1]:.2f}x / {res[c][1][2]:.2f}x" for c in cliques]
        )
        rows_us.append(
            [label] + [f"{res[c][0][1] * 1e6:.1f} / {res[c][0][2] * 1e6:.1f}" for c in cliques]
        )
        if math.prod(sizes) >= 2**18:
            for c in cliques:
                worst[c] = max(worst.get(c, 0.0), res[c][1][0], res[c][1][1])
        else:
            for c in cliques:
                slowest[c] = max(slowest.get(c, 0.0), res[c][0][1] * 1e6, res[c][0][2] * 1e6)
        print(f"  done {label} (load average {os.getloadavg()[0]:.1f})", flush=True)

    header = ["\\|X\\|", "copy ms", *cliques]
    print("\nMarginal: ms (median per-round ratio to the copy)\n")
    print(_markdown(header, rows_m))
    print("\nReweight, ratio to copy: marginal given / marginal computed\n")
    print(_markdown(header, rows_r))
    print("\nMicroseconds per call: marginal / reweight with the marginal given\n")
    print(_markdown(["\\|X\\|", *cliques], rows_us))
    missed = [c for c, r in worst.items() if r > 1.5]
    print(
        "\nTarget marginal and reweight (given) <= 1.5x copy for |X| >= 2^18: "
        + ("met by every clique." if not missed else f"MISSED by {missed}.")
        + " Worst ratio per clique: "
        + ", ".join(f"{c} {r:.2f}x" for c, r in worst.items())
    )
    if slowest:
        over = [c for c, us in slowest.items() if us > 20.0]
        print(
            "Target <= 20 us per kernel below 2^18: "
            + ("met by every clique." if not over else f"MISSED by {over}.")
            + " Slowest per clique: "
            + ", ".join(f"{c} {us:.1f} us" for c, us in slowest.items())
        )
    if args.prior_log2:
        prior_fit(args.prior_log2)
    print(f"load average at end {os.getloadavg()[0]:.1f}")


def prior_fit(log2: int) -> None:
    """Times the 2-way marginal prior fit on ``2^log2`` binary cells, in copies and memory."""
    domain = Domain.from_sizes({f"a{i}": 2 for i in range(log2)})
    rng = np.random.default_rng(1)
    cliques = pairwise_cliques(domain)
    measured = [
        Measurement(clique=c, values=np.abs(rng.normal(0.25, 0.02, (2, 2))), sigma=0.02)
        for c in cliques
    ]
    iterations = default_iterations(domain, len(cliques))
    copy = _copy_seconds(domain.size)
    tracemalloc.start()
    start = time.perf_counter()
    fit_histogram(domain, measured, iterations=iterations)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(
        f"\nPrior fit, 2^{log2} cells, {len(cliques)} 2-way cliques, {iterations} iterations: "
        f"{seconds:.1f} s = {seconds / copy:,.0f} copies (copy {copy * 1e3:.1f} ms); "
        f"peak traced memory {peak / 2**20:,.0f} MiB = {peak / (8 * domain.size):.2f} histograms "
        "(targets: <= 30 s at 2^24, <= 2 histograms)"
    )


def _copy_seconds(cells: int) -> float:
    """Median seconds of ``np.copyto`` of ``cells`` float64 values (5 runs)."""
    src = np.random.default_rng(2).random(cells)
    dst = np.empty_like(src)
    return statistics.median(timeit.repeat(lambda: np.copyto(dst, src), number=1, repeat=5))


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"]
    lines.append("| " + " | ".join("-" * w for w in widths) + " |")
    lines += [
        "| " + " | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) + " |" for r in rows
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
