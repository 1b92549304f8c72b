"""The fused CUDA kernels (:mod:`pmwcm.kernels.cuda_kernels`), run on the CPU by numba's
CUDA simulator: the code a GPU runs, checked against the host path in CI.

The simulator must be switched on before numba is imported, so the device tests
of ``tests/test_support_array.py`` run again in a child process with
``NUMBA_ENABLE_CUDASIM=1``, where its ``device`` fixture adds a device whose
marginal and gather are the fused kernels (marginals, reweights, the large
clique's occupied cells, samples, the prior fit and an engine's transcript, each
against the host to ``1e-12`` relative).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from pmwcm.kernels import cuda_kernels

TESTS = Path(__file__).resolve().parent


def test_the_device_tests_pass_on_the_fused_kernels_under_the_simulator() -> None:
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
         str(TESTS / "test_support_array.py"), "-k", "fused"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    passed = re.search(r"(\d+) passed", run.stdout)
    assert passed is not None and int(passed.group(1)) >= 12, run.stdout[-2000:]


def test_the_kernels_load_only_where_numba_sees_a_device() -> None:
    """Without the simulator, the kernels load exactly where numba's CUDA target sees a
    card (in CI: nowhere, and the array path stays unfused)."""
    from numba import config, cuda

    assert not config.ENABLE_CUDASIM  # type: ignore[attr-defined]
    assert (cuda_kernels.load() is not None) == bool(cuda.is_available())


def test_the_two_compilers_share_one_shared_memory_limit() -> None:
    from pmwcm.kernels import cuda_bodies

    assert cuda_bodies.SHARED_CELLS == cuda_kernels.SHARED_CELLS
