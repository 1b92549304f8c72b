"""The bodies of :mod:`pmwcm.kernels.cuda_kernels`' kernels, compiled by ``numba.cuda.jit``.

Each thread walks the records ``i = t, t + T, t + 2T, ...`` (``t`` its index in
the grid, ``T`` the grid's size) and computes the record's cell on the clique
by Horner's rule, ``c_i = (x_{i,a_1} s_2 + x_{i,a_2}) s_3 + ...``, in registers.
They live in a module of their own because numba's CUDA simulator runs a body
by swapping the ``cuda`` global it reads for its own: the body must read
``cuda`` as a module global.
"""

# mypy: disable-error-code="call-arg, call-overload, attr-defined"
# (numba types its CUDA intrinsics, cuda.grid and cuda.threadIdx, for its own compiler, not
# for mypy; numba-cuda's float64 is not in numba's stubs)

from numba import cuda

try:  # numba-cuda (the CUDA target as its own package) has its own types
    from numba.cuda import float64
except ImportError:  # numba's built-in CUDA target (and its simulator) uses numba's
    from numba import float64

#: As :data:`pmwcm.kernels.cuda_kernels.SHARED_CELLS` (a kernel needs it as a constant).
SHARED_CELLS = 4096

__all__ = ["clique_marginal", "gather_add"]


def clique_marginal(columns, probabilities, axes, sizes, out):  # type: ignore[no-untyped-def]
    """``out[c_i] += p_i`` for every record (a float64 atomic: records share cells); a table
    of at most ``SHARED_CELLS`` cells is summed in the block's shared memory first."""
    cells = out.shape[0]
    local = cuda.shared.array(SHARED_CELLS, float64)
    shared = cells <= SHARED_CELLS
    if shared:
        for c in range(cuda.threadIdx.x, cells, cuda.blockDim.x):
            local[c] = 0.0
        cuda.syncthreads()
    records = probabilities.shape[0]
    for i in range(cuda.grid(1), records, cuda.gridsize(1)):
        code = 0
        for j in range(len(axes)):
            code = code * sizes[j] + int(columns[axes[j], i])
        if shared:
            cuda.atomic.add(local, code, probabilities[i])
        else:
            cuda.atomic.add(out, code, probabilities[i])
    if shared:
        cuda.syncthreads()
        for c in range(cuda.threadIdx.x, cells, cuda.blockDim.x):
            if local[c] != 0.0:
                cuda.atomic.add(out, c, local[c])


def gather_add(columns, table, axes, sizes, out):  # type: ignore[no-untyped-def]
    """``out_i += table[c_i]`` for every record (each thread writes its own records)."""
    records = out.shape[0]
    for i in range(cuda.grid(1), records, cuda.gridsize(1)):
        code = 0
        for j in range(len(axes)):
            code = code * sizes[j] + int(columns[axes[j], i])
        out[i] += table[code]
