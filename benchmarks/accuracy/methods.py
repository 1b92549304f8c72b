"""The methods compared by the accuracy benchmark, behind one small interface.

Every method is built for one ``(data, epsilon, delta, k, seed)`` and then
answers a stream of CM queries one at a time (so adaptive analysts can use it):

* ``pmw``        -- pmwcm's practical mode with its defaults (marginal prior,
                    backend chosen automatically);
* ``pmw-dense`` / ``pmw-support`` -- the same on the dense / weighted-support backend;
* ``pmw-paper``  -- practical mode from the uniform start (the paper's algorithm,
                    tight accounting, defaults for ``prior="uniform"``);
* ``pmw-mst`` / ``pmw-aim`` -- practical mode with OpenDP's MST / AIM as the paid
                    prior (``prior="mst"`` / ``"aim"``, :mod:`pmwcm.mechanisms.priors.synthetic`;
                    on a support, records sampled from the model);
* ``composition``-- every query through noisy gradient descent, budget split k ways;
* ``mst`` / ``aim`` -- OpenDP's ``extras.mbi`` synthetic data, each query then
                    fitted non-privately on the synthetic records (AIM for 16
                    rounds; ``aim-default`` / ``aim-ar-default`` for OpenDP's
                    own default of 16 per attribute);
* ``nonprivate`` -- the exact optimum (the reference).

Privacy units: pmwcm is replace-one (eps, delta)-DP. OpenDP's mbi
synthesizers are rho-zCDP for add/remove-one. By group privacy (Bun, Steinke
2016, Prop. 1.9) an add/remove rho-zCDP mechanism is 4 rho-zCDP for
replace-one, so we run them at ``rho = rho*(eps, delta) / 4``, where
``rho*`` is the largest zCDP that converts to ``(eps, delta)`` (Canonne,
Kamath, Steinke 2020): the synthetic data then carries the same replace-one
``(eps, delta)`` guarantee as pmwcm. The methods ``mst-ar`` / ``aim-ar`` instead give them
``rho*`` under their own add/remove unit (a weaker guarantee for replace-one,
by up to 4x in rho), for readers who want the comparison most favourable to them.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from pmwcm.engine.baselines import CompositionBaseline, NonPrivateBaseline
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.clique_table import CliqueTable, is_dense
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.kernels.queries import CMQuery, GLMProblem
from pmwcm.kernels.solvers import EXACT_BASELINE_SOLVE, minimize
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.oracles import OracleInput
from pmwcm.mechanisms.priors.synthetic import (
    records_of,  # a histogram-backed population, as records
)
from pmwcm.mechanisms.private_data import PrivateData

SYNTHETIC_CACHE = Path(__file__).parent / "results" / "synthetic"
METHODS = (
    "pmw",
    "pmw-dense",
    "pmw-support",
    "pmw-paper",
    "pmw-mst",
    "pmw-aim",
    "composition",
    "mst",
    "aim",
    "mst-ar",
    "aim-ar",
    "aim-model-ar",
    "aim-default",
    "aim-ar-default",
    "nonprivate",
)
#: Methods that answer on records synthesized by OpenDP's MST or AIM.
SYNTHESIZERS = ("mst", "aim", "mst-ar", "aim-ar", "aim-default", "aim-ar-default")


class Answerer(Protocol):
    """One method, built for one budget, answering queries online."""

    oracle_calls: int

    def answer(self, query: CMQuery) -> np.ndarray: ...


@dataclass
class PMWAnswerer:
    """pmwcm's engine; answers after the halt come from the final hypothesis."""

    data: PrivateData
    config: PMWConfig
    seed: int
    oracle_calls: int = 0
    engine: object = field(init=False)

    def __post_init__(self) -> None:
        self.engine = build_engine(self.data, self.config, noise=NumpyNoise(seed=self.seed))

    def answer(self, query: CMQuery) -> np.ndarray:
        out = self.engine.answer(query)  # type: ignore[attr-defined]
        self.oracle_calls = len(self.engine.updates)  # type: ignore[attr-defined]
        return np.asarray(out.value)


@dataclass
class CompositionAnswerer:
    """Noisy gradient descent per query at (eps, delta) / k under PLD."""

    data: PrivateData
    epsilon: float
    delta: float
    k: int
    seed: int
    oracle_calls: int = 0
    baseline: CompositionBaseline = field(init=False)

    def __post_init__(self) -> None:
        self.baseline = CompositionBaseline(
            self.data,
            epsilon=self.epsilon,
            delta=self.delta,
            queries=self.k,
            noise=NumpyNoise(seed=self.seed),
        )

    def answer(self, query: CMQuery) -> np.ndarray:
        self.oracle_calls += 1
        if not is_large(self.data):
            return self.baseline.answer(query)
        # CompositionBaseline.answer on the occupied clique cells (same checks, same
        # charge before any noise): a full-resolution clique has no dense marginal.
        base = self.baseline
        problem, weights = sparse_problem(self.data, query)
        base.oracle.check(problem)
        base.ledger.spend(base.oracle.privacy_event(base.noise_level), label="composition call")
        data = OracleInput(problem=problem, weights=weights, n=self.data.n)
        return base.oracle.answer(data, noise_level=base.noise_level, noise=base.noise)


