"""The support backend on a GPU: a prepared check, correctness, then timings (issue 37 item 5).

1. **Correctness.** A support of ``--check-size`` records on a small universe is
   held twice, on the host (NumPy and numba, ``--device cpu``) and on the array
   device (:mod:`pmwcm.kernels.array_device`); their marginals, a reweight, a
   sample and a 20-step prior fit must agree to ``1e-12`` relative (the sample
   exactly). Prints the largest relative difference of each and ``PASS``/``FAIL``.
2. **Timings** at each ``--sizes`` ``M`` (the issue's anchor: a 3-attribute clique
   of 10^6 cells, uint8 codes held column-major, so the marginal reads only its
   three columns whatever the number of attributes): the marginal (device work
   alone, and with its table copied to the host), a below-threshold round's
   hypothesis side (a fresh query clique's marginal, to the host: what the engine
   reads before its sparse-vector check), and an update (reweight and normalise),
   each the median of ``--repeats`` after two warm-ups, beside the host path's
   ``bincount`` on the same records. Prints the card's name.

On a GPU machine (``pip install -e '.[gpu]'``)::

    python benchmarks/gpu_check.py                                  # cuda; M = 1e7, 1e8

Anywhere, the same array path on NumPy's namespace::

    python benchmarks/gpu_check.py --device cpu --sizes 100000 1000000

Nothing is asserted but the correctness check (exit status 1 on a ``FAIL``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pmwcm.kernels import cuda_kernels, support_array
from pmwcm.kernels.array_device import ArrayDevice, resolve_device
from pmwcm.kernels.clique_table import cell_codes
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.priors.marginals import Measurement, pairwise_cliques
from pmwcm.mechanisms.priors.support import fit_support

RTOL = 1e-12


def _device(name: str) -> ArrayDevice:
    """``--device cpu`` runs the array path on NumPy's namespace (not the host path), with
    the fused kernels under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
    found = resolve_device(name)
    if found is not None:
        return found
    import array_api_compat.numpy

    return ArrayDevice(array_api_compat.numpy, name="cpu", fused=cuda_kernels.load())


def _sync(dev: ArrayDevice) -> None:
    """Waits for the device's queued work (a timing must not stop at the launch)."""
    import array_api_compat

    probe = dev.xp.zeros(1, device=dev.device)
    if array_api_compat.is_cupy_array(probe):
        import cupy

        cupy.cuda.Device().synchronize()
    elif array_api_compat.is_torch_array(probe):
        import torch

        torch.cuda.synchronize()


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def check(dev: ArrayDevice, size: int) -> bool:
    """Step 1: the array path against the host path; prints one line per comparison."""
    domain = Domain.from_sizes({"a": 3, "b": 5, "c": 2, "d": 7, "e": 4})
    rng = np.random.default_rng(0)
    records = np.stack([rng.integers(0, s, size) for s in domain.sizes], axis=1)
    weights = rng.normal(scale=2.0, size=size)
    host = SupportHistogram(domain, records, weights)
    moved = SupportHistogram(domain, records, weights, device=dev)
    errors = {
        "marginal": max(
            _relative(moved.marginal(c), host.marginal(c)) for c in pairwise_cliques(domain)
        )
    }
    for h in (host, moved):
        h.reweight(("a", "d"), np.linspace(-1, 1, 21).reshape(3, 7))
    errors["reweight"] = _relative(moved.log_weights, host.log_weights)
    same = np.array_equal(
        moved.sample(10_000, rng=np.random.default_rng(1)),
        host.sample(10_000, rng=np.random.default_rng(1)),
    )
    truth = host.to_array()
    measured = [
        Measurement(clique=c, values=host.marginal(c) * 0.9 + 0.1 / truth.size, sigma=1e-3)
        for c in pairwise_cliques(domain)
    ]
    fits = [fit_support(h, measured, iterations=20, continuation=1) for h in (host, moved)]
    errors["fit (20 steps)"] = _relative(fits[1].log_weights, fits[0].log_weights)
    errors["large clique (occupied cells)"] = _large_clique(dev, size)
    for name, error in errors.items():
        print(f"check {name}: max relative difference {error:.2e}", flush=True)
    print(f"check sample: {'identical' if same else 'DIFFERENT'} draws", flush=True)
    passed = same and all(e <= RTOL for e in errors.values())
    label = dev.fused.name if dev.fused is not None else "array API operations"
    print(f"check {'PASS' if passed else 'FAIL'} ({label}, M = {size:,}, rtol {RTOL:g})")
    return passed


