"""Do updates help? Per-update segments of one stream, fixed step against calibrated step.

Issue 15's measurement: on a random logistic stream, group the below-threshold
(``"hypothesis"``) answers by how many updates the engine had made when it gave
them, and compare each segment's mean excess risk with the one before it (the
target: after the t-th update at most 1.1x before it); and the whole stream's
mean at k = 10,000 against its first 1,000 answers (the same prior noise; target
at most 1.2x)::

    .venv/bin/python benchmarks/accuracy/updates.py --seeds 5 --k 10000 --rules fixed calibrated

Data: the bundled Adult train split of ``run.py`` (binary schema, n = 39,073);
streams are seeded 1000 + s as in ``run.py``. ``--regimes`` runs the other
random-stream regimes of docs/results.md the same way (:data:`REGIMES`: the
squared and smoothed-hinge losses, wide and interaction features, the parity
label at n = 39,073, 10^6 and 10^7, and the scaling-n populations), each with
its own query family for the stream and the panel. One JSON line per (regime,
rule, eps, seed) goes to ``results/updates.jsonl`` (rows without a ``regime``
are ``random``). The segment ratio compares whichever queries fell on either side
of an update; ``--null`` scores the same segments on the frozen prior (the query
mix's share), and ``--same-queries`` runs the default engine's streams again with
each segment also answered by the hypothesis from before the update that opened it
(the update's own effect on the queries after it: :func:`same_query_ratios`).
``--report`` prints the tables that docs/results.md quotes::

    .venv/bin/python benchmarks/accuracy/updates.py --rules calibrated --regimes \
        squared smoothed_hinge wide interactions parity parity-1e6 parity-1e7 \
        n-5000 n-10000 n-20000 n-1e6 n-1e7
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pmwcm.data.bundled import load_adult
from pmwcm.engine.practical import REFIT_ITERATIONS, PMWConfig, build_engine
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.workload import random_queries
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.private_data import PrivateData

sys.path.insert(0, str(Path(__file__).parent))
from run import DELTA, Evaluator, population
from workloads import interaction_queries, parity_queries, parity_records, wide_queries

RESULTS = Path(__file__).parent / "results" / "updates.jsonl"
#: The frozen prior's errors on the same stream segments (``--null``): what the
#: segment ratio reads when no update moves the hypothesis at all.
NULL_RESULTS = RESULTS.with_name("updates_null.jsonl")
#: The default engine's streams run again (``--same-queries``) with each segment's
#: queries also answered by the hypothesis from before the update that opened it.
SAME_QUERY_RESULTS = RESULTS.with_name("updates_same_queries.jsonl")
#: Probe queries (seeded 5000 + s, never a benchmark stream) on which the hypothesis
#: is scored before and after every update: the same queries each time, so a
#: ratio above one is the update's own doing, not a change in which queries came.
PANEL = 300


def _split() -> tuple[Domain, np.ndarray, np.ndarray]:
    """``run.py``'s public 80/20 split of bundled Adult: the domain, train and test records."""
    data = load_adult()
    order = np.random.default_rng(20261126).permutation(data.n)
    cut = int(0.8 * data.n)
    return data.domain, data.records[order[:cut]], data.records[order[cut:]]


def adult_split() -> Evaluator:
    """``run.py``'s public 80/20 split of bundled Adult."""
    domain, train, test = _split()
    return Evaluator(
        PrivateData.from_records(domain, train), PrivateData.from_records(domain, test)
    )


def _resampled(n: int, *, parity: bool = False) -> Evaluator:
    """``run.py``'s population of ``n`` (scaling-n and parity regimes), on the parity
    label if asked, scored against the held-out split as run.py scores it."""
    domain, train, test = _split()
    if parity:
        train, test = parity_records(train, domain), parity_records(test, domain)
    return Evaluator(population(domain, train, n), PrivateData.from_records(domain, test))


QueryMaker = Callable[[Domain, int, np.random.Generator], list[CMQuery]]


def _random(*losses: str) -> QueryMaker:
    def make(domain: Domain, k: int, rng: np.random.Generator) -> list[CMQuery]:
        return random_queries(domain, k, rng=rng, losses=losses)

    return make


def _family(generator: Callable[..., list[CMQuery]]) -> QueryMaker:
    def make(domain: Domain, k: int, rng: np.random.Generator) -> list[CMQuery]:
        return generator(domain, k, rng=rng)

    return make