def sparse_problem(data: PrivateData, query: CMQuery) -> tuple[GLMProblem, np.ndarray]:
    """The query compiled on ``data``'s occupied clique cells, and their masses.

    The same problem as ``query.compile(domain)`` restricted to cells carrying
    mass (the omitted cells weigh zero), so a full-resolution clique with
    ``10^10`` cells is never enumerated (:mod:`pmwcm.kernels.clique_table`).
    """
    records = data.held_records()
    if is_large(data) and records is not None:
        # Built afresh, not through PrivateData's per-clique cache: a stream of
        # 10^4 distinct cliques would keep ~10^4 tables of up to n cells alive.
        axes = data.domain.axes(query.clique)
        shape = tuple(data.domain.sizes[a] for a in axes)
        if is_dense(shape):
            table = CliqueTable.dense(data.marginal(query.clique))
        else:
            codes = np.zeros(data.n, dtype=np.int64)
            for axis, size in zip(axes, shape, strict=True):
                codes *= size
                codes += records[:, axis]
            table = CliqueTable.from_codes(shape, codes)
    else:
        table = data.clique_table(query.clique)
    cells = None if table.is_dense else table.cells()
    return query.compile(data.domain, cells=cells), np.asarray(table.mass)


@dataclass
class SyntheticAnswerer:
    """Fits every query non-privately on a synthetic dataset (post-processing)."""

    synthetic: PrivateData
    oracle_calls: int = 0

    def answer(self, query: CMQuery) -> np.ndarray:
        if not is_large(self.synthetic):
            return NonPrivateBaseline(self.synthetic).answer(query)
        problem, weights = sparse_problem(self.synthetic, query)
        budget = EXACT_BASELINE_SOLVE
        return minimize(problem, weights, tol=budget.tol, max_iter=budget.max_iter).theta


def zcdp_for(epsilon: float, delta: float) -> float:
    """The largest rho with rho + 2 sqrt(rho log(1/delta)) <= epsilon (Bun-Steinke Prop. 1.3)."""
    log_inv = math.log(1.0 / delta)
    return (math.sqrt(log_inv + epsilon) - math.sqrt(log_inv)) ** 2


#: Above this many cells a domain is never densified here (full-resolution tables):
#: datasets are then named, fitted and synthesised from their records.
LARGE_DOMAIN = 2**24


def is_large(data: PrivateData) -> bool:
    """Whether ``data``'s domain is too large for a dense histogram (a public rule)."""
    return data.domain.log_size > math.log(LARGE_DOMAIN)


def records_or_rebuilt(data: PrivateData) -> np.ndarray:
    """The data's records: as given on a large domain, else rebuilt from its histogram."""
    records = data.held_records()
    if is_large(data):
        if records is None:
            raise ValueError("a full-resolution PrivateData must be built from records.")
        return np.asarray(records, dtype=np.int64)
    return records_of(data)


def data_digest(data: PrivateData) -> str:
    """A name for a dataset as a multiset of records: its cell counts (row order is ignored)."""
    if is_large(data):  # the sorted records: the same multiset, without a dense table
        records = records_or_rebuilt(data)
        ordered = records[np.lexsort(records.T[::-1])]
        return hashlib.sha1(np.ascontiguousarray(ordered).tobytes()).hexdigest()[:12]
    counts = np.rint(data.histogram().to_array().ravel() * data.n).astype(np.int64)
    return hashlib.sha1(counts.tobytes()).hexdigest()[:12]


def cached_synthesis(
    method: str, data: PrivateData, *, rho: float, seed: int, rounds: int | None = 16
) -> tuple[np.ndarray, float]:
    """One synthetic release per (method, data, rho, seed) and the seconds it took.

    A release is post-processed by every query fitted on it, so the random,
    interaction and adaptive workloads may share it (as a user of synthetic data
    would); caching it saves an AIM run (~10 minutes) per workload. The time
    reported is the original synthesis time, also when the release is reused.
    The records are only materialised (10^7 rows for the largest populations)
    when the release must be made.
    """
    from synthetic import synthesize  # heavy optional dependency (opendp[mbi])

    name = method if rounds == 16 else f"{method}-rounds{rounds or 'default'}"
    path = SYNTHETIC_CACHE / f"{name}-{data_digest(data)}-rho{rho:.6g}-seed{seed}.npz"
    if path.exists():
        with np.load(path) as saved:
            return saved["records"], float(saved["seconds"])
    start = time.perf_counter()
    fake = synthesize(method, data.domain, records_or_rebuilt(data), rho=rho, rounds=rounds)
    seconds = time.perf_counter() - start
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.stem + ".partial.npz")
    np.savez(partial, records=fake, seconds=seconds)
    partial.replace(path)
    return fake, seconds