def _large_clique(dev: ArrayDevice, size: int) -> float:
    """A clique past the dense limit: occupied cells found on the device, its table's mass
    and a reweight through it, against the host; ``inf`` where the cells differ."""
    domain = Domain.from_sizes({"a": 300, "b": 300, "c": 40, "y": 2})
    rng = np.random.default_rng(2)
    records = np.stack([rng.integers(0, s, size) for s in domain.sizes], axis=1)
    weights = rng.normal(size=size)
    host = SupportHistogram(domain, records, weights)
    moved = SupportHistogram(domain, records, weights, device=dev)
    clique = ("a", "b", "c")
    tables = [h.clique_table(clique) for h in (host, moved)]
    if not np.array_equal(tables[0].codes, tables[1].codes):
        return float("inf")
    factor = rng.normal(size=tables[0].codes.shape)
    for h, table in zip((host, moved), tables, strict=True):
        h.reweight_table(clique, table, factor)
    return max(
        _relative(tables[1].mass, tables[0].mass),
        _relative(moved.log_weights, host.log_weights),
    )


def median_ms(run: Callable[[], Any], dev: ArrayDevice, repeats: int) -> float:
    times = []
    for attempt in range(repeats + 2):
        _sync(dev)
        start = time.perf_counter()
        run()
        _sync(dev)
        if attempt >= 2:  # two warm-ups: compilation, allocation pools
            times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def timings(dev: ArrayDevice, size: int, repeats: int) -> dict[str, object]:
    """Step 2 at ``M = size`` records (a 3-attribute clique of 10^6 cells)."""
    rng = np.random.default_rng(size)
    sizes = (100, 100, 100, 100)
    host_columns = np.stack([rng.integers(0, s, size, dtype=np.uint8) for s in sizes])
    columns = dev.asarray(host_columns)
    log_w, p = support_array.normalised(dev, dev.asarray(rng.normal(size=size)))
    clique, fresh = (0, 1, 2), (1, 2, 3)
    cells = 100**3
    factor = rng.normal(scale=0.01, size=(100,) * 3)

    def scatter() -> Any:
        return support_array.device_marginal(dev, columns, p, clique, sizes[:3])

    def to_host() -> Any:
        return support_array.marginal(dev, columns, p, clique, sizes[:3])

    def round_side() -> Any:
        return support_array.marginal(dev, columns, p, fresh, sizes[1:])

    def update() -> Any:
        shifted = support_array.plus_gathered(dev, log_w, columns, clique, sizes[:3], factor)
        return support_array.normalised(dev, shifted)

    host_p = dev.to_numpy(p)
    host_rows = np.asfortranarray(host_columns.T)

    def host_marginal() -> Any:
        codes = cell_codes(host_rows, clique, sizes[:3])
        return np.bincount(codes, weights=host_p, minlength=cells)

    marginal_ms = median_ms(scatter, dev, repeats)
    return {
        "M": size,
        "path": dev.fused.name if dev.fused is not None else "array API",
        "marginal_ms": round(marginal_ms, 3),
        "marginal_to_host_ms": round(median_ms(to_host, dev, repeats), 3),
        "below_threshold_round_ms": round(median_ms(round_side, dev, repeats), 3),
        "update_ms": round(median_ms(update, dev, repeats), 3),
        "host_bincount_ms": round(median_ms(host_marginal, dev, max(1, repeats // 5)), 1),
        # Bytes the marginal must read: three uint8 codes and a float64 weight per record.
        "marginal_GB_per_s": round(size * 11 / (marginal_ms * 1e-3) / 1e9, 1),
    }


def copy_bandwidth(dev: ArrayDevice, gigabytes: float = 4.0, repeats: int = 10) -> float:
    """The card's device-to-device copy rate (bytes read plus written per second, GB/s):
    the ceiling a memory-bound pass is measured against in the same run."""
    xp = dev.xp
    source = xp.ones(int(gigabytes * 1e9 / 8), dtype=xp.float64, device=dev.device)
    milliseconds = median_ms(lambda: xp.asarray(source, copy=True), dev, repeats)
    return round(2 * gigabytes / (milliseconds * 1e-3), 1)


def _environment(dev: ArrayDevice) -> None:
    """The card and the library versions, first: a run's numbers name what made them."""
    from importlib import metadata

    names = ["numpy", "numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "torch"]
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    print(f"device: {dev.name} (namespace {dev.xp.__name__}); {', '.join(found)}")
    fused = dev.fused.name if dev.fused is not None else "not available (array API operations only)"
    print(f"fused kernels: {fused}", flush=True)
    for reason in getattr(dev.fused, "passed_over", ()):
        print(f"  passed over: {reason}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e7, 1e8])
    parser.add_argument("--check-size", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    dev = _device(args.device)
    _environment(dev)
    variants = [dev] if dev.fused is None else [dev, dataclasses.replace(dev, fused=None)]
    passed = all([check(variant, args.check_size) for variant in variants])
    if dev.device is not None or dev.fused is not None or "cupy" in dev.xp.__name__:
        print(f"device-to-device copy: {copy_bandwidth(dev)} GB/s (read + written)", flush=True)
    rows = []
    for size in args.sizes:
        for variant in variants:
            rows.append(timings(variant, int(size), args.repeats))
            print(json.dumps(rows[-1]), flush=True)
    keys = list(rows[0])
    print("\n| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row[key]) for key in keys) + " |", flush=True)
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
