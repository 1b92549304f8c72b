"""The digest of a multiset of coded records, taken a batch of its sorted order at a time.

A service stores, with each session, a SHA-256 of the data it answered from
(:meth:`~pmwcm.kernels.coded_records.CodedRecords.fingerprint`), and compares it
when it opens the data again. The digest is of the multiset, whatever the row
order or the split of equal records into rows::

    SHA-256( sizes || c_1 || ... || c_m || counts )

where the distinct records are sorted lexicographically (attribute 1 first),
``c_j`` is their codes of attribute ``j`` and ``counts`` each one's number of
records, every number an ``int64``. Sorting all rows at once holds an ``int64``
order, sorted copies and ``int64`` counts: about 47 bytes a row (448 MiB for
``10^7`` rows of a 67 MiB snapshot), so a snapshot that fits in memory could not
be fingerprinted.

Above :data:`FINGERPRINT_BATCH_ROWS` rows the rows are taken in batches instead:
each row's code on the leading attributes (those whose cells multiply to at most
:data:`PREFIX_BUCKETS`) is its bucket; whole buckets, in code order, form
batches of at most that many rows where the data allows (one bucket is never
split); each batch is sorted and merged on its own, and its distinct records
are appended to private temporary files (unnamed, in a directory removed at
once), which are then read back in order into the digest. Every record of a
bucket sorts after every record of a lower bucket, and equal records share a
bucket, so the bytes hashed are the whole sort's, byte for byte: the digest
does not depend on the batching. Memory: one batch (about 64 bytes a row of it), and of
a spilled snapshot one block's pages; disk: the distinct records, narrow, and
their counts.
"""

from __future__ import annotations

import hashlib
import math
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels.spilled_columns import release_pages

__all__ = ["FINGERPRINT_BATCH_ROWS", "PREFIX_BUCKETS", "records_fingerprint"]

#: Rows sorted at a time (about 80 MiB of temporaries); a snapshot of at most this
#: many rows is sorted whole, in memory.
FINGERPRINT_BATCH_ROWS = 2**21
#: The leading attributes whose codes make a row's bucket have at most this many cells.
PREFIX_BUCKETS = 2**16
#: Rows read at a time when finding a batch's rows or counting the buckets.
_SCAN_ROWS = 2**20
#: Bytes read back from a batch file at a time.
_READ_BYTES = 2**24


def records_fingerprint(
    sizes: Sequence[int], columns: Sequence[NDArray[Any]], counts: NDArray[Any] | None
) -> str:
    """The hex SHA-256 of the multiset of records (the module's docstring)."""
    rows = len(columns[0]) if columns else 0
    if rows == 0:
        return hashlib.sha256(b"empty").hexdigest()
    sha = hashlib.sha256()
    sha.update(np.asarray(sizes, dtype=np.int64).tobytes())
    if rows <= FINGERPRINT_BATCH_ROWS:
        distinct, merged = _sorted_distinct(list(columns), counts)
        for column in distinct:
            sha.update(column.astype(np.int64).data)
        sha.update(merged.data)
        return sha.hexdigest()
    lead = _leading(sizes)
    files = _unnamed_files(len(columns) + 1)
    try:
        for first, last in _batches(_bucket_rows(sizes, columns, lead)):
            batch, weights = _batch(sizes, columns, counts, lead, first, last)
            distinct, merged = _sorted_distinct(batch, weights)
            del batch, weights
            for file, values in zip(files, [*distinct, merged], strict=True):
                file.write(np.ascontiguousarray(values).data)
        dtypes = [np.dtype(c.dtype) for c in columns] + [np.dtype(np.int64)]
        for file, dtype in zip(files, dtypes, strict=True):
            _hash_back(sha, file, dtype)
    finally:
        for file in files:
            file.close()
    return sha.hexdigest()