#: Every random-stream regime of docs/results.md: its data (built on demand) and the
#: query family of its stream and its panel. ``random`` is the Adult train split with
#: random logistic queries, the rows without a ``regime`` key.
REGIMES: dict[str, tuple[Callable[[], Evaluator], QueryMaker]] = {
    "random": (adult_split, _random("logistic")),
    "squared": (adult_split, _random("squared")),
    "smoothed_hinge": (adult_split, _random("smoothed_hinge")),
    "wide": (adult_split, _family(wide_queries)),
    "interactions": (adult_split, _family(interaction_queries)),
    "parity": (lambda: _resampled(39_073, parity=True), _family(parity_queries)),
    "parity-1e6": (lambda: _resampled(10**6, parity=True), _family(parity_queries)),
    "parity-1e7": (lambda: _resampled(10**7, parity=True), _family(parity_queries)),
    "n-5000": (lambda: _resampled(5_000), _random("logistic")),
    "n-10000": (lambda: _resampled(10_000), _random("logistic")),
    "n-20000": (lambda: _resampled(20_000), _random("logistic")),
    "n-1e6": (lambda: _resampled(10**6), _random("logistic")),
    "n-1e7": (lambda: _resampled(10**7), _random("logistic")),
}


def run_one(
    ev: Evaluator,
    *,
    rule: str,
    epsilon: float,
    seed: int,
    k: int,
    regime: str = "random",
    refit: int = REFIT_ITERATIONS,
) -> dict[str, object]:
    """One stream; the per-segment means of below-threshold answers and the k-ratio.
    ``refit``: the engine's refit steps after each update (``PMWConfig.refit_iterations``)."""
    make = REGIMES[regime][1]
    queries = make(ev.domain, k, np.random.default_rng(1000 + seed))
    config = PMWConfig(
        epsilon=epsilon,
        delta=DELTA,
        after_halt="synthetic",
        step_rule=rule,  # type: ignore[arg-type]
        refit_iterations=refit,
    )
    start = time.perf_counter()
    engine = build_engine(ev.train, config, noise=NumpyNoise(seed=seed))
    panel = make(ev.domain, PANEL, np.random.default_rng(5000 + seed))
    panel_means = [panel_error(engine, ev, panel)]
    # The engine replaces its hypothesis at an update, never changes it in place, so
    # hypotheses[t] is the one the answers after t updates came from.
    hypotheses = [engine.hypothesis]
    errors, sources, updates, before, repeats = [], [], [], [], 0
    for q in queries:
        answer = engine.answer(q)
        repeats += answer.repeated
        if len(engine.updates) > len(hypotheses) - 1:
            hypotheses.append(engine.hypothesis)
        if answer.source == "oracle":
            # Also after a repeat of an oracle answer, where no update happened and
            # the panel is unchanged (a ratio of exactly one): rows stored before
            # runs counted their updates were made this way, and new ones match them.
            panel_means.append(panel_error(engine, ev, panel))
        errors.append(ev.excess_risk(q, np.asarray(answer.value)))
        sources.append(answer.source)
        updates.append(answer.updates if answer.source != "oracle" else answer.updates - 1)
        # A fresh below-threshold answer after an update, answered again by the
        # hypothesis from before that update: what the update changed for it. A
        # repeat is the released answer given again, which no later update touches.
        t = updates[-1]
        fresh = answer.source != "oracle" and not answer.repeated and t >= 1
        before.append(_error_on(engine, hypotheses[t - 1], ev, q) if fresh else np.nan)
    err, err_before = np.asarray(errors), np.asarray(before)
    below = np.asarray([s != "oracle" for s in sources])
    segments = []
    for t in range(max(updates) + 1):
        mask = below & (np.asarray(updates) == t)
        if mask.any():
            segment = {
                "t": t,
                "count": int(mask.sum()),
                "mean": float(err[mask].mean()),
                "max": float(err[mask].max()),
            }
            fresh = mask & ~np.isnan(err_before)
            if fresh.any():
                segment["fresh"] = int(fresh.sum())
                segment["fresh_mean"] = float(err[fresh].mean())
                segment["before_mean"] = float(err_before[fresh].mean())
            segments.append(segment)
    oracle = [float(e) for e, s in zip(err, sources, strict=True) if s == "oracle"]
    return {
        "regime": regime, "rule": rule, "tilt": tilt_of(rule), "refit": refit,
        "epsilon": epsilon, "seed": seed,
        "k": k, "n": ev.train.n,
        "mean": float(err.mean()), "max": float(err.max()),
        "mean_first_1000": float(err[:1000].mean()), "max_first_1000": float(err[:1000].max()),
        "segments": segments, "oracle_errors": oracle, "panel": panel_means,
        "updates": len(engine.updates), "repeats": repeats,
        "seconds": time.perf_counter() - start,
    }  # fmt: skip


