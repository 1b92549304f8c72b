"""docs/results.md's issue-15 section: updates that help, the tuned oracle, small n.

Reads the files the issue-15 runs wrote (every number below is computed from
them; nothing is typed in):

* ``results/updates.jsonl`` -- ``updates.py``: per-update segments and a fixed
  probe panel, fixed step against calibrated step, Adult, eps = 1, k = 10,000;
  ``results/updates_null.jsonl`` -- ``updates.py --null``: the same segments on the
  frozen prior; ``results/updates_same_queries.jsonl`` -- ``updates.py
  --same-queries``: the default engine's streams again, each segment also answered by
  the hypothesis from before its update;
* ``results/rerun_composition.jsonl`` and ``results/rerun_regimes.jsonl`` --
  ``run.py --results ...`` with the budget-tuned oracle (composition) and the
  new defaults (pmw); the old composition rows come from ``results/results.jsonl``;
* ``results/rerun_large_n.jsonl`` -- ``run.py --experiments parity scaling-n --methods
  pmw composition --seeds 5 --sizes 39073 1000000 10000000 --parity-sizes 39073 1000000
  10000000 --results ...``: pmw told each stream's length (composition mode where the
  rule prefers it) and the tuned composition; ``results/large_n_tuning.jsonl`` --
  ``large_n.py --tune``, the grid that placed the rule's cut;
  ``results/random_before_large_n.jsonl`` / ``random_after_large_n.jsonl`` -- the
  random regime at n = 39,073 (every epsilon, k = 1,000, 3 seeds) on the code before
  the mode rule (this branch's base commit) and after it;
* ``results/rerun_announced_k.jsonl`` -- ``run.py --experiments parity scaling-n wide
  interactions adaptive --methods pmw --seeds 5 --epsilons 1 --ks 1000 --sizes 5000 10000
  20000 39073 --parity-sizes 39073 --results ...``: pmw with the announced ``k`` in its
  threshold rule; its rows replace ``rerun_large_n.jsonl``'s pmw rows at n = 39,073;
* ``results/rerun_refit.jsonl`` -- the same command, on the engine that refits the
  prior's marginals after each update (``PMWConfig.refit_iterations``); its pmw rows
  replace ``rerun_announced_k.jsonl``'s;
* ``results/rerun_composition_all.jsonl`` -- ``run.py --methods composition`` on every
  other regime (random at eps 0.1 to 4, k = 1,000 and 10,000, 3 seeds; the losses,
  scaling-n below 39,073, wide, interactions and adaptive at eps = 1, 5 seeds) with the
  tuned oracle;
* ``results/small_n.jsonl`` and ``results/small_n_tuning.jsonl`` -- ``small_n.py``:
  pmw (the budget rule) and the old fixed split against AIM at its default rounds,
  answered on the fitted model's marginals, at its add/remove unit
  (``aim-model-ar``) and at ``rho*/4`` under add/remove (``aim-model-rho4``), n = 10,000;
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

from pmwcm.engine.budget_rule import prefers_composition

HERE = Path(__file__).parent
RESULTS = HERE / "results"
DELTA = 1e-6  # run.py's


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


def pmw_from_updates() -> dict[tuple, list[dict]]:
    """The calibrated (today's default) runs of updates.py as pmw rows, by regime
    (experiment, workload, epsilon, k, n): the k = 10,000 stream and its first 1,000
    answers (run.py's streams 1000 + s and split)."""
    sys.path.insert(0, str(HERE))
    from updates import regime_of, rule_label

    out: dict[tuple, list[dict]] = defaultdict(list)
    random = [r for r in _rows("updates.jsonl") if regime_of(r) == "random"]
    # Today's default is the conditional tilt with the refit; an epsilon without its
    # runs yet keeps the newest earlier ones (the tables say which rows each label holds).
    newest_first = ("calibrated + refit", "calibrated", "calibrated (joint tilt)")
    best: dict[float, int] = {}
    for r in random:
        if rule_label(r) in newest_first:
            rank = newest_first.index(rule_label(r))
            best[r["epsilon"]] = min(best.get(r["epsilon"], rank), rank)
    for r in random:
        label = rule_label(r)
        if label not in newest_first or newest_first.index(label) != best[r["epsilon"]]:
            continue
        for k, mean, top in (
            (r["k"], r["mean"], r["max"]),
            (1000, r["mean_first_1000"], r["max_first_1000"]),
        ):
            cell = {"experiment": "random", "workload": "logistic", "epsilon": r["epsilon"],
                    "k": k, "n": r["n"], "method": "pmw", "seed": r["seed"]}  # fmt: skip
            out[("random", "logistic", r["epsilon"], k, r["n"])].append(
                cell | {"mean": mean, "max": top}
            )
    return out


def _newest(*names: str) -> dict[tuple, dict[str, list[dict]]]:
    """Rows by regime and method, each (regime, method) from the last file holding it."""
    out: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for name in names:
        for key, methods in _by_regime(_rows(name)).items():
            for method, rows in methods.items():
                out[key][method] = list(rows)
    return out


def composition_table() -> str:
    """pmw (new defaults) against composition before and after the oracle rule."""
    new = _newest(
        "rerun_regimes.jsonl",
        "rerun_composition.jsonl",
        "rerun_announced_k.jsonl",
        "rerun_composition_all.jsonl",
        "rerun_refit.jsonl",
    )
    old = _by_regime(_rows("results.jsonl"))
    for key, rows in pmw_from_updates().items():
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


#: The regimes the large-n subsection covers (experiment, workload).
LARGE_N_REGIMES = (("parity", "3-way parity label"), ("scaling-n", "logistic"))


def _best_other(key: tuple, tuned: list[dict]) -> tuple[float, float, str, str]:
    """The lowest mean and lowest max among the other methods of a regime: the tuned
    composition and every other method ``results.jsonl`` holds there (not pmw)."""
    old = _by_regime(_rows("results.jsonl")).get(key, {})
    candidates = {m: rows for m, rows in old.items() if m not in ("pmw", "composition")}
    if tuned:
        candidates["composition (tuned)"] = tuned
    mean_by = {m: _avg(rows, "mean") for m, rows in candidates.items()}
    max_by = {m: _avg(rows, "max") for m, rows in candidates.items()}
    best_mean, best_max = min(mean_by, key=mean_by.__getitem__), min(max_by, key=max_by.__getitem__)
    return mean_by[best_mean], max_by[best_max], best_mean, best_max


def large_n_rows() -> list[tuple]:
    """Per regime and n: the hybrid (before), pmw now, and the best other method."""
    new = _by_regime(_rows("rerun_large_n.jsonl"))
    # pmw's newest rows where a later run replaced them (the announced k in the
    # threshold rule, n = 39,073): the same regime, the same seeds.
    for name in ("rerun_announced_k.jsonl", "rerun_refit.jsonl"):
        for key, methods in _by_regime(_rows(name)).items():
            if key in new and methods.get("pmw"):
                new[key]["pmw"] = methods["pmw"]
    before = _by_regime(_rows("rerun_regimes.jsonl"))
    out = []
    for key in sorted(new):
        if (key[0], key[1]) not in LARGE_N_REGIMES or not new[key].get("pmw"):
            continue
        pmw, tuned = new[key]["pmw"], new[key].get("composition", [])
        hybrid = before.get(key, {}).get("pmw", [])
        # The mode the rule picked, from the public values it reads (repeats of a query
        # are free, so the oracle-call count alone does not show it).
        composed = all(
            prefers_composition(r["epsilon"], DELTA, r["n"], r["announced_queries"]) for r in pmw
        )
        out.append((key, pmw, hybrid, tuned, composed, *_best_other(key, tuned)))
    return out


def large_n_table() -> str:
    """pmw told each stream's length, against the hybrid before and the best other method."""
    lines = [
        "| regime | n | k | mode chosen | pmw before: hybrid, mean / max (seeds) "
        "| pmw now, mean / max (seeds) | best other mean (method) | best other max (method) "
        "| pmw / best mean | pmw / best max | target (1.5x mean, 2x max) |",
        "| --- " * 11 + "|",
    ]
    for key, pmw, hybrid, _, composed, mean, top, mean_by, max_by in large_n_rows():
        experiment, workload, eps, k, n = key
        r_mean, r_max = _avg(pmw, "mean") / mean, _avg(pmw, "max") / top
        hybrid_cell = (
            f"{_avg(hybrid, 'mean'):.2g} / {_avg(hybrid, 'max'):.2g} ({len(hybrid)})"
            if hybrid
            else "-"
        )
        met = "met" if r_mean <= 1.5 and r_max <= 2.0 else "**not met**"
        lines.append(
            f"| {experiment} ({workload}), eps = {eps:g} | {n:,} | {k:,} "
            f"| {'composition' if composed else 'hybrid'} | {hybrid_cell} "
            f"| {_avg(pmw, 'mean'):.2g} / {_avg(pmw, 'max'):.2g} ({len(pmw)}) "
            f"| {mean:.2g} ({mean_by}) | {top:.2g} ({max_by}) "
            f"| {r_mean:.2f} | {r_max:.2f} | {met} |"
        )
    return "\n".join(lines)


def random_before_after() -> str:
    """The random regime at n = 39,073 on the code before and after the mode rule."""
    lines = [
        "| eps | k | seeds | before: mean / max | after: mean / max | after / before mean "
        "| identical per seed |",
        "| --- " * 7 + "|",
    ]
    before = {(r["epsilon"], r["seed"]): r for r in _rows("random_before_large_n.jsonl")}
    after = {(r["epsilon"], r["seed"]): r for r in _rows("random_after_large_n.jsonl")}
    for eps in sorted({e for e, _ in before}):
        seeds = sorted(s for e, s in before if e == eps and (e, s) in after)
        if not seeds:
            continue
        b = [before[(eps, s)] for s in seeds]
        a = [after[(eps, s)] for s in seeds]
        same = all(
            x["mean"] == y["mean"] and x["max"] == y["max"] for x, y in zip(b, a, strict=True)
        )
        lines.append(
            f"| {eps:g} | {b[0]['k']:,} | {len(seeds)} "
            f"| {_avg(b, 'mean'):.3g} / {_avg(b, 'max'):.3g} "
            f"| {_avg(a, 'mean'):.3g} / {_avg(a, 'max'):.3g} "
            f"| {_avg(a, 'mean') / _avg(b, 'mean'):.3f} | {'yes' if same else 'no'} |"
        )
    return "\n".join(lines)


def large_n_tuning_table() -> str:
    """The mode rule's tuning grid (large_n.py --tune)."""
    sys.path.insert(0, str(HERE))
    from large_n import report

    return report()


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


#: What the large-n rows say (written from the committed rows; revisit on a rerun).
LARGE_N_READING = (
    "Reading: at n = 10^6 and 10^7 the rule picks composition mode, so pmw answers",
    "every distinct query with a fresh oracle call at the budget split k ways: the",
    "tuned composition baseline inside the engine (same noise seed, same answers; a",
    "repeated query is answered again for free, so the parity streams, 369-401",
    "distinct queries in 1,000, make that many calls, and the random ones 963-980).",
    "That meets the target there on both regimes, and removes the hybrid's parity",
    "maxima (3.6e-3 at n = 10^6, about 65x composition's). The cost is in the random",
    "(scaling-n) regime at n = 10^6, where the hybrid's mean (8.3e-6) had been lower",
    "than composition's (1.3e-5): the rule cannot tell that world from the parity one",
    "(their public values are the same) and gives that mean up for the parity",
    "world's maxima. At n = 39,073 on the parity label the hybrid is unchanged and",
    "still misses the target against composition (1.65x on the mean, 1.66x on the",
    "max, 5 seeds; seeds 0 and 4 leave the parity unfixed after their 2 updates):",
    "the sparse vector's threshold at this n (largest for the radius-4 queries)",
    "lets the pair prior's parity errors through. The mode rule cannot fix that",
    "regime: there c = 231, and on the random stream at the same c the hybrid is",
    "22x better than composition on the mean, so any cut that low would break the",
    "random regimes instead; it needs a better hybrid at small n (a prior that sees",
    "3-way structure, or a lower threshold), not this rule.",
)


def verdicts() -> list[str]:
    """The issue's targets, checked on the files (met / not met, with the numbers)."""
    sys.path.insert(0, str(HERE))
    from updates import (
        own_shares,
        regime_of,
        rule_label,
        run_key,
        segment_ratios,
        updates_made,
        worst_panel_ratio,
        worst_segment_ratio,
    )

    made = updates_made()

    out = []
    frozen = {run_key(r): r["segments"] for r in _rows("updates_null.jsonl")}
    for rule in ("calibrated + refit", "calibrated", "calibrated (joint tilt)", "fixed"):
        rows = [r for r in _rows("updates.jsonl") if rule_label(r) == rule]
        if not rows:
            continue
        own = []  # each boundary's ratio over the frozen prior's on the same segments
        for r in rows:
            still = segment_ratios(frozen.get(run_key(r), []))
            own += own_shares(segment_ratios(r["segments"]), still)
        regimes = sorted({regime_of(r) for r in rows})
        by_regime = {
            g: max(worst_panel_ratio(r["panel"]) for r in rows if regime_of(r) == g)
            for g in regimes
        }
        missed = {g: v for g, v in by_regime.items() if v > 1.1}
        seg = max(worst_segment_ratio(r["segments"]) for r in rows)
        pan = max(worst_panel_ratio(r["panel"]) for r in rows)
        flat = max(r["mean"] / r["mean_first_1000"] for r in rows)
        moved = sum(abs(b - a) > 1e-3 * a for r in rows for a, b in itertools.pairwise(r["panel"]))
        counts = [made.get(run_key(r)) for r in rows]
        steps = (
            f"{sum(counts)} updates"  # type: ignore[arg-type]
            if None not in counts
            else f"{sum(len(r['panel']) - 1 for r in rows)} oracle answers (repeats included)"
        )
        out.append(
            f"- {rule} step ({len(regimes)} regime{'s' if len(regimes) > 1 else ''}, "
            f"{len(rows)} streams): worst per-update segment ratio {seg:.2f} "
            f"(target <= 1.1: **{'met' if seg <= 1.1 else 'not met'}**); worst panel ratio "
            f"{pan:.2f} ("
            + (
                f"**not met** in {', '.join(f'{g} ({v:.2f})' for g, v in missed.items())}; "
                f"met in the other {len(regimes) - len(missed)}"
                if missed
                else "**met** in every regime"
            )
            + "); "
            f"k = 10,000 / 1,000 {flat:.2f} "
            f"(target <= 1.2: **{'met' if flat <= 1.2 else 'not met'}**); "
            f"{moved} of {steps} changed the panel's mean by more than 0.1%."
            + (
                f" Over the frozen prior's ratio on the same segments (the query mix taken "
                f"out): worst {max(own):.2f} (**{'met' if max(own) <= 1.1 else 'not met'}**)."
                if own
                else ""
            )
        )
    out += same_query_verdict()
    large = large_n_rows()
    if large:
        missed = [
            f"{key[0]} n = {key[4]:,} (mean {_avg(pmw, 'mean') / mean:.2f}x, "
            f"max {_avg(pmw, 'max') / top:.2f}x)"
            for key, pmw, _, _, _, mean, top, _, _ in large
            if _avg(pmw, "mean") / mean > 1.5 or _avg(pmw, "max") / top > 2.0
        ]
        out.append(
            f"- best or near-best at large n (parity and scaling-n, n = 39,073 to 10^7, "
            f"k = 1,000; pmw mean <= 1.5x and max <= 2x the best other method): met in "
            f"{len(large) - len(missed)} of {len(large)} regimes"
            + (f"; **not met**: {'; '.join(missed)}." if missed else ".")
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
        replace_one = [r for r in small if r["method"] == "aim-model-rho4" and r["k"] == k]
        if pmw and replace_one:
            out.append(
                f"  At rho*/4 under its add/remove unit (a replace-one guarantee by group "
                f"privacy; not OpenDP's unit_of(changes=1) AIM), model-marginal AIM scores "
                f"{_avg(replace_one, 'mean'):.3g} / {_avg(replace_one, 'max'):.3g} "
                f"({len(replace_one)} seed{'s' if len(replace_one) > 1 else ''})."
            )
    return out


def same_query_verdict() -> list[str]:
    """The segment target read on the same queries: each segment's answers against the
    same queries answered by the hypothesis from before the update that opened it
    (``updates.py --same-queries``, today's default engine)."""
    sys.path.insert(0, str(HERE))
    from updates import REGIMES, regime_of, same_query_ratios

    rows = _rows("updates_same_queries.jsonl")
    if not rows:
        return []
    ratios = [(r, t, v) for r in rows for t, v in same_query_ratios(r["segments"]).items()]
    worst_row, worst_t, worst = max(ratios, key=lambda item: item[2], default=(None, 0, 1.0))
    regimes = {regime_of(r) for r in rows}
    missing = [g for g in REGIMES if g not in regimes]
    where = ""
    if worst_row is not None:
        size = next(g["fresh"] for g in worst_row["segments"] if g["t"] == worst_t)
        where = (
            f", {regime_of(worst_row)} eps = {worst_row['epsilon']:g} seed {worst_row['seed']}, "
            f"after update {worst_t} ({size} fresh answers)"
        )
    return [
        f"- the segment target on the same queries (today's default engine, {len(rows)} "
        f"streams in {len(regimes)} regimes, {len(ratios)} segments after an update): each "
        "segment's fresh answers (repeats are the released answer again) against the same "
        "queries answered by the hypothesis from before the update that opened it: worst "
        f"{worst:.3f}{where} (target <= 1.1: "
        f"**{'met' if worst <= 1.1 else 'not met'}**"
        + (f"; not run: {', '.join(missing)}" if missing else "")
        + ")."
    ]


def section() -> str:
    """The markdown section."""
    sys.path.insert(0, str(HERE))
    from updates import null_report, same_query_report
    from updates import report as updates_report

    parts = [
        "## Issue 15: updates that help, a tuned oracle, budget rules",
        "",
        "New defaults measured here: the calibrated update (`pmwcm.engine.step_size`) and",
        "noisy GD configured by its per-call budget (`pmwcm.mechanisms.oracles.tuning`,",
        "also the composition baseline's oracle), and the budget split by the prior's",
        "signal `epsilon n / sqrt(d (d - 1))` (`pmwcm.engine.budget_rule.plan_for_budget`:",
        "the old 40/30/30 split and `T = 10` from n ~ 30,000 on at d = 14, so every regime",
        "below at n >= 39,073 and eps = 1 is unchanged). Since round 2 session 7 the",
        "calibrated update tilts only the label's conditional (docs/design.md section 9),",
        "and the prior's fit goes on past its budget while it is more than twice the",
        "measurement noise's energy from its measurements (section 6). The continuation",
        "changed pmw's numbers at n >= 10^6 and at eps = 4, and nothing where the fit",
        "already ended within that bound (n <= 39,073 at eps <= 1, the full-resolution",
        "priors); the tilt's effect is in the tables below, both tilts side by side.",
        "The sections after this one were",
        "measured with the old defaults and the old fixed-100-step composition; their",
        "ratios against composition are superseded by the restated ones here and by",
        '"Where each method wins", which reads every regime\'s newest rows: composition',
        "with the tuned oracle in every regime of the grid "
        + (
            "(`rerun_composition_all.jsonl` completed the random regime at every epsilon "
            "and k = 1,000 / 10,000, the losses, scaling-n, wide, interactions and adaptive)."
            if (RESULTS / "rerun_composition_all.jsonl").exists()
            else "that was re-run (the others keep the weaker fixed-100-step composition)."
        ),
        "",
        "### Targets checked",
        "",
        *verdicts(),
        "",
        "Reading: the segment ratio compares different queries (whichever fell between",
        "two updates), so it moves even when the hypothesis does not. The frozen prior",
        "(no update at all) scored on the same segments has the same worst ratios",
        "(second table below): the query mix alone exceeds 1.1 on these streams (a",
        "segment of 7 or 26 answers against the next), so no update rule can meet the",
        "segment target as worded; divided by the frozen prior's ratio at the same",
        "boundary, what is left is the update's own share. The panel ratio measures the",
        "update's own effect directly: the same 300 probe queries before and after each",
        "update. The fixed step makes them worse after its updates. The calibrated step",
        "with the joint tilt (rows marked so, measured before the conditional tilt) kept",
        "them within 1.1 except on the smoothed hinge, where one update that fixed its",
        "own query (excess risk 1.8e-4 to 2e-5) raised the panel by 12%: the joint tilt",
        "also reshaped the features' distribution that the other queries read. Today's",
        "calibrated step tilts only the label's conditional (docs/design.md section 9),",
        "and since round 2 session 8 the engine refits the prior's released marginals",
        "after each update (`pmwcm.mechanisms.priors.refit`): its rows are the ones named",
        "`calibrated + refit`, and the rows named `calibrated` are the same streams",
        "without the refit. Most updates at these budgets are noise-triggered, and for",
        "those the rule declines to move (w = 0).",
        "",
        "The segment target read on the same queries (`updates.py --same-queries`, round 2",
        "session 9): every stream of today's default engine is run again (it reproduces",
        "its stored segments), and each fresh below-threshold answer after an update is",
        "also given by the hypothesis from before that update (the engine replaces its",
        "hypothesis at an update, so the old one is still there). A segment's ratio is",
        "then its fresh answers' mean over the same queries' mean one update earlier:",
        "nothing but the update differs, so this is the question the issue asks (did the",
        "t-th update make the answers after it worse?) without the query mix or a",
        "3-answer segment's luck. Repeats are left out on both sides: a repeated query",
        "gets its released answer again, made by an older hypothesis that no later update",
        "touches. The parity family has a few hundred distinct queries, so its streams",
        "are mostly repeats: at n = 10^6 and 10^7 a stream gives over a thousand answers",
        'marked "oracle" but makes about ten updates, and most of a late segment\'s',
        "raw mean is answers released before its update.",
        "One bias is left and it favours the update: a segment holds the queries the",
        "updated hypothesis passed the sparse vector on. It is small here (a few oracle",
        "calls in 10,000 queries), and the panel ratio above, on fixed probe queries, has",
        "no such selection.",
        "",
        "What the refit changed: the parity label at n = 10^6 and 10^7, answered by the",
        "unannounced hybrid (an announced stream of that length is answered in",
        "composition mode and makes no update). A stream there makes 2-10 updates (its",
        "1,000-3,500 answers marked oracle are mostly repeats of those few), and",
        "together they lower the panel more than 100-fold (`panel after / before`",
        "0.00). Without the refit single ones raised it up to 1.87x (10^6) and 3.34x",
        "(10^7): a one-dimensional tilt that fixes one query also moves pairs the prior",
        "had right, and the sweeps replay only past updates. With it no update raises",
        "the panel by more than 0.4% there. The stream's mean falls 3.2x at 10^6 (1.2e-4",
        "against 4.0e-4; one seed's 1.7e-3 falls to 7.2e-5, the other four rise",
        "1.5-4.3x) and rises 1.5x at 10^7 (5.6e-5 against 3.7e-5; its below-threshold",
        "answers are worse on every seed: pulling the pairs back also pulls back part of",
        "what the updates learned about the parity); the max falls 1.7x and 4%.",
        "Every other regime's mean and max moved by less than 1% (eps = 4: 0.7% and 2%",
        "lower).",
        "",
        "### Do updates help? (every random-stream regime, k = 10,000)",
        "",
        "`benchmarks/accuracy/updates.py`, on run.py's Adult train split (n = 39,073) and",
        "its populations (scaling-n: the first n train records or n resampled; parity: the",
        "3-way parity label), each regime with its own query family for the stream and",
        "the panel. *Segment ratio*: mean excess risk of the",
        "below-threshold answers given after the t-th update over those given before it",
        "(different queries fall in each segment, so small segments are noisy).",
        "*Panel ratio*: the same 300 probe queries (seeds 5000 + s, not a benchmark",
        "stream) answered from the hypothesis before and after each update, so any rise",
        "is the update's own doing. Every rule uses the tuned oracle.",
        "",
    ]
    if (RESULTS / "updates.jsonl").exists():
        parts += [updates_report(), ""]
    if (RESULTS / "updates_null.jsonl").exists():
        parts += [
            "The same segments scored on the frozen prior (`updates.py --null`: the engine's",
            "starting hypothesis, the same prior noise, answers every query of the segment;",
            "no update at all). Its ratios are the query mix's alone; the last column divides",
            "each run's ratio by the frozen prior's at the same boundary, which leaves the",
            "update's own share:",
            "",
            null_report(),
            "",
        ]
    if (RESULTS / "updates_same_queries.jsonl").exists():
        parts += [
            "The same segments on the same queries (`updates.py --same-queries`): each",
            "segment's fresh answers over the same queries answered by the hypothesis from",
            "before the update that opened it; the last column sums every fresh answer after",
            "a first update on both sides:",
            "",
            same_query_report(),
            "",
        ]
    parts += [
        "### Composition re-run with the tuned oracle, and the ratios restated",
        "",
        "pmw at k = 10,000 / 1,000 on the random stream comes from the calibrated runs",
        "above (the k = 1,000 row is their first 1,000 answers); parity and scaling-n rows",
        "from `run.py --experiments parity scaling-n --methods pmw composition --seeds 3`,",
        "run before the composition mode below: their pmw is the hybrid (nothing",
        "announced); the next subsection restates the large-n rows.",
        "",
        composition_table(),
        "",
        "### Large n: composition mode where the public rule prefers it",
        "",
        "pmw is now told each stream's length (`announced_queries = k`, as composition",
        "is), and its budget rule answers the stream in composition mode where",
        "composition's signal `c = n sqrt(2 rho*(eps, delta) / k)` is at least 1,450",
        "(`pmwcm.engine.budget_rule.prefers_composition`; docs/design.md section 9):",
        "here n = 10^6 and 10^7 at k = 1,000 (c = 5,911 and 59,110); n = 39,073 stays",
        "the hybrid (c = 231). `run.py --experiments parity scaling-n --methods pmw",
        "composition --seeds 5 --sizes 39073 1000000 10000000 --parity-sizes 39073",
        "1000000 10000000 --results benchmarks/accuracy/results/rerun_large_n.jsonl`",
        "(run while the cut stood at 2,000, from the stream-0 fit; the refit cut picks",
        "the same mode in every regime here, so the rows are the shipped code's).",
        "*pmw before* is the hybrid of the rows above (3 seeds); *best other* is the",
        "lowest mean and the lowest max over the tuned composition (5 seeds) and every",
        "other method `results.jsonl` holds for the regime (MST, AIM, pmw-paper,",
        "pmw-mst; their old rows).",
        "",
        large_n_table() if (RESULTS / "rerun_large_n.jsonl").exists() else "Not measured.",
        "",
        *LARGE_N_READING,
        "",
        "The existing regimes at n = 39,073 do not move: every announced stream there",
        "has c <= 880, so the engine is the hybrid, built exactly as before",
        "(`tests/test_composition_mode.py` checks answer for answer). The random",
        "regime on this branch's base commit (before) and with the mode rule (after),",
        "k = 1,000 random logistic queries (the stream announced to pmw), 3 seeds:",
        "`run.py --experiments random --methods pmw --seeds 3 --ks 1000`, the before",
        "run from `git archive` of the base commit:",
        "",
        random_before_after()
        if (RESULTS / "random_after_large_n.jsonl").exists()
        else "Not measured.",
        "",
        "Where the cut came from (`benchmarks/accuracy/large_n.py --tune`, then",
        "`--report`): worlds no benchmark evaluates (the Adult train records from",
        "10,000 on, resampled to n with seed 11; streams 0, 1 and 2), the hybrid (the",
        "default engine, nothing announced) against the tuned composition; a cell",
        "averages stream 0's three noise seeds, then the streams; *rule* is the mode",
        "the shipped cut picks.",
        "",
        large_n_tuning_table() if (RESULTS / "large_n_tuning.jsonl").exists() else "Not measured.",
        "",
        "The hybrid rows above were re-run after the prior fit's discrepancy",
        "continuation (docs/design.md section 6); the earlier hybrid rows, which placed",
        "the cut with a worst score near 1, are in `large_n_tuning_before_continuation.jsonl`.",
        "The hybrid is now 6-100x below composition on the random world's mean at every",
        "large n, because its prior fits precise measurements to their precision. On the",
        "parity world nothing changed: a pair prior cannot see the label, and the hybrid",
        "stays 3-320x above composition. The rule reads only eps, delta, n and k, so it",
        "cannot tell the two worlds apart. Every cut up to the one printed scores the",
        "same (the random world's loss where composition answers), and every higher cut",
        "scores worse (the parity world's maxima). The shipped cut is still in the",
        "optimal range, so it stays. What it gives up is the random world's 6-100x:",
        "an analyst who knows the table has low-order structure can take it with",
        "`--mode hybrid` (or by not announcing `k`).",
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
        "at `rho* / 4` under that add/remove unit (`aim-model-rho4`: a replace-one",
        "guarantee by group privacy, the guarantee pmwcm gives, but **not** OpenDP's",
        "replace-one AIM, `unit_of(changes=1)`, which calibrates itself to that unit (issue",
        "35 reports it at 1.37e-3 where this row's AIM scored 2.10e-3, on a held-out",
        "table); until issue 35 this row was mislabelled as that unit). AIM's noise comes",
        "from OpenDP's CSPRNG: its seeds are independent runs.",
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
