"""docs/results.md's issue-15 section: updates that help, the tuned oracle, small n.

Reads the files the issue-15 runs wrote (every number below is computed from
them; nothing is typed in):

* ``results/updates.jsonl`` -- ``updates.py``: per-update segments and a fixed
  probe panel, fixed step against calibrated step, Adult, eps = 1, k = 10,000;
* ``results/rerun_composition.jsonl`` and ``results/rerun_regimes.jsonl`` --
  ``run.py --results ...`` with the budget-tuned oracle (composition) and the
  new defaults (pmw); the old composition rows come from ``results/results.jsonl``;
* ``results/small_n.jsonl`` and ``results/small_n_tuning.jsonl`` -- ``small_n.py``:
  pmw (the budget rule) and the old fixed split against AIM at its default rounds,
  answered on the fitted model's marginals, at its add/remove unit
  (``aim-model-ar``) and at OpenDP's replace-one unit (``aim-model``), n = 10,000;
  and the public tuning grid that placed the rule's anchors.

    python benchmarks/accuracy/issue15.py     # prints the section
"""

from __future__ import annotations

import itertools
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
RESULTS = HERE / "results"


def _rows(name: str) -> list[dict]:
    path = RESULTS / name
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _by_regime(rows: list[dict]) -> dict[tuple, dict[str, list[dict]]]:
    out: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        key = (r["experiment"], r["workload"], r["epsilon"], r["k"], r["n"])
        out[key][r["method"]].append(r)
    return out


def _avg(rows: list[dict], stat: str) -> float:
    return float(np.mean([r[stat] for r in rows]))


def _pmw_from_updates() -> dict[tuple, list[dict]]:
    """The calibrated (new default) runs of updates.py as pmw rows at k = 10,000 and 1,000."""
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in _rows("updates.jsonl"):
        if r["rule"] != "calibrated":
            continue
        key = ("random", "logistic", r["epsilon"], r["k"], r["n"])
        out[key].append({"mean": r["mean"], "max": r["max"], "seed": r["seed"]})
        first = ("random", "logistic", r["epsilon"], 1000, r["n"])
        out[first].append(
            {"mean": r["mean_first_1000"], "max": r["max_first_1000"], "seed": r["seed"]}
        )
    return out


