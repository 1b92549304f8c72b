"""How the paid prior on a weighted support depends on its size ``M`` and its draw.

For full-resolution Adult (the train split of ``full_resolution.py``) and each
``(eps, seed, M)``, this builds pmwcm's default engine with ``support_size = M``
and reads its starting hypothesis, the prior, before any query is answered:

* ``fit / noise``: the fit's loss ``L = sum_k ||Dhat_{C_k} - y_k||^2 / 2`` on the
  released 2-way marginals ``y_k``, over their noise energy ``sum_k |C_k|
  sigma_k^2 / 2`` (the data's own marginals sit at about 1.0 in expectation; a
  support that cannot represent the marginals stalls above it). Public: it reads
  the release only.
* ``prior mean`` / ``prior max``: the excess risk of the prior's answers
  (``theta_hat`` on the prior, no sparse vector, no update) on the first
  ``--queries`` queries of that seed's random stream, against the exact
  optimum on the train split (``full_resolution.Evaluator``).

It measures the support's approximation (issue 13: "measure and document how
accuracy moves with M") where the release is precise enough for it to show:
at eps = 4 one draw of the ``2^16``-record support (seed 2) stalled at 1.07 and
answered 5-6x worse than seeds 0 and 1. Rows go to
``results/prior_support.jsonl``; a rerun skips the rows already there.

    .venv-bench/bin/python benchmarks/accuracy/prior_support.py --epsilons 4 \\
        --seeds 0 1 2 --log2-sizes 16 17 18
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.priors.marginals import noise_energy
from pmwcm.mechanisms.private_data import PrivateData

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "prior_support.jsonl"


def prior_row(
    train: PrivateData, epsilon: float, seed: int, size: int, queries: int
) -> dict[str, object]:
    """One ``(eps, seed, M)`` row on ``train`` (full-resolution Adult's train split):
    the fit against its noise, and the prior's answers."""
    import full_resolution as fr

    config = PMWConfig(epsilon=epsilon, delta=fr.DELTA, after_halt="synthetic", support_size=size)
    start = time.perf_counter()
    engine = build_engine(train, config, noise=NumpyNoise(seed=seed))
    setup = time.perf_counter() - start
    prior = engine.hypothesis
    measured = engine.prior_measurements
    loss = 0.5 * sum(
        float(((np.asarray(prior.marginal(m.clique)) - m.values) ** 2).sum()) for m in measured
    )
    evaluator = fr.Evaluator("adult-full", train)
    errors = []
    for query in fr.random_stream("adult-full", train.domain, queries, seed):
        round_ = engine.cm_round(query)
        theta = round_.hypothesis_answer(prior.clique_table(round_.clique))
        errors.append(evaluator.excess_risk(query, np.asarray(theta)))
    evaluator.flush()
    return {
        "dataset": "adult-full",
        "epsilon": epsilon,
        "seed": seed,
        "support": size,
        "queries": queries,
        "fit_over_noise": loss / noise_energy(measured),
        "prior_mean": float(np.mean(errors)),
        "prior_max": float(np.max(errors)),
        "setup": setup,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epsilons", type=float, nargs="*", default=[4.0])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--log2-sizes", type=int, nargs="*", default=[16, 17, 18])
    parser.add_argument("--queries", type=int, default=3000)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    import full_resolution as fr

    train, _ = fr.load("adult-full")
    done = set()
    if RESULTS.exists():
        for line in RESULTS.read_text().splitlines():
            row = json.loads(line)
            done.add((row["epsilon"], row["seed"], row["support"], row["queries"]))
    for epsilon in args.epsilons:
        for seed in args.seeds:
            for log2 in args.log2_sizes:
                if (epsilon, seed, 2**log2, args.queries) in done:
                    continue
                row = prior_row(train, epsilon, seed, 2**log2, args.queries)
                RESULTS.parent.mkdir(parents=True, exist_ok=True)
                with RESULTS.open("a") as out:
                    out.write(json.dumps(row) + "\n")
                print(
                    f"eps {epsilon:g} seed {seed} M 2^{log2}: fit/noise "
                    f"{row['fit_over_noise']:.3f}, prior mean {row['prior_mean']:.3g} "
                    f"max {row['prior_max']:.3g} ({row['setup']:.0f} s set-up)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
