"""The schema's rules compiled to SQL, so that the engine holding the data makes the codes.

Each :class:`~pmwcm.data.attribute.Attribute` becomes one ``CASE`` expression
that maps a source cell to the same code as
:func:`~pmwcm.data.table.encode_column` would, or to a negative *fault* code:

* :data:`OUTSIDE` -- a value the schema does not list, or a number outside
  the bins (without ``clip``);
* :data:`MISSING` -- ``NULL``, an empty or blank text, or a float ``NaN``;
* :data:`NOT_A_NUMBER` -- text that a ``bins``/``threshold`` rule cannot read
  as a number.

The source value is matched as :func:`~pmwcm.data.attribute.canonical_value`
matches it in memory:

* text: stripped of the characters Python's ``str.strip`` removes, and
  compared with the schema's values; read as a number for bins and
  thresholds when it has the form ``[+-]digits[.digits][e[+-]digits]`` or
  is an infinity (``inf``, ``infinity``, any case, signed), as
  ``pandas.to_numeric`` reads it;
* an integer column: a schema value matches when it is the integer's
  decimal form (``"7"``, not ``"07"``);
* a float column: a schema value matches when it is the float's canonical
  text (``"1"`` for ``1.0``, ``repr`` otherwise), i.e. compares equal to
  the float it spells;
* a boolean column: the values ``"True"`` and ``"False"`` (as numbers, 1 and 0).

Every other column type is a type mismatch, reported when the data is
opened. One function per rule kind (:func:`categorical_code`,
:func:`bins_code`, :func:`threshold_code`) writes the ``CASE``; a
:class:`Dialect` holds the few spellings that differ between DuckDB,
PostgreSQL and Spark SQL. Identifiers and literals come only from the
public schema and are always quoted by the dialect.

A categorical of a text column with more than :data:`CODE_TABLE_MIN_VALUES`
source values is coded by a join instead, where the dialect can bind a table
of parameters (DuckDB): a :class:`CodeTable` of its source texts and codes
(and the numbers they spell, for ``"1.0"`` against ``"1"``), bound as list
parameters, so the query's text and its planning stay the same size whatever
the number of values (a ``CASE`` arm per value cost 2.5 s a query at 1,025
values and cannot be planned at 10^6).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pmwcm.data.attribute import NUMBER_PATTERN, Attribute, canonical_value, format_number

__all__ = [
    "CODE_TABLE_MIN_VALUES",
    "DIALECTS",
    "EVEN_BINS_MAX_SPAN",
    "LINEAR_BINS_MAX_EDGES",
    "MISSING",
    "NOT_A_NUMBER",
    "OUTSIDE",
    "Cell",
    "CodeTable",
    "ColumnKind",
    "Dialect",
    "attribute_code",
    "bins_code",
    "canonical_text",
    "categorical_code",
    "code_tables",
    "coding_query",
    "evenly_spaced",
    "is_marker",
    "threshold_code",
]

#: Fault codes (negative, never a valid code).
OUTSIDE, MISSING, NOT_A_NUMBER = -1, -2, -3

#: A text categorical with more source values than this is coded by a join with a
#: :class:`CodeTable` (where the dialect binds one) rather than a ``CASE`` arm per code.
CODE_TABLE_MIN_VALUES = 64

#: How a source column's type is read: the four kinds a schema rule can use.
ColumnKind = Literal["text", "integer", "float", "boolean"]

#: The characters ``str.strip()`` removes (Unicode whitespace), in one string.
WHITESPACE = "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())

_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")
_POSITIVE_INFINITY = ("inf", "+inf", "infinity", "+infinity")
_NEGATIVE_INFINITY = ("-inf", "-infinity")


def _quote_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _quote_name(name: str, mark: str = '"') -> str:
    return mark + name.replace(mark, mark * 2) + mark


@dataclass(frozen=True, kw_only=True)
class Dialect:
    """The spellings that differ between SQL engines.

    Attributes:
        name: ``"duckdb"``, ``"postgresql"`` or ``"spark"``.
        identifier: quotes a column or table name.
        literal: quotes a text literal.
        double: the name of the float64 type.
        trim: ``trim(expr, chars)`` in this dialect (``{x}``, ``{chars}``).
        matches: a full regular-expression match (``{x}``, ``{pattern}``).
        is_nan: whether a double is NaN (``{x}``).
        contains: whether text ``{chars}`` contains the text ``{c}``.
        fence: ends a subquery that the planner must not merge into its
            parent (PostgreSQL would copy a named expression into every use).
        code_table: a ``FROM`` item of two columns unnested from two bound list
            parameters (``{keys}``, ``{codes}`` parameter names, ``{key_type}``,
            ``{key}``, ``{code}`` column names); empty where the engine (or the
            way a source runs its query) cannot bind one.
    """

    name: str
    identifier: Callable[[str], str]
    literal: Callable[[str], str]
    double: str
    trim: str
    matches: str
    is_nan: str
    contains: str
    fence: str = ""
    code_table: str = ""

    def as_double(self, text: str) -> str:
        """A float64 constant from its (Python) text, read exactly by the engine.

        A finite value is written as a float literal in exponent form
        (``repr`` round-trips; ``1.5e0`` is a double in DuckDB and Spark, and
        PostgreSQL rounds it correctly to a double), which the planners fold
        far faster than a ``CAST``; the infinities are cast from text.
        """
        x = float(text)
        if math.isinf(x):
            return f"CAST({self.literal(text)} AS {self.double})"
        r = repr(x)
        return r if "e" in r else f"{r}e0"


def _postgres_identifier(name: str) -> str:
    from psycopg import sql

    return sql.Identifier(name).as_string(None)


def _postgres_literal(text: str) -> str:
    from psycopg import sql

    return sql.Literal(text).as_string(None)


DIALECTS: dict[str, Dialect] = {
    "duckdb": Dialect(
        name="duckdb",
        identifier=_quote_name,
        literal=_quote_text,
        double="DOUBLE",
        trim="trim({x}, {chars})",
        matches="regexp_full_match({x}, {pattern})",
        is_nan="isnan({x})",
        contains="contains({chars}, {c})",
        code_table=(
            "(SELECT unnest(${keys}::{key_type}[]) AS {key}, unnest(${codes}::INTEGER[]) AS {code})"
        ),
    ),
    "postgresql": Dialect(
        name="postgresql",
        identifier=_postgres_identifier,
        literal=_postgres_literal,
        double="double precision",
        trim="btrim({x}, {chars})",
        matches="({x} ~ {pattern})",
        is_nan="({x} = CAST('NaN' AS double precision))",
        contains="(strpos({chars}, {c}) > 0)",
        fence=" OFFSET 0",
    ),
    "spark": Dialect(
        name="spark",
        identifier=lambda name: _quote_name(name, "`"),
        literal=lambda text: _quote_text(text.replace("\\", "\\\\")),
        double="DOUBLE",
        trim="trim(BOTH {chars} FROM {x})",
        matches="({x} RLIKE {pattern})",
        is_nan="isnan({x})",
        contains="(instr({chars}, {c}) > 0)",
    ),
}


def canonical_text(x: str, d: Dialect) -> str:
    """The stripped text of a text cell, ``NULL`` when missing (blank or ``NULL``).

    Trimming by a set of characters is slow in every engine, so it runs only on
    the cells that start or end with one of them (almost none, in clean data).
    """
    chars = d.literal(WHITESPACE)
    edge = " OR ".join(
        d.contains.format(chars=chars, c=f"{end}({x}, 1)") for end in ("left", "right")
    )
    stripped = d.trim.format(x=x, chars=chars)
    return f"NULLIF(CASE WHEN {edge} THEN {stripped} ELSE {x} END, '')"


def number_of_text(t: str, d: Dialect) -> str:
    """The number that canonical text ``t`` spells, ``NULL`` if it spells none."""
    pinf = ", ".join(d.literal(s) for s in _POSITIVE_INFINITY)
    ninf = ", ".join(d.literal(s) for s in _NEGATIVE_INFINITY)
    is_number = d.matches.format(x=t, pattern=d.literal(NUMBER_PATTERN))
    return (
        f"CASE WHEN lower({t}) IN ({pinf}) THEN {d.as_double('inf')} "
        f"WHEN lower({t}) IN ({ninf}) THEN {d.as_double('-inf')} "
        f"WHEN {is_number} THEN CAST({t} AS {d.double}) END"
    )


def number_of_column(x: str, kind: ColumnKind, d: Dialect) -> str:
    """A non-text column read as a float64."""
    if kind == "boolean":
        return f"CAST(CASE WHEN {x} THEN 1 ELSE 0 END AS {d.double})"
    return f"CAST({x} AS {d.double})"


@dataclass(frozen=True)
class Cell:
    """The names under which a query has one source cell, in three forms.

    Attributes:
        raw: the cell as stored.
        text: its canonical text (text columns; ``NULL`` when missing).
        number: its value as a float64 (``NULL`` for text that spells no number).
        kind: the column's kind.
    """

    raw: str
    text: str
    number: str
    kind: ColumnKind


def _numeric(cell: Cell, d: Dialect, rule: str) -> str:
    """``rule`` (a ``WHEN ... ELSE ...`` tail on ``cell.number``) behind the fault tests.

    A number must be finite: an infinity is :data:`NOT_A_NUMBER`, as in memory.
    """
    infinite = f"{cell.number} IN ({d.as_double('inf')}, {d.as_double('-inf')})"
    if cell.kind == "text":
        head = (
            f"WHEN {cell.text} IS NULL THEN {MISSING} "
            f"WHEN {cell.number} IS NULL OR {infinite} THEN {NOT_A_NUMBER}"
        )
    else:
        nan = f" OR {d.is_nan.format(x=cell.number)}" if cell.kind == "float" else ""
        head = f"WHEN {cell.raw} IS NULL{nan} THEN {MISSING} WHEN {infinite} THEN {NOT_A_NUMBER}"
    return f"CASE {head} {rule} END"


def is_marker(attr: Attribute, cell: Cell, d: Dialect) -> str | None:
    """SQL that is true when the cell is one of ``attr.missing`` (``None``: no marker
    can match a column of this kind), matched as :func:`canonical_value` matches."""
    markers = attr.missing
    if not markers:
        return None
    if cell.kind == "text":
        return f"{cell.text} IN ({', '.join(d.literal(m) for m in markers)})"
    if cell.kind == "boolean":
        spelled = {"True": cell.raw, "False": f"NOT {cell.raw}"}
        tests = [spelled[m] for m in markers if m in spelled]
    elif cell.kind == "integer":
        numbers = [m for m in markers if _INTEGER.fullmatch(m) and abs(int(m)) < 2**63]
        tests = [f"{cell.raw} IN ({', '.join(numbers)})"] if numbers else []
    else:
        numbers = [d.as_double(m) for m in markers if _spells_a_float(m)]
        tests = [f"{cell.raw} IN ({', '.join(numbers)})"] if numbers else []
    return f"({' OR '.join(tests)})" if tests else None


def categorical_code(attr: Attribute, cell: Cell, d: Dialect) -> str:
    """The ``values`` (and ``map``) rule: the code of the schema value the cell spells."""
    groups: dict[int, list[str]] = {}
    for source, code in attr.source_codes().items():
        groups.setdefault(code, []).append(source)
    x = cell.raw
    if cell.kind == "text":
        t = cell.text
        arms = [
            f"WHEN {t} IN ({', '.join(d.literal(s) for s in sources)}) THEN {code}"
            for code, sources in groups.items()
        ]
        # A number written another way ("1.0", "1e0") matches the schema's spelling ("1").
        number = number_of_text(t, d)
        for code, sources in groups.items():
            numbers = [d.as_double(s) for s in sources if _spells_a_float(s)]
            if numbers:
                arms.append(f"WHEN {number} IN ({', '.join(numbers)}) THEN {code}")
        return f"CASE WHEN {t} IS NULL THEN {MISSING} {' '.join(arms)} ELSE {OUTSIDE} END"
    if cell.kind == "boolean":
        index = attr.source_codes()
        yes, no = index.get("True", OUTSIDE), index.get("False", OUTSIDE)
        return f"CASE WHEN {x} IS NULL THEN {MISSING} WHEN {x} THEN {yes} ELSE {no} END"
    arms = []
    for code, sources in groups.items():
        if cell.kind == "integer":
            numbers = [s for s in sources if _INTEGER.fullmatch(s) and abs(int(s)) < 2**63]
        else:  # a float equals the number it spells exactly when it spells it canonically
            numbers = [d.as_double(s) for s in sources if _spells_a_float(s)]
        if numbers:
            arms.append(f"WHEN {x} IN ({', '.join(numbers)}) THEN {code}")
    nan = f" OR {d.is_nan.format(x=x)}" if cell.kind == "float" else ""
    return f"CASE WHEN {x} IS NULL{nan} THEN {MISSING} {' '.join(arms)} ELSE {OUTSIDE} END"


@dataclass(frozen=True)
class CodeTable:
    """A text categorical's rule as data: joined on the cell instead of a ``CASE``.

    Attributes:
        position: the attribute's position ``j`` (names its parameters and columns).
        texts: the source values (canonical text), one row each.
        codes: their codes.
        numbers: the finite numbers the source values spell canonically (``+ 0.0``,
            so that ``-0`` and ``0`` meet as ``==`` has them meet).
        number_codes: their codes.
    """

    position: int
    texts: list[str]
    codes: list[int]
    numbers: list[float]
    number_codes: list[int]

    @classmethod
    def of(cls, attr: Attribute, position: int) -> CodeTable:
        """The table of categorical ``attr`` at ``position``."""
        index = attr.source_codes()
        spelled = [(float(s) + 0.0, c) for s, c in index.items() if _spells_a_float(s)]
        return cls(
            position=position,
            texts=list(index),
            codes=list(index.values()),
            numbers=[x for x, _ in spelled],
            number_codes=[c for _, c in spelled],
        )

    def parameters(self) -> dict[str, list[str] | list[int] | list[float]]:
        """The list parameters the joins bind, by name."""
        j = self.position
        bound: dict[str, list[str] | list[int] | list[float]] = {
            f"text{j}": self.texts,
            f"code{j}": self.codes,
        }
        if self.numbers:
            bound |= {f"number{j}": self.numbers, f"ncode{j}": self.number_codes}
        return bound

    def joins(self, cell: Cell, d: Dialect) -> str:
        """The ``LEFT JOIN`` clauses that bring the cell's code as ``tc{j}`` (by its
        text) and ``nc{j}`` (by the number it spells; ``NULL`` where none matches)."""
        j = self.position
        text = d.code_table.format(
            keys=f"text{j}", codes=f"code{j}", key_type="VARCHAR", key=f"tk{j}", code=f"tc{j}"
        )
        out = f" LEFT JOIN {text} AS ct{j} ON ct{j}.tk{j} = {cell.text}"
        if self.numbers:
            number = d.code_table.format(
                keys=f"number{j}", codes=f"ncode{j}", key_type=d.double, key=f"nk{j}",
                code=f"nc{j}",
            )  # fmt: skip
            out += f" LEFT JOIN {number} AS cn{j} ON cn{j}.nk{j} = {cell.number} + 0.0"
        return out

    def code(self, cell: Cell) -> str:
        """The code the joins brought, or a fault."""
        j = self.position
        by_number = f"WHEN nc{j} IS NOT NULL THEN nc{j} " if self.numbers else ""
        return (
            f"CASE WHEN {cell.text} IS NULL THEN {MISSING} WHEN tc{j} IS NOT NULL THEN tc{j} "
            f"{by_number}ELSE {OUTSIDE} END"
        )


def code_tables(
    attrs: Sequence[Attribute], kinds: Mapping[str, ColumnKind], d: Dialect
) -> dict[int, CodeTable]:
    """The attributes coded by a join (text categoricals past
    :data:`CODE_TABLE_MIN_VALUES` source values), by position; none where ``d``
    cannot bind a table."""
    if not d.code_table:
        return {}
    return {
        j: CodeTable.of(attr, j)
        for j, attr in enumerate(attrs)
        if attr.kind == "values"
        and kinds[attr.column] == "text"
        and len(attr.source_codes()) > CODE_TABLE_MIN_VALUES
    }


def _spells_a_float(text: str) -> bool:
    try:
        x = float(text)
    except ValueError:
        return False
    return x == x and abs(x) != float("inf") and canonical_value(x) == text


#: A ``bins`` rule of more edges than this is coded by a binary search of nested
#: ``CASE``s, a smaller one by one ``WHEN`` an edge (DuckDB, 10^7 rows, one thread:
#: 4 bins 0.08 s either way against 0.10, 16 bins 0.20 against 0.21, 100 bins 1.06
#: against 0.77, 1,000 bins 9.1 against 4.9: each ``CASE`` costs about half a
#: microsecond a 2,048-row vector it sees, so neither form is cheap at 1,000).
LINEAR_BINS_MAX_EDGES = 17


def bins_code(attr: Attribute, cell: Cell, d: Dialect) -> str:
    """The ``bins`` rule: ``i`` for ``e_i <= v < e_{i+1}``; outside, clipped or a fault.

    The code is the first ``k`` with ``v < e_k``, less one (``k = 0``: below the bins;
    none: above). Up to :data:`LINEAR_BINS_MAX_EDGES` edges, one ``WHEN`` an edge in
    order; beyond, since the edges increase strictly (so ``v < e_k`` is false then
    true along ``k``), a binary search for the first true ``k`` written as nested
    ``CASE``s. The same comparisons decide either way, so the same codes: a NaN fails
    every one, as it fails every ``WHEN``. Edges evenly spaced (:func:`evenly_spaced`,
    such as one bin per year of age) take the code by arithmetic instead
    (:func:`_arithmetic_bins`), checked against the same edges.
    """
    v, edges = cell.number, attr.bins
    below, above = (0, len(edges) - 2) if attr.clip else (OUTSIDE, OUTSIDE)
    width = evenly_spaced(edges)
    if width is not None:
        return _numeric(cell, d, _arithmetic_bins(v, edges, width, below, above, d))
    bounds = [d.as_double(format_number(e)) for e in edges]
    if len(edges) <= LINEAR_BINS_MAX_EDGES:
        arms = [f"WHEN {v} < {bounds[0]} THEN {below}"]
        arms += [f"WHEN {v} < {b} THEN {i}" for i, b in enumerate(bounds[1:])]
        return _numeric(cell, d, f"{' '.join(arms)} ELSE {above}")

    def first_below(lo: int, hi: int) -> str:
        # The code when the first k with v < e_k lies in [lo, hi] (hi = len(edges): none).
        if lo == hi:
            return str(hi - 1) if hi < len(edges) else str(above)
        mid = (lo + hi) // 2
        return (
            f"CASE WHEN {v} < {bounds[mid]} THEN {first_below(lo, mid)} "
            f"ELSE {first_below(mid + 1, hi)} END"
        )

    rule = f"WHEN {v} < {bounds[0]} THEN {below} ELSE {first_below(1, len(edges))}"
    return _numeric(cell, d, rule)


#: :func:`evenly_spaced` takes edges whose span is at most this many times their spacing,
#: so that the quotient ``(v - e_0) / w`` of :func:`_arithmetic_bins` is off by far less
#: than a bin (its rounding error is about ``2^-52`` of the span over ``w``).
EVEN_BINS_MAX_SPAN = 2.0**40


def evenly_spaced(edges: Sequence[float]) -> float | None:
    """The spacing ``w`` of three or more edges with ``e_k = e_0 + k w`` *as computed in
    float64* (so an engine's ``e_0 + k * w`` is the edge itself) and a span of at most
    :data:`EVEN_BINS_MAX_SPAN` spacings; ``None`` otherwise (public: the schema alone).

    >>> evenly_spaced([17, 18, 19, 20]), evenly_spaced([0, 2.5, 5]), evenly_spaced([0, 1, 3])
    (1.0, 2.5, None)
    """
    if len(edges) < 3:
        return None
    first, width = float(edges[0]), float(edges[1]) - float(edges[0])
    if not width > 0 or max(abs(first), abs(float(edges[-1]))) > EVEN_BINS_MAX_SPAN * width:
        return None
    if any(first + k * width != float(e) for k, e in enumerate(edges)):
        return None
    return width


def _arithmetic_bins(
    v: str, edges: Sequence[float], width: float, below: int | str, above: int | str, d: Dialect
) -> str:
    """:func:`bins_code`'s rule for evenly spaced edges: ``c = floor((v - e_0) / w)``,
    moved by one where the edges say so.

    Within ``e_0 <= v < e_last`` the code is the ``c`` with ``e_c <= v < e_{c+1}``. The
    rounded quotient puts ``floor`` within one of it (the span is bounded by
    :data:`EVEN_BINS_MAX_SPAN`), and the two comparisons with ``e_0 + c w`` and
    ``e_0 + (c + 1) w``, which are the schema's edges exactly (:func:`evenly_spaced`),
    move it onto the code. Below and above are decided by the same comparisons as the
    binary search's, ``v < e_0`` and ``v < e_last``, so a NaN (which fails both) is
    above, as there. One ``floor`` and a few comparisons a row, where the binary search
    evaluates a nested ``CASE`` a level: 5-10x faster on DuckDB at 100 edges.
    """
    first, last = d.as_double(format_number(edges[0])), d.as_double(format_number(edges[-1]))
    w = d.as_double(format_number(width))
    c = f"floor(({v} - {first}) / {w})"
    step = (
        f"CASE WHEN {v} < {first} + {c} * {w} THEN -1 "
        f"WHEN {v} >= {first} + ({c} + 1) * {w} THEN 1 ELSE 0 END"
    )
    return (
        f"WHEN {v} < {first} THEN {below} WHEN NOT ({v} < {last}) THEN {above} "
        f"ELSE CAST({c} AS BIGINT) + {step}"
    )


def threshold_code(attr: Attribute, cell: Cell, d: Dialect) -> str:
    """The ``threshold`` rule: 1 when ``v >= t``, else 0."""
    assert attr.threshold is not None
    t = d.as_double(format_number(attr.threshold))
    return _numeric(cell, d, f"WHEN {cell.number} >= {t} THEN 1 ELSE 0")


_RULES = {"values": categorical_code, "bins": bins_code, "threshold": threshold_code}


def attribute_code(attr: Attribute, cell: Cell, d: Dialect, table: CodeTable | None = None) -> str:
    """The code of ``attr`` from its source ``cell`` (through ``table``'s joins if given).

    A ``missing`` marker is :data:`MISSING` before the rule reads the cell; with a
    ``missing_label``, :data:`MISSING` becomes the attribute's last code (as
    :func:`~pmwcm.data.table.encode_column` does), else it stays a fault.
    """
    code = table.code(cell) if table is not None else _RULES[attr.kind](attr, cell, d)
    marker = is_marker(attr, cell, d)
    if marker is not None:
        code = f"CASE WHEN {marker} THEN {MISSING} ELSE {code} END"
    if attr.missing_code is not None:
        code = f"COALESCE(NULLIF({code}, {MISSING}), {attr.missing_code})"
    return code


def coding_query(
    attrs: Sequence[Attribute],
    raw: Mapping[str, str],
    kinds: Mapping[str, ColumnKind],
    d: Dialect,
    inner: str,
    keep: Sequence[str] = (),
    tables: Mapping[int, CodeTable] | None = None,
) -> str:
    """``SELECT`` each attribute's code (``k0, k1, ...``) and ``keep`` from the query ``inner``.

    ``inner`` has each source column under its alias ``raw[column]``. The text
    and number forms of each column are named in two layers first, so that
    every rule reads short names and the engine derives each form once. The
    attributes in ``tables`` (by position) are coded by joins with their code
    tables (:func:`code_tables`; the caller binds :meth:`CodeTable.parameters`).
    """
    tables = tables or {}
    numeric = {a.column for a in attrs if a.kind != "values"}
    numeric |= {attrs[j].column for j, table in tables.items() if table.numbers}
    texts, numbers = [], []
    for column, alias in raw.items():
        if kinds[column] == "text":
            texts.append(f"{canonical_text(alias, d)} AS t_{alias}")
            if column in numeric:
                numbers.append(f"{number_of_text('t_' + alias, d)} AS v_{alias}")
        elif column in numeric or kinds[column] == "float":
            numbers.append(f"{number_of_column(alias, kinds[column], d)} AS v_{alias}")
    codes, joins = [], []
    for j, attr in enumerate(attrs):
        a = raw[attr.column]
        cell = Cell(raw=a, text=f"t_{a}", number=f"v_{a}", kind=kinds[attr.column])
        codes.append(f"{attribute_code(attr, cell, d, tables.get(j))} AS k{j}")
        if j in tables:
            joins.append(tables[j].joins(cell, d))
    layer1 = f"SELECT {', '.join(['*', *texts])} FROM ({inner}{d.fence}) AS l0"
    layer2 = f"SELECT {', '.join(['*', *numbers])} FROM ({layer1}{d.fence}) AS l1"
    return f"SELECT {', '.join([*codes, *keep])} FROM ({layer2}{d.fence}) AS l2{''.join(joins)}"
