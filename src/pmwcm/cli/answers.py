"""A query file's answers, one output record per line, streamed in input order.

Each line of a :class:`~pmwcm.cli.query_file.QueryFile` becomes a record: the
answer (:func:`labelled` adds ``coefficients`` and ``on_boundary``), or
``{"id", "error", "noise"}``. Errors become records through one table,
:data:`REFUSALS`, keyed by the :mod:`pmwcm.errors` hierarchy. Only those
deliberate refusals (decided from public inputs before the data or the budget
is touched) become error lines; any other exception is a bug: the run stops
with a one-line error that names only the exception's type, never its
message, and writes nothing.

Every line goes through the engine's one door
(:meth:`~pmwcm.engine.online.OnlinePMW.ask`). A repeated query (the same key,
:func:`~pmwcm.engine.state.query_key`, in any spelling) is answered there from
the released answer: the same ``theta`` in the line's coordinate order, no new
noise, no cost, with the running ``updates`` and ``epsilon_spent``. It is asked
with ``log_repeat=False``, since this module writes its own record of every
line: the engine's transcript grows with the distinct queries, not with the
file's lines.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pmwcm.cli.common import fail
from pmwcm.cli.query_file import QueryFile, QueryLine
from pmwcm.errors import BudgetExhausted, Halted, InvalidQuery, PmwcmError, Refused

if TYPE_CHECKING:
    from pmwcm.data.table import Dataset
    from pmwcm.engine.online import OnlinePMW
    from pmwcm.kernels.domain import Domain
    from pmwcm.kernels.queries import CMQuery
    from pmwcm.mechanisms.private_data import PrivateData

HALTED = (
    "refused: all private updates are spent, so no further query can be answered with an "
    "accuracy check (--after-halt synthetic answers it from the final hypothesis instead)."
)

REFUSALS: dict[type[PmwcmError], Callable[[PmwcmError], str]] = {
    InvalidQuery: str,
    Refused: lambda exc: f"refused: {exc}",
    BudgetExhausted: lambda exc: f"refused: {exc}",
    Halted: lambda exc: HALTED,
}
"""How each deliberate refusal is reported in an output line's ``"error"``."""


def refusal_message(exc: PmwcmError) -> str:
    """The ``"error"`` text of a refusal, from :data:`REFUSALS` (the nearest base wins)."""
    for cls in type(exc).__mro__:
        if cls in REFUSALS:
            return REFUSALS[cls](exc)
    return f"refused: {exc}"


@dataclass(frozen=True)
class _Released:
    """What a record reports of one answer (an engine ``Answer`` has these fields too)."""

    value: Any
    source: str
    updates: int
    epsilon_spent: float | None
    delta: float | None


class _EngineAnswers:
    """Online PMW's answers to a surveyed file: each new key through the engine's door
    for a known batch (:meth:`~pmwcm.engine.online.OnlinePMW.ask_each`, told the first
    query of every distinct key, so the data sides of the next large-clique queries run
    while one is answered); a repeat through the same door, not logged (module docstring)."""

    def __init__(self, engine: OnlinePMW, firsts: list[CMQuery]) -> None:
        from pmwcm.engine.state import query_key

        self.engine = engine
        self._key = lambda query: query_key(query, engine.domain)
        self._expected = deque((self._key(query), query) for query in firsts)
        self._announced = {key for key, _ in self._expected}
        self._outcomes = engine.ask_each([query for _, query in self._expected])

    def __call__(self, query: CMQuery) -> Any:
        key = self._key(query)  # a QueryError here is the line's refusal
        if key in self.engine.released:
            return self.engine.ask(query, log_repeat=False)
        if self._expected and self._expected[0][0] == key:
            self._announced.discard(self._expected.popleft()[0])
            outcome = next(self._outcomes)
        else:  # a key refused before, asked again
            outcome = self._ask(query)
            if key in self._announced or not isinstance(outcome, PmwcmError):
                # Answered this time, so it may have read the data outside the announced
                # batch (the data side then drops the batch): announce the rest anew. A
                # refusal is decided before the data is touched and changes nothing.
                self._expected = deque(item for item in self._expected if item[0] != key)
                self._announced.discard(key)
                self._outcomes = self.engine.ask_each([q for _, q in self._expected])
        if isinstance(outcome, PmwcmError):
            raise outcome
        return outcome

    def _ask(self, query: CMQuery) -> Any:
        try:
            return self.engine.ask(query)
        except PmwcmError as refusal:
            return refusal


def answer_with_engine(engine: OnlinePMW, queries: QueryFile) -> Iterator[dict[str, Any]]:
    """The records of a surveyed file's lines, answered by online PMW; per-line errors
    for refusals."""
    survey = queries.survey_result
    if survey is None:
        raise RuntimeError("answer_with_engine needs a surveyed QueryFile")
    answer = _EngineAnswers(engine, survey.firsts)
    return _answer_each(queries, answer, engine.noise.name, engine.domain)


