"""Turns ``results/results.jsonl`` into ``docs/results.md`` and its plots.

Every number in the document is computed here from the stored results; the
verdicts on the targets are computed too, so a regenerated document can never
claim a target its numbers miss.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).parent / "results" / "results.jsonl"
DOCS = ROOT / "docs"
IMG = DOCS / "img"
LABELS = {
    "pmw": "PMW-CM hybrid (pmwcm default: 2-way marginal prior + online corrections)",
    "pmw-paper": "PMW-CM (paper's algorithm, uniform start)",
    "pmw-mst": "PMW-CM hybrid with an MST prior (prior='mst')",
    "composition": "composition (noisy GD, budget / k)",
    "composition-100": "composition, fixed 100-step noisy GD (the first runs)",
    "mst": "MST synthetic data",
    "aim": "AIM synthetic data",
    "mst-ar": "MST, add/remove units (favourable to it)",
    "aim-ar": "AIM, add/remove units (favourable to it)",
}
ORDER = [
    "pmw",
    "pmw-paper",
    "pmw-mst",
    "composition",
    "composition-100",
    "mst",
    "aim",
    "mst-ar",
    "aim-ar",
]


def load(path: Path = RESULTS) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def group(rows, **fixed):
    """Rows matching ``fixed``, grouped by (method, varying key) over seeds."""
    return [r for r in rows if all(r.get(k) == v for k, v in fixed.items())]


def agg(rows, metric):
    vals = np.array([r[metric] for r in rows], dtype=float)
    return vals.mean(), (vals.std(ddof=1) if len(vals) > 1 else 0.0), len(vals)


def fmt(rows, metric):
    if not rows:
        return "-"
    mean, sd, n = agg(rows, metric)
    return f"{mean:.2g} ± {sd:.1g}" if n > 1 else f"{mean:.2g}"


def table(rows, by, values, title_cols):
    """A markdown table: one line per (method, value of ``by``)."""
    head = "| method | " + by + " | " + " | ".join(title_cols) + " | seeds |"
    lines = [head, "|" + " --- |" * (len(title_cols) + 3)]
    for method in ORDER:
        for v in values:
            sel = [r for r in rows if r["method"] == method and r[by] == v]
            if not sel:
                continue
            cells = [fmt(sel, m) for m in ("mean", "p95", "max")]
            acc = fmt(sel, "test_accuracy") if "test_accuracy" in sel[0] else "-"
            calls = f"{np.mean([r['oracle_calls'] for r in sel]):.0f}"
            secs = f"{np.mean([r['seconds'] for r in sel]):.0f}"
            extra = [acc, calls, secs][: len(title_cols) - 3]
            lines.append(f"| {method} | {v:g} | " + " | ".join(cells + extra) + f" | {len(sel)} |")
    return "\n".join(lines)


def plot(rows, by, path, xlabel, title):
    fig, ax = plt.subplots(figsize=(6, 4))
    for method in ORDER:
        sel = [r for r in rows if r["method"] == method]
        xs = sorted({r[by] for r in sel})
        if not xs:
            continue
        ys = [np.mean([r["mean"] for r in sel if r[by] == x]) for x in xs]
        ax.plot(xs, ys, marker="o", label=LABELS[method])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("mean excess empirical risk")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    IMG.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def mean_of(rows, method, metric, **fixed):
    sel = [r for r in group(rows, method=method, **fixed)]
    return float(np.mean([r[metric] for r in sel])) if sel else float("nan")


def verdicts(rows) -> list[str]:
    """The issue's targets, each with the numbers that decide it."""
    out = []
    base = {"experiment": "random", "workload": "logistic", "epsilon": 1.0}
    kmax = max((r["k"] for r in group(rows, **base)), default=0)
    if not kmax:
        return ["No random-workload results yet."]
    pm, cm = (
        mean_of(rows, "pmw", "mean", k=kmax, **base),
        mean_of(rows, "composition", "mean", k=kmax, **base),
    )
    px, cx = (
        mean_of(rows, "pmw", "max", k=kmax, **base),
        mean_of(rows, "composition", "max", k=kmax, **base),
    )
    out.append(
        f"- k = {kmax:,}, eps = 1: PMW-CM mean {pm:.2g} vs composition {cm:.2g} "
        f"({cm / pm:.1f}x; target >= 3x: **{'met' if cm >= 3 * pm else 'missed'}**); "
        f"max {px:.2g} vs {cx:.2g} ({cx / px:.1f}x; "
        f"target >= 2x: **{'met' if cx >= 2 * px else 'missed'}**)."
    )
    k1 = max((k for k in {r["k"] for r in group(rows, **base)} if k < kmax), default=None)
    if k1:
        ratio = mean_of(rows, "pmw", "mean", k=kmax, **base) / mean_of(
            rows, "pmw", "mean", k=k1, **base
        )
        out.append(
            f"- Flat in k: PMW-CM mean at k = {kmax:,} / k = {k1:,} = {ratio:.2f} "
            f"(target <= 1.5: **{'met' if ratio <= 1.5 else 'missed'}**)."
        )
    am, ax_ = (
        mean_of(rows, "aim", "mean", k=kmax, **base),
        mean_of(rows, "aim", "max", k=kmax, **base),
    )
    if not np.isnan(am):
        out.append(
            f"- Against AIM at k = {kmax:,}, eps = 1: mean {pm:.2g} vs {am:.2g} "
            f"(target within 1.2x: **{'met' if pm <= 1.2 * am else 'missed'}**), "
            f"max {px:.2g} vs {ax_:.2g} "
            f"(target below AIM: **{'met' if px < ax_ else 'missed'}**); "
            f"wall time {mean_of(rows, 'pmw', 'seconds', k=kmax, **base):.0f} s vs "
            f"{mean_of(rows, 'aim', 'seconds', k=kmax, **base):.0f} s (AIM's synthesis "
            "plus fitting every query on its records)."
        )
    out += ahead_of_aim(rows)
    return out