def null_segments(ev: Evaluator, row: dict[str, object]) -> list[dict[str, float]]:
    """The segments of ``row``'s stream scored on the frozen prior (no update at all).

    Segment ``t`` holds the below-threshold answers given after ``t`` updates; they are
    contiguous in the stream, and exactly ``t`` oracle answers (one per update) and the
    earlier segments come before it, so the stream positions follow from the stored
    counts (checked: the counts and the oracle answers add up to ``k``; a repeated
    oracle answer would break this). Each query there is
    answered by the engine's starting hypothesis (the same prior noise: the same
    seed) and scored like the run's answers. A segment ratio above one on these is
    the query mix's doing alone: the hypothesis is the same on both sides.
    """
    seed, epsilon, k = int(row["seed"]), float(row["epsilon"]), int(row["k"])  # type: ignore[arg-type]
    queries = REGIMES[regime_of(row)][1](ev.domain, k, np.random.default_rng(1000 + seed))
    config = PMWConfig(epsilon=epsilon, delta=DELTA, after_halt="synthetic")
    frozen = build_engine(ev.train, config, noise=NumpyNoise(seed=seed))
    segments = row["segments"]
    counts = sum(int(g["count"]) for g in segments)  # type: ignore[attr-defined]
    assert counts + len(row["oracle_errors"]) == k, "segments and updates do not tile the stream"  # type: ignore[arg-type]
    out, earlier = [], 0
    for segment in segments:  # type: ignore[attr-defined]
        count, t = int(segment["count"]), int(segment["t"])
        part = queries[earlier + t : earlier + t + count]
        errors = [_hypothesis_error(frozen, ev, q) for q in part]
        out.append({"t": t, "count": count, "mean": float(np.mean(errors))})
        earlier += count
    return out


def _hypothesis_error(engine: object, ev: Evaluator, query: object) -> float:
    return _error_on(engine, engine.hypothesis, ev, query)  # type: ignore[attr-defined]


def _error_on(engine: object, hypothesis: object, ev: Evaluator, query: object) -> float:
    """The excess risk of ``hypothesis``'s answer to ``query`` (the engine's compiled round)."""
    round_ = engine.cm_round(query)  # type: ignore[attr-defined]
    table = hypothesis.clique_table(round_.clique)  # type: ignore[attr-defined]
    return ev.excess_risk(query, round_.hypothesis_answer(table))  # type: ignore[arg-type]


def panel_error(engine: object, ev: Evaluator, panel: list) -> float:
    """Mean excess risk of the current hypothesis's answers on a fixed panel of queries."""
    return sum(_hypothesis_error(engine, ev, q) for q in panel) / len(panel)


def worst_panel_ratio(panel: list[float]) -> float:
    """The largest ratio of the panel's mean error after an update to before it."""
    return max((b / a for a, b in itertools.pairwise(panel) if a > 0), default=1.0)


def tilt_of(rule: str) -> str:
    """How today's code tilts an update: the calibrated rule moves the label's
    conditional only (``step_size.conditional_factor``), the fixed step the joint."""
    return "conditional" if rule == "calibrated" else "joint"


def rule_label(row: dict[str, object]) -> str:
    """The step rule as the tables name it. Calibrated rows stored before the
    conditional tilt (``"tilt": "joint"``) are ``calibrated (joint tilt)``; rows
    whose engine refitted the prior's marginals after each update (``"refit"``
    steps, stored since the refit exists) add ``+ refit``."""
    rule = str(row["rule"])
    if rule == "calibrated" and row.get("tilt", "joint") == "joint":
        rule = "calibrated (joint tilt)"
    if int(row.get("refit", 0)) > 0:  # type: ignore[call-overload]
        rule += " + refit"
    return rule


def run_key(row: dict[str, object]) -> tuple[object, ...]:
    """What identifies a stored run: regime, rule (and tilt), eps, seed and k."""
    return (regime_of(row), rule_label(row), row["epsilon"], row["seed"], row["k"])


