"""End-to-end neighbouring-pair audits of the paths the 16-cell default pipeline never takes.

The default pipeline audit (:mod:`pmwcm.audit.pipeline`) runs on 4 binary attributes:
every clique is a dense table, the hypothesis is a dense tensor and the data sits
in memory. These rows run the same machinery -- the real engine built afresh for
every trial (:class:`~pmwcm.audit.pipeline.PipelineMechanism`), the whole transcript
as the output, a refusal coded as an output, a lower confidence bound on epsilon
(:mod:`pmwcm.audit.auditor`) -- through

* **the support backend**: a public hypothesis-memory budget of 128 KiB makes
  :func:`~pmwcm.kernels.backend.choose_backend` pick a weighted support of ``M =
  2,520`` records, so the paid prior is the support prior and every round reads the
  hypothesis through :class:`~pmwcm.kernels.support.SupportHistogram`
  (:func:`support_config`);
* **sparse clique tables**: the queries' clique ``{x, u, v, y}`` has ``2 * 34 * 32
  * 2 = 4,352`` cells, over :data:`~pmwcm.kernels.clique_table.DENSE_CLIQUE_CELLS`,
  so the data's table is kept on its occupied cells; with the uniform start and
  ``T = 2`` on the dense backend the parity query crosses the threshold in most
  trials, so the oracle solves on the sparse table and the update reweights through
  it (:func:`sparse_config`);
* **a data source**: the pair written to a Parquet file or a PostgreSQL table and
  opened through the opener ``pmwcm run --data`` uses (:class:`Source`;
  ``open_source`` lives in :mod:`pmwcm.data`, a layer the audit does not import, so
  the caller passes it in), once per batch of trials
  (:meth:`~pmwcm.audit.pipeline.PipelineMechanism.transcripts`: opening is
  deterministic and draws no noise). With ``n = 4,000 < |X|`` every clique is a
  ``GROUP BY`` of its own, today; the same rows keep auditing whatever the source
  reads at open instead.

**Neighbours** (:func:`wide_parity_pair`). ``x`` binary, ``u`` (34 values) and ``v``
(32 values) cycle through their ``2,176`` combinations, ``y = x XOR [u >= 17]``;
``n = 4,000``, so every combination holds one or two records and the data occupies
``2,176`` cells of the full clique. ``D1`` flips ``y`` of record 0 (a cell holding
two records) into the empty cell ``(0, 0, 0, 1)``: ``2,177`` occupied cells. The
2-way marginals cannot see the parity, so the parity query is the prior's blind
spot, and the two datasets differ in the *number* of occupied cells of every
sparse table the stream reads -- the shape a data-dependent branch on a sparse
table needs to show.

**Negative controls** (must be caught; each is planted through a parameter of the
case -- a build, an opener -- never by patching the engine):

* :func:`private_support_build`: the support prior fitted on a support of the
  *private* records (PMW^Pub with private records; charged like the real prior).
  Under ``D0`` the final hypothesis never holds cell ``(0, 0, 0, 1)``, under ``D1``
  it always does: the event "hypothesis holds cell 1".
* :class:`OddCellsRefusing`: the data's side refuses a sparse table whose number of
  occupied cells is odd (the planted bug of issue 33, which 60 runs of the 16-cell
  audit never reached): every sparse query raises on ``D1``, none on ``D0``.
* :func:`capped_snapshot`: an opener whose in-memory snapshot is capped by the data's
  number of distinct records (set between the neighbours' 2,176 and 2,177) instead of
  a public bound: ``D1`` is refused at open. This is the failure a snapshot taken at
  open invites (its size must come from ``n`` and the schema, never from the data).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pmwcm.audit.cases import AuditCase
from pmwcm.audit.pipeline import (
    Build,
    Opener,
    PipelineMechanism,
    pipeline_family,
    released_direction,
    shipped,
)
from pmwcm.audit.support_prior import private_support_prior
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.practical import PMWConfig, build_engine, make_accountant
from pmwcm.kernels.clique_table import CliqueTable
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.accounting import PrivacyLedger, calibrate_gaussian_multiplier
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.priors.marginals import measurement_event
from pmwcm.mechanisms.private_data import PrivateData

__all__ = [
    "CHANGED_CELL",
    "OddCellsRefusing",
    "Records",
    "Source",
    "capped_snapshot",
    "distinct_records",
    "private_support_build",
    "reach_case",
    "source_case",
    "sparse_config",
    "sparse_table_case",
    "support_case",
    "support_config",
    "wide_parity_pair",
    "wide_stream",
]

IntArray = NDArray[np.int64]
#: The cell ``(x, u, v, y) = (0, 0, 0, 1)`` that only ``D1`` occupies (flat, C-order).
CHANGED_CELL = 1
#: The hypothesis memory budget that makes the real rule pick the support backend
#: here: a dense tensor needs 4 x 8 x 4,352 = 139,264 bytes, over 2^17 = 131,072.
SUPPORT_MEMORY = 2**17


@dataclass(frozen=True, kw_only=True)
class Records:
    """Integer-coded records with their domain, as ``PrivateData.of`` reads data in memory."""

    domain: Domain
    records: IntArray


@dataclass(frozen=True, kw_only=True)
class Source:
    """The pair where a data source holds it.

    Attributes:
        label: names the source in the row (e.g. ``"DuckDB, Parquet"``).
        dataset0: how ``opener`` finds ``D0`` (a file's path, a table's name).
        dataset1: the same for ``D1``.
        opener: the public opener (``open_source`` with the pair's schema); its
            result is read through ``PrivateData.of``, as ``pmwcm run --data`` reads it.
    """

    label: str
    dataset0: Any
    dataset1: Any
    opener: Callable[[Any], object]

    def private_data(self, dataset: Any) -> PrivateData:
        """``dataset`` opened as a session opens it."""
        return PrivateData.of(self.opener(dataset))


def wide_parity_pair(n: int = 4000) -> tuple[Records, Records]:
    """``(D0, D1)`` of the module docstring (``n >= 2,176``, so every ``(x, u, v)`` is held)."""
    if n < 2176:
        raise ValueError(f"need n >= 2176 (every (x, u, v) held), got n={n}.")
    domain = Domain.from_sizes({"x": 2, "u": 34, "v": 32, "y": 2})
    i = np.arange(n)
    x, u, v = i % 2, (i // 2) % 34, (i // 68) % 32
    records = np.column_stack([x, u, v, x ^ (u >= 17)]).astype(np.int64)
    flipped = records.copy()
    flipped[0, 3] = 1 - flipped[0, 3]
    return Records(domain=domain, records=records), Records(domain=domain, records=flipped)


def wide_stream() -> tuple[CMQuery, ...]:
    """Three queries: a 2-way one the prior answers, the parity of ``y`` on the sparse
    clique ``{x, u, v, y}`` (smooth, so each trial stays cheap), and a regression on it.

    The parity query's data error is about ``1/3`` (smoothed hinge at ``R = 2``: from
    ``1/2`` at ``theta = 0`` to ``1/6``) against a sensitivity of ``8 / n``: about 170 of
    its units, so from the uniform start at ``T = 2`` it crosses the threshold in most
    trials (and in the noiseless run).
    """
    parity = CMQuery(
        loss="smoothed_hinge",
        target="y",
        features=("x", "u", "v"),
        interactions=(("x", "u"),),
        encodings={"u": "ordinal", "v": "ordinal"},
        radius=2.0,
        intercept=False,
    )
    return (
        CMQuery(loss="logistic", target="x", features=("u",), encodings={"u": "ordinal"}),
        parity,
        CMQuery(loss="squared", target="v", features=("x", "u", "y"), encodings={"u": "ordinal"}),
    )


def support_config(*, epsilon: float = 1.0, delta: float = 1e-6) -> PMWConfig:
    """The shipped defaults with :data:`SUPPORT_MEMORY`: the support backend, paid prior."""
    return PMWConfig(epsilon=epsilon, delta=delta, hypothesis_memory=SUPPORT_MEMORY)


def sparse_config(*, epsilon: float = 1.0, delta: float = 1e-6) -> PMWConfig:
    """The dense backend from the uniform start with ``T = 2`` (the prior's fit on 4,352
    cells costs ~0.3 s a trial; from the uniform start the parity query always updates)."""
    return PMWConfig(epsilon=epsilon, delta=delta, prior="uniform", backend="dense", max_updates=2)


def distinct_records(data: PrivateData) -> int:
    """The number of distinct records (occupied cells of the full clique); private."""
    return int(np.count_nonzero(data.clique_table(data.domain.names).mass))


# --- Negative controls: broken paths the audit must catch. ---


def private_support_build(data: PrivateData, config: PMWConfig, noise: NoiseSource) -> OnlinePMW:
    """Broken: the paid prior charged and measured as shipped, then fitted on a support of
    the PRIVATE records (:func:`~pmwcm.audit.support_prior.private_support_prior`), which
    publishes which cells hold a record whatever the noise."""
    accountant = make_accountant(config.accountant)
    ledger = PrivacyLedger(epsilon=config.epsilon, delta=config.delta, accountant=accountant)
    split = config.resolved_for(data.n, len(data.domain)).split
    epsilon, delta = split.prior_budget(config.epsilon, config.delta)
    multiplier = calibrate_gaussian_multiplier(
        fixed=None, gaussian_count=1, epsilon=epsilon, delta=delta, accountant=accountant
    )
    ledger.spend(measurement_event(multiplier), label="prior: noisy 2-way marginals")
    release = private_support_prior(data, noise_multiplier=multiplier, noise=noise, size=0)
    return build_engine(data, config, noise=noise, prior=release.hypothesis, ledger=ledger)


class OddCellsRefusing(PrivateData):
    """Broken: the data's side raises on a sparse table with an odd number of occupied cells
    (a refusal decided by the data; open it with ``OddCellsRefusing.of``)."""

    def clique_table(self, clique: Sequence[str]) -> CliqueTable:
        """:meth:`PrivateData.clique_table`, refused when sparse with odd occupied cells."""
        table = super().clique_table(clique)
        if table.codes is not None and table.codes.size % 2 == 1:
            raise RuntimeError("the sparse table has an odd number of occupied cells.")
        return table


def capped_snapshot(opener: Opener, cap: int) -> Opener:
    """Broken: ``opener`` whose result is refused when the data holds more than ``cap``
    distinct records (a snapshot's memory guard that reads the data, not ``n``)."""

    def open_capped(dataset: Any) -> PrivateData:
        data = opener(dataset)
        if distinct_records(data) > cap:
            data.close()
            raise MemoryError(f"the snapshot holds more than {cap} distinct records.")
        return data

    return open_capped


# --- The rows. ---


def reach_case(
    *,
    name: str,
    config: PMWConfig,
    datasets: tuple[Any, Any],
    opener: Opener = PrivateData.of,
    build: Build = shipped,
    cells: tuple[int, ...] = (),
) -> AuditCase:
    """``build`` at ``config`` on the pair ``datasets`` (opened by ``opener`` in every
    trial), asked :func:`wide_stream`; the claim is ``config``'s ``(epsilon, delta)``."""
    queries = wide_stream()
    domain = wide_parity_pair()[0].domain
    dims = tuple(q.compile(domain).dim for q in queries)
    mechanism = PipelineMechanism(
        config=config, queries=queries, dims=dims, build=build, opener=opener, cells=cells
    )
    direction = released_direction(mechanism, *datasets)
    return AuditCase(
        name=f"{name}: {len(queries)} queries on |X| = {domain.size:,}",
        guarantee=f"({config.epsilon:g}, {config.delta:g})-DP: build_engine's ledger (PLD)",
        mechanism=mechanism,
        dataset0=datasets[0],
        dataset1=datasets[1],
        events=pipeline_family(mechanism, direction),
        claimed_epsilon=config.epsilon,
        delta=config.delta,
    )


def support_case(*, broken: bool = False, n: int = 4000) -> AuditCase:
    """Row (a): the support backend, chosen by the real rule (:func:`support_config`)."""
    label = "BROKEN support of the private records" if broken else "support backend"
    return reach_case(
        name=f"{label} (M = 2,520)",
        config=support_config(),
        datasets=wide_parity_pair(n),
        build=private_support_build if broken else shipped,
        cells=(CHANGED_CELL,),
    )


def sparse_table_case(*, broken: bool = False, n: int = 4000) -> AuditCase:
    """Row (b): sparse clique tables on the dense backend (:func:`sparse_config`)."""
    label = "BROKEN refusal on odd occupied cells" if broken else "sparse clique tables"
    return reach_case(
        name=f"{label} (uniform start, T = 2)",
        config=sparse_config(),
        datasets=wide_parity_pair(n),
        opener=OddCellsRefusing.of if broken else PrivateData.of,
    )


def source_case(source: Source, *, broken: bool = False) -> AuditCase:
    """Rows (c) and (d): the support row's pipeline on the pair opened from ``source``."""
    opener: Opener = source.private_data
    label = source.label
    if broken:  # the cap sits at D0's distinct records: D1 holds one more
        data = source.private_data(source.dataset0)
        cap = distinct_records(data)
        data.close()
        opener, label = capped_snapshot(opener, cap), f"BROKEN snapshot capped by the data, {label}"
    return reach_case(
        name=label,
        config=support_config(),
        datasets=(source.dataset0, source.dataset1),
        opener=opener,
    )


def write_parquet(records: Records, path: Path) -> Path:
    """Writes ``records`` as a Parquet file of their value labels (one text column per
    attribute), the file a curator would hand ``pmwcm run --data``."""
    import duckdb
    import pandas as pd

    frame = pd.DataFrame(_labelled(records))
    with duckdb.connect() as connection:
        connection.register("frame", frame)
        quoted = str(path).replace("'", "''")
        connection.execute(f"COPY frame TO '{quoted}' (FORMAT parquet)")
    return path


def write_postgres(records: Records, url: str, table: str) -> str:
    """Replaces table ``table`` at ``url`` by ``records``' value labels (text columns)."""
    import psycopg
    from psycopg import sql

    columns = _labelled(records)
    name = sql.Identifier(table)
    definition = sql.SQL(", ").join(sql.SQL("{} text").format(sql.Identifier(c)) for c in columns)
    with psycopg.connect(url) as connection:
        connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))
        connection.execute(sql.SQL("CREATE TABLE {} ({})").format(name, definition))
        copy = sql.SQL("COPY {} FROM STDIN").format(name)
        with connection.cursor().copy(copy) as writer:
            for row in zip(*columns.values(), strict=True):
                writer.write_row(row)
    return table


def _labelled(records: Records) -> dict[str, list[str]]:
    """Each attribute's column of value labels."""
    domain = records.domain
    return {
        name: [domain.values_of(name)[code] for code in records.records[:, j].tolist()]
        for j, name in enumerate(domain.names)
    }
