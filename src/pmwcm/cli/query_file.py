"""A query file read in two streaming passes, in memory bounded by its distinct queries.

``pmwcm run`` announces ``k``, the file's number of distinct answerable queries,
before its first answer (the budget plan may split the budget over them), so
the file is read twice, a line at a time, and never held:

1. :meth:`QueryFile.survey` reads what is public and small: that every line is
   a JSON object (a line that is not is fatal: one-line error, nothing spent),
   the number of lines, the distinct query keys in order of first occurrence
   (with the first query of each, which the engine is told to expect), ``k``,
   and a 64-bit hash of each line's id (8 bytes a line, the one record kept per
   line; sorted at the end of the pass, only lines whose hash occurs twice are
   remembered, and their ids are compared exactly in the second pass).
2. :meth:`QueryFile.lines` yields each line again as a :class:`QueryLine`: its
   id checked (present, unique) and its spec validated by
   :meth:`~pmwcm.kernels.queries.CMQuery.from_dict` alone.

A spec is parsed once per distinct spelling (the line without its id), in a
bounded cache, so the queries of repeated lines are one object whose canonical
form and key (:func:`~pmwcm.engine.state.query_key`) are computed once.

The file is UTF-8 (a leading byte-order mark is skipped, as the CSV reader
skips it); lines are split as :meth:`str.splitlines` splits them and blank
lines are skipped, their numbers counted. ``-`` reads stdin, copied once into
a private temporary file (removed on close) so that it can be read twice.
"""

from __future__ import annotations

import functools
import json
import shutil
import sys
import tempfile
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pmwcm.cli.common import fail, is_stdio
from pmwcm.errors import InvalidQuery

if TYPE_CHECKING:
    from pmwcm.kernels.domain import Domain
    from pmwcm.kernels.queries import CMQuery

#: Distinct spellings whose parsed query is kept (a bounded cache: a repeat beyond it
#: is parsed again, with the same result). It is kept from the survey to the second
#: pass, which meets the spellings in the same order: a cache smaller than the file's
#: distinct spellings misses on every one of them there (least recently used goes
#: first). The survey holds every distinct query anyway (``Survey.firsts``), so the
#: cache adds little: 4.1 MB over the survey's 23.5 MB on a 10,000-line Adult file of
#: 8,073 spellings (6,055 distinct queries), so about 33 MB at the cap.
SPEC_CACHE_SIZE = 2**16

_BOM = "\ufeff"


@dataclass(frozen=True)
class QueryLine:
    """One query line: its number, its id, and the parsed query or why it is refused."""

    line: int
    id: str | int | None
    query: CMQuery | None = None
    error: str | None = None


@dataclass
class Survey:
    """What the first pass learned: public and small (see the module docstring).

    Attributes:
        lines: the number of query lines (blank lines not counted).
        firsts: the first query of each distinct key, in order of first occurrence.
        answerable: ``k``, the distinct keys whose query compiles on the domain
            (:meth:`~pmwcm.kernels.queries.CMQuery.check`); a query that does not
            fit is left out (its answer is then refused).
        cliques: the clique (features and target) of each of those ``k`` queries,
            public as ``k`` is: the plan's workload-aware start reads them.
        shared_hashes: the line numbers whose id hash another line shares.
    """

    lines: int = 0
    firsts: list[CMQuery] = field(default_factory=list)
    answerable: int = 0
    cliques: list[tuple[str, ...]] = field(default_factory=list)
    shared_hashes: set[int] = field(default_factory=set)


def _id_of(spec: dict[str, Any]) -> str | int | None:
    """The line's id if it is a string or an int (``True`` is not an id)."""
    qid = spec.get("id")
    if not isinstance(qid, str | int) or isinstance(qid, bool):
        return None
    return qid


def _id_hash(qid: str | int) -> int:
    """A 64-bit hash of an id, never 0 (0 marks a line without an id)."""
    return hash((type(qid).__name__, qid)) or 1


