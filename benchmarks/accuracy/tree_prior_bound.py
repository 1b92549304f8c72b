"""Would a prior that measures a tree of pairs beat all pairs on a wide table? An upper bound.

On loans (54 attributes, n = 10,000) MST's best releases beat pmwcm's mean on the
stepwise analyst at eps = 1, and MST measures 53 tree edges where pmwcm's prior
measures about 1,430 pairs. Before building a private pair selection, this bounds what
one could buy: the measured engine (``online_updates.run_stream``, the same streams and
noise seeds as its rows) with the prior's cliques replaced by every 1-way marginal and
the **data's own** maximum spanning tree of pairs, scored as MST scores them (the L1
gap between a pair's joint marginal and the product of its 1-ways; Kruskal). The tree
is chosen on the private data without noise and without charge, so this is not a
mechanism and its rows are not private: a private selection can only do worse. The
prior's budget and noise multiplier are the plan's own; measuring ``d + (d - 1)``
cliques instead of all pairs gives each one less noise (``sigma = m sqrt(2K) / n``).

    PYTHONPATH=src:. python benchmarks/accuracy/tree_prior_bound.py --table loans \\
        --eps 1 --workload stepwise --seeds 3

One JSON line per stream goes to ``results/tree_prior_bound.jsonl``; ``--report``
prints each cell beside ``online_updates.jsonl``'s ``measure`` rows for the same
streams (the all-pairs prior).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import online_updates  # noqa: E402

from pmwcm.engine import plan as plan_module  # noqa: E402
from pmwcm.mechanisms.private_data import PrivateData  # noqa: E402

RESULTS = HERE / "results" / "tree_prior_bound.jsonl"


def spanning_tree(data: PrivateData) -> list[tuple[str, str]]:
    """The maximum spanning tree of the attributes under MST's pair score
    ``||D_ab - D_a (x) D_b||_1``, read from the data without noise (Kruskal; ties in the
    domain's pair order)."""
    names = list(data.domain.names)
    one = {a: np.asarray(data.marginal([a])).ravel() for a in names}
    scored = []
    for a, b in itertools.combinations(names, 2):
        joint = np.asarray(data.marginal([a, b]))
        scored.append((-float(np.abs(joint - np.outer(one[a], one[b])).sum()), a, b))
    root = {a: a for a in names}

    def find(a: str) -> str:
        while root[a] != a:
            root[a] = root[root[a]]
            a = root[a]
        return a

    tree = []
    for _, a, b in sorted(scored, key=lambda s: s[0]):  # stable: ties keep pair order
        if find(a) != find(b):
            root[find(a)] = find(b)
            tree.append((a, b))
    return tree


@contextmanager
def prior_cliques(cliques: Sequence[tuple[str, ...]]) -> Iterator[None]:
    """Every paid marginal prior planned inside measures ``cliques`` (the plan's private
    ``_prior_cliques`` replaced for the duration: an experiment's hook, not an option)."""
    planned = plan_module._prior_cliques

    def fixed(*args: Any, **kwargs: Any) -> tuple[tuple[str, ...], ...]:
        return tuple(cliques) if planned(*args, **kwargs) else ()

    with mock.patch.object(plan_module, "_prior_cliques", fixed):
        yield


def run(name: str, *, epsilon: float, workload: str, seeds: range, k: int) -> None:
    ev = online_updates.table(name)
    tree = spanning_tree(ev.train)
    cliques = [(a,) for a in ev.domain.names] + tree
    with prior_cliques(cliques):
        for seed in seeds:
            row = online_updates.run_stream(
                ev, name, update="measure", epsilon=epsilon, seed=seed, k=k, workload=workload
            )
            row.update(table=name, prior="tree (non-private)", tree_edges=len(tree))
            with RESULTS.open("a") as out:
                out.write(json.dumps(row) + "\n")
            print(json.dumps({key: row[key] for key in ("seed", "mean", "max", "gain")}))


def report(path: Path = RESULTS, pairs: Path = online_updates.RESULTS) -> str:
    """Each cell's tree-prior streams beside the same streams on the all-pairs prior."""
    tree_rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    pair_rows = [json.loads(line) for line in pairs.read_text().splitlines() if line.strip()]
    header = ("table", "workload", "eps", "seeds", "prior", "mean", "mean of the maxima",
              "its start alone: mean")  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    cells = sorted({(r["table"], r["workload"], r["epsilon"], r["k"]) for r in tree_rows})
    for name, workload, eps, k in cells:
        tree = [r for r in tree_rows if (r["table"], r["workload"], r["epsilon"], r["k"])
                == (name, workload, eps, k)]  # fmt: skip
        seeds = {r["seed"] for r in tree}
        same = [r for r in pair_rows if r["update"] == "measure" and r["seed"] in seeds
                and (r["table"], r.get("workload", "random"), r["epsilon"], r["k"])
                == (name, workload, eps, k)]  # fmt: skip
        for label, rs in (("all pairs (the engine's)", same), ("tree of pairs, non-private", tree)):
            if rs:
                lines.append(
                    f"| {name} | {workload} | {eps:g} | {len(rs)} | {label} "
                    f"| {np.mean([r['mean'] for r in rs]):.3g} "
                    f"| {np.mean([r['max'] for r in rs]):.3g} "
                    f"| {np.mean([r['prior_mean'] for r in rs]):.3g} |"
                )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default="loans")
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--workload", choices=online_updates.WORKLOADS, default="stepwise")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--k", type=int, default=2000, help="the random stream's length")
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    if not args.report:
        seeds = range(args.seeds)
        run(args.table, epsilon=args.eps, workload=args.workload, seeds=seeds, k=args.k)
    print(report())


if __name__ == "__main__":
    main()
