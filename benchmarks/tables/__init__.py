"""Public benchmark tables (TV16, Lending Club loans) with hand-written schemas; see README.md."""

from benchmarks.tables.load import TABLES, encode, load_table, schema_of

__all__ = ["TABLES", "encode", "load_table", "schema_of"]
