"""Where a session's private data lives: a file, a named PostgreSQL connection, or Spark.

The service takes the locations ``pmwcm run --data`` takes, each confined to
what the operator allows at start-up:

* ``data_path``: a file (CSV, in memory) or Parquet file or directory (DuckDB,
  in place), under ``--data-dir``;
* ``connection`` and ``table``: a PostgreSQL table, read once on a read-only
  connection named in ``--connections``;
* ``engine: "spark"`` with ``data_path`` (Parquet under ``--data-dir``) or
  ``table`` (the server's Spark catalog), once the operator allows Spark (``--spark``).

:func:`data_config` turns a request into the fields stored with the session:
an absolute path and the SHA-256 of its bytes, or a connection's *name* and a
table -- never a URL or a password, which stay in the operator's
:class:`~pmwcm.service.connections.Connections` and are looked up again by name
whenever the session is opened (:func:`open_private`), at creation and after
every restart. Each opening reads the data once, into the pinned snapshot the
session's engine answers from (docs/design.md section 8). The number of rows
``n`` (public) and a SHA-256 of the coded records (never released) are stored at
creation; a reopened file or table that holds other records, even as many, is
refused like a changed file, before anything is answered or charged.

Messages. At creation a refusal goes to the curator who named the data: it
names the field and the bad value (a column, a table, a connection), never a
data value, a URL or a password. Reopening after a restart can be answered to
an analyst: it says only that the data cannot be opened, and the server's log
(passwords scrubbed) has the cause.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pmwcm.data.schema import Schema
from pmwcm.mechanisms.private_data import PrivateData
from pmwcm.service.connections import Connections

__all__ = ["DataRefused", "SessionUnavailable", "data_config", "digest", "open_private"]

_log = logging.getLogger("pmwcm.service")


class SessionUnavailable(RuntimeError):
    """The session cannot be loaded (its files changed, or its stored state is inconsistent)."""


class DataRefused(ValueError):
    """The session's data cannot be used; the message is for the curator creating it."""


def digest(path: Path) -> str:
    """SHA-256 of a file's bytes, or of a directory's files (their relative names and bytes)."""
    sha = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        if file is not path:
            sha.update(str(file.relative_to(path)).encode("utf-8", "surrogateescape") + b"\0")
        with file.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                sha.update(chunk)
    return sha.hexdigest()


def _confine(path: str, data_dirs: Sequence[Path] | None) -> Path:
    """``data_path`` resolved, if it is a file or directory under ``data_dirs``."""
    if "://" in path:  # a URL is never a path here; never echo it (it may hold a password)
        scheme = path.partition("://")[0][:16]
        raise DataRefused(
            f"data_path is a {scheme}:// URL, not a file on the server; a PostgreSQL table is "
            "read through a connection the operator configured by name ('connection' and "
            "'table'; pmwcm serve --connections), a Spark catalog table with engine 'spark' "
            "and 'table'."
        )
    resolved = Path(path).resolve()
    if data_dirs is not None and not any(resolved.is_relative_to(d) for d in data_dirs):
        raise DataRefused(
            "data_path is not under the data directories this server allows (the operator "
            "sets them with pmwcm serve --data-dir)."
        )
    if not (resolved.is_file() or resolved.is_dir()):
        raise DataRefused("data_path: no such file or directory on the server.")
    return resolved


def data_config(
    *,
    data_path: str | None,
    connection: str | None = None,
    table: str | None = None,
    engine: str | None = None,
    data_dirs: Sequence[Path] | None = None,
    connections: Connections | None = None,
) -> dict[str, Any]:
    """The stored description of the session's data (checked; nothing is read yet).

    Raises:
        DataRefused: the fields do not name one location, a path is outside
            ``data_dirs`` or missing, or the connection is not configured (the message
            names the field and the value given, never a URL).
    """
    if engine not in (None, "duckdb", "spark"):
        raise DataRefused(f"engine must be 'duckdb' or 'spark', got {str(engine)[:32]!r}.")
    if connection is not None:
        if data_path is not None or engine is not None:
            raise DataRefused(
                "connection reads a PostgreSQL table: give it with table, and without "
                "data_path or engine."
            )
        if table is None:
            raise DataRefused(f"connection {connection!r} needs table (the table to read).")
        (connections or Connections()).url(connection)  # UnknownConnection: names the choices
        return {"connection": connection, "table": table}
    if engine == "spark":
        if connections is None or not connections.spark:
            raise DataRefused(
                "engine 'spark' is not enabled on this server (the operator enables it with "
                "pmwcm serve --spark)."
            )
        if (data_path is None) == (table is None):
            raise DataRefused("engine 'spark' reads one of data_path (Parquet) or table.")
        if table is not None:
            return {"engine": "spark", "table": table}
        assert data_path is not None
        path = _confine(data_path, data_dirs)
        return {"engine": "spark", "data_path": str(path), "data_sha256": digest(path)}
    if table is not None:
        raise DataRefused(
            f"table {table!r} needs a connection (PostgreSQL) or engine 'spark'; a file is "
            "given as data_path."
        )
    if data_path is None:
        raise DataRefused(
            "the session needs its data: data_path, connection with table, or engine 'spark'."
        )
    path = _confine(data_path, data_dirs)
    return {"data_path": str(path), "data_sha256": digest(path)}