class QueryFile:
    """A query file, read twice (:meth:`survey`, then :meth:`lines`); a context manager.

    Args:
        path: the file, or ``-`` for stdin.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._spool: Path | None = None
        self._parse = functools.lru_cache(maxsize=SPEC_CACHE_SIZE)(_parse_spec)
        self.survey_result: Survey | None = None

    def __enter__(self) -> QueryFile:
        if is_stdio(self.path):
            folder = Path(tempfile.mkdtemp(prefix="pmwcm-queries-"))  # mode 0700
            self._spool = folder / "queries.jsonl"
            try:
                with self._spool.open("wb") as sink:
                    shutil.copyfileobj(sys.stdin.buffer, sink)
            except BaseException:
                self.__exit__(None, None, None)
                raise
        elif not self.path.exists():
            raise fail(f"queries file not found: '{self.path}'.")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._spool is not None:
            shutil.rmtree(self._spool.parent, ignore_errors=True)
            self._spool = None

    def _objects(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(line number, JSON object)`` of every non-blank line; fatal on any other line."""
        source = self._spool or self.path
        try:
            with source.open("rb") as stream:
                number = 0
                for chunk in stream:
                    try:
                        text = chunk.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise fail(
                            f"cannot read queries file '{self.path}': line {number + 1} is not "
                            f"UTF-8 ({exc.reason} at byte {exc.start + 1})."
                        ) from None
                    if number == 0 and text.startswith(_BOM):
                        text = text[1:]
                    for raw in text.splitlines():
                        number += 1
                        if raw.strip():
                            yield number, self._object(number, raw)
        except OSError as exc:
            raise fail(f"cannot read queries file '{self.path}': {exc}.") from None

    def _object(self, number: int, raw: str) -> dict[str, Any]:
        try:
            spec = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise fail(
                f"queries file '{self.path}' line {number} is not valid JSON: {exc.msg} "
                f"(column {exc.colno}); every line must be one JSON object."
            ) from None
        if not isinstance(spec, dict):
            raise fail(
                f"queries file '{self.path}' line {number} must be a JSON object, "
                f"got {type(spec).__name__}."
            )
        return spec

    def survey(self, domain: Domain) -> Survey:
        """The first pass (module docstring): fatal line errors, counts, keys, id hashes.

        Lines whose id another line shares are refused, and their queries not
        counted; when two ids share a hash, a second pass of the same kind
        (rare: a duplicate id, or a 64-bit collision) finds which lines are
        duplicates, comparing their ids exactly.
        """
        result = self._collect(domain, _Ids(set()), hashes=array("q"))
        if result.shared_hashes:
            result = self._collect(domain, _Ids(result.shared_hashes), hashes=None)
        self.survey_result = result
        return result

    def _collect(self, domain: Domain, ids: _Ids, *, hashes: array[int] | None) -> Survey:
        """One surveying pass; ``hashes`` (if given) receives each line's id hash."""
        from pmwcm.engine.state import query_key

        result = Survey(shared_hashes=ids.suspects)
        keys: set[str] = set()
        for number, spec in self._objects():
            result.lines += 1
            qid = _id_of(spec)
            if hashes is not None:
                hashes.extend([0] * (number - len(hashes) - 1))  # blank lines have no id
                hashes.append(0 if qid is None else _id_hash(qid))
            if qid is None or ids.first_line_of(number, qid) is not None:
                continue
            query, _ = self._parse(_spelling(spec))
            if query is None:
                continue
            try:
                key = query_key(query, domain)
            except InvalidQuery:
                continue
            if key not in keys:
                keys.add(key)
                result.firsts.append(query)
                if _compiles(query, domain):
                    result.answerable += 1
                    result.cliques.append(query.clique)
        if hashes is not None:
            result.shared_hashes = _shared(hashes)
        return result

    def lines(self) -> Iterator[QueryLine]:
        """The second pass: one :class:`QueryLine` per non-blank line, in order."""
        if self.survey_result is None:
            raise RuntimeError("QueryFile.lines() needs survey() first")
        ids = _Ids(self.survey_result.shared_hashes)
        for number, spec in self._objects():
            qid = _id_of(spec)
            if qid is None:
                yield QueryLine(
                    number, None, error=f"line {number}: a query needs an id (string or int)."
                )
                continue
            first = ids.first_line_of(number, qid)
            if first is not None:
                yield QueryLine(number, qid, error=f"duplicate id {qid!r} (first on line {first}).")
                continue
            query, error = self._parse(_spelling(spec))
            yield QueryLine(number, qid, query=query, error=error)


class _Ids:
    """The exact duplicate-id check, over the lines whose id hash is shared."""

    def __init__(self, suspects: set[int]) -> None:
        self.suspects = suspects
        self._first_line: dict[str | int, int] = {}

    def first_line_of(self, number: int, qid: str | int) -> int | None:
        """The earlier line with this id, or ``None`` (then the id is new)."""
        if number not in self.suspects:
            return None
        first = self._first_line.setdefault(qid, number)
        return None if first == number else first


def _spelling(spec: dict[str, Any]) -> str:
    """The line's spec without its id, as JSON in the line's key order (the cache key)."""
    return json.dumps({k: v for k, v in spec.items() if k != "id"})


def _parse_spec(spelling: str) -> tuple[CMQuery | None, str | None]:
    """The query of a spelling, or :meth:`CMQuery.from_dict`'s message refusing it."""
    from pmwcm.kernels.queries import CMQuery

    try:
        return CMQuery.from_dict(json.loads(spelling)), None
    except InvalidQuery as exc:
        return None, str(exc)


def _compiles(query: CMQuery, domain: Domain) -> bool:
    try:
        query.check(domain)
    except InvalidQuery:
        return False
    return True


def _shared(hashes: array[int]) -> set[int]:
    """The line numbers (1-based) whose nonzero hash occurs on another line too."""
    import numpy as np

    values = np.frombuffer(hashes, dtype=np.int64) if len(hashes) else np.zeros(0, np.int64)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    equal = (ordered[1:] == ordered[:-1]) & (ordered[1:] != 0)
    marked = np.zeros(len(values), dtype=bool)
    marked[1:] |= equal
    marked[:-1] |= equal
    return {int(i) + 1 for i in order[marked]}
