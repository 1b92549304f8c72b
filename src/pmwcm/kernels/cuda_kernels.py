"""Fused CUDA kernels for a support held on a GPU (``--device cuda``), in numba.

The array-API path of :mod:`pmwcm.kernels.support_array` builds each clique's
cell codes as an ``M``-long int64 array (Horner's rule, one pass per attribute)
and only then scatters the weights: at ``M = 10^8`` that writes and rereads
0.8 GB per attribute, several times the bytes the result needs. The two kernels
here read each record's codes and weight once and never materialise the codes:

* :func:`clique_marginal`: ``Dhat_C(c) = sum_{i : c_i = c} p_i``, each thread
  computing ``c_i = (x_{i,a_1} s_2 + x_{i,a_2}) s_3 + ...`` in registers and
  adding ``p_i`` to the table with a float64 atomic (the table, ``|C|`` cells,
  stays in the card's L2 cache for the cliques a query has);
* :func:`gather_add`: ``out_i += T(c_i)`` for a table ``T`` on the clique, the
  multiplicative-weights factor of a reweight and each term of the prior fit's
  gradient ``g_i = sum_k r_k(c_{i,k})``.

Both loop over records with a grid stride, so one launch covers any ``M``. A
table of at most :data:`SHARED_CELLS` cells is summed per block in shared memory
first (a pair of binary attributes has four cells: ``10^8`` atomics on four
global addresses would queue behind each other), then added to the table once
per block and cell. The
sums are the same numbers as the host's ``bincount`` up to the order of the
additions (atomics land in any order): equal to ``1e-12`` relative, which is
what ``benchmarks/gpu_check.py`` checks on a card.

**Two compilers, one contract.** :class:`NumbaKernels` writes the kernels in
numba (``cuda_bodies``); :class:`CupyKernels` writes the same arithmetic in
CUDA C for CuPy's runtime compiler, used on a CuPy device where numba's CUDA
target does not load. :func:`load` compiles and smoke-tests them on four public
records before any data is read; a compiler or driver that fails or sums wrong
leaves the device with the array library's own operations.

**The same code on the CPU.** numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``)
runs these kernels' Python bodies thread by thread on NumPy arrays; CI checks
them there against the host path (``tests/test_cuda_kernels.py``), so the code a
GPU runs is the code CI tested. :func:`load` returns ``None`` where numba's CUDA
target is missing or sees no device (and the simulator is off), and the array
path then keeps its unfused operations.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["SHARED_CELLS", "CupyKernels", "FusedKernels", "NumbaKernels", "load"]

#: Threads per block: a multiple of the warp, small enough to keep many blocks resident.
THREADS = 256
#: Blocks per multiprocessor a grid-stride launch asks for (enough to hide memory latency).
BLOCKS_PER_PROCESSOR = 32
#: The largest table summed in a block's shared memory first (float64: 32 KiB a block).
SHARED_CELLS = 4096


class FusedKernels:
    """The fused marginal and gather for one device, and the launch shape.

    Args:
        max_blocks: the most blocks one launch uses (``BLOCKS_PER_PROCESSOR`` per
            multiprocessor on a card).
        threads: threads per block.
    """

    name = "fused"

    def __init__(self, max_blocks: int, threads: int = THREADS) -> None:
        self.threads = threads
        self.max_blocks = max(1, max_blocks)
        #: Why compilers tried before this one were passed over (for status lines).
        self.passed_over: tuple[str, ...] = ()

    def _blocks(self, records: int) -> int:
        return max(1, min(self.max_blocks, math.ceil(records / self.threads)))

    def clique_marginal(
        self, out: Any, columns: Any, probabilities: Any, axes: Sequence[int], sizes: Sequence[int]
    ) -> None:
        """Adds each record's ``p_i`` to ``out`` (a zeroed ``prod(sizes)``-cell float64
        table) at its cell on the clique; ``columns`` has shape ``(m, M)``."""
        raise NotImplementedError

    def gather_add(
        self, out: Any, columns: Any, table: Any, axes: Sequence[int], sizes: Sequence[int]
    ) -> None:
        """``out_i += table[c_i]`` for every record (``table`` flat, C order, on the device)."""
        raise NotImplementedError

    def smoke_test(self, to_device: Callable[[Any], Any], to_host: Callable[[Any], Any]) -> None:
        """Compiles and runs both kernels on four public records, raising if either fails
        or is wrong (a card whose compiler or driver is broken must not serve answers)."""
        columns = to_device(np.array([[0, 1, 1, 0], [2, 0, 2, 1]], dtype=np.uint8))
        table = to_device(np.zeros(6))
        self.clique_marginal(table, columns, to_device(np.full(4, 0.25)), (0, 1), (2, 3))
        gathered = to_device(np.zeros(4))
        self.gather_add(gathered, columns, to_device(np.arange(6.0)), (0, 1), (2, 3))
        if not (np.allclose(to_host(table), [0, 0.25, 0.25, 0.25, 0, 0.25]) and
                np.array_equal(to_host(gathered), [2.0, 3.0, 5.0, 1.0])):  # fmt: skip
            raise ArithmeticError("the fused kernels' smoke test gave wrong sums")


class NumbaKernels(FusedKernels):
    """The kernels of :mod:`pmwcm.kernels.cuda_bodies`, compiled by ``numba.cuda.jit``
    (the real target, or the simulator CI runs them on)."""

    name = "fused (numba)"

    def __init__(self, cuda: Any, max_blocks: int, threads: int = THREADS) -> None:
        super().__init__(max_blocks, threads)
        from pmwcm.kernels import cuda_bodies  # imports numba.cuda: only where one is used

        self._marginal = cuda.jit(cuda_bodies.clique_marginal)
        self._gather_add = cuda.jit(cuda_bodies.gather_add)

    def clique_marginal(
        self, out: Any, columns: Any, probabilities: Any, axes: Sequence[int], sizes: Sequence[int]
    ) -> None:
        launch = self._marginal[self._blocks(probabilities.shape[0]), self.threads]
        launch(columns, probabilities, _tuple(axes), _tuple(sizes), out)

    def gather_add(
        self, out: Any, columns: Any, table: Any, axes: Sequence[int], sizes: Sequence[int]
    ) -> None:
        launch = self._gather_add[self._blocks(out.shape[0]), self.threads]
        launch(columns, table, _tuple(axes), _tuple(sizes), out)


def _tuple(values: Sequence[int]) -> tuple[int, ...]:
    """A clique's axes or sizes as a tuple of Python ints: numba compiles one kernel per
    clique width and unrolls Horner's rule over it."""
    return tuple(int(v) for v in values)


