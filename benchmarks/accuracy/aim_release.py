"""AIM's and MST's models at full resolution: made once, kept on disk, projected per clique.

OpenDP 0.16's AIM and MST (``opendp.extras.mbi``) release a contingency table whose
model is a Markov random field ``p(x) ~ exp(sum_C psi_C(x_C))`` over the
release's keys. A query's clique marginal is the model projected onto the
clique (``release.project``, variable elimination in NumPy under
:func:`pmwcm.mechanisms.priors.mbi_projection.numpy_projection`), read at the
codes ``0 .. s_a - 1`` of each attribute (each key list also holds a null slot,
to which mbi attributes unknown values: dropped), clipped at 0 and normalised,
exactly as :func:`synthetic.model_table` reads the whole table on a small
universe. That clique table then plays the population's clique table: the
query is fitted on it non-privately (post-processing of the release).

Eliminating onto a query clique multiplies every factor that holds the attribute
summed out: on a model whose cliques share hub attributes (AIM's at eps = 4 on
full Adult: relationship, sex, income in most of its 28 cliques) one such product
can span the query clique and more, 6.3e9 cells for some 6-attribute cliques,
and answering that release was killed by the kernel at 23 GB. Where a product
would exceed :data:`UNION_CELLS` cells, attributes of the query clique are held
at each of their codes in turn (:func:`conditioning_set`, conditioning: every
product then lacks them) and the marginal is assembled from the slices; on that
release and the 2,000-query stream of seed 0 (1,711 distinct cliques), 157 cliques
hold one or more attributes at 2^26 cells, at most 3,570 code combinations on one
clique (43,282 eliminations over the stream).

A release takes minutes to an hour, so it is made in its own process (its
peak RSS is its own) and saved as an ``.npz`` of the model itself: the
potentials and marginals of every model clique, the total, and each
attribute's code positions among the keys. :func:`load_model` rebuilds mbi's
``MarkovRandomField`` from it, so any later clique (the stepwise analyst's too)
is projected without running AIM again. MST's release (``--method mst``: OpenDP's
``dp.mbi.MST()`` at its defaults, a tree of pairs and every one-way marginal) is the
same kind of model and goes through the same code; it has no rounds.

A clique of six native attributes can have 10^9 cells, too many to hold or
fit on. Above :data:`TOP_CELLS` cells the clique marginal is the exact
model marginal restricted to its :data:`TOP_CELLS` heaviest cells,
renormalised; :meth:`SavedModel.clique_table` returns the mass dropped, and
the benchmark's rows record its mean and max over the stream. The heaviest
cells are found by eliminating every attribute outside the clique (the
factors that are left live on subsets of the clique) and enumerating the
clique's cells in slices along its leading attributes, never the universe.
The cut is not free: on full Adult at eps = 1 (release seed 0, stream seed 0)
the excess risk of AIM's answer on the stream's largest cliques, kept at 2^16,
2^18, 2^20 and 2^21 cells, was 9.0e-5, 5.5e-5, 4.2e-5, 4.0e-5 (1.25e9 cells,
1.2% of the mass left out at 2^20), 2.39e-4, 2.49e-4, 2.53e-4, 2.54e-4 (2.3e8
cells) and 7.4e-5, 5.7e-5, 5.1e-5, 5.0e-5 (2.6e7 cells): within a few percent
at 2^20, in either direction; fitting 2^21 cells took 3x longer.

    python benchmarks/accuracy/aim_release.py --table adult-full --epsilon 1 --unit addremove
    python benchmarks/accuracy/aim_release.py --table loans --epsilon 1 --method mst
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import resource
import subprocess
import sys
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from pmwcm.kernels.clique_table import CliqueTable  # noqa: E402
from pmwcm.kernels.domain import Domain  # noqa: E402
from pmwcm.kernels.queries import CMQuery  # noqa: E402
from pmwcm.kernels.solvers import EXACT_BASELINE_SOLVE, minimize  # noqa: E402
from pmwcm.mechanisms.private_data import PrivateData  # noqa: E402

#: Above this many cells a clique marginal keeps only its heaviest cells.
TOP_CELLS = 2**20
#: Cells enumerated at once while looking for the heaviest ones.
SLICE_CELLS = 2**22
#: The most cells of a factor product one elimination step may build (float64: 512 MiB;
#: the log-space fallback of a step holds about three such arrays).
UNION_CELLS = 2**26
#: :class:`HeaviestCells` cuts its candidates back to ``top`` once it holds this many
#: times as many.
BUFFER_FACTOR = 4
RELEASES = HERE / "results" / "aim_releases"
#: The mechanisms whose releases this module makes and reads (OpenDP's ``dp.mbi``).
Method = Literal["aim", "mst"]


def code_picks(keys: dict[str, Sequence[Any]], domain: Domain) -> list[list[int]]:
    """For each attribute, the model-axis position of each code ``0 .. s_a - 1``.

    The release's keys list every code plus a null slot (``None``); the slot's
    position and the keys' order are the release's, so they are looked up.
    """
    picks = []
    for name, size in zip(domain.names, domain.sizes, strict=True):
        listed = list(keys[name])
        picks.append([listed.index(code) for code in range(size)])
    return picks


def read_at_codes(model_marginal: np.ndarray, picks: Sequence[Sequence[int]]) -> np.ndarray:
    """A model marginal (axes in the release's key order) read at the codes, clipped at
    0 and normalised: the population's clique table (same axis order)."""
    table = np.clip(np.asarray(model_marginal, dtype=np.float64)[np.ix_(*picks)], 0.0, None)
    return table / table.sum()


def release_path(
    table: str, digest: str, *, rho: float, unit: str, seed: int, method: Method = "aim"
) -> Path:
    tag = "" if unit == "addremove" else "-changes1"
    return RELEASES / f"{method}{tag}-{table}-{digest}-rho{rho:.6g}-roundsdefault-seed{seed}.npz"


def save_release(
    release: Any, domain: Domain, path: Path, *, seconds: float, peak_rss_mb: float
) -> None:
    """The model of an OpenDP release, its code positions and the release's cost."""
    model = release.model
    keys = {name: release.keys[name].to_list() for name in domain.names}
    arrays: dict[str, np.ndarray] = {}
    cliques = {}
    for kind, vector in (("potential", model.potentials), ("marginal", model.marginals)):
        cliques[kind] = [list(c) for c in vector.cliques]
        for i, clique in enumerate(vector.cliques):
            arrays[f"{kind}{i}"] = np.asarray(vector.arrays[clique].values, dtype=np.float64)
    meta = {
        "attributes": list(model.domain.attributes),
        "shape": [int(s) for s in model.domain.shape],
        "cliques": cliques,
        "total": float(model.total),
        "picks": code_picks(keys, domain),
        "seconds": seconds,
        "peak_rss_mb": peak_rss_mb,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.stem + ".partial.npz")
    arrays["meta"] = np.asarray(json.dumps(meta))
    np.savez(partial, **arrays)  # type: ignore[arg-type]
    partial.replace(path)


@dataclass
class SavedModel:
    """A saved AIM or MST model: mbi's ``MarkovRandomField`` and each attribute's code
    positions."""

    model: Any
    picks: dict[str, list[int]]
    seconds: float
    peak_rss_mb: float
    digest: str

    def clique_table(self, clique: Sequence[str]) -> tuple[CliqueTable, float]:
        """The model's marginal on ``clique`` (axes in the order given) as a clique table,
        and the mass left out (0 unless the clique has more than :data:`TOP_CELLS` cells)."""
        from pmwcm.mechanisms.priors.mbi_projection import numpy_projection

        picks = [self.picks[a] for a in clique]
        cells = math.prod(len(p) for p in picks)
        potentials = self.model.potentials
        held: tuple[str, ...] | None = None
        if cells <= TOP_CELLS:
            supported = self.model.marginals.supports(tuple(clique))
            held = () if supported else conditioning_set(potentials, clique, UNION_CELLS)
            if not held:  # no product over budget: mbi's projection, in NumPy
                with numpy_projection():
                    projected = np.asarray(self.model.project(list(clique)).values)
                return CliqueTable.of_marginal(read_at_codes(projected, picks)), 0.0
        table, dropped = heaviest_cells(potentials, clique, picks, TOP_CELLS, held)
        if cells <= TOP_CELLS:  # every cell kept: the dense table, as above
            return CliqueTable.of_marginal(table.table()), 0.0
        return table, dropped


@dataclass
class ModelAnswerer:
    """Fits every query non-privately on the model's clique marginal (post-processing),
    as ``methods.SyntheticAnswerer`` fits it on a population's; keeps each answer's
    left-out mass (:meth:`SavedModel.clique_table`)."""

    model: SavedModel
    domain: Domain
    dropped: list[float] = field(default_factory=list)
    #: The last few cliques' tables (a stepwise round asks one clique per candidate).
    tables: OrderedDict[tuple[str, ...], tuple[CliqueTable, float]] = field(
        default_factory=OrderedDict
    )

    def answer(self, query: CMQuery) -> np.ndarray:
        key = tuple(query.clique)
        if key not in self.tables:
            self.tables[key] = self.model.clique_table(key)
            if len(self.tables) > 8:
                self.tables.popitem(last=False)
        table, dropped = self.tables[key]
        self.dropped.append(dropped)
        problem = query.compile(self.domain, cells=None if table.is_dense else table.cells())
        budget = EXACT_BASELINE_SOLVE
        return minimize(problem, table.mass, tol=budget.tol, max_iter=budget.max_iter).theta


def load_model(path: Path) -> SavedModel:
    """Rebuilds the saved model (NumPy arrays in mbi's factors)."""
    from mbi import CliqueVector, Factor, MarkovRandomField
    from mbi import Domain as MbiDomain

    with np.load(path) as saved:
        meta = json.loads(str(saved["meta"]))
        domain = MbiDomain(meta["attributes"], meta["shape"])
        vectors = {}
        for kind in ("potential", "marginal"):
            cliques = [tuple(c) for c in meta["cliques"][kind]]
            arrays = {
                c: Factor(domain.project(c), saved[f"{kind}{i}"]) for i, c in enumerate(cliques)
            }
            vectors[kind] = CliqueVector(domain, cliques, arrays)
    model = MarkovRandomField(
        potentials=vectors["potential"], marginals=vectors["marginal"], total=meta["total"]
    )
    picks = dict(zip(meta["attributes"], meta["picks"], strict=True))
    digest = hashlib.sha1(path.read_bytes()).hexdigest()[:12]
    return SavedModel(model, picks, meta["seconds"], meta["peak_rss_mb"], digest)


def _scopes_and_sizes(potentials: Any) -> tuple[list[tuple[str, ...]], dict[str, int]]:
    sizes = dict(zip(potentials.domain.attributes, potentials.domain.shape, strict=True))
    return [tuple(f.domain.attributes) for f in potentials.arrays.values()], sizes


def _elimination_order(
    potentials: Any,
    scopes: Sequence[tuple[str, ...]],
    clique: tuple[str, ...],
    fixed: Sequence[str],
) -> list[str]:
    """mbi's greedy order for summing every attribute outside ``clique`` out of the
    factors ``scopes``, with the attributes ``fixed`` held at a value (off the domain)."""
    from mbi import Domain as MbiDomain
    from mbi import junction_tree

    active = potentials.active_domain
    kept = [a for a in active.attributes if a not in fixed]
    domain = MbiDomain(kept, [active.size(a) for a in kept])
    free = tuple(a for a in clique if a not in fixed)
    order, _ = junction_tree.greedy_order(domain, [*scopes, free], elim=domain.invert(free))
    return list(order)


def elimination_peak(
    potentials: Any, clique: Sequence[str], fixed: Sequence[str] = ()
) -> tuple[int, frozenset[str]]:
    """The cells of the largest factor product that :func:`clique_factors` builds on
    ``clique`` with ``fixed`` held at a value, and that product's attributes.

    Summing an attribute out multiplies every factor that holds it, so a step builds a
    table over the union of their attributes. On a model whose cliques share hub
    attributes (AIM's at eps = 4 on full Adult) that union can hold most of a large query
    clique and more: 6.3e9 cells for some 6-attribute cliques, which no machine here
    holds. Fixing an attribute removes it from every union.
    """
    scopes, sizes = _scopes_and_sizes(potentials)
    scopes = [tuple(a for a in s if a not in fixed) for s in scopes]
    peak, widest = 1, frozenset[str]()
    for attr in _elimination_order(potentials, scopes, tuple(clique), fixed):
        touching = [s for s in scopes if attr in s]
        union = frozenset().union(*touching)
        cells = math.prod(sizes[a] for a in union)
        if cells > peak:
            peak, widest = cells, union
        scopes = [s for s in scopes if attr not in s] + [tuple(a for a in union if a != attr)]
    return peak, widest


def conditioning_set(potentials: Any, clique: Sequence[str], budget: int) -> tuple[str, ...]:
    """Attributes of ``clique`` to hold fixed, one value at a time, so that no product in
    :func:`clique_factors` exceeds ``budget`` cells (empty where none does).

    Greedy: while the widest product is over budget, fix the attribute of the clique that
    minimises (the widest product after fixing it) x (its values), a proxy for the work of
    one elimination per value. Stops when every attribute of the clique is fixed (the
    products then hold eliminated attributes only, bounded by the model's own cliques).
    """
    _, sizes = _scopes_and_sizes(potentials)
    fixed: list[str] = []
    peak, _ = elimination_peak(potentials, clique, fixed)
    while peak > budget and len(fixed) < len(clique):
        scored = []
        for attr in clique:
            if attr not in fixed:
                after, _ = elimination_peak(potentials, clique, [*fixed, attr])
                scored.append((after * sizes[attr], after, attr))
        _, peak, attr = min(scored)
        fixed.append(attr)
    return tuple(fixed)


def clique_factors(
    potentials: Any, clique: Sequence[str], fixed: dict[str, int] | None = None
) -> list[tuple[tuple[str, ...], np.ndarray]]:
    """The log-space factors left on subsets of ``clique`` once every other attribute is
    summed out (mbi's greedy order, :mod:`pmwcm.mechanisms.priors.mbi_projection`'s steps):
    their sum is the model's unnormalised log-marginal on the clique.

    ``fixed`` maps attributes of the clique to a model-axis position: every factor is read
    at it first, so the factors returned live on the clique's other attributes (a factor
    whose attributes are all fixed is a constant with no axes) and their sum is the
    log-marginal's slice there, on the same scale for every choice of ``fixed``.
    """
    from pmwcm.mechanisms.priors.mbi_projection import _sum_out

    fixed = fixed or {}
    _, sizes = _scopes_and_sizes(potentials)
    factors = []
    for f in potentials.arrays.values():
        attrs = tuple(f.domain.attributes)
        at = tuple(fixed.get(a, slice(None)) for a in attrs)
        values = np.asarray(f.values, dtype=np.float64)[at]
        factors.append((tuple(a for a in attrs if a not in fixed), values))
    scopes = [attrs for attrs, _ in factors]
    for attr in _elimination_order(potentials, scopes, tuple(clique), list(fixed)):
        touching = [f for f in factors if attr in f[0]]
        factors = [f for f in factors if attr not in f[0]]
        factors.append(_sum_out(touching, attr, sizes))
    return factors


def on_clique_axes(
    attrs: tuple[str, ...],
    values: np.ndarray,
    clique: tuple[str, ...],
    picks: Sequence[Sequence[int]],
) -> np.ndarray:
    """A factor on ``attrs`` (a subset of ``clique``, model axes) read at the codes and laid
    on the clique's axes, size 1 where it does not depend on an attribute."""
    at_codes = values[np.ix_(*[picks[clique.index(a)] for a in attrs])] if attrs else values
    order = sorted(range(len(attrs)), key=lambda i: clique.index(attrs[i]))
    shape = [len(picks[i]) if a in attrs else 1 for i, a in enumerate(clique)]
    return np.transpose(at_codes, order).reshape(shape)


def log_mass_slices(read: Sequence[np.ndarray], shape: tuple[int, ...]) -> Iterator[np.ndarray]:
    """The sum of the factors ``read`` (laid on ``shape``'s axes) over every cell, in C
    order, in flat slices of at most :data:`SLICE_CELLS` cells along the leading axes.

    The factors on the trailing axes only are summed once; each slice adds the rest read
    at its index.
    """
    lead = 0
    while math.prod(shape[lead:]) > SLICE_CELLS:
        lead += 1
    base = np.zeros(shape[lead:])
    sliced = []
    for factor in read:
        if all(size == 1 for size in factor.shape[:lead]):
            base = base + factor.reshape(factor.shape[lead:])
        else:
            sliced.append(factor)
    for index in np.ndindex(*shape[:lead]):
        log_slice = base
        for factor in sliced:
            at = tuple(i if factor.shape[axis] > 1 else 0 for axis, i in enumerate(index))
            log_slice = log_slice + factor[at]
        yield log_slice.reshape(-1)


@dataclass
class HeaviestCells:
    """The ``top`` heaviest of a stream of cells given by log-mass, and the log of every
    cell's mass summed (kept relative to the largest log-mass seen, so no ``exp``
    overflows).

    Cells must come in increasing code order (:func:`heaviest_cells` enumerates them
    so). A tie at the cut keeps the smaller codes, so the kept set is a function of the
    marginal alone, not of how the stream was sliced. Candidates are buffered and cut
    back to ``top`` only when the buffer holds :data:`BUFFER_FACTOR` times as many: a
    cut per slice re-sorted the ``top`` kept cells at every slice, which on a clique
    enumerated in thousands of small slices (attributes held at each of their codes)
    was most of the time AIM's answers took.
    """

    top: int
    #: Cells at or below this log-mass cannot be among the ``top`` (the last cut's).
    floor: float = -math.inf
    log_total: float = -math.inf
    _codes: list[np.ndarray] = field(default_factory=list)
    _logs: list[np.ndarray] = field(default_factory=list)
    _buffered: int = 0
    _next_code: int = 0

    def add(self, first_code: int, logs: np.ndarray) -> None:
        if first_code < self._next_code:
            raise ValueError("cells must come in increasing code order.")
        self._next_code = first_code + logs.size
        peak = float(logs.max()) if logs.size else -math.inf
        if peak == -math.inf:
            return
        log_sum = peak + float(np.log(np.exp(logs - peak).sum()))
        self.log_total = float(np.logaddexp(self.log_total, log_sum))
        # A cell equal to the floor ties a kept cell of smaller code, which stays.
        heavy = np.flatnonzero(logs > self.floor)
        if heavy.size == 0:
            return
        self._codes.append(first_code + heavy)
        self._logs.append(logs[heavy])
        self._buffered += heavy.size
        if self._buffered > BUFFER_FACTOR * self.top:
            self._cut()

    def _cut(self) -> None:
        """Keeps the ``top`` heaviest buffered cells (ties: the smaller codes)."""
        codes = np.concatenate(self._codes) if self._codes else np.zeros(0, dtype=np.int64)
        logs = np.concatenate(self._logs) if self._logs else np.zeros(0)
        if logs.size > self.top:
            cut = float(np.partition(logs, logs.size - self.top)[logs.size - self.top])
            above = np.flatnonzero(logs > cut)
            tied = np.flatnonzero(logs == cut)  # in increasing code order, as added
            keep = np.concatenate([above, tied[: self.top - above.size]])
            codes, logs = codes[keep], logs[keep]
            self.floor = cut
        self._codes, self._logs, self._buffered = [codes], [logs], logs.size

    def masses(self) -> tuple[np.ndarray, np.ndarray, float]:
        """The kept cells' codes (sorted), their masses renormalised, the mass left out."""
        if not math.isfinite(self.log_total):
            raise FloatingPointError("the model's marginal underflowed.")
        self._cut()
        codes, logs = self._codes[0], self._logs[0]
        order = np.argsort(codes)
        kept = np.exp(logs[order] - self.log_total)
        return codes[order], kept / kept.sum(), max(0.0, 1.0 - float(kept.sum()))


def heaviest_cells(
    potentials: Any,
    clique: Sequence[str],
    picks: Sequence[Sequence[int]],
    top: int,
    held: Sequence[str] | None = None,
) -> tuple[CliqueTable, float]:
    """The model's clique marginal on its ``top`` heaviest cells (renormalised) and the
    mass left out.

    The log-marginal is the sum of :func:`clique_factors` (read at the codes: the null
    slots never enter, as :func:`read_at_codes` drops them), enumerated in slices
    (:func:`log_mass_slices`). Where eliminating onto the clique would build a product of
    more than :data:`UNION_CELLS` cells, the attributes of :func:`conditioning_set` are
    held at each of their codes in turn and the rest of the clique is enumerated under
    each: the cells are visited in the order (held attributes, then the others), and the
    kept cells' codes are mapped back to the clique's own order at the end. ``held``
    is that set where the caller has it already.
    """
    clique = tuple(clique)
    pick_of = dict(zip(clique, picks, strict=True))
    if held is None:
        held = conditioning_set(potentials, clique, UNION_CELLS)
    free = tuple(a for a in clique if a not in held)
    free_picks = [pick_of[a] for a in free]
    free_shape = tuple(len(p) for p in free_picks)
    inner = math.prod(free_shape)
    best = HeaviestCells(top)
    for outer, positions in enumerate(itertools.product(*[pick_of[a] for a in held])):
        factors = clique_factors(potentials, clique, dict(zip(held, positions, strict=True)))
        read = [on_clique_axes(attrs, values, free, free_picks) for attrs, values in factors]
        first = outer * inner
        for flat in log_mass_slices(read, free_shape):
            best.add(first, flat)
            first += flat.size
    codes, mass, dropped = best.masses()
    shape = tuple(len(p) for p in picks)
    if held:  # (held, free) order -> the clique's
        visited = [*held, *free]
        index = np.unravel_index(codes, [len(pick_of[a]) for a in visited])
        codes = np.ravel_multi_index([index[visited.index(a)] for a in clique], shape)
        order = np.argsort(codes)
        codes, mass = codes[order], mass[order]
    return CliqueTable(shape=shape, codes=codes, mass=mass), dropped


def log_rounds(stream: Any = sys.stderr) -> None:
    """Prints a line as each of OpenDP's AIM rounds starts (its number, the model-size cap
    it selects under, wall and CPU seconds since this call, peak RSS): AIM prints
    nothing of its own, and a release on a wide table runs for hours. Wraps OpenDP
    0.16's private ``_make_aim_marginal`` (one call a round); where that is not there,
    warns and leaves AIM as it is. Reads nothing of the data: timings only."""
    import opendp.extras.mbi._aim as aim

    step = getattr(aim, "_make_aim_marginal", None)
    if step is None:
        print("aim_release: this OpenDP has no _make_aim_marginal; no round log", file=stream)
        return
    start, rounds = time.perf_counter(), itertools.count(1)

    def logged(*args: Any, **kwargs: Any) -> Any:
        line = {
            "round": next(rounds), "max_size_mb": kwargs.get("max_size"),
            "seconds": round(time.perf_counter() - start, 1),
            "cpu_seconds": round(time.process_time(), 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        }  # fmt: skip
        print(json.dumps(line), file=stream, flush=True)
        return step(*args, **kwargs)

    aim._make_aim_marginal = logged


def make_release(
    table: str, *, epsilon: float, unit: str, seed: int, method: Method = "aim"
) -> Path:
    """Runs AIM (default rounds) or MST (its defaults) at rho*(eps, delta) under ``unit`` on
    ``table`` in this process and saves its model; the path."""
    from full_tables import DELTA, load_private
    from methods import data_digest, zcdp_for
    from synthetic import _release

    data = load_private(table)
    rho = zcdp_for(epsilon, DELTA)
    path = release_path(table, data_digest(data), rho=rho, unit=unit, seed=seed, method=method)
    if path.exists():
        return path
    records = np.asarray(data.held_records(), dtype=np.int64)
    start = time.perf_counter()
    release = _release(method, data.domain, records, rho=rho, rounds=None, unit=unit)
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    save_release(release, data.domain, path, seconds=seconds, peak_rss_mb=rss)
    return path


def saved_model(
    table: str,
    data: PrivateData,
    *,
    unit: str,
    epsilon: float,
    seed: int,
    method: Method = "aim",
) -> SavedModel:
    """AIM's (or MST's) saved model on a full-resolution table, its release made first (in
    its own process, :func:`main`, AIM's rounds logged on stderr) where no run has made it."""
    from full_tables import DELTA
    from methods import data_digest, zcdp_for

    rho = zcdp_for(epsilon, DELTA)
    path = release_path(table, data_digest(data), rho=rho, unit=unit, seed=seed, method=method)
    if not path.exists():
        env = dict(os.environ)
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        env.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
        command = [sys.executable, str(HERE / "aim_release.py"), "--table", table,
                   "--epsilon", repr(epsilon), "--unit", unit, "--seed", str(seed),
                   "--method", method, "--log-rounds"]  # fmt: skip
        subprocess.run(command, check=True, env=env)
    return load_model(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", required=True)
    parser.add_argument("--epsilon", type=float, required=True)
    parser.add_argument("--unit", choices=("addremove", "replace"), default="addremove")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--method", choices=("aim", "mst"), default="aim")
    parser.add_argument(
        "--log-rounds", action="store_true", help="AIM: a JSON line on stderr as each round starts"
    )
    args = parser.parse_args()
    if args.log_rounds and args.method == "aim":
        log_rounds()
    path = make_release(
        args.table, epsilon=args.epsilon, unit=args.unit, seed=args.seed, method=args.method
    )
    print(json.dumps({"release": str(path)}), flush=True)


if __name__ == "__main__":
    main()