def _sorted_distinct(
    columns: list[NDArray[Any]], counts: NDArray[Any] | None
) -> tuple[list[NDArray[Any]], NDArray[np.int64]]:
    """The distinct records in lexicographic order (attribute 1 first) and each one's
    count (``int64``), equal rows merged."""
    order = np.lexsort(columns[::-1])
    ordered = [c[order] for c in columns]
    # Equal records are adjacent once sorted; each run merges into one row (counts summed).
    starts = np.zeros(order.size, dtype=bool)
    starts[0] = True
    for column in ordered:
        starts[1:] |= column[1:] != column[:-1]
    weights = (
        counts[order].astype(np.int64) if counts is not None else np.ones(order.size, np.int64)
    )
    merged = np.add.reduceat(weights, np.flatnonzero(starts))
    return [column[starts] for column in ordered], merged.astype(np.int64, copy=False)


def _leading(sizes: Sequence[int]) -> int:
    """How many leading attributes make the bucket: their cells at most
    :data:`PREFIX_BUCKETS`, and at least one attribute."""
    lead = 1
    while lead < len(sizes) and math.prod(sizes[: lead + 1]) <= PREFIX_BUCKETS:
        lead += 1
    return lead


def _scan(
    sizes: Sequence[int], columns: Sequence[NDArray[Any]], lead: int
) -> Iterator[tuple[int, int, NDArray[np.int64]]]:
    """Each block of rows ``[start, stop)`` with its rows' buckets; a spilled snapshot's
    pages of the block are let go once the caller is done with it."""
    rows = len(columns[0])
    for start in range(0, rows, _SCAN_ROWS):
        stop = min(start + _SCAN_ROWS, rows)
        prefix = np.zeros(stop - start, dtype=np.int64)
        for j in range(lead):
            prefix *= sizes[j]
            prefix += columns[j][start:stop]
        yield start, stop, prefix
        for column in columns:
            release_pages(column, start, stop)


def _bucket_rows(
    sizes: Sequence[int], columns: Sequence[NDArray[Any]], lead: int
) -> NDArray[np.int64]:
    """How many rows fall in each bucket."""
    rows = np.zeros(math.prod(sizes[:lead]), dtype=np.int64)
    for _, _, prefix in _scan(sizes, columns, lead):
        rows += np.bincount(prefix, minlength=rows.size)
    return rows


def _batches(bucket_rows: NDArray[np.int64]) -> Iterator[tuple[int, int]]:
    """Runs ``[first, last)`` of whole buckets, in order, of at most
    :data:`FINGERPRINT_BATCH_ROWS` rows each unless one bucket alone is larger."""
    first, held = 0, 0
    for bucket, count in enumerate(bucket_rows.tolist()):
        if held and held + count > FINGERPRINT_BATCH_ROWS:
            yield first, bucket
            first, held = bucket, 0
        held += count
    if held:
        yield first, len(bucket_rows)


def _batch(
    sizes: Sequence[int],
    columns: Sequence[NDArray[Any]],
    counts: NDArray[Any] | None,
    lead: int,
    first: int,
    last: int,
) -> tuple[list[NDArray[Any]], NDArray[Any] | None]:
    """The rows whose bucket lies in ``[first, last)``: their codes and counts, gathered
    a block at a time."""
    parts: list[list[NDArray[Any]]] = [[] for _ in columns]
    weights: list[NDArray[Any]] = []
    for start, stop, prefix in _scan(sizes, columns, lead):
        taken = np.flatnonzero((prefix >= first) & (prefix < last))
        for part, column in zip(parts, columns, strict=True):
            part.append(column[start:stop][taken])
        if counts is not None:
            weights.append(counts[start:stop][taken])
    joined = [np.concatenate(part) for part in parts]
    return joined, (np.concatenate(weights) if counts is not None else None)


def _unnamed_files(count: int) -> list[IO[bytes]]:
    """``count`` temporary files without a name, in a private directory removed at
    once: nothing is left on disk however the process ends."""
    directory = tempfile.mkdtemp(prefix="pmwcm-fingerprint-")
    try:
        return [tempfile.TemporaryFile(dir=directory) for _ in range(count)]
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _hash_back(sha: Any, file: IO[bytes], dtype: np.dtype) -> None:
    """Feeds ``file``'s values, written as ``dtype``, to ``sha`` as ``int64``."""
    file.flush()
    file.seek(0)
    step = _READ_BYTES // dtype.itemsize * dtype.itemsize
    while chunk := file.read(step):
        sha.update(np.frombuffer(chunk, dtype=dtype).astype(np.int64).data)