def regime_of(row: dict[str, object]) -> str:
    """A stored row's regime (the first rows, all ``random``, do not name it)."""
    return str(row.get("regime", "random"))


def worst_segment_ratio(segments: list[dict[str, float]]) -> float:
    """The largest ratio of a segment's mean to the previous segment's (1 if one segment)."""
    return max(segment_ratios(segments).values(), default=1.0)


def stored(path: Path) -> list[dict[str, object]]:
    """The rows of a results file (JSON lines)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def table_group(row: dict[str, object]) -> tuple[int, str, str, float, int]:
    """A row's line in the tables: its regime (in :data:`REGIMES` order), rule, eps, k."""
    regime = regime_of(row)
    order = list(REGIMES).index(regime)
    return (order, regime, rule_label(row), float(row["epsilon"]), int(row["k"]))  # type: ignore[arg-type]


def updates_made(path: Path = SAME_QUERY_RESULTS) -> dict[tuple[object, ...], int]:
    """The updates each stored run made, by :func:`run_key`: a row's own ``updates``, or
    its ``--same-queries`` re-run's (rows stored before runs counted them hold only
    their answers marked "oracle", which include repeats of an oracle answer)."""
    rows = [*stored(RESULTS), *(stored(path) if path.exists() else [])]
    return {run_key(r): int(r["updates"]) for r in rows if "updates" in r}  # type: ignore[call-overload]