def ahead_of_aim(rows) -> list[str]:
    """Issue 7: regimes where the hybrid is clearly ahead of AIM (>= 3x lower mean and max)."""
    out = []
    keys = sorted(
        {(r["experiment"], r["epsilon"], r["k"], r["n"]) for r in group(rows, method="aim")}
    )
    for exp, eps, k, n in keys:
        fixed = {"experiment": exp, "epsilon": eps, "k": k, "n": n}
        if exp == "random" and k != 10_000:
            continue
        pm, am = mean_of(rows, "pmw", "mean", **fixed), mean_of(rows, "aim", "mean", **fixed)
        px, ax_ = mean_of(rows, "pmw", "max", **fixed), mean_of(rows, "aim", "max", **fixed)
        if np.isnan(pm):
            continue
        runs = len(group(rows, method="aim", **fixed))
        ahead = am >= 3 * pm and ax_ >= 3 * px
        out.append(
            f"- {exp}, eps = {eps:g}, k = {k:,}, n = {n:,}: AIM / hybrid mean {am / pm:.1f}x, "
            f"max {ax_ / px:.1f}x ({runs} AIM run{'s' if runs > 1 else ''}): "
            f"hybrid clearly ahead (>= 3x on both): **{'yes' if ahead else 'no'}**."
        )
    return out