#: Widest clique whose Horner loop is unrolled at compile time (and whose axes and sizes
#: sit in registers); wider cliques take the kernels' general form.
UNROLLED_WIDTH = 4

#: The CUDA C of :class:`CupyKernels`: ``cuda_bodies``' arithmetic, one template per code type
#: ``T``, clique width ``W`` (``0``: any width, read from ``width``) and cell-code type ``C``.
#: An unrolled kernel keeps each attribute's column pointer and size in registers and
#: computes a record's cell in ``C`` (32 bits where the table has fewer than ``2^32``
#: cells: a GPU does 64-bit integer products in several instructions).
CUDA_SOURCE = r"""
template <typename T, int W, typename C>
struct Clique {
    const T* column[W];
    C size[W];
    __device__ __forceinline__ Clique(const T* columns, long long records,
                                      const long long* axes, const long long* sizes, int) {
#pragma unroll
        for (int j = 0; j < W; ++j) {
            column[j] = columns + axes[j] * records;
            size[j] = (C)sizes[j];
        }
    }
    __device__ __forceinline__ C cell(long long i) const {
        C code = 0;
#pragma unroll
        for (int j = 0; j < W; ++j) code = code * size[j] + (C)__ldg(column[j] + i);
        return code;
    }
};

template <typename T, typename C>
struct Clique<T, 0, C> {  // any width: axes and sizes read from memory (cached) per record
    const T* columns; long long records; const long long* axes; const long long* sizes;
    int width;
    __device__ __forceinline__ Clique(const T* columns_, long long records_,
                                      const long long* axes_, const long long* sizes_,
                                      int width_)
        : columns(columns_), records(records_), axes(axes_), sizes(sizes_), width(width_) {}
    __device__ __forceinline__ C cell(long long i) const {
        C code = 0;
        for (int j = 0; j < width; ++j) {
            code = code * (C)sizes[j] + (C)columns[axes[j] * records + i];
        }
        return code;
    }
};

template <typename T, int W, typename C>
__global__ void clique_marginal(const T* columns, long long records, const double* p,
                                const long long* axes, const long long* sizes, int width,
                                double* out, long long cells, int shared) {
    extern __shared__ double local[];
    const Clique<T, W, C> clique(columns, records, axes, sizes, width);
    if (shared) {
        for (long long c = threadIdx.x; c < cells; c += blockDim.x) local[c] = 0.0;
        __syncthreads();
    }
    long long stride = (long long)gridDim.x * blockDim.x;
    long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    // Two loops, not one atomic on a pointer chosen per record: the compiler then knows
    // each atomic's memory (shared or global) and need not issue a generic one.
    if (shared) {
        for (long long i = first; i < records; i += stride) {
            atomicAdd(local + clique.cell(i), __ldg(p + i));
        }
    } else {
        for (long long i = first; i < records; i += stride) {
            atomicAdd(out + clique.cell(i), __ldg(p + i));
        }
    }
    if (shared) {
        __syncthreads();
        for (long long c = threadIdx.x; c < cells; c += blockDim.x) {
            if (local[c] != 0.0) atomicAdd(out + c, local[c]);
        }
    }
}

template <typename T, int W, typename C>
__global__ void gather_add(const T* columns, long long records, const double* table,
                           const long long* axes, const long long* sizes, int width,
                           double* out) {
    const Clique<T, W, C> clique(columns, records, axes, sizes, width);
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < records;
         i += stride) {
        out[i] += __ldg(table + clique.cell(i));
    }
}
"""

