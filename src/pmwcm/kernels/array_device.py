"""Where a support hypothesis's arrays live: the host (NumPy, numba) or a CUDA device.

``--device auto|cpu|cuda`` (:data:`DEVICES`) picks it. ``cpu`` (the default) keeps
today's NumPy and numba path; ``cuda`` runs the support's marginal, reweight,
sampling and prior fit (:mod:`pmwcm.kernels.support_array`) on a CUDA array
library's arrays; ``auto`` takes CUDA when one is importable and sees a device.
The choice reads only the settings and the machine (public), and is made before
any data is read: :func:`resolve_device` refuses ``cuda`` without a GPU then.

One code path serves every array library: it is written against the Python array
API standard (https://data-apis.org/array-api/2024.12/), reached through
``array_api_compat`` (NumPy, CuPy and PyTorch share it). The standard has no
scatter-add, which a weighted ``bincount`` needs; :meth:`ArrayDevice.scatter_add`
is that one primitive, taken from the library where it has one (``bincount`` in
NumPy and CuPy, ``index_add_`` in PyTorch) and written in the standard's own
operations otherwise (a one-hot matrix product in bounded blocks: exact for
positive weights, slow, used by the tests with ``array_api_strict`` to prove the
rest of the path stays within the standard). CI runs the path on NumPy's
namespace and on ``array_api_strict``; ``benchmarks/gpu_check.py`` checks it on
a GPU against the CPU path to ``1e-12`` relative.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from pmwcm.kernels import cuda_kernels
from pmwcm.kernels.cuda_kernels import FusedKernels

__all__ = [
    "DEVICES",
    "ArrayDevice",
    "DeviceName",
    "DeviceUnavailable",
    "array_device",
    "check_device_name",
    "resolve_device",
]

DeviceName = Literal["auto", "cpu", "cuda"]
DEVICES: tuple[DeviceName, ...] = get_args(DeviceName)
#: Cells times records one block of the standard-only scatter-add holds (8 bytes each).
ONE_HOT_BLOCK = 2**22


class DeviceUnavailable(ValueError):
    """``device="cuda"`` on a machine where no CUDA array library sees a device."""


def check_device_name(device: str) -> None:
    """Raises ``ValueError`` naming the setting unless ``device`` is one of :data:`DEVICES`."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got device={device!r}.")


@dataclass(frozen=True)
class ArrayDevice:
    """An array namespace (array API standard) and the device its arrays live on.

    Attributes:
        xp: the namespace (``array_api_compat``'s wrapper of NumPy, CuPy or PyTorch,
            or a library that is compliant itself, such as ``array_api_strict``).
        device: the device object arrays are made on (``None``: the library's default).
        name: a description for status lines (the card's name on a GPU).
        fused: the fused kernels (:mod:`pmwcm.kernels.cuda_kernels`) that replace the
            clique marginal's and the gather's separate passes on a card; ``None``: the
            standard's operations alone.
    """

    xp: Any
    device: Any = None
    name: str = "cpu"
    fused: FusedKernels | None = None

    def asarray(self, values: Any, dtype: Any = None) -> Any:
        """``values`` (host or device) as an array of this namespace, on this device."""
        return self.xp.asarray(values, dtype=dtype, device=self.device)

    def to_numpy(self, array: Any, *, copy: bool = True) -> NDArray[Any]:
        """``array`` on the host, as NumPy: a copy, or with ``copy=False`` possibly a view of
        it (a host array read in place: for a result the caller owns)."""
        import array_api_compat

        if array_api_compat.is_cupy_array(array):
            return np.asarray(array.get())
        if array_api_compat.is_torch_array(array):
            return np.asarray(array.detach().cpu().numpy())
        if array_api_compat.is_numpy_array(array):
            return np.array(array, copy=copy)
        host = np.from_dlpack(array)
        return host.copy() if copy else host

    def scatter_add(self, index: Any, weights: Any, size: int) -> Any:
        """``out[j] = sum_{i : index[i] = j} weights[i]`` for ``j < size`` (float64).

        The weighted ``bincount`` the standard lacks (module docstring).
        """
        import array_api_compat

        if array_api_compat.is_numpy_array(index):
            return np.asarray(np.bincount(index, weights=weights, minlength=size), dtype=np.float64)
        if array_api_compat.is_cupy_array(index):
            cupy = importlib.import_module("cupy")
            return cupy.bincount(index, weights=weights, minlength=size)
        if array_api_compat.is_torch_array(index):
            torch = importlib.import_module("torch")
            out = torch.zeros(size, dtype=weights.dtype, device=weights.device)
            return out.index_add_(0, index, weights)
        return self._one_hot_sum(index, weights, size)

    def _one_hot_sum(self, index: Any, weights: Any, size: int) -> Any:
        """:meth:`scatter_add` in the standard's operations: ``weights @ onehot(index)``,
        a block of records at a time (all weights positive: every sum exact to a few ulps)."""
        xp = self.xp
        cells = xp.arange(size, dtype=index.dtype, device=self.device)
        out = xp.zeros(size, dtype=xp.float64, device=self.device)
        block = max(1, ONE_HOT_BLOCK // max(size, 1))
        records = index.shape[0]
        for begin in range(0, records, block):
            end = min(records, begin + block)
            hot = xp.astype(index[begin:end, None] == cells[None, :], xp.float64)
            out = out + xp.matmul(weights[begin:end], hot)
        return out


def array_device(namespace: ModuleType | Any) -> ArrayDevice:
    """The host device of a CPU namespace (NumPy, ``array_api_strict``), for tests."""
    return ArrayDevice(xp=namespace, device=None, name=getattr(namespace, "__name__", "cpu"))


@functools.cache
def _cuda_device() -> ArrayDevice | None:
    """CuPy's (else PyTorch's) current CUDA device, if either is installed and sees one
    (probed once per process: a configuration is checked many times)."""
    if importlib.util.find_spec("array_api_compat") is None:
        return None
    import array_api_compat

    if importlib.util.find_spec("cupy") is not None:
        cupy = importlib.import_module("cupy")
        try:
            if cupy.cuda.runtime.getDeviceCount() > 0:
                props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
                name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
                xp = array_api_compat.array_namespace(cupy.zeros(1))
                return ArrayDevice(xp, None, name, cuda_kernels.load(cupy=cupy))
        except cupy.cuda.runtime.CUDARuntimeError:
            pass
    if importlib.util.find_spec("torch") is not None:
        torch = importlib.import_module("torch")
        if torch.cuda.is_available():
            xp = array_api_compat.array_namespace(torch.zeros(1))
            name = torch.cuda.get_device_name()
            return ArrayDevice(xp, torch.device("cuda"), name, cuda_kernels.load())
    return None


def resolve_device(device: str) -> ArrayDevice | None:
    """The array device for the setting ``device``; ``None`` for the host's NumPy path.

    Reads only the setting and the machine: call it before any data is read.

    >>> resolve_device("cpu") is None
    True

    Raises:
        DeviceUnavailable: ``device="cuda"`` and no CUDA array library sees a GPU.
        ValueError: ``device`` is not one of :data:`DEVICES`.
    """
    check_device_name(device)
    if device == "cpu":
        return None
    found = _cuda_device()
    if found is None and device == "cuda":
        raise DeviceUnavailable(
            "device='cuda' (--device cuda): no CUDA array library sees a GPU on this "
            "machine; install pmwcm[gpu] where one is, or choose device 'cpu'."
        )
    return found