def model_population(
    data: PrivateData,
    *,
    rho: float,
    seed: int,
    method: str = "aim",
    unit: str = "addremove",
    rounds: int | None = 16,
) -> tuple[PrivateData, float]:
    """``method``'s (OpenDP's AIM or MST) fitted model table as a population, and its fit's
    seconds: every query is then answered on the model's own marginals (no sampling).

    At ``rho`` under ``unit`` (``"addremove"``, OpenDP's own; ``"replace"``, its
    ``unit_of(changes=1)``) for ``rounds`` (``None``: OpenDP's default). Cached per
    data (as a multiset), mechanism, unit, rounds, rho and run ``seed``; the seconds
    are the original fit's, also when the table comes from the cache (``nan`` for a
    table cached before the seconds were kept).
    """
    tag = "" if unit == "addremove" else "-changes1"
    name = "" if rounds == 16 else f"-rounds{rounds or 'default'}"
    path = SYNTHETIC_CACHE / (
        f"{method}-model{tag}-{data_digest(data)}-rho{rho:.6g}{name}-seed{seed}.npz"
    )
    if path.exists():
        with np.load(path) as saved:
            table = saved["table"]
            seconds = float(saved["seconds"]) if "seconds" in saved else math.nan
    else:
        from synthetic import model_table  # heavy optional dependency (opendp[mbi])

        records = records_or_rebuilt(data)
        start = time.perf_counter()
        table = model_table(method, data.domain, records, rho=rho, rounds=rounds, unit=unit)
        seconds = time.perf_counter() - start
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.stem + ".partial.npz")
        np.savez(partial, table=table, seconds=seconds)
        partial.replace(path)  # a fit stopped half-way leaves no cached table
    histogram = DenseHistogram(data.domain, table)
    return PrivateData(domain=data.domain, n=data.n, histogram=histogram), seconds


def build(
    method: str,
    data: PrivateData,
    *,
    epsilon: float,
    delta: float,
    k: int,
    seed: int,
    units: str = "replace",
    options: dict[str, object] | None = None,
) -> tuple[Answerer, float]:
    """The method, ready to answer, and its set-up time in seconds.

    ``options`` are extra :class:`PMWConfig` fields for ``pmw`` (e.g. ``backend``,
    ``support_size``); ``pmw-dense`` / ``pmw-support`` are ``pmw`` on that backend.
    """
    start = time.perf_counter()
    domain = data.domain
    answerer: Answerer
    if method in ("pmw", "pmw-dense", "pmw-support"):
        extra = dict(options or {})
        if method != "pmw":
            extra["backend"] = method.removeprefix("pmw-")
        config = PMWConfig(epsilon=epsilon, delta=delta, after_halt="synthetic", **extra)  # type: ignore[arg-type]
        answerer = PMWAnswerer(data, config, seed)
    elif method == "pmw-paper":
        config = PMWConfig(epsilon=epsilon, delta=delta, after_halt="synthetic", prior="uniform")
        answerer = PMWAnswerer(data, config, seed)
    elif method in ("pmw-mst", "pmw-aim"):
        prior = "mst" if method == "pmw-mst" else "aim"
        config = PMWConfig(epsilon=epsilon, delta=delta, after_halt="synthetic", prior=prior)
        answerer = PMWAnswerer(data, config, seed)
    elif method == "composition":
        answerer = CompositionAnswerer(data, epsilon, delta, k, seed)
    elif method in SYNTHESIZERS:
        # "-ar": rho* under OpenDP's own add/remove unit (up to 4x more rho than matched).
        # "-default": AIM with OpenDP's own number of rounds (16 per attribute), not 16.
        addremove = "-ar" in method or units == "addremove"
        rho = zcdp_for(epsilon, delta) / (1.0 if addremove else 4.0)
        fetch = time.perf_counter()
        fake, synthesis_seconds = cached_synthesis(
            method.split("-")[0],
            data,
            rho=rho,
            seed=seed,
            rounds=None if method.endswith("-default") else 16,
        )
        # Count the release's own synthesis time, also when it came from the cache.
        start += (time.perf_counter() - fetch) - synthesis_seconds
        answerer = SyntheticAnswerer(PrivateData.from_records(domain, fake))
    elif method == "aim-model-ar":
        # AIM at its own add/remove unit (rho*), every query answered on the fitted
        # model's marginals (no sampling): the comparison issue 15 asks for.
        model, _ = model_population(data, rho=zcdp_for(epsilon, delta), seed=seed)
        answerer = SyntheticAnswerer(model)
    elif method == "nonprivate":
        answerer = SyntheticAnswerer(data)
    else:
        raise ValueError(f"Unknown method {method!r}; choose from {METHODS}.")
    return answerer, time.perf_counter() - start
