"""What bounds the fused clique marginal on a card (issue 37 item 5), measured in one run.

The marginal ``Dhat_C(c) = sum_{i : c_i = c} p_i`` reads three byte codes and one
float64 weight per record and adds the weight to the record's cell with a float64
atomic. At ``M = 10^8`` records on a clique of ``10^6`` cells (the issue's anchor)
that is 1.1 GB read and ``10^8`` atomics into an 8 MB table held in L2. Which of the
two sets the pace decides what a faster kernel must change, so this run times, on
the same records and the same card:

* ``library``: :class:`pmwcm.kernels.cuda_kernels.CupyKernels`' marginal, the kernel
  the engine runs;
* ``before``: the CUDA C kernel this project shipped before (a generic atomic on a
  pointer chosen per record, 64-bit cell codes, the clique's axes read per record),
  kept here so the gain is a ratio in one run;
* ``four per thread``: the library's arithmetic with four records' loads issued
  before their four atomics (more memory requests in flight per thread);
* ``reads only``: the same reads and cell codes, summed in a register, one atomic
  per thread: the kernel without its atomics (a lower bound on any marginal that
  reads these bytes);
* ``atomics only``: ``10^8`` atomics to the same cells without reading a weight
  (a lower bound on any kernel that makes one atomic per record);
* ``copy``: the device-to-device copy rate, the bandwidth ceiling
  (:func:`gpu_check.copy_bandwidth`; every time is :func:`gpu_check.median_ms`'s).

Every kernel's table is checked against CuPy's ``bincount`` on the same records
(``1e-12`` relative) before it is timed; a wrong one is reported, not timed.

    python benchmarks/gpu_marginal_bounds.py --sizes 1e7 1e8      # on a CUDA machine
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import numpy as np
from gpu_check import copy_bandwidth, median_ms  # the same timing and ceiling as the check

from pmwcm.kernels import cuda_kernels
from pmwcm.kernels.array_device import ArrayDevice, resolve_device

#: The kernel this project shipped before (commit cd995ba), verbatim but for its
#: ``extern "C"`` name, for the ratio in one run.
BEFORE_SOURCE = r"""
__device__ __forceinline__ long long cell_of(const unsigned char* columns, long long records,
                                             long long i, const long long* axes,
                                             const long long* sizes, int width) {
    long long code = 0;
    for (int j = 0; j < width; ++j) {
        code = code * sizes[j] + (long long)columns[axes[j] * records + i];
    }
    return code;
}

extern "C" __global__ void before(const unsigned char* columns, long long records,
                                  const double* p, const long long* axes,
                                  const long long* sizes, int width, double* out,
                                  long long cells, int shared) {
    extern __shared__ double local[];
    if (shared) {
        for (long long c = threadIdx.x; c < cells; c += blockDim.x) local[c] = 0.0;
        __syncthreads();
    }
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < records;
         i += stride) {
        long long code = cell_of(columns, records, i, axes, sizes, width);
        atomicAdd((shared ? local : out) + code, p[i]);
    }
    if (shared) {
        __syncthreads();
        for (long long c = threadIdx.x; c < cells; c += blockDim.x) {
            if (local[c] != 0.0) atomicAdd(out + c, local[c]);
        }
    }
}
"""

#: The probes: three byte columns (0, 1, 2) of 100 values each, cells 10^6.
PROBE_SOURCE = r"""
__device__ __forceinline__ unsigned int cell(const unsigned char* c, long long records,
                                             long long i) {
    return ((unsigned int)__ldg(c + i) * 100u + __ldg(c + records + i)) * 100u
           + __ldg(c + 2 * records + i);
}

extern "C" __global__ void four_per_thread(const unsigned char* c, long long records,
                                           const double* p, double* out) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < records; i += 4 * stride) {
        unsigned int k0 = cell(c, records, i), k1 = cell(c, records, i + stride);
        unsigned int k2 = cell(c, records, i + 2 * stride);
        unsigned int k3 = cell(c, records, i + 3 * stride);
        double p0 = __ldg(p + i), p1 = __ldg(p + i + stride);
        double p2 = __ldg(p + i + 2 * stride), p3 = __ldg(p + i + 3 * stride);
        atomicAdd(out + k0, p0); atomicAdd(out + k1, p1);
        atomicAdd(out + k2, p2); atomicAdd(out + k3, p3);
    }
    for (; i < records; i += stride) atomicAdd(out + cell(c, records, i), __ldg(p + i));
}

extern "C" __global__ void reads_only(const unsigned char* c, long long records,
                                      const double* p, double* out) {
    long long stride = (long long)gridDim.x * blockDim.x;
    double sum = 0.0;
    unsigned int codes = 0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < records;
         i += stride) {
        codes += cell(c, records, i);
        sum += __ldg(p + i);
    }
    atomicAdd(out + (codes % 1000000u), sum);
}

