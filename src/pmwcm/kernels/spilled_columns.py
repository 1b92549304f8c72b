"""A snapshot's columns in a private file, mapped read-only, when they outgrow memory.

The pinned snapshot (:class:`~pmwcm.kernels.coded_records.CodedRecords`) holds one
narrow code a distinct record and attribute, plus a count. A table of mostly
distinct records has about as many snapshot rows as records: at ``10^8`` records
of 17 one-byte attributes, 1.8 GB. Past :data:`SPILL_BYTES`, the open writes the
columns to files instead, one per column, appended block by block, and maps them
read-only: the snapshot then lives in the page cache, which the system may
reclaim, not in the process's own memory, and counting a clique reads it a block
at a time and lets each block's pages go (:func:`release_pages`).

The files are private: created in a fresh directory that only this user can
enter (``tempfile.mkdtemp``: mode ``0700``), each file unlinked as soon as it is
mapped and the directory removed, so nothing is left on disk once the process
ends, however it ends, and no other process finds them by name. The data they
hold is the snapshot's, so they are exactly as private as the process's memory
(and as DuckDB's own spill directory beside them). They live in the temporary
directory (``TMPDIR``): a RAM-backed one would hold them in memory after all, and
one without room makes the open fail with a one-line error naming it
(:mod:`pmwcm.data.sources.sql_source`), nothing spent.
"""

from __future__ import annotations

import mmap
import os
import shutil
import tempfile
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["SPILL_BYTES", "ColumnFiles", "file_map", "release_pages"]

#: A snapshot whose codes pass this many bytes is moved to private files (64 MiB: at
#: 10^8 distinct records the open peaked at 974 MiB with 256 MiB held before the move,
#: beside DuckDB's buffers).
SPILL_BYTES = 2**26


class ColumnFiles:
    """Columns appended block by block to private files, then mapped read-only.

    Args:
        dtypes: each column's dtype, in order.
    """

    def __init__(self, dtypes: list[np.dtype]) -> None:
        self._dtypes = [np.dtype(d) for d in dtypes]
        self._directory = tempfile.mkdtemp(prefix="pmwcm-snapshot-")
        self._files = [
            open(os.path.join(self._directory, f"c{j}"), "wb")  # noqa: SIM115 (kept open)
            for j in range(len(dtypes))
        ]
        self._rows = [0] * len(dtypes)

    def append(self, column: int, block: NDArray[Any]) -> None:
        """Writes ``block`` at the end of column ``column`` (cast to its dtype)."""
        data = np.ascontiguousarray(block, dtype=self._dtypes[column])
        self._files[column].write(data.data)
        self._rows[column] += data.size

    def mapped(self) -> list[NDArray[Any]]:
        """Every column, mapped read-only (its file already gone from the directory,
        the directory removed). Ends the writing."""
        if len(set(self._rows)) > 1:
            self.discard()
            raise ValueError("every column must have as many rows.")
        columns = []
        try:
            for file, dtype, rows in zip(self._files, self._dtypes, self._rows, strict=True):
                file.flush()
                if rows == 0:
                    columns.append(np.empty(0, dtype=dtype))
                    continue
                with open(file.name, "rb") as reader:
                    pages = mmap.mmap(
                        reader.fileno(), rows * dtype.itemsize, access=mmap.ACCESS_READ
                    )
                columns.append(np.frombuffer(pages, dtype=dtype, count=rows))
        finally:
            self.discard()
        return columns

    def discard(self) -> None:
        """Closes and removes the files (the maps already made stay valid; idempotent)."""
        for file in self._files:
            file.close()
        shutil.rmtree(self._directory, ignore_errors=True)


def file_map(array: NDArray[Any]) -> mmap.mmap | None:
    """The read-only map of a file that ``array`` views (:meth:`ColumnFiles.mapped`),
    else ``None``: an anonymous map is writable, so it is never one."""
    base = array.base
    if isinstance(base, memoryview) and base.readonly and isinstance(base.obj, mmap.mmap):
        return base.obj
    return None


def release_pages(array: NDArray[Any], start: int, stop: int) -> None:
    """Lets the pages of ``array[start:stop]`` go from this process, where ``array`` is
    a read-only map of a file (:meth:`ColumnFiles.mapped`); else does nothing.

    The pages stay in the system's page cache (read back from it, or from the file,
    when next touched), but no longer count in this process's resident memory, so a
    pass over a mapped snapshot holds one block of it, not all of it.
    """
    # Only a read-only map of a file: on a private anonymous map (such as
    # ``coded_records.own_pages``'s) the same advice would zero the pages.
    pages = file_map(array)
    if pages is None:
        return
    size = array.itemsize
    first = start * size // mmap.PAGESIZE * mmap.PAGESIZE  # whole pages only
    last = min(stop * size, len(pages))
    if last > first:
        pages.madvise(mmap.MADV_DONTNEED, first, last - first)