def answer_with_baseline(
    method: str,
    data: Dataset | PrivateData,
    queries: QueryFile,
    *,
    epsilon: float,
    delta: float,
    noise: Any,
) -> Iterator[dict[str, Any]]:
    """Answers with the composition baseline (split over the surveyed distinct answerable
    queries) or exactly.

    A repeated query gets its released answer again (no new noise, no cost);
    ``epsilon_spent`` is always the running total at that line.
    """
    from pmwcm.engine.baselines import CompositionBaseline, NonPrivateBaseline
    from pmwcm.engine.state import query_key
    from pmwcm.mechanisms.private_data import PrivateData

    survey = queries.survey_result
    if survey is None:
        raise RuntimeError("answer_with_baseline needs a surveyed QueryFile")
    private = (
        data
        if isinstance(data, PrivateData)
        else PrivateData.from_records(data.domain, data.records)
    )
    exact = NonPrivateBaseline(private)
    comp = None
    if method == "composition" and survey.answerable > 0:
        comp = CompositionBaseline(
            private, epsilon=epsilon, delta=delta, queries=survey.answerable, noise=noise
        )
    thetas: dict[str, Any] = {}

    def answer(query: CMQuery) -> _Released:  # a repeat is served from `thetas`
        key = query_key(query, data.domain)
        if key not in thetas:  # kept in the canonical order, returned in each query's
            canonical = query.canonical(data.domain)
            thetas[key] = exact.answer(canonical) if comp is None else comp.answer(canonical)
        order = query.coordinate_order(data.domain)
        theta = thetas[key] if order is None else thetas[key][list(order)]
        if comp is None:
            return _Released(theta, "nonprivate", 0, None, None)
        spent = comp.ledger.spent_epsilon()
        return _Released(theta, "composition", 0, spent, comp.ledger.delta)

    return _answer_each(queries, answer, "none" if comp is None else noise.name, data.domain)


def labelled(query: CMQuery, domain: Domain, theta: list[float]) -> dict[str, Any]:
    """The fields that make ``theta`` readable: ``coefficients`` and ``on_boundary``.

    ``coefficients`` names each coordinate of ``theta``, in order
    (:func:`pmwcm.kernels.coefficients.coefficient_names`); ``on_boundary``
    (:func:`pmwcm.kernels.coefficients.on_boundary`) is true when ``||theta||``
    reached the radius. Both read only the public query, the public domain and
    the released ``theta``.
    """
    from pmwcm.kernels.coefficients import coefficient_names, on_boundary

    return {
        "coefficients": list(coefficient_names(query, domain)),
        "on_boundary": on_boundary(query, theta),
    }


def _answer_each(
    queries: QueryFile,
    answer: Callable[[CMQuery], Any],
    noise: str,
    domain: Domain,
) -> Iterator[dict[str, Any]]:
    """One output record per line: the answer, or ``{"id", "error"}`` (the run goes on).

    An answer also carries :func:`labelled`'s ``coefficients`` and
    ``on_boundary`` (fields added to the fixed contract; ``theta`` is unchanged).
    Every record also carries ``"noise"``, the noise source's name. Only refusals
    decided from public inputs become error lines; any other exception stops the
    run without its message (it could carry a number computed from the data).
    The error text of a refusal comes from :data:`REFUSALS`.
    """
    from pmwcm.cli.progress import progress_bar

    survey = queries.survey_result
    with progress_bar(0 if survey is None else survey.lines, "queries") as advance:
        for item in queries.lines():
            yield _answer_one(item, answer, noise, domain, advance)


def _answer_one(
    item: QueryLine,
    answer: Callable[[CMQuery], Any],
    noise: str,
    domain: Domain,
    advance: Callable[[str], None],
) -> dict[str, Any]:
    """The output record of one query line (see :func:`_answer_each`)."""
    if item.query is None:
        advance("error")
        return {"id": item.id, "error": item.error, "noise": noise}
    try:
        a = answer(item.query)
    except PmwcmError as exc:
        advance("error")
        return {"id": item.id, "error": refusal_message(exc), "noise": noise}
    except Exception as exc:  # a bug: never echo its message, which may hold data
        raise fail(
            f"internal error ({type(exc).__name__}) while answering query {item.id!r} "
            f"(line {item.line}); nothing was written. Please report this bug."
        ) from None
    advance(a.source)
    theta = [float(v) for v in a.value]
    record = (
        {"id": item.id, "theta": theta, "source": a.source, "updates": a.updates,
         "epsilon_spent": a.epsilon_spent, "delta": a.delta, "noise": noise}
        | labelled(item.query, domain, theta)
    )  # fmt: skip
    if a.source == "synthetic":
        from pmwcm.engine.online import SYNTHETIC_ANSWER_WARNING  # the service's too

        record["warning"] = SYNTHETIC_ANSWER_WARNING
    return record