def main() -> None:
    rows = load(Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS)
    rnd = group(rows, experiment="random", workload="logistic")
    eps1 = [r for r in rnd if r["epsilon"] == 1.0]
    ks = sorted({r["k"] for r in eps1})
    kmax = max(ks) if ks else 0
    at_kmax = [r for r in rnd if r["k"] == kmax]
    epss = sorted({r["epsilon"] for r in at_kmax})
    cols = ["mean", "p95", "max", "test acc.", "oracle calls", "seconds"]
    plot(eps1, "k", IMG / "error_vs_k.png", "number of queries k", "Adult, eps = 1, logistic")
    plot(at_kmax, "epsilon", IMG / "error_vs_eps.png", "epsilon", f"Adult, k = {kmax:,}, logistic")
    scal = group(rows, experiment="scaling-n")
    if scal:
        plot(scal, "n", IMG / "error_vs_n.png", "n (records)", "eps = 1, k = 1,000, logistic")
    parts = [TEMPLATE_HEAD]
    if (Path(__file__).parent / "results" / "updates.jsonl").exists():
        # Issue 15's section (new defaults, restated composition ratios), from its own files.
        sys.path.insert(0, str(Path(__file__).parent))
        from issue15 import section as issue15_section

        parts += [issue15_section(), ""]
    if (Path(__file__).parent / "results" / "online_updates.jsonl").exists():
        # Issue 35's ablation, from its own results file (online_updates.py).
        sys.path.insert(0, str(Path(__file__).parent))
        from online_updates import section as issue35_section

        parts += [issue35_section(), ""]
    parts += ["## Targets\n", "\n".join(verdicts(rows)), ""]
    parts += [
        "## Workload A: random logistic queries, eps = 1\n",
        table(eps1, "k", ks, cols),
        "",
        "![error vs k](img/error_vs_k.png)",
        "",
    ]
    parts += [
        f"## Workload A at k = {kmax:,}, every epsilon\n",
        table(at_kmax, "epsilon", epss, cols),
        "",
        "![error vs eps](img/error_vs_eps.png)",
        "",
    ]
    for workload in ("squared", "smoothed_hinge"):
        sel = group(rows, experiment="random", workload=workload)
        if sel:
            parts += [
                f"## Workload A, {workload} loss, eps = 1\n",
                table(
                    sel,
                    "k",
                    sorted({r["k"] for r in sel}),
                    cols,
                ),
                "",
            ]
    adap = group(rows, experiment="adaptive")
    if adap:
        parts += [
            "## Workload B: adaptive forward stepwise selection, eps = 1\n",
            "Every binary attribute is a target; each analyst selects 4 features, each step "
            "choosing from the answers the method released.\n",
            table(adap, "k", sorted({r["k"] for r in adap}), cols),
            "",
        ]
    for name, title, text in REGIMES:
        sel = group(rows, experiment=name)
        if sel:
            by = "n" if len({r["n"] for r in sel}) > 1 else "k"
            parts += [
                title + "\n",
                text + "\n",
                table(sel, by, sorted({r[by] for r in sel}), cols),
                "",
            ]
            if by == "n":
                image = IMG / f"{name}_vs_n.png"
                plot(sel, "n", image, "n (records)", f"{name}: eps = 1, k = 1,000")
                parts += [f"![{name}: error vs n](img/{image.name})", ""]
    parts += ["## Where each method wins\n", WINS_INTRO, winners(newest(rows)), "", READING]
    parts += [
        "## Why the first runs lost at eps = 0.1 (40/30/30 split, T = 10)\n",
        low_epsilon_diagnosis(rows),
        "",
    ]
    if scal:
        parts += [
            "## Error against n (k = 1,000 logistic queries, eps = 1)\n",
            "Sizes above 39,073 resample the train split with replacement: a proxy for a "
            "larger population, not new people.\n",
            table(scal, "n", sorted({r["n"] for r in scal}), cols),
            "",
            "![error vs n](img/error_vs_n.png)",
            "",
        ]
    theory = ROOT / "benchmarks" / "accuracy" / "results" / "theory.md"
    if theory.exists():
        parts += [theory.read_text()]
    table1 = ROOT / "benchmarks" / "accuracy" / "results" / "table1.md"
    if table1.exists():  # theory.py table1: the paper's Table 1, every row
        parts += [table1.read_text()]
    parts += [TEMPLATE_TAIL]
    if (Path(__file__).parent / "results" / "full_resolution.jsonl").exists():
        # Issue 13's section, from its own results file (full_resolution.py --report).
        sys.path.insert(0, str(Path(__file__).parent))
        from full_resolution import section

        parts += ["", section()]
    DOCS.mkdir(exist_ok=True)
    (DOCS / "results.md").write_text("\n".join(parts))
    print(f"wrote {DOCS / 'results.md'}")


