"""The engine's values: a released :class:`Answer`, the query key, and :class:`EngineState`.

Frozen data only, read by the engine (:mod:`pmwcm.engine.online`), its snapshots
(:mod:`pmwcm.engine.snapshot`) and the service's durable log; nothing here reads
the private data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Literal

from pmwcm.engine.rounds import QueryRound
from pmwcm.kernels.counting import LinearQuery
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import Histogram
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.accounting import LedgerEntry
from pmwcm.mechanisms.priors.marginals import Measurement

Source = Literal["hypothesis", "oracle", "synthetic"]

#: What a reader of a ``"synthetic"`` answer must be told, wherever it is read.
SYNTHETIC_ANSWER_WARNING = (
    "synthetic: the engine had halted (all private updates spent), so this answer comes "
    "from the final hypothesis with NO accuracy check against the data"
)


def query_key(query: CMQuery | LinearQuery, domain: Domain) -> str:
    """The identity of the problem a query poses on ``domain`` (repeats are free).

    A CM query is keyed by its canonical form (:meth:`CMQuery.canonical`), so
    every spelling of one compiled problem (a default ``loss_param`` written
    out, ``"auto"`` against the encoding it resolves to, ``1`` against ``1.0``)
    gets one key and so one oracle draw: otherwise an analyst could average up
    to ``T`` independent draws of the same problem. The key after ``"cm:"`` is
    the canonical spec as JSON.
    """
    if isinstance(query, LinearQuery):
        return query.key()
    return "cm:" + query.canonical_json(domain)


@dataclass(frozen=True, kw_only=True)
class Answer:
    """One released answer.

    Attributes:
        index: position of the query in the stream (0-based).
        value: ``theta`` for CM queries (in feature order, intercept last); the
            estimated fraction for linear queries.
        source: ``"hypothesis"`` (certified by the sparse vector), ``"oracle"``
            (fresh private answer, followed by an update) or ``"synthetic"``
            (after the halt; no accuracy check).
        updates: ``t``, the number of updates made so far (after this query).
        epsilon_spent: privacy spent so far, at the ledger's ``delta``.
        delta: the ledger's ``delta``.
        repeated: this query had been answered before; the released answer is
            returned again (no new noise, no cost).
    """

    index: int
    value: Any
    source: Source
    updates: int
    epsilon_spent: float
    delta: float
    repeated: bool = False


@dataclass(frozen=True, kw_only=True)
class UpdateRecord:
    """A past update: the query, its round and the private answer that defined ``u``."""

    query: CMQuery | LinearQuery
    round: QueryRound
    private: Any


@dataclass(frozen=True, kw_only=True)
class PastUpdate:
    """One update as the state keeps it: the query and the private answer that defined ``u``.

    The round is not kept: it is compiled again from the query and public
    inputs (:meth:`OnlinePMW.round_for`), so a state carries no compiled objects
    and can be encoded as JSON (:mod:`pmwcm.engine.snapshot`).
    """

    query: CMQuery | LinearQuery
    private: Any


def _frozen_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


#: How a field of :class:`EngineState` is kept, in its ``metadata["kept"]``: the
#: snapshot codec (:mod:`pmwcm.engine.snapshot`) and the service's durable log
#: (``pmwcm.service.durable``) read these marks instead of naming fields.
Kept = Literal["apart", "log", "grows", "value"]
#: Saved apart from the JSON (the hypothesis: an array of up to millions of cells).
#: Replaced only by an update, so the count of ``updates`` shows when it changed.
APART: Mapping[str, Kept] = MappingProxyType({"kept": "apart"})
#: What a log of answers holds (a service's rows), so its snapshots need not.
LOG: Mapping[str, Kept] = MappingProxyType({"kept": "log"})
#: Append-only: its length shows when it changed.
GROWS: Mapping[str, Kept] = MappingProxyType({"kept": "grows"})
#: A small value, compared whole.
VALUE: Mapping[str, Kept] = MappingProxyType({"kept": "value"})


@dataclass(frozen=True, kw_only=True)
class EngineState:
    """Everything an engine's future behaviour depends on, beyond its public ingredients.

    An explicit value (in the style of optax's optimiser states) so that saving,
    restoring and crash recovery read and write the engine through one door
    (:meth:`OnlinePMW.state`, :meth:`OnlinePMW.restore`) instead of assigning its
    attributes from outside. It is secret: ``sparse_vector`` holds the threshold
    noise, ``updates`` the private answers behind every update.

    Each field's ``metadata["kept"]`` says how it is kept (:data:`APART`, :data:`LOG`,
    :data:`GROWS`, :data:`VALUE`): snapshots and the service's log are written from
    these marks, so a new field is saved, restored and marked without a list to update.

    Attributes:
        hypothesis: the hypothesis ``Dhat_t``, the engine's own histogram object,
            shared rather than copied: a copy re-normalises the values, which can
            move the last bit and so the next answers. Sharing is safe because
            the engine never changes a hypothesis in place (each update builds a
            new one); never call its in-place methods (``reweight``).
        updates: the updates made so far, in order (replayed by the sweeps).
        answers: every answer given, in order (repeats included).
        released: :func:`query_key` -> position in ``answers`` of the released
            answer (repeats are answered from here, never with fresh noise).
        sv_paid: whether the sparse vector's one-off charge is in the ledger.
        sparse_vector: the sparse vector's exported state (positives, threshold noise).
        ledger: the ledger's entries, in order.
        prior_measurements: the paid prior's released marginals, which the
            refit after each update reads (public; empty without a paid
            marginal prior).
    """

    hypothesis: Histogram = field(metadata=APART)
    updates: tuple[PastUpdate, ...] = field(default=(), metadata=GROWS)
    answers: tuple[Answer, ...] = field(default=(), metadata=LOG)
    released: Mapping[str, int] = field(default_factory=dict, metadata=LOG)
    sv_paid: bool = field(default=False, metadata=VALUE)
    sparse_vector: Mapping[str, Any] = field(default_factory=dict, metadata=VALUE)
    ledger: tuple[LedgerEntry, ...] = field(default=(), metadata=GROWS)
    prior_measurements: tuple[Measurement, ...] = field(default=(), metadata=GROWS)

    def __post_init__(self) -> None:
        object.__setattr__(self, "updates", tuple(self.updates))
        object.__setattr__(self, "prior_measurements", tuple(self.prior_measurements))
        object.__setattr__(self, "answers", tuple(self.answers))
        object.__setattr__(self, "released", _frozen_mapping(self.released))
        object.__setattr__(self, "sparse_vector", _frozen_mapping(self.sparse_vector))
        object.__setattr__(self, "ledger", tuple(self.ledger))
        for key, index in self.released.items():
            if not 0 <= index < len(self.answers):
                raise ValueError(f"Released key {key!r} points at no answer (index {index}).")

    def mark(self) -> tuple[Any, ...]:
        """In brief, every field but the ``LOG`` and ``APART`` ones: equal marks before and
        after an answer mean it changed nothing but the log (no snapshot is needed).

        A ``GROWS`` field is marked by its length, a ``VALUE`` field by itself (a
        mapping by its sorted items); the ``APART`` hypothesis is replaced only by an
        update, which the length of ``updates`` marks.
        """
        out: list[Any] = []
        for item in fields(self):
            value = getattr(self, item.name)
            if item.metadata["kept"] == "grows":
                out.append(len(value))
            elif item.metadata["kept"] == "value":
                out.append(tuple(sorted(value.items())) if isinstance(value, Mapping) else value)
        return tuple(out)