def describe(config: Mapping[str, Any]) -> str:
    """The session's data as messages name it (no path, no URL)."""
    if "connection" in config:
        return f"table {config['table']!r} of connection {config['connection']!r}"
    if "table" in config:
        return f"Spark table {config['table']!r}"
    return "data_path"


def _scrub(text: str, url: str | None) -> str:
    """``text`` without the URL or its password."""
    if url is None:
        return text
    from pmwcm.data.sources.postgres import redact_url

    text = text.replace(url, redact_url(url))
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    return text.replace(password, "***") if password else text


def open_private(
    config: Mapping[str, Any],
    schema: Schema,
    *,
    connections: Connections | None,
    creating: bool,
) -> PrivateData:
    """Opens the session's private data where it lives (validated against ``schema``).

    Raises:
        DataRefused: at creation, naming what is wrong (for the curator).
        SessionUnavailable: on reopening (for anyone: no detail), or when a file
            changed or a table's ``n`` differs from the stored one.
    """
    from pmwcm.data.table import DataError

    where = describe(config)
    if "data_path" in config:
        path = Path(config["data_path"])
        if not path.exists() or digest(path) != config["data_sha256"]:
            _log.warning("session data_path ('%s') is missing or changed", path)
            raise SessionUnavailable(
                "The session's data_path is missing or changed since the session was created; "
                "the session cannot continue on other data."
            )
    url = None
    try:
        if "connection" in config:
            url = (connections or Connections()).url(config["connection"])
        private = _open(config, schema, url)
    except ImportError as err:  # an extra missing on the server
        raise _missing_module(err, where, creating=creating) from None
    except (DataError, ValueError) as err:
        raise _unreadable(err, config, where, url, creating=creating) from None
    stored = config.get("data_n")
    fingerprint = config.get("data_fingerprint")
    if (stored is not None and private.n != stored) or (
        fingerprint is not None and private.fingerprint() != fingerprint
    ):
        private.close()
        _log.warning("session data (%s) is not the data the session was created on", where)
        raise SessionUnavailable(
            "The session's data changed since the session was created; the session "
            "cannot continue on other data (the server's log names the data)."
        )
    return private


def _open(config: Mapping[str, Any], schema: Schema, url: str | None) -> PrivateData:
    """The session's data, opened where ``config`` says it lives (``url``: its
    connection's, for a PostgreSQL table).

    Raises:
        DataError, ValueError, ImportError: as the data source raises them.
    """
    from pmwcm.data.sources.open import open_source
    from pmwcm.data.table import Dataset

    if "connection" in config:
        from pmwcm.data.sources.postgres import PostgresSource

        assert url is not None  # open_private looked it up by the connection's name
        label = f"connection {config['connection']!r}"
        return PrivateData.of(PostgresSource(url, config["table"], schema, label=label))
    if config.get("engine") == "spark":
        data = config.get("table", config.get("data_path"))
        return PrivateData.of(open_source(data, schema, engine="spark", table=config.get("table")))
    if Path(config["data_path"]).suffix.lower() == ".csv":  # in memory (the server may fork)
        dataset = Dataset.from_csv(config["data_path"], schema)
        return PrivateData.from_records(dataset.domain, dataset.records)
    return PrivateData.of(open_source(config["data_path"], schema))  # Parquet, by DuckDB


_REOPEN_FAILED = "The session's data cannot be opened again; the server's log has the cause."


def _missing_module(err: ImportError, where: str, *, creating: bool) -> Exception:
    """The refusal of data whose reader needs a module the server lacks (logged)."""
    _log.warning("session data (%s) needs a module: %s", where, err)
    if not creating:
        return SessionUnavailable(_REOPEN_FAILED)
    return DataRefused(
        f"{where}: the server lacks the module {err.name!r} (pip install 'pmwcm[spark]')."
    )


def _unreadable(
    err: Exception, config: Mapping[str, Any], where: str, url: str | None, *, creating: bool
) -> Exception:
    """The refusal of data that could not be opened: on reopening, nothing but that (the
    cause, without the URL's password or the path, goes to the log); at creation, what
    is wrong for the curator, never a line of a file nor a driver's hosts and sockets."""
    detail = _scrub(str(err), url)
    if "data_path" in config:
        detail = detail.replace(str(config["data_path"]), "data_path")
    _log.warning("session data (%s) could not be opened: %s", where, detail)
    if not creating:
        return SessionUnavailable(_REOPEN_FAILED)
    if "data_path" in config and "engine" not in config:  # a file's line is never echoed
        return DataRefused(
            "data_path: the file could not be read as CSV or Parquet records under the "
            "schema; the server's log has the details."
        )
    from pmwcm.data.sources.postgres import ConnectionFailed

    if isinstance(err, ConnectionFailed):  # the driver's text names hosts and sockets
        return DataRefused(
            f"cannot connect through connection {config['connection']!r} "
            f"({err.driver_error}); the server's log has the details."
        )
    return DataRefused(f"{where}: {detail}")