REGIMES = [
    (
        "wide",
        "## Many attributes at once: 8-13 features per query (k = 1,000, eps = 1)",
        "Each logistic query predicts a random binary attribute from 8 to 13 of the other 13: "
        "its loss reads a 9- to 14-way marginal, while every prior here (ours, MST's, AIM's "
        "2-way workload) measures 2-way marginals.",
    ),
    (
        "interactions",
        "## Interaction features: products of 2-3 features (k = 1,000, eps = 1)",
        "Each query has 3-5 features plus 1-3 interaction terms (the CMQuery `interactions` "
        "field: products of the listed features' encodings).",
    ),
    (
        "parity",
        "## Stress case: a label no low-order marginal sees, at growing n (k = 1,000, eps = 1)",
        "`income>50K` is replaced by the parity of `married`, `education-num>=10` and "
        "`hours>=40` (5% of labels flipped); every query predicts it from those three, 0-2 "
        "other attributes and their 3-way product (radius 1, 2 or 4). A model fitted to 2-way "
        "marginals misses the parity, so the prior's answers (and MST's, AIM's) are far off; "
        "the online part must find and fix them. n above 39,073 resamples the parity-labelled "
        "train split with replacement (drawn as multinomial cell counts): a proxy for a larger "
        "population, not new people.",
    ),
]

#: Later runs of the same regimes (issue 15), oldest first: each replaces a method's
#: rows in a regime wholesale (its seeds may differ), never mixes with them.
RERUNS = (
    "rerun_regimes.jsonl",
    "rerun_composition.jsonl",
    "rerun_large_n.jsonl",
    "rerun_composition_all.jsonl",
    "rerun_announced_k.jsonl",
    "rerun_refit.jsonl",
)

WINS_INTRO = (
    "For every regime (experiment, epsilon, k, n) measured, the method with the lowest "
    "mean and the lowest max excess risk (means over seeds), and PMW-CM's ratio to the best "
    "other method (above 1: PMW-CM is worse by that factor). Computed from the results; "
    "regimes where a method is missing compare only those run. A method's rows in a "
    "regime come from its newest run there: "
    + ", ".join(f"`{name}`" for name in RERUNS)
    + " replace, in that order, the first run's `results.jsonl`; pmw on the random "
    "logistic stream comes from `updates.jsonl` (today's default engine, the k = 10,000 "
    "stream and its first 1,000 answers), and where composition was re-run with the tuned "
    "oracle the first runs' fixed 100-step composition stays as `composition-100`, so "
    "each ratio is against the stronger of the two (so composition is the "
    "tuned oracle wherever it was re-run, pmw at n = 10^6 and 10^7 is told k, as "
    "`run.py` now does, and pmw on the announced streams of fewer than 10,000 queries "
    "at n <= 39,073 (parity, scaling-n, wide, interactions, adaptive) uses that k in its "
    "threshold rule, and from `rerun_refit.jsonl` on refits the prior's marginals after "
    "each update).\n"
)