def composition_table() -> str:
    """pmw (new defaults) against composition before and after the oracle rule."""
    new = _by_regime(_rows("rerun_composition.jsonl") + _rows("rerun_regimes.jsonl"))
    old = _by_regime(_rows("results.jsonl"))
    for key, rows in _pmw_from_updates().items():
        new[key]["pmw"].extend(rows)
    lines = [
        "| regime | n | k | pmw mean / max (seeds) | composition, tuned oracle (seeds) "
        "| composition, fixed 100 steps | tuned / fixed composition mean "
        "| composition / pmw mean | composition / pmw max |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for key in sorted(new):
        experiment, workload, eps, k, n = key
        methods = new[key]
        comp, pmw = methods.get("composition", []), methods.get("pmw", [])
        if not comp:
            continue
        before = old.get(key, {}).get("composition", [])
        pmw_cell = f"{_avg(pmw, 'mean'):.2g} / {_avg(pmw, 'max'):.2g} ({len(pmw)})" if pmw else "-"
        comp_cell = f"{_avg(comp, 'mean'):.2g} / {_avg(comp, 'max'):.2g} ({len(comp)})"
        before_cell = f"{_avg(before, 'mean'):.2g} / {_avg(before, 'max'):.2g}" if before else "-"
        gain = f"{_avg(comp, 'mean') / _avg(before, 'mean'):.2f}" if before else "-"
        ratio_mean = f"{_avg(comp, 'mean') / _avg(pmw, 'mean'):.3g}x" if pmw else "-"
        ratio_max = f"{_avg(comp, 'max') / _avg(pmw, 'max'):.3g}x" if pmw else "-"
        lines.append(
            f"| {experiment} ({workload}), eps = {eps:g} | {n:,} | {k:,} | {pmw_cell} "
            f"| {comp_cell} | {before_cell} | {gain} | {ratio_mean} | {ratio_max} |"
        )
    return "\n".join(lines)


def tuning_table() -> str:
    """The budget rule's tuning grid (small_n.py --tune)."""
    sys.path.insert(0, str(HERE))
    from small_n import tuning_table as table

    return table()


def small_n_table(name: str = "small_n.jsonl") -> str:
    """pmw against model-marginal AIM at both units, averaged over seeds (small_n.py)."""
    sys.path.insert(0, str(HERE))
    from small_n import report

    return report(RESULTS / name)


def verdicts() -> list[str]:
    """The issue's targets, checked on the files (met / not met, with the numbers)."""
    sys.path.insert(0, str(HERE))
    from updates import worst_panel_ratio, worst_segment_ratio

    out = []
    for rule in ("calibrated", "fixed"):
        rows = [r for r in _rows("updates.jsonl") if r["rule"] == rule]
        if not rows:
            continue
        seg = max(worst_segment_ratio(r["segments"]) for r in rows)
        pan = max(worst_panel_ratio(r["panel"]) for r in rows)
        flat = max(r["mean"] / r["mean_first_1000"] for r in rows)
        moved = sum(abs(b - a) > 1e-3 * a for r in rows for a, b in itertools.pairwise(r["panel"]))
        steps = sum(len(r["panel"]) - 1 for r in rows)
        out.append(
            f"- {rule} step, {len(rows)} seeds: worst per-update segment ratio {seg:.2f} "
            f"(target <= 1.1: **{'met' if seg <= 1.1 else 'not met'}**); worst panel ratio "
            f"{pan:.2f} (**{'met' if pan <= 1.1 else 'not met'}**); k = 10,000 / 1,000 "
            f"{flat:.2f} (target <= 1.2: **{'met' if flat <= 1.2 else 'not met'}**); "
            f"{moved} of {steps} updates changed the panel's mean by more than 0.1%."
        )
    small = _rows("small_n.jsonl")
    for k in sorted({r["k"] for r in small}):
        pmw = [r for r in small if r["method"] == "pmw" and r["k"] == k]
        aim = [r for r in small if r["method"] == "aim-model-ar" and r["k"] == k]
        if pmw and aim:
            ok = _avg(pmw, "mean") <= _avg(aim, "mean") and _avg(pmw, "max") <= _avg(aim, "max")
            out.append(
                f"- small n = {pmw[0]['n']:,}, k = {k:,}: pmw mean / max {_avg(pmw, 'mean'):.3g} / "
                f"{_avg(pmw, 'max'):.3g} against model-marginal AIM (default rounds, add/remove) "
                f"{_avg(aim, 'mean'):.3g} / {_avg(aim, 'max'):.3g} ({len(pmw)} and {len(aim)} "
                f"seeds; target at or below on both: **{'met' if ok else 'not met'}**)."
            )
        elif pmw:
            out.append(f"- small n, k = {k:,}: no AIM run finished; no verdict (see below).")
        replace_one = [r for r in small if r["method"] == "aim-model" and r["k"] == k]
        if pmw and replace_one:
            out.append(
                f"  At OpenDP's replace-one unit (pmwcm's), model-marginal AIM scores "
                f"{_avg(replace_one, 'mean'):.3g} / {_avg(replace_one, 'max'):.3g} "
                f"({len(replace_one)} seed{'s' if len(replace_one) > 1 else ''})."
            )
    return out


def section() -> str:
    """The markdown section."""
    sys.path.insert(0, str(HERE))
    from updates import report as updates_report

    parts = [
        "## Issue 15: updates that help, a tuned oracle, budget rules",
        "",
        "New defaults measured here: the calibrated update (`pmwcm.engine.step_size`) and",
        "noisy GD configured by its per-call budget (`pmwcm.mechanisms.oracles.tuning`,",
        "also the composition baseline's oracle), and the budget split by the prior's",
        "signal `epsilon n / sqrt(d (d - 1))` (`pmwcm.engine.budget_rule.plan_for_budget`:",
        "the old 40/30/30 split and `T = 10` from n ~ 30,000 on at d = 14, so every regime",
        "below at n >= 39,073 and eps = 1 is unchanged). The sections after this one were",
        "measured",
        "with the old defaults and the old fixed-100-step composition; their ratios",
        "against composition are superseded by the restated ones here, for the regimes",
        "re-run. Regimes not re-run (composition at k = 10,000, the other epsilons, the",
        "losses, adaptive, wide and interactions regimes) keep their old numbers and",
        "their old ratios, which are against the weaker fixed-100-step composition.",
        "",
        "### Targets checked",
        "",
        *verdicts(),
        "",
        "Reading: the segment ratio compares different queries (whichever fell between",
        "two updates), so it moves even when the hypothesis does not: where the",
        "calibrated step left the hypothesis unchanged (panel ratio 1.00) its worst",
        "segment ratio is still above 1.1. The panel ratio isolates the update's effect:",
        "the fixed step makes the same probe queries worse after its updates, the",
        "calibrated one does not. On Adult at eps = 1 the sparse vector's positives are",
        "almost all noise-triggered and the oracle's answers no better than the",
        "hypothesis's, so the calibrated rule mostly declines to move (w = 0).",
        "",
        "### Do updates help? (Adult train split, eps = 1, k = 10,000)",
        "",
        "`benchmarks/accuracy/updates.py`. *Segment ratio*: mean excess risk of the",
        "below-threshold answers given after the t-th update over those given before it",
        "(different queries fall in each segment, so small segments are noisy).",
        "*Panel ratio*: the same 300 probe queries (seeds 5000 + s, not a benchmark",
        "stream) answered from the hypothesis before and after each update, so any rise",
        "is the update's own doing. Both rules use the tuned oracle.",
        "",
    ]
    if (RESULTS / "updates.jsonl").exists():
        parts += [updates_report(), ""]
    parts += [
        "### Composition re-run with the tuned oracle, and the ratios restated",
        "",
        "pmw at k = 10,000 / 1,000 on the random stream comes from the calibrated runs",
        "above (the k = 1,000 row is their first 1,000 answers); parity and scaling-n rows",
        "from `run.py --experiments parity scaling-n --methods pmw composition --seeds 3`.",
        "",
        composition_table(),
        "",
        "### Small n: pmw against AIM's model marginals, both units",
        "",
        "The first 10,000 records of the Adult train split (binary schema, 14 attributes),",
        "k = 2,000 random logistic queries (streams 1000 + s), eps = 1, delta = 1e-6.",
        "`pmw` is today's default (the budget rule: at this n the prior gets 95% of the",
        "budget, `T = 1`); `pmw-fixed-split` the old 40/30/30 split with `T = 10`.",
        "AIM (OpenDP `extras.mbi`) at its **default rounds** (`16 d`), every query answered",
        "on the fitted model's full table (`release.project`, no sampling), at",
        "`rho*(eps, delta)` under its own add/remove unit (`aim-model-ar`, the target) and",
        "at OpenDP's replace-one unit (`aim-model`: `rho* / 4`, the guarantee pmwcm",
        "gives). AIM's noise comes from OpenDP's CSPRNG: its seeds are independent runs.",
        "`python benchmarks/accuracy/small_n.py --seeds 5 --k 2000`; `--report` prints:",
        "",
        small_n_table() if (RESULTS / "small_n.jsonl").exists() else "Not measured.",
        "",
        "Where the rule's anchors came from (`small_n.py --tune`): the Adult train records",
        "from 10,000 on (disjoint from the table above; 39,073 and 100,000: the whole",
        "train split, resampled beyond it), the seed-0 stream (no benchmark uses it),",
        "k = 1,000, eps = 1, two noise seeds; *parity*: the same records with the label",
        "replaced by a 3-way parity (`workloads.parity_records`), which no pair prior sees.",
        "",
        tuning_table() if (RESULTS / "small_n_tuning.jsonl").exists() else "Not measured.",
        "",
        "### Where the rule changes a default at n = 39,073: eps = 0.1 and 0.5",
        "",
        "The rule reads `eps n`, so on the whole Adult train split (binary schema) it",
        "moves the split at eps = 0.5 (`s = 1,448`: prior 0.66, `T = 3`) and eps = 0.1",
        "(`s = 290`: prior 0.95, `T = 1`); at eps >= 1 it is the old split. k = 1,000",
        "random logistic queries, streams 1000 + s: `small_n.py --rows 39073 --epsilon",
        "0.1 --k 1000 --methods pmw pmw-fixed-split --results",
        "benchmarks/accuracy/results/small_n_epsilons.jsonl` (and `--epsilon 0.5`).",
        "",
        small_n_table("small_n_epsilons.jsonl")
        if (RESULTS / "small_n_epsilons.jsonl").exists()
        else "Not measured.",
        "",
    ]
    return "\n".join(parts)


if __name__ == "__main__":
    print(section())