#: NumPy code types to their C names (a support's codes are unsigned bytes up to 256 values).
_C_TYPES = {"uint8": "unsigned char", "uint16": "unsigned short", "int32": "int",
            "int64": "long long"}  # fmt: skip


def _instance(kernel: str, code_type: str, width: int, cells: int) -> str:
    """The template instance of ``kernel`` for a clique of ``width`` attributes and
    ``cells`` cells over records of ``code_type``."""
    unrolled = width if width <= UNROLLED_WIDTH else 0
    cell_type = "unsigned int" if unrolled and cells < 2**32 else "unsigned long long"
    return f"{kernel}<{_C_TYPES[code_type]}, {unrolled}, {cell_type}>"


class CupyKernels(FusedKernels):
    """:data:`CUDA_SOURCE` compiled by CuPy's runtime compiler (NVRTC)."""

    name = "fused (CUDA C)"

    def __init__(self, cupy: Any, max_blocks: int, threads: int = THREADS) -> None:
        super().__init__(max_blocks, threads)
        self._cupy = cupy
        names = [
            _instance(kernel, code_type, width, cells)
            for kernel in ("clique_marginal", "gather_add")
            for code_type in _C_TYPES
            for width in range(UNROLLED_WIDTH + 2)
            for cells in ((1, 2**32) if 0 < width <= UNROLLED_WIDTH else (1,))
        ]
        self._module = cupy.RawModule(code=CUDA_SOURCE, name_expressions=sorted(set(names)))
        self._cliques: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple] = {}

    def _clique(self, axes: Sequence[int], sizes: Sequence[int]) -> tuple:
        """A clique's axes and sizes on the device (copied once: a fit launches the same
        cliques' kernels at every step)."""
        key = (_tuple(axes), _tuple(sizes))
        if key not in self._cliques:
            cupy = self._cupy
            self._cliques[key] = (
                cupy.asarray(np.asarray(key[0], dtype=np.int64)),
                cupy.asarray(np.asarray(key[1], dtype=np.int64)),
                np.int32(len(axes)),
            )
        return self._cliques[key]

    def _kernel(self, name: str, columns: Any, width: int, cells: int) -> Any:
        return self._module.get_function(_instance(name, str(columns.dtype), width, cells))

    def clique_marginal(
        self, out: Any, columns: Any, probabilities: Any, axes: Sequence[int], sizes: Sequence[int]
    ) -> None:
        columns = self._cupy.ascontiguousarray(columns)  # the C reads row-major codes
        records, cells = probabilities.shape[0], out.shape[0]
        shared = cells <= SHARED_CELLS
        axes_d, sizes_d, width = self._clique(axes, sizes)
        self._kernel("clique_marginal", columns, len(axes), cells)(
            (self._blocks(records),), (self.threads,),
            (columns, np.int64(records), probabilities, axes_d, sizes_d, width, out,
             np.int64(cells), np.int32(shared)),
            shared_mem=8 * cells if shared else 0,
        )  # fmt: skip

    def gather_add(
        self, out: Any, columns: Any, table: Any, axes: Sequence[int], sizes: Sequence[int]
    ) -> None:
        columns = self._cupy.ascontiguousarray(columns)
        records = out.shape[0]
        axes_d, sizes_d, width = self._clique(axes, sizes)
        self._kernel("gather_add", columns, len(axes), table.size)(
            (self._blocks(records),),
            (self.threads,),
            (columns, np.int64(records), table, axes_d, sizes_d, width, out),
        )