def newest(rows: list[dict]) -> list[dict]:
    """``rows`` with every (regime, method) group replaced by its newest rerun."""

    def group_key(row: dict) -> tuple:
        return tuple(row[f] for f in ("experiment", "workload", "epsilon", "k", "n", "method"))

    latest: dict[tuple, list[dict]] = {}
    for row in rows:
        latest.setdefault(group_key(row), []).append(row)
    # The first runs' fixed 100-step composition stays a candidate beside the tuned
    # one: the tuned oracle is not better everywhere (the smoothed hinge), and each
    # ratio is against the strongest composition measured.
    first_composition = {key: rows for key, rows in latest.items() if key[-1] == "composition"}
    # pmw on the random logistic stream: today's engine (updates.py's calibrated runs).
    from issue15 import pmw_from_updates

    latest.update({(*key, "pmw"): rows for key, rows in pmw_from_updates().items()})
    for name in RERUNS:
        path = RESULTS.parent / name
        if not path.exists():
            continue
        rerun: dict[tuple, list[dict]] = {}
        for row in load(path):
            rerun.setdefault(group_key(row), []).append(row)
        latest.update(rerun)
    for key, rows in first_composition.items():
        if latest[key] is not rows:  # re-run with the tuned oracle
            latest[(*key[:-1], "composition-100")] = [
                dict(r, method="composition-100") for r in rows
            ]
    return [row for group_rows in latest.values() for row in group_rows]


READING = """In words (the tables above are the evidence; this reading was written from
the committed results and should be revisited if a rerun changes them):

- **Adult at eps >= 0.5, any loss or workload here** (random, many attributes,
  interactions, squared and smoothed-hinge losses, the adaptive analyst): the
  hybrid has the lowest mean and max. Its 2-way prior already answers almost
  every query within the certified threshold; the online part mostly certifies.
  Against AIM at matched units it is ahead several-fold to an order of
  magnitude (the verdicts under Targets give the ratios), in a
  fraction of AIM's time.
- **eps = 0.1**: the first runs (40/30/30 split, `T = 10`) lost to MST at
  k = 10,000, because the few, very noisy updates made the hypothesis worse
  (diagnosis below, on those runs). Today's budget rule gives the prior 95% and
  `T = 1` there, and the calibrated step declines noise-driven moves: on the
  same streams the hybrid's mean is 5x below MST's.
- **Large n, fixed k**: composition's noise falls like 1/n. The first runs
  had composition catching up around n = 10^6 and winning at 10^7 (k = 1,000),
  because the hybrid's prior fit stopped at its 300-iteration budget far above
  the precision of its measurements. Told k (`announced_queries`, as `run.py`
  now does), pmwcm's budget rule answers such a stream in composition mode
  from n ~ 245,000 at eps = 1 (`pmwcm.engine.composition_mode`; the cut was
  fitted on public streams). At 10^6 and 10^7 it ties composition (the rows
  above). Since the fit goes on to its measurements' precision (docs/design.md
  section 6), the unannounced hybrid beats composition on the random stream
  there, 64x and 870x on the mean at 10^6 and 10^7 (`updates.py`'s n-1e6 and
  n-1e7 rows, first 1,000 answers). It still loses on the parity label, and the rule cannot tell the
  two apart, so it keeps composition mode (issue 15 section, "Where the cut
  came from").
- **A label no low-order marginal sees** (parity): MST misses it and AIM fits
  only part of it, and neither improves with n. At n = 39,073 the hybrid told
  the stream's length sets its threshold for 1,000 queries instead of 10,000,
  catches more of what the prior misses, and leads composition on the mean (2x)
  though not on the max (1.4x the fixed-step composition's); at n = 10^6 and 10^7
  composition mode matches composition.
"""


#: Issue 15's "best or near-best" bounds on PMW-CM's ratio to the best other method.
NEAR_BEST = {"mean": 1.5, "max": 2.0}


