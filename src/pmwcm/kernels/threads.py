"""How many threads BLAS may use under the library's kernels.

The engine's BLAS calls are small (a clique table's solve) or memory-bound (a
pass over the histogram): extra BLAS threads cannot speed them up, and on a
loaded machine OpenBLAS's spinning threads contend for the cores and slow a
kernel by up to 5x (issue 18; ``benchmarks/throughput.py`` measures it). So
the library does not leave this to ``OPENBLAS_NUM_THREADS``:

* :func:`blas_threads` limits BLAS inside a block (the engine wraps each round
  in it: half a microsecond when every BLAS is already at the limit, tens of
  microseconds when it must set and restore, so it goes around rounds, not
  single kernels);
* :func:`limit_blas_threads` sets the limit for the rest of the process (the
  ``pmwcm`` command line does, before any command runs).

Both go through threadpoolctl, which finds every BLAS loaded in the process
(NumPy's and SciPy's OpenBLAS, MKL, BLIS) and calls its own setter.

>>> with blas_threads(1):
...     pass
"""

from __future__ import annotations

import functools
from contextlib import AbstractContextManager
from typing import Any

from threadpoolctl import ThreadpoolController

__all__ = ["blas_threads", "limit_blas_threads"]


@functools.cache
def _controller() -> ThreadpoolController:
    """The process's thread pools, found once (the search reads every loaded library,
    about a millisecond; a BLAS loaded later is not in it: see :func:`limit_blas_threads`)."""
    return ThreadpoolController()


def blas_threads(threads: int = 1) -> AbstractContextManager[None]:
    """Limits every BLAS to ``threads`` threads inside the block, then restores them.

    Raises:
        ValueError: for ``threads < 1``.
    """
    if not (isinstance(threads, int) and threads >= 1):
        raise ValueError(f"threads must be a positive integer, got threads={threads!r}.")
    return _BlasThreads(threads)


class _BlasThreads(AbstractContextManager[None]):
    """:func:`blas_threads`' block: a class, not a generator, since the engine enters
    one per round and a generator's context costs about a microsecond more."""

    __slots__ = ("_limiter", "_threads")

    def __init__(self, threads: int) -> None:
        self._threads = threads
        self._limiter: Any = None

    def __enter__(self) -> None:
        threads = self._threads
        if any(library.get_num_threads() > threads for library in _blas_libraries()):
            self._limiter = _controller().limit(limits=threads, user_api="blas")
        # Otherwise every BLAS already runs at most this many threads (the pmwcm
        # command sets it for the process): nothing to set or restore, and the
        # limit's own cost (tens of us, once per engine round) is saved.

    def __exit__(self, *exc_info: object) -> None:
        if self._limiter is not None:
            self._limiter.restore_original_limits()
            self._limiter = None


@functools.cache
def _blas_libraries() -> tuple[Any, ...]:
    """The BLAS controllers of :func:`_controller` (each reads its thread count directly)."""
    return tuple(lib for lib in _controller().lib_controllers if lib.user_api == "blas")


def limit_blas_threads(threads: int = 1) -> None:
    """Limits every BLAS to ``threads`` threads for the rest of the process.

    Raises:
        ValueError: for ``threads < 1``.
    """
    if not (isinstance(threads, int) and threads >= 1):
        raise ValueError(f"threads must be a positive integer, got threads={threads!r}.")
    # A fresh search: every BLAS loaded so far, not only those of the cached controller.
    ThreadpoolController().limit(limits=threads, user_api="blas")