def load(*, cupy: Any = None) -> FusedKernels | None:
    """The kernels for the current CUDA device: numba's where its CUDA target loads, else
    (given ``cupy``, the device's arrays being CuPy's) the CUDA C ones; ``None`` where
    neither compiles, runs and sums right (the simulator counts as a device: it is how CI
    runs the numba kernels).

    Reads only the machine (public), before any data is read.
    """
    try:
        from numba import config, cuda
    except ImportError:  # a numba without its CUDA target
        config = cuda = None  # type: ignore[assignment]
    if config is not None and config.ENABLE_CUDASIM:  # type: ignore[attr-defined]
        # One Python thread per CUDA thread there: keep launches small.
        simulated = NumbaKernels(cuda, max_blocks=2, threads=32)
        simulated.smoke_test(np.array, np.asarray)
        return simulated
    failures: list[str] = []
    candidates: list[Callable[[], tuple[FusedKernels, Callable, Callable]]] = []
    if cuda is not None and _sees_a_device(cuda):

        def numba_kernels() -> tuple[FusedKernels, Callable, Callable]:
            device = cuda.get_current_device()
            blocks = BLOCKS_PER_PROCESSOR * int(getattr(device, "MULTIPROCESSOR_COUNT", 1) or 1)
            return NumbaKernels(cuda, blocks), cuda.to_device, lambda a: a.copy_to_host()

        candidates.append(numba_kernels)
    if cupy is not None:

        def cupy_kernels() -> tuple[FusedKernels, Callable, Callable]:
            device = cupy.cuda.Device()
            processors = int(device.attributes["MultiProcessorCount"])
            kernels = CupyKernels(cupy, BLOCKS_PER_PROCESSOR * processors)
            return kernels, cupy.asarray, cupy.asnumpy

        candidates.append(cupy_kernels)
    for candidate in candidates:
        try:
            kernels, to_device, to_host = candidate()
            kernels.smoke_test(to_device, to_host)
            kernels.passed_over = tuple(failures)
            return kernels
        except Exception as error:  # a driver or compiler that fails: try the next
            failures.append(f"{candidate.__name__}: {type(error).__name__}: {error}"[:300])
    if failures:
        warnings.warn(
            "no fused CUDA kernels compiled and ran here (" + "; ".join(failures) + "); the "
            "support uses the array library's own operations.",
            RuntimeWarning,
            stacklevel=2,
        )
    return None


def _sees_a_device(cuda: Any) -> bool:
    """Whether numba's CUDA target finds a driver and a card (no card is no failure)."""
    try:
        return bool(cuda.is_available())
    except Exception:  # a broken driver install reads as no device
        return False
