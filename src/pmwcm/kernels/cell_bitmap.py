"""A clique's occupied cells as a bitmap of all its cells, and each cell's rank in it.

A clique of ``C`` cells that records occupy sparsely is found in two passes over
the records' cell codes and one over a bitmap of ``C`` bits: the first pass sets
each code's bit (:func:`mark_codes`); :func:`rank_words` reads the set bits off
in order (the sorted occupied cells) and, per 64-bit word, how many are set
before it; the second pass then finds each code's rank among the occupied cells
as the set bits before its own (:func:`rank_of`). The bitmap and the word counts
take a quarter of a byte a cell, nothing is as long as the records, and nothing
is sorted. Both the support's clique tables (:mod:`pmwcm.kernels.support_cells`)
and the data's count tables (:mod:`pmwcm.kernels.coded_records`) count this way.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

__all__ = ["ONE", "add_ranked", "mark_codes", "popcount", "rank_of", "rank_words"]

ONE = np.uint64(1)
_M1, _M2, _M4 = (np.uint64(m) for m in (0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F))
_H01 = np.uint64(0x0101010101010101)


@njit(cache=True, nogil=True, inline="always")
def popcount(x: np.uint64) -> int:
    """The set bits of a 64-bit word (SWAR: pairs, nibbles, bytes, then one multiply)."""
    x = x - ((x >> ONE) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return int((x * _H01) >> np.uint64(56))


@njit(cache=True, nogil=True)
def rank_words(words: NDArray[np.uint64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The set bits' positions in order (the occupied cells, sorted) and, per word, the
    count of set bits before it."""
    before = np.empty(words.size, dtype=np.int64)
    occupied = 0
    for w in range(words.size):
        before[w] = occupied
        occupied += popcount(words[w])
    cells = np.empty(occupied, dtype=np.int64)
    k = 0
    for w in range(words.size):
        x = words[w]
        while x:
            lowest = x & (~x + ONE)
            cells[k] = 64 * w + popcount(lowest - ONE)
            k += 1
            x ^= lowest
    return cells, before


@njit(cache=True, nogil=True, inline="always")
def rank_of(words: NDArray[np.uint64], before: NDArray[np.int64], code: int) -> int:
    """The rank of occupied cell ``code`` among the occupied cells (:func:`rank_words`)."""
    below = (ONE << np.uint64(code & 63)) - ONE
    return before[code >> 6] + popcount(words[code >> 6] & below)


@njit(cache=True, nogil=True)
def mark_codes(words: NDArray[np.uint64], codes: NDArray[np.integer]) -> None:
    """Sets the bit of every cell code in ``codes``."""
    for code in codes:
        words[code >> 6] |= ONE << np.uint64(code & 63)


@njit(cache=True, nogil=True)
def add_ranked(
    mass: NDArray[np.float64],
    words: NDArray[np.uint64],
    before: NDArray[np.int64],
    codes: NDArray[np.integer],
    counts: NDArray[np.integer],
) -> None:
    """``mass[rank(codes[i])] += counts[i]`` (an empty ``counts``: one each)."""
    ones = counts.size == 0
    for i in range(codes.size):
        mass[rank_of(words, before, codes[i])] += 1.0 if ones else counts[i]