extern "C" __global__ void atomics_only(const unsigned char* c, long long records,
                                        const double* p, double* out) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < records;
         i += stride) {
        // A multiplicative hash spreads the records over the cells as random codes do.
        atomicAdd(out + (unsigned int)((unsigned long long)i * 2654435761ull % 1000000ull),
                  1e-9);
    }
}
"""


class _Kernels:
    """The kernels compared, compiled once for the card."""

    def __init__(self, cupy) -> None:  # type: ignore[no-untyped-def]
        device = cupy.cuda.Device()
        self.blocks = cuda_kernels.BLOCKS_PER_PROCESSOR * int(
            device.attributes["MultiProcessorCount"]
        )
        self.threads = cuda_kernels.THREADS
        self.library = cuda_kernels.CupyKernels(cupy, self.blocks)
        self.before = cupy.RawKernel(BEFORE_SOURCE, "before")
        self.probes = cupy.RawModule(code=PROBE_SOURCE)


def measure(
    dev: ArrayDevice, kernels: _Kernels, size: int, repeats: int
) -> list[dict[str, object]]:
    """Every kernel on the 10^6-cell clique, then the library and the kernel before on a
    100-cell clique (summed in each block's shared memory first)."""
    import cupy

    rng = np.random.default_rng(size)
    host = np.stack([rng.integers(0, 100, size, dtype=np.uint8) for _ in range(4)])
    columns = cupy.asarray(host)
    p = cupy.asarray(rng.random(size))
    p /= p.sum()
    rows = _clique_rows(dev, kernels, columns, p, (0, 1, 2), repeats)
    return rows + _clique_rows(dev, kernels, columns, p, (3,), repeats)


def _clique_rows(
    dev: ArrayDevice, kernels: _Kernels, columns, p, axes: tuple[int, ...], repeats: int
):  # type: ignore[no-untyped-def]
    import cupy

    size = int(p.shape[0])
    sizes = (100,) * len(axes)
    cells = 100 ** len(axes)
    codes = cupy.zeros(size, dtype=cupy.int64)
    for a in axes:
        codes = codes * 100 + columns[a]
    truth = cupy.asnumpy(cupy.bincount(codes, weights=p, minlength=cells))
    del codes
    out = cupy.zeros(cells)
    shared = cells <= cuda_kernels.SHARED_CELLS
    before_args = (
        columns, np.int64(size), p, cupy.asarray(np.array(axes, dtype=np.int64)),
        cupy.asarray(np.array(sizes, dtype=np.int64)), np.int32(len(axes)), out,
        np.int64(cells), np.int32(shared),
    )  # fmt: skip
    grid = ((kernels.blocks,), (kernels.threads,))

    def launch(name: str) -> Callable[[], object]:
        if name == "library":
            return lambda: kernels.library.clique_marginal(out, columns, p, axes, sizes)
        if name == "before":
            memory = 8 * cells if shared else 0
            return lambda: kernels.before(*grid, before_args, shared_mem=memory)
        kernel = kernels.probes.get_function(name)
        return lambda: kernel(*grid, (columns, np.int64(size), p, out))

    names = ["library", "before"]
    if cells == 100**3:
        names += ["four_per_thread", "reads_only", "atomics_only"]
    rows = []
    for name in names:
        out.fill(0)
        launch(name)()
        row: dict[str, object] = {"M": size, "cells": cells, "kernel": name.replace("_", " ")}
        if name not in ("reads_only", "atomics_only"):
            table = cupy.asnumpy(out)
            error = float(np.max(np.abs(table - truth) / np.maximum(np.abs(truth), 1e-300)))
            if error > 1e-12:
                rows.append({**row, "error": error})
                print(json.dumps(rows[-1]), flush=True)
                continue
        ms = median_ms(launch(name), dev, repeats)
        rows.append({
            **row, "ms": round(ms, 3),
            # Bytes a marginal must read: its byte codes and a float64 weight a record.
            "GB_per_s_read": round(size * (8 + len(axes)) / (ms * 1e-3) / 1e9, 1),
            "atomics_per_ns": round(size / (ms * 1e6), 1),
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e7, 1e8])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    import cupy

    dev = resolve_device("cuda")
    assert dev is not None  # resolve_device refuses "cuda" without a card
    kernels = _Kernels(cupy)
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"device: {name}; device-to-device copy {copy_bandwidth(dev)} GB/s (read + written)")
    rows = [row for size in args.sizes for row in measure(dev, kernels, int(size), args.repeats)]
    keys = ["M", "cells", "kernel", "ms", "GB_per_s_read", "atomics_per_ns", "error"]
    print("\n| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row.get(key)) for key in keys) + " |", flush=True)


if __name__ == "__main__":
    main()