def winners(rows) -> str:
    """One line per regime: who has the lowest mean / max, and how PMW-CM compares."""
    keys = sorted(
        {(r["experiment"], r["workload"], r["epsilon"], r["k"], r["n"]) for r in rows},
        key=lambda t: (t[0], t[1], t[2], t[3], t[4]),
    )
    lines = [
        "| regime | eps | k | n | lowest mean | lowest max | PMW-CM mean / best other "
        "| PMW-CM max / best other |",
        "|" + " --- |" * 8,
    ]
    wins: dict[str, list[str]] = {}
    missed: list[str] = []  # issue 15: pmw's mean <= 1.5x and max <= 2x the best other's
    for exp, workload, eps, k, n in keys:
        sel = group(rows, experiment=exp, workload=workload, epsilon=eps, k=k, n=n)
        methods = [m for m in ORDER if any(r["method"] == m for r in sel)]
        if "pmw" not in methods or len(methods) < 2:
            continue
        if exp == "random" and k not in (1000, 10_000):
            continue
        stat = {m: {x: mean_of(sel, m, x) for x in ("mean", "max")} for m in methods}
        best = {x: min(methods, key=lambda m: stat[m][x]) for x in ("mean", "max")}
        others = [m for m in methods if m != "pmw"]
        ratio = {x: stat["pmw"][x] / min(stat[m][x] for m in others) for x in ("mean", "max")}
        best_other = {x: min(others, key=lambda m: stat[m][x]) for x in ("mean", "max")}
        label = f"{exp} ({workload}), eps = {eps:g}, k = {k:,}, n = {n:,}"
        for x in ("mean", "max"):
            wins.setdefault(f"{best[x]}|{x}", []).append(label)
        if ratio["mean"] > NEAR_BEST["mean"] or ratio["max"] > NEAR_BEST["max"]:
            missed.append(f"{label} ({ratio['mean']:.2f}x mean, {ratio['max']:.2f}x max)")
        lines.append(
            f"| {exp} ({workload}) | {eps:g} | {k:,} | {n:,} "
            f"| {best['mean']} ({stat[best['mean']]['mean']:.2g}) "
            f"| {best['max']} ({stat[best['max']]['max']:.2g}) "
            f"| {ratio['mean']:.2g} (vs {best_other['mean']}) "
            f"| {ratio['max']:.2g} (vs {best_other['max']}) |"
        )
    total = len(lines) - 2
    lines.append("")
    for method in ORDER:
        for x in ("mean", "max"):
            won = wins.get(f"{method}|{x}", [])
            if won:
                where = "; ".join(won) if method != "pmw" else f"{len(won)} of {total} regimes"
                lines.append(f"- Lowest {x}: **{method}** in {where}.")
    lines.append(
        f"- Best or near-best (issue 15: PMW-CM's mean at most {NEAR_BEST['mean']:g}x and its "
        f"max at most {NEAR_BEST['max']:g}x the best other method's): "
        + (
            f"**met in all {total} regimes**."
            if not missed
            else f"met in {total - len(missed)} of {total}; **not met**: {'; '.join(missed)}."
        )
    )
    return "\n".join(lines)


def low_epsilon_diagnosis(rows, eps: float = 0.1, k: int = 10_000) -> str:
    """Per seed at the smallest epsilon: the hybrid's oracle calls against its mean error."""
    sel = sorted(
        group(rows, experiment="random", workload="logistic", method="pmw", epsilon=eps, k=k),
        key=lambda r: r["seed"],
    )
    if len(sel) < 3:
        return "Not enough runs at eps = 0.1 yet."
    calls = np.array([r["oracle_calls"] for r in sel], dtype=float)
    means = np.array([r["mean"] for r in sel])
    early = [
        mean_of(rows, "pmw", "mean", experiment="random", workload="logistic", epsilon=eps, k=1000)
    ]
    rho = float(spearmanr(calls, means).statistic) if calls.std() > 0 else float("nan")
    lines = [
        f"At eps = {eps:g} each of the T = 10 oracle calls gets a tiny share of the budget, so "
        "its private answer is very noisy and an update driven by it can make the hypothesis "
        "worse. The evidence, per seed of the k = 10,000 stream:",
        "",
        "| seed | oracle calls (updates) | mean excess risk | max |",
        "| --- | --- | --- | --- |",
        *(f"| {r['seed']} | {r['oracle_calls']} | {r['mean']:.2g} | {r['max']:.2g} |" for r in sel),
        "",
        f"Spearman rank correlation between updates and mean error: {rho:.2f}; the same "
        f"streams' first 1,000 queries (before most updates) averaged {early[0]:.2g}. "
        "More updates went with more error: at this epsilon fewer, better-funded updates (or "
        "none) would serve better. We report the fixed default rule rather than tune it on "
        "these streams.",
    ]
    return "\n".join(lines)


