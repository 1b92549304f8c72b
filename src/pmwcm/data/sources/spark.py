"""Spark: a table or Parquet data set counted by Spark SQL, for data that lives on a cluster.

Needs the optional extra ``pmwcm[spark]`` (``pyspark`` and ``pyarrow``, and Java 17). The
data is a Parquet path (a file or a directory, any file system Spark reads:
``hdfs://``, ``s3a://``, ...) or the name of a table in Spark's catalog. It is
registered as a temporary view and read once, at open, by the snapshot query of
:mod:`pmwcm.data.sources.sql_source`, run as Spark SQL on the cluster: only the
distinct coded records and their counts are collected to the driver (as Arrow
columns, not rows), every clique is counted from them, and the view is dropped at once. A table or
Parquet data set changed after the open changes nothing the engine answers from.

Pointing at a real cluster: pass your own ``SparkSession`` (the Python API),
or, from the command line, set the master the usual way before ``pmwcm run
--engine spark`` -- ``spark-submit --master yarn`` / ``spark://host:7077``, or
the ``PYSPARK_SUBMIT_ARGS`` / ``SPARK_HOME`` environment and
``spark-defaults.conf`` that ``SparkSession.builder.getOrCreate()`` reads.
Without any of these, Spark runs locally on this machine.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Generator, Sequence
from importlib import resources
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pmwcm.data.schema import Schema
from pmwcm.data.sources.sql import DIALECTS, ColumnKind
from pmwcm.data.sources.sql_source import Parameters, SQLSource
from pmwcm.data.table import DataError

__all__ = ["SparkSource", "column_kind"]

_VIEWS = itertools.count()
_KINDS: dict[str, ColumnKind] = {
    "string": "text",
    "varchar": "text",
    "char": "text",
    "tinyint": "integer",
    "smallint": "integer",
    "int": "integer",
    "bigint": "integer",
    "float": "float",
    "double": "float",
    "decimal": "float",
    "boolean": "boolean",
}


def column_kind(type_name: str) -> ColumnKind | None:
    """How the schema's rules read a Spark SQL type (``simpleString``; ``None``: they cannot).

    >>> column_kind("decimal(10,2)"), column_kind("date")
    ('float', None)
    """
    return _KINDS.get(type_name.split("(")[0])


def _quiet_session(session_type: Any) -> Any:
    """``getOrCreate()`` with the driver logging errors only and no console progress bars.

    The log configuration reaches the driver's JVM as it starts (a session that is
    already running keeps its own); PySpark's warning about the pandas version is
    about APIs pmwcm does not call.
    """
    log_config = resources.files("pmwcm.data.sources").joinpath("spark-log4j2.properties")
    builder = (
        session_type.builder.config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "ERROR")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log_config}")
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class SparkSource(SQLSource):
    """A Spark table or Parquet path, validated against the schema when opened.

    Args:
        data: a Parquet path, or a table name when ``table=True``.
        schema: the public pmwcm schema.
        spark: the ``SparkSession`` (default: ``SparkSession.builder.getOrCreate()``).
        table: read ``data`` as a catalog table name instead of a path.

    Raises:
        DataError: the path or table cannot be read, a column is missing or of
            an unreadable type, or rows fail the schema.
    """

    def __init__(
        self, data: str, schema: Schema, *, spark: Any = None, table: bool = False
    ) -> None:
        import pyarrow  # noqa: F401  (the snapshot's transfer: missing, refused before any read)
        from pyspark.errors import PySparkException
        from pyspark.sql import SparkSession

        if spark is None:  # ours to configure: a library prints no progress bars or WARN lines
            spark = _quiet_session(SparkSession)
        self._spark = spark
        self._view: str | None = None
        try:
            frame = self._spark.table(data) if table else self._spark.read.parquet(data)
        except PySparkException as exc:
            what = f"table {data!r}" if table else f"Parquet data '{data}'"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise DataError(f"Spark cannot read {what}: {type(exc).__name__}: {first}") from None
        self._view = f"pmwcm_source_{next(_VIEWS)}"
        frame.createOrReplaceTempView(self._view)
        columns = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
        kinds = {c: k for c, t in columns.items() if (k := column_kind(t)) is not None}
        try:
            super().__init__(
                schema,
                relation=self._view,
                columns=columns,
                kinds=kinds,
                dialect=DIALECTS["spark"],
                where=f"table {data!r}" if table else f"'{data}'",
            )
        except Exception:
            self.close()
            raise

    def _column_blocks(
        self, query: str, width: int, parameters: Parameters
    ) -> Generator[Sequence[NDArray[np.integer]], None, None]:
        """The result as Arrow record batches (``DataFrame.toArrow``): columns from the
        cluster to the driver, not one ``Row`` object a distinct record."""
        assert not parameters, "this source's dialect binds no code tables"
        for batch in self._spark.sql(query).toArrow().to_batches():
            yield [batch.column(j).to_numpy() for j in range(width)]

    def close(self) -> None:
        """Drops the temporary view (the session stays: it may be shared)."""
        if self._view is not None:
            view, self._view = self._view, None
            self._spark.catalog.dropTempView(view)
