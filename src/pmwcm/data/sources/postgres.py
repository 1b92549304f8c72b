"""PostgreSQL: a table counted where it lives, through psycopg 3.

The connection is opened from a URL (``postgresql://user:password@host:port/db``),
made read-only, and closed once the table has been read: one query at open
takes the snapshot of :mod:`pmwcm.data.sources.sql_source` (the table's
distinct coded records and their counts, in one statement, so one consistent
view of the table; streamed by ``COPY`` and parsed into integer columns block by
block, :func:`integer_rows`), and every clique is counted from it. A table written to
after the open changes nothing the engine answers from, and no transaction is
held open on the server (which would keep it from vacuuming). Identifiers come
only from the schema and the given table name, and are quoted by
``psycopg.sql.Identifier``. The URL's password
never appears in a message: :func:`redact_url` removes it, and errors from
the driver are reported by their class and redacted text.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Generator, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from numpy.typing import NDArray

from pmwcm.data.schema import Schema
from pmwcm.data.sources.sql import DIALECTS, ColumnKind
from pmwcm.data.sources.sql_source import Parameters, SQLSource
from pmwcm.data.table import DataError

__all__ = [
    "COPY_BLOCK_BYTES",
    "ConnectionFailed",
    "PostgresSource",
    "column_kind",
    "integer_rows",
    "is_postgres_url",
    "redact_url",
]

#: Bytes of the snapshot's ``COPY`` text parsed at a time (16 MiB, a few hundred thousand
#: rows of keys): what the open holds beyond the snapshot itself, whatever the rows. With
#: one Python tuple a row (``fetchall``), 10^6 distinct records took 247 MiB more than
#: their 13 MB snapshot (benchmarks/snapshot_transfer.py).
COPY_BLOCK_BYTES = 2**24

_KINDS: dict[str, ColumnKind] = {
    "text": "text",
    "character varying": "text",
    "character": "text",
    "smallint": "integer",
    "integer": "integer",
    "bigint": "integer",
    "real": "float",
    "double precision": "float",
    "numeric": "float",
    "boolean": "boolean",
}


def integer_rows(text: bytes | bytearray, width: int) -> list[NDArray[np.int64]]:
    """Whole lines of ``COPY ... TO STDOUT`` text (tab-separated integers, no NULL) as
    ``width`` columns.

    >>> [column.tolist() for column in integer_rows(b"1\\t20\\n3\\t40\\n", 2)]
    [[1, 3], [20, 40]]

    Raises:
        ValueError: the text is not ``width`` integers on every line (never data: the
            snapshot query's columns are non-NULL integers).
    """
    values = np.fromstring(bytes(text), dtype=np.int64, sep=" ")  # any whitespace splits
    lines = text.count(b"\n")
    if values.size != lines * width:
        raise ValueError(f"COPY gave {values.size} integers for {lines} rows of {width} columns.")
    table = values.reshape(lines, width)
    return [np.ascontiguousarray(table[:, j]) for j in range(width)]


def column_kind(type_name: str) -> ColumnKind | None:
    """How the schema's rules read a PostgreSQL ``data_type`` (``None``: they cannot)."""
    return _KINDS.get(type_name)


def is_postgres_url(text: str) -> bool:
    """Whether ``text`` is a PostgreSQL connection URL.

    >>> is_postgres_url("postgresql://u@db/x"), is_postgres_url("data.csv")
    (True, False)
    """
    return re.match(r"postgres(ql)?://", text) is not None


def redact_url(url: str) -> str:
    """The URL without its password (safe to print).

    >>> redact_url("postgresql://ann:s3cret@db:5432/x?sslmode=require")
    'postgresql://ann:***@db:5432/x?sslmode=require'
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://***"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def _redacted(text: str, url: str) -> str:
    """``text`` with the URL's password (and the URL itself) masked out."""
    password = urlsplit(url).password
    text = text.replace(url, redact_url(url))
    return text.replace(password, "***") if password else text


class ConnectionFailed(DataError):
    """The server could not be reached or refused the login (the table was never read).

    Attributes:
        driver_error: the driver's exception class (``OperationalError``), for a
            message that leaves out the driver's text (hosts, sockets).
    """

    def __init__(self, message: str, *, driver_error: str) -> None:
        super().__init__(message)
        self.driver_error = driver_error


class PostgresSource(SQLSource):
    """A PostgreSQL table, validated against the schema when opened.

    Args:
        url: ``postgresql://...`` (credentials are never echoed).
        table: ``"table"`` or ``"schema.table"``.
        schema: the public pmwcm schema.
        label: names the server in messages (default: the URL without its password;
            the service passes its connection's name).

    Raises:
        ConnectionFailed: the server cannot be reached or refuses the login.
        DataError: the table or a column is
            missing or of an unreadable type, or rows fail the schema.
    """

    def __init__(self, url: str, table: str, schema: Schema, *, label: str | None = None) -> None:
        import psycopg
        from psycopg import sql

        self._connection: Any = None
        shown = label if label is not None else redact_url(url)
        parts = table.split(".")
        if not table or len(parts) > 2 or not all(parts):
            raise DataError(f"--table must be 'table' or 'schema.table', got {table!r}.")
        try:
            connection = psycopg.connect(url, autocommit=False)
        except psycopg.Error as exc:
            first = _redacted(str(exc).strip().splitlines()[0] if str(exc).strip() else "", url)
            raise ConnectionFailed(
                f"cannot connect to {shown}: {type(exc).__name__}: {first}",
                driver_error=type(exc).__name__,
            ) from None
        self._connection = connection
        # Closed with the source even if the caller forgets close() (ends the transaction).
        self._finalizer = weakref.finalize(self, connection.close)
        try:
            connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            connection.read_only = True
            namespace, name = parts if len(parts) == 2 else (None, parts[0])
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    "WHERE table_name = %s AND table_schema = COALESCE(%s, current_schema()) "
                    "ORDER BY ordinal_position",
                    (name, namespace),
                )
                columns = {str(c): str(t) for c, t in cursor.fetchall()}
            if not columns:
                # information_schema lists only the columns this user may read, so an
                # empty list is also what a table without SELECT privilege gives.
                cursor = connection.execute(
                    "SELECT to_regclass(%s) IS NOT NULL",
                    (sql.Identifier(*parts).as_string(connection),),
                )
                exists = cursor.fetchone()
                if exists is not None and exists[0]:
                    raise DataError(
                        f"permission denied: the user of {shown} cannot read table {table!r} "
                        "(ask for GRANT SELECT on it)."
                    )
                raise DataError(f"table {table!r} not found in {shown}.")
            kinds = {c: k for c, t in columns.items() if (k := column_kind(t)) is not None}
            relation = sql.Identifier(*parts).as_string(connection)
            super().__init__(
                schema,
                relation=relation,
                columns=columns,
                kinds=kinds,
                dialect=DIALECTS["postgresql"],
                where=f"table {table!r}",
            )
        except psycopg.Error as exc:
            self.close()
            raise DataError(
                f"cannot read table {table!r}: {type(exc).__name__}: "
                f"{_redacted(str(exc).strip().splitlines()[0], url)}"
            ) from None
        except Exception:
            self.close()
            raise

    def _column_blocks(
        self, query: str, width: int, parameters: Parameters
    ) -> Generator[Sequence[NDArray[np.integer]], None, None]:
        """The result streamed by ``COPY (query) TO STDOUT`` and parsed block by block
        (:func:`integer_rows`), never more than :data:`COPY_BLOCK_BYTES` of text held."""
        assert not parameters, "this source's dialect binds no code tables"
        # composed from quoted identifiers and literals only
        statement = f"COPY ({query}) TO STDOUT".encode()
        with self._connection.cursor() as cursor, cursor.copy(statement) as copy:
            pending = bytearray()
            for data in copy:
                pending += data
                if len(pending) >= COPY_BLOCK_BYTES:
                    cut = pending.rindex(b"\n") + 1
                    yield integer_rows(pending[:cut], width)
                    del pending[:cut]
            if pending:
                yield integer_rows(pending, width)

    def close(self) -> None:
        """Closes the connection (idempotent; done as soon as the snapshot is taken)."""
        if self._connection is not None:
            self._connection = None
            self._finalizer()
