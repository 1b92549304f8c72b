"""One MST or AIM release on a bigger machine, written where the benchmark's cache reads it.

AIM on TV16 (17 attributes, its default workload of every 3-way marginal) took
2.7 hours of one core here while mbi projected its candidates through eager JAX;
with :mod:`pmwcm.mechanisms.priors.mbi_projection` it takes about 5 minutes, so
this script is now needed only for much larger runs. It runs the same
:func:`synthetic.synthesize` (OpenDP 0.16 ``extras.mbi``, JAX) anywhere with
``opendp[mbi]`` and pmwcm installed, from the benchmark's own train split
saved as an ``.npz`` (``records``, ``names``, ``sizes``), and writes the file
:func:`methods.cached_synthesis` looks for (``records``, ``seconds``). The
benchmark then answers and scores the release as if it had made it; the cell's
``seconds`` is this run's synthesis time, on that machine::

    python benchmarks/accuracy/device_synthesis.py --input tv16_train.npz \\
        --method aim --rho 0.0174689 --output aim-<digest>-rho0.0174689-seed0.npz
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic import synthesize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--method", choices=["aim", "mst"], required=True)
    parser.add_argument("--rho", type=float, required=True)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    with np.load(args.input) as saved:
        records = saved["records"].astype(np.int64)
        domain = SimpleNamespace(
            names=tuple(str(n) for n in saved["names"]),
            sizes=tuple(int(s) for s in saved["sizes"]),
        )
    start = time.perf_counter()
    fake = synthesize(args.method, domain, records, rho=args.rho)  # type: ignore[arg-type]
    seconds = time.perf_counter() - start
    np.savez(args.output, records=fake, seconds=seconds)
    print(f"{args.method} rho={args.rho:g}: {len(fake)} records in {seconds:.1f} s", flush=True)


if __name__ == "__main__":
    main()
