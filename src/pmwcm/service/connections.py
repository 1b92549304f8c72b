"""Named database connections: the operator's secrets, referred to by name.

A session created over HTTP reads a PostgreSQL table through a connection the
operator configured when starting the server (``pmwcm serve --connections
FILE``), by its name: ``{"connection": "warehouse", "table": "census.adult"}``.
The URL, and the password in it, never travel through the API, never reach
the state store (a session stores the name only, and the name is looked up
again when the session is reloaded after a restart) and are never logged or
shown: the only way to print a :class:`Connections` is by its names.

The file is a JSON object from names to ``postgresql://`` URLs::

    {"warehouse": "postgresql://pmwcm_reader:s3cret@db.internal:5432/census"}

A URL may also leave the password out and let libpq find it on the server
(``~/.pgpass``, ``PGPASSFILE``, ``PGPASSWORD``). Like ``--data-dir`` for files,
the list is also the confinement rule for databases: a curator reaches only the
databases the operator named, never a host of their choosing.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = ["CONNECTION_NAME", "Connections", "UnknownConnection"]

#: What a connection's name may be (it is stored with the session and shown in messages).
CONNECTION_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class UnknownConnection(ValueError):
    """The curator named a connection this server was not started with."""


class Connections:
    """The operator's named ``postgresql://`` connections (printable by name only), and
    whether sessions may read through the server's Spark.

    Args:
        urls: name to URL.
        spark: let sessions read with ``engine: "spark"`` (``pmwcm serve --spark``):
            it starts, or joins, the Spark the server's set-up names.

    Raises:
        ValueError: a name that is not :data:`CONNECTION_NAME`, or a value that is
            not a ``postgresql://`` URL (the message names the connection, never the URL).

    >>> Connections({"warehouse": "postgresql://reader:s3cret@db/census"})
    Connections(['warehouse'])
    """

    def __init__(self, urls: Mapping[str, str] | None = None, *, spark: bool = False) -> None:
        checked: dict[str, str] = {}
        for name, url in (urls or {}).items():
            if not (isinstance(name, str) and re.match(CONNECTION_NAME, name)):
                raise ValueError(
                    f"connection name {str(name)[:64]!r} must be 1-64 letters, digits, "
                    "'_', '.' or '-' (starting with a letter or digit)."
                )
            if not (isinstance(url, str) and re.match(r"postgres(ql)?://", url)):
                raise ValueError(
                    f"connection {name!r} must be a postgresql:// URL (its value is not shown)."
                )
            checked[name] = url
        self._urls = checked
        self.spark = spark

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, spark: bool = False) -> Connections:
        """Reads a JSON object of name -> ``postgresql://`` URL.

        Raises:
            ValueError: the file cannot be read, is not such an object, or a
                connection is invalid (no URL is ever quoted).
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as err:
            raise ValueError(f"cannot read the connections file: {err.strerror or err}.") from None
        try:
            urls = json.loads(text)
        except ValueError:  # the parser's message may quote a line of the file
            raise ValueError("the connections file is not valid JSON.") from None
        if not isinstance(urls, dict):
            raise ValueError("the connections file must hold a JSON object of name -> URL.")
        return cls(urls, spark=spark)

    @property
    def names(self) -> tuple[str, ...]:
        """The connection names, sorted (public)."""
        return tuple(sorted(self._urls))

    def url(self, name: str) -> str:
        """The URL of connection ``name`` (a secret: never print it).

        Raises:
            UnknownConnection: naming ``name`` and the names this server has.
        """
        try:
            return self._urls[name]
        except KeyError:
            have = ", ".join(repr(n) for n in self.names) or "none (pmwcm serve --connections)"
            raise UnknownConnection(
                f"connection {name!r} is not configured on this server; it has {have}."
            ) from None

    def __repr__(self) -> str:
        return f"Connections({list(self.names)}{', spark=True' if self.spark else ''})"
