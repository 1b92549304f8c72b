"""Where the budget rule for noisy gradient descent comes from (issue 15 item 3).

Noisy GD's privacy does not depend on its steps ``N`` or step size ``h``
(``N`` Gaussian steps at multiplier ``m sqrt(N)`` are one Gaussian mechanism
at ``m``), so both can be chosen freely from public values. This script
measures the mean excess risk of noisy GD over a grid of ``N`` and ``h`` at a
range of per-call noise levels, on **synthetic** data only (a random
chain-structured binary table drawn from a public seed; never Adult or any
benchmark stream), and prints the best ``N`` per level of ``n / m`` (the
effective number of records per call, the one dimensionless quantity the
noise depends on)::

    .venv/bin/python benchmarks/accuracy/oracle_tuning.py

:func:`pmwcm.mechanisms.oracles.tuning.steps_for_budget` encodes the fit;
docs/design.md ("Budget rules") quotes this script's table.
"""

from __future__ import annotations

import argparse

import numpy as np

from pmwcm.engine.baselines import exact_minimum
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.workload import random_queries
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.oracles import NoisyGradientDescent, OracleInput
from pmwcm.mechanisms.private_data import PrivateData

STEPS = (1, 2, 3, 5, 10, 20, 50, 100, 200)
STEP_SCALES = (1.0, 2.0, 4.0)
RATIOS = (30, 100, 300, 1_000, 3_000, 10_000, 100_000)


def synthetic_table(n: int, attributes: int = 10, seed: int = 0) -> PrivateData:
    """``n`` records of a chain ``x_0 -> x_1 -> ...`` of binary attributes with random
    logistic links (public seed): correlated like survey data, from no real data."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, attributes), dtype=np.int64)
    x[:, 0] = rng.random(n) < 0.4
    for j in range(1, attributes):
        weights = rng.normal(0, 1.5, size=min(j, 2))
        logits = rng.normal(0, 0.5) + x[:, max(0, j - 2) : j] @ weights
        x[:, j] = rng.random(n) < 1 / (1 + np.exp(-logits))
    domain = Domain.from_sizes({f"x{j}": 2 for j in range(attributes)})
    return PrivateData.from_records(domain, x)


def measure(n: int, queries: int, seeds: int) -> dict[tuple[int, int, float], float]:
    """Mean excess risk per (n / m, N, step scale)."""
    data = synthetic_table(n)
    qs = random_queries(data.domain, queries, rng=np.random.default_rng(1), losses=("logistic",))
    problems = []
    for q in qs:
        p = q.compile(data.domain)
        w = data.marginal(p.clique).ravel()
        problems.append((p, w, exact_minimum(p, w)))
    out: dict[tuple[int, int, float], float] = {}
    for ratio in RATIOS:
        m = n / ratio
        for steps in STEPS:
            for scale in STEP_SCALES:
                errs = []
                for p, w, best in problems:
                    beta = (p.smoothness or 0.0) + p.l2
                    oracle = NoisyGradientDescent(steps=steps, step_size=scale / beta)
                    for s in range(seeds):
                        theta = oracle.answer(
                            OracleInput(problem=p, weights=w, n=n),
                            noise_level=m,
                            noise=NumpyNoise(seed=s),
                        )
                        errs.append(p.objective(theta, w) - best)
                out[(ratio, steps, scale)] = float(np.mean(errs))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    results = measure(args.n, args.queries, args.seeds)
    print("| n / m | best N | best h x 1/beta | its mean excess risk | N = 100, h = 1/beta |")
    print("| --- | --- | --- | --- | --- |")
    for ratio in RATIOS:
        cells = {k: v for k, v in results.items() if k[0] == ratio}
        (_, steps, scale), err = min(cells.items(), key=lambda kv: kv[1])
        print(f"| {ratio:,} | {steps} | {scale:g} | {err:.3g} | {cells[(ratio, 100, 1.0)]:.3g} |")
    print()
    print("mean excess risk by N at h = 1/beta:")
    for ratio in RATIOS:
        row = " ".join(f"{results[(ratio, s, 1.0)]:.2g}" for s in STEPS)
        print(f"  n/m={ratio:>7,}: {row}")


if __name__ == "__main__":
    main()