def report(path: Path = RESULTS) -> str:
    """Markdown: per (rule, eps), the mean over seeds of the stream's mean, the worst
    segment ratio and the k = 10,000 / 1,000 ratio."""
    groups: dict[tuple[int, str, str, float, int], list[dict[str, object]]] = {}
    for row in stored(path):
        groups.setdefault(table_group(row), []).append(row)
    lines = [
        "| regime | n | step rule | eps | k | seeds | mean | max | worst segment ratio (mean "
        "over seeds; max) | worst panel ratio (mean; max) | panel after / before all updates "
        "| k / first 1,000 mean (mean; max) | oracle answers (repeats included) | updates |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    made = updates_made()
    for (_, regime, rule, eps, k), group in sorted(groups.items()):
        seg = [worst_segment_ratio(g["segments"]) for g in group]  # type: ignore[arg-type]
        flat = [float(g["mean"]) / float(g["mean_first_1000"]) for g in group]  # type: ignore[arg-type]
        oracle = [len(g["oracle_errors"]) for g in group]  # type: ignore[arg-type]
        counts = [made.get(run_key(g)) for g in group]
        ups = f"{np.mean(counts):.1f}" if None not in counts else "-"
        pan = [worst_panel_ratio(g["panel"]) for g in group]  # type: ignore[arg-type]
        whole = [g["panel"][-1] / g["panel"][0] for g in group]  # type: ignore[index]
        lines.append(
            f"| {regime} | {int(group[0]['n']):,} | {rule} | {eps:g} | {k} | {len(group)} "  # type: ignore[call-overload]
            f"| {np.mean([g['mean'] for g in group]):.2g} "
            f"| {np.mean([g['max'] for g in group]):.2g} "
            f"| {np.mean(seg):.2f}; {max(seg):.2f} | {np.mean(pan):.2f}; {max(pan):.2f} "
            f"| {np.mean(whole):.2f} | {np.mean(flat):.2f}; {max(flat):.2f} "
            f"| {np.mean(oracle):.1f} | {ups} |"
        )
    return "\n".join(lines)


def segment_ratios(segments: list[dict[str, float]]) -> dict[int, float]:
    """Each segment's mean over the previous segment's, keyed by the later one's ``t``."""
    return {
        int(b["t"]): b["mean"] / a["mean"] for a, b in itertools.pairwise(segments) if a["mean"] > 0
    }


def own_shares(run: dict[int, float], frozen: dict[int, float]) -> list[float]:
    """Each boundary's segment ratio over the frozen prior's at the same boundary
    (both from :func:`segment_ratios`): the update's own share of the ratio."""
    return [run[t] / frozen[t] for t in run if frozen.get(t)]


def same_query_ratios(segments: list[dict[str, float]]) -> dict[int, float]:
    """Each segment's fresh answers (not repeats) over the same queries answered by the
    hypothesis from before the update that opened it, keyed by ``t``: the update's
    effect on the queries that came after it, with nothing else changed."""
    return {
        int(g["t"]): g["fresh_mean"] / g["before_mean"]
        for g in segments
        if g.get("before_mean", 0.0) > 0
    }


def rerun_same_queries(ev: Evaluator, row: dict[str, object]) -> dict[str, object]:
    """``row``'s stream run again with :func:`run_one`, which now also scores each
    segment on the hypothesis from before its update; checked to reproduce the stored
    segments (counts exactly, means to 1e-9), so the ratios are about that very run."""
    again = run_one(
        ev,
        rule=str(row["rule"]),
        epsilon=float(row["epsilon"]),  # type: ignore[arg-type]
        seed=int(row["seed"]),  # type: ignore[call-overload]
        k=int(row["k"]),  # type: ignore[call-overload]
        regime=regime_of(row),
        refit=int(row.get("refit", 0)),  # type: ignore[call-overload]
    )
    old, new = row["segments"], again["segments"]
    same = len(old) == len(new) and all(  # type: ignore[arg-type]
        a["t"] == b["t"]
        and a["count"] == b["count"]
        and np.isclose(a["mean"], b["mean"], rtol=1e-9)
        for a, b in zip(old, new, strict=True)  # type: ignore[call-overload]
    )
    if not same:
        raise AssertionError(f"The re-run of {run_key(row)} did not reproduce its segments.")
    keep = {f: row.get(f) for f in ("rule", "tilt", "refit", "epsilon", "seed", "k")}
    counts = {f: again[f] for f in ("updates", "repeats")}
    return {"regime": regime_of(row)} | keep | counts | {"segments": new}


def same_query_report(path: Path = SAME_QUERY_RESULTS) -> str:
    """Markdown: per regime and eps, the worst same-query ratio over each stream's
    segments, the segments above 1.1 (with their fresh answers), and the ratio of the
    summed errors of every fresh answer after a first update."""
    groups: dict[tuple[int, str, float], list[dict[str, object]]] = {}
    for row in stored(path):
        regime = regime_of(row)
        key = (list(REGIMES).index(regime), regime, float(row["epsilon"]))  # type: ignore[arg-type]
        groups.setdefault(key, []).append(row)
    lines = [
        "| regime | eps | seeds | segments | worst same-query ratio (mean over seeds; max) "
        "| segments above 1.1 (fresh answers in each) | every fresh answer after a first "
        "update, after / before |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (_, regime, eps), rows in sorted(groups.items()):
        ratios = [same_query_ratios(r["segments"]) for r in rows]  # type: ignore[arg-type]
        scored = [g for r in rows for g in r["segments"] if "before_mean" in g]  # type: ignore[attr-defined]
        above = [g for g in scored if g["fresh_mean"] > 1.1 * g["before_mean"]]
        worst = [max(r.values(), default=1.0) for r in ratios]
        after = sum(g["fresh_mean"] * g["fresh"] for g in scored)
        before = sum(g["before_mean"] * g["fresh"] for g in scored)
        sizes = f" ({', '.join(str(g['fresh']) for g in above)})" if above else ""
        overall = f"{after / before:.3f}" if before > 0 else "-"
        lines.append(
            f"| {regime} | {eps:g} | {len(rows)} | {len(scored)} "
            f"| {np.mean(worst):.2f}; {max(worst):.2f} | {len(above)}{sizes} | {overall} |"
        )
    return "\n".join(lines)


def null_report(path: Path = RESULTS, nulls: Path = NULL_RESULTS) -> str:
    """Markdown: the segment ratios of the runs beside the frozen prior's on the same
    segments, and their quotient (the update's own share of each ratio)."""
    frozen = {run_key(row): row["segments"] for row in stored(nulls)}
    groups: dict[tuple[int, str, str, float, int], list[tuple[float, float, float]]] = {}
    for row in stored(path):
        key = run_key(row)
        if key not in frozen:
            continue
        run, still = segment_ratios(row["segments"]), segment_ratios(frozen[key])  # type: ignore[arg-type]
        worst = (
            max(run.values(), default=1.0),
            max(still.values(), default=1.0),
            max(own_shares(run, still), default=1.0),
        )
        groups.setdefault(table_group(row), []).append(worst)
    lines = [
        "| regime | step rule | eps | k | seeds | worst segment ratio (mean; max) | the "
        "frozen prior's on the same segments (mean; max) | worst ratio over the frozen "
        "prior's (mean; max) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (_, regime, rule, eps, k), rows in sorted(groups.items()):
        cells = []
        for i in range(3):
            values = [r[i] for r in rows]
            cells.append(f"{np.mean(values):.2f}; {max(values):.2f}")
        lines.append(
            f"| {regime} | {rule} | {eps:g} | {k} | {len(rows)} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4])
    parser.add_argument("--epsilons", type=float, nargs="*", default=[1.0])
    parser.add_argument("--rules", nargs="*", default=["fixed", "calibrated"])
    parser.add_argument("--k", type=int, default=10_000)
    parser.add_argument(
        "--refit",
        type=int,
        default=REFIT_ITERATIONS,
        help="the engine's refit steps after each update (0: none, as before the refit)",
    )
    parser.add_argument("--regimes", nargs="*", choices=list(REGIMES), default=["random"])
    parser.add_argument("--report", action="store_true")
    parser.add_argument(
        "--null",
        action="store_true",
        help="score the stored runs of --regimes on the frozen prior "
        "(results/updates_null.jsonl); runs already scored there are kept",
    )
    parser.add_argument(
        "--same-queries",
        action="store_true",
        help="run the default engine's stored streams of --regimes again, each segment's "
        "queries also scored on the hypothesis from before its update "
        "(results/updates_same_queries.jsonl); runs already there are kept",
    )
    args = parser.parse_args()
    if args.report:
        print(report())
        if NULL_RESULTS.exists():
            print("\n" + null_report())
        if SAME_QUERY_RESULTS.exists():
            print("\n" + same_query_report())
        return
    evaluators: dict[str, Evaluator] = {}

    def evaluator(regime: str) -> Evaluator:
        if regime not in evaluators:
            evaluators[regime] = REGIMES[regime][0]()
        return evaluators[regime]

    if args.same_queries:
        done = set()
        if SAME_QUERY_RESULTS.exists():
            done = {run_key(row) for row in stored(SAME_QUERY_RESULTS)}
        default = "calibrated + refit" if REFIT_ITERATIONS else "calibrated"
        with SAME_QUERY_RESULTS.open("a") as fh:
            for row in stored(RESULTS):
                if (
                    run_key(row) in done
                    or regime_of(row) not in args.regimes
                    or rule_label(row) != default
                    or int(row.get("refit", 0)) != REFIT_ITERATIONS  # type: ignore[call-overload]
                ):
                    continue
                again = rerun_same_queries(evaluator(regime_of(row)), row)
                fh.write(json.dumps(again) + "\n")
                fh.flush()
                print(
                    regime_of(row), row["epsilon"], row["seed"],
                    same_query_ratios(again["segments"]), flush=True,  # type: ignore[arg-type]
                )  # fmt: skip
        return
    if args.null:
        scored = {run_key(row) for row in stored(NULL_RESULTS)} if NULL_RESULTS.exists() else set()
        with NULL_RESULTS.open("a") as fh:
            for row in stored(RESULTS):
                if run_key(row) in scored or regime_of(row) not in args.regimes:
                    continue
                segments = null_segments(evaluator(regime_of(row)), row)
                keep = {f: row.get(f, "joint") for f in ("rule", "tilt", "epsilon", "seed", "k")}
                keep["refit"] = row.get("refit", 0)  # part of the run's key (rule_label)
                fh.write(
                    json.dumps({"regime": regime_of(row)} | keep | {"segments": segments}) + "\n"
                )
                print(
                    regime_of(row), row["rule"], row["seed"], segment_ratios(segments), flush=True
                )
        return
    done = set()
    if RESULTS.exists():
        done = {run_key(row) for row in stored(RESULTS)}
    for regime in args.regimes:
        for seed in args.seeds:
            for eps in args.epsilons:
                for rule in args.rules:
                    label = rule_label({"rule": rule, "tilt": tilt_of(rule), "refit": args.refit})
                    if (regime, label, eps, seed, args.k) in done:
                        continue
                    row = run_one(
                        evaluator(regime),
                        rule=rule,
                        epsilon=eps,
                        seed=seed,
                        k=args.k,
                        regime=regime,
                        refit=args.refit,
                    )
                    RESULTS.parent.mkdir(parents=True, exist_ok=True)
                    with RESULTS.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
                    panel: list[float] = row["panel"]  # type: ignore[assignment]
                    print(
                        f"{regime} {rule} eps={eps} seed={seed}: mean {row['mean']:.3g}, "
                        f"{len(panel) - 1} updates, worst panel ratio "
                        f"{worst_panel_ratio(panel):.3f}, {row['seconds']:.0f} s",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