TEMPLATE_HEAD = """# Accuracy results

Generated by `make bench-accuracy` (`benchmarks/accuracy/run.py`, then
`benchmarks/accuracy/report.py`) from `benchmarks/accuracy/results/results.jsonl`.
Every number below is computed from that file. Cells show the mean over seeds
± the standard deviation across seeds of each per-seed statistic (mean, 95th
percentile and max of the excess empirical risk `err_l(D, theta) = L_D(theta) -
min L_D` over the k queries of a stream).

**Setup.** Bundled UCI Adult, binary schema (14 attributes, |X| = 2^14), split
80/20 with a fixed public seed; the 39,073-record train split is the private
data; logistic answers are also scored by classification accuracy on the test
split. delta = 1e-6. Query streams are seeded 1000 + s and were never used to
choose defaults (pmwcm's defaults were chosen on a seed-0 stream on the full
file: see `src/pmwcm/engine/practical.py`).

**Privacy units.** pmwcm and composition are (eps, delta)-DP for replace-one
neighbours. MST and AIM (OpenDP 0.16 `extras.mbi`) are rho-zCDP for add/remove
one; an add/remove rho-zCDP mechanism is 4 rho-zCDP for replace-one (group
privacy, Bun and Steinke 2016 Prop. 1.9), so they run at rho = rho*(eps, delta)/4
with rho* the largest zCDP converting to (eps, delta) (Bun and Steinke 2016 Prop.
1.3): every method here carries the same replace-one (eps, delta) guarantee. AIM
runs with 16 rounds (the default 224 did not finish in 25 minutes on 2 cores).
OpenDP cannot be seeded: its "seeds" are independent runs. One synthetic release
per (method, data, epsilon, seed) is cached and reused by every workload on that
data (a release is post-processed by every query fitted on it, exactly as a
user of synthetic data would reuse it); its reported time is the original
synthesis time plus the fits. AIM takes about 10 minutes per release here, so
it has fewer runs than the other methods: the "seeds" column says how many.
`make bench-accuracy` resumes the grid where the results file stops (the full
default grid takes many hours on 2 cores); the `aim-ar` row comes from
`run.py --experiments random --methods aim-ar --epsilons 1 --seeds 1`.

**The hybrid.** pmwcm's default (`pmw`) is the engine of issue 7: a private
prior (all 2-way marginals measured with the Gaussian mechanism at 40% of the
budget and fitted into the histogram) corrected online (sparse vector 30%, at
most T = 10 oracle calls and updates with the remaining 30%), every
below-threshold answer certified against the real data
(`OnlinePMW.certified_error`). `pmw-mst` is the same engine with OpenDP's MST
as the paid prior. The split is a fixed rule (`src/pmwcm/engine/practical.py`), not
fitted to these streams.
"""

TEMPLATE_TAIL = """
## How pmwcm's defaults were chosen, and what that would cost

The defaults (marginal prior with 40% of the budget, sparse vector 30%,
T = 10 with the prior, eta S = 4, two post-processing sweeps, the threshold
rule) are fixed constants in `src/pmwcm/engine/practical.py`. They were chosen by
looking at the bundled public Adult file with a seed-0 query stream, i.e. on
the same population this benchmark evaluates (on a different split of queries,
not of records). For a user's own private data, choosing constants by looking
at that data would itself leak: each configuration tried is a query of the
data, and an honest account would charge every trial (e.g. by private
selection, Liu and Talwar 2019) or tune on public data of the same shape as we
did. pmwcm never reads the private data to set a parameter.
"""


if __name__ == "__main__":
    main()
