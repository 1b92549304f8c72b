"""Theory mode on the benchmark's workload: the n the paper needs, and what it then achieves.

Writes ``results/theory.md`` (included by ``report.py``). For random logistic
queries on the Adult binary domain (S = 2 R G B = 2, log|X| = 14 log 2), it
tabulates the paper's T and required n (Ullman 2015, Theorem
"putittogetheronline") for several alpha, then runs theory mode on a synthetic
histogram: the Adult train histogram declared to hold the required n records
(histograms let n be huge without records; the sparse vector and oracle noise
then scale with that n).

``python benchmarks/accuracy/theory.py table1`` reproduces the paper's Table 1
instead, every row (:func:`table1`): each row's single-query oracle against n,
and theory mode on k queries against n, with the slopes Table 1 predicts. It
writes ``results/table1.md`` and ``docs/img/table1.png``.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pmwcm.audit.oracles import NoisyGDModel
from pmwcm.data.bundled import load_adult
from pmwcm.engine.baselines import excess_risk
from pmwcm.engine.theory import (
    Table1Row,
    TheoryParameters,
    build_theory_engine,
    table1_oracle,
)
from pmwcm.kernels.counting import LinearQuery
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.solvers import minimize
from pmwcm.kernels.workload import random_queries
from pmwcm.mechanisms.noise import NumpyNoise, add_laplace
from pmwcm.mechanisms.oracles import (
    JainThakurtaGLM,
    NoisyGradientDescent,
    OracleInput,
    OutputPerturbation,
)
from pmwcm.mechanisms.private_data import PrivateData

OUT = Path(__file__).parent / "results" / "theory.md"


def main(*, k: int = 1000, epsilon: float = 1.0, delta: float = 1e-6, beta: float = 0.05) -> None:
    data = load_adult()
    domain = data.domain
    lines = [
        "## Theory mode (the paper's constants)\n",
        f"Random logistic queries on Adult's binary domain: S = 2, log|X| = {domain.log_size:.2f}, "
        f"k = {k:,}, eps = {epsilon}, delta = {delta:g}, beta = {beta}.\n",
        "| alpha | T | required n | eps0 per oracle call |",
        "| --- | --- | --- | --- |",
    ]

    def params_for(alpha: float) -> TheoryParameters:
        return TheoryParameters(
            epsilon=epsilon,
            delta=delta,
            alpha=alpha,
            beta=beta,
            k=k,
            scale=2.0,
            log_size=domain.log_size,
        )

    for alpha in (0.05, 0.1, 0.25, 0.5):
        p = params_for(alpha)
        lines.append(
            f"| {alpha} | {p.max_updates:,} | {p.required_n():.3g} | {p.oracle_epsilon:.2g} |"
        )
    alpha = 0.5
    params = params_for(alpha)
    n = int(np.ceil(params.required_n()))
    hist = DenseHistogram.from_records(domain, data.records)
    private = PrivateData(domain=domain, n=n, histogram=hist)
    queries = random_queries(domain, k, rng=np.random.default_rng(2024), losses=("logistic",))
    runs, worst, failures = 5, [], 0
    start = time.perf_counter()
    for seed in range(runs):
        engine = build_theory_engine(private, params, noise=NumpyNoise(seed=seed))
        errs = [
            excess_risk(
                q.compile(domain), private.marginal(q.clique).ravel(), engine.answer(q).value
            )
            for q in queries
        ]
        worst.append(max(errs))
        failures += max(errs) > alpha
    seconds = (time.perf_counter() - start) / runs
    lines += [
        "",
        f"At alpha = {alpha} the theorem needs n = {n:.3g}; on the Adult histogram declared "
        f"to hold that many records, theory mode answered {k:,} queries in {runs} runs "
        "with max excess risk "
        f"{min(worst):.2g} to {max(worst):.2g} (alpha = {alpha}; failures {failures}/{runs}, "
        f"allowed beta = {beta}), {seconds:.0f} s per run. The guarantee holds, but it is far from "
        "useful: alpha = 0.5 is most of the loss of the all-zero model (log 2 = 0.69), and "
        "alpha = 0.05 needs n in the billions. Practical mode exists because of this table.\n",
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


# --- The paper's Table 1, every row: error against n ---------------------------------------

TABLE1_MD = Path(__file__).parent / "results" / "table1.md"
TABLE1_PNG = Path(__file__).parents[2] / "docs" / "img" / "table1.png"
ROWS = ("linear", "lipschitz", "uglm", "strongly_convex")
ROW_TITLES = {
    "linear": "Linear queries",
    "lipschitz": "Lipschitz, d-bounded",
    "uglm": "Lipschitz, d-bounded, UGLM",
    "strongly_convex": "Lipschitz, d-bounded, sigma-strongly convex",
}
#: Table 1's single-query column as alpha ~ n^slope: O(1/alpha), O~(sqrt(d)/alpha),
#: O~(1/alpha^2), O~(sqrt(d / (sigma alpha))).
SINGLE_SLOPE = {"linear": -1.0, "lipschitz": -1.0, "uglm": -0.5, "strongly_convex": -2.0}
#: The strong convexity of the strongly convex row (the hinge query's minimiser is then
#: interior: |theta*| = G B / sigma = 1/4 < R = 1/2).
SIGMA = 4.0


def _linear_on_ball(l2: float) -> Any:
    """Huber loss (delta = 1/4) of y (+/-1) on a (+/-1), no intercept, R = 1/2 (d = 1).

    ``|z - y| >= 1/2 > delta`` on the ball, so the loss is linear there (gradient
    ``-/+ 1/4`` per cell, ``G B = 1/4``) yet smooth, so the oracles' solves reach
    their planned distances (a kinked loss meets float64's resolution first).
    """
    domain = Domain.from_sizes({"a": 2, "y": 2})
    return CMQuery(loss="huber", target="y", features=("a",), radius=0.5, l2=l2,
                   intercept=False, loss_param=0.25).compile(domain)  # fmt: skip


def _linear_excess(problem: Any, weights: Any, theta: float) -> float:
    """Exact excess risk of a 1-D loss that is linear on the ball, plus ``(l2/2) theta^2``."""
    g = float(problem.data_gradient(np.zeros(1), weights)[0])
    lam, radius = problem.l2, problem.radius
    best = float(np.clip(-g / lam, -radius, radius)) if lam > 0 else -radius * np.sign(g)
    return g * (theta - best) + 0.5 * lam * (theta * theta - best * best)


#: The datasets the single-query sweep takes the worst case over: a share ``(1 + s)/2``
#: of the records in one cell and ``(1 - s)/2`` in the cell of opposite gradient, so the
#: mean gradient is ``s G B`` (``s = 1``: all records agree; small ``s``: its sign is
#: hard to tell, where Lipschitz losses are hardest).
SHARES = tuple(2.0**-j for j in range(0, 21, 2))


def gd_for(n: int, m: float) -> NoisyGradientDescent:
    """Noisy GD with BST14's growing step count: ``N = ceil(n / m)``, step ``1/beta = 1``.

    On a loss linear on the ball the optimisation error after ``N`` steps is at most
    ``R^2 / (4 N)`` (worst at ``|g| = R / (2N)``), so ``N ~ n / m`` keeps it at the
    noise's ``1/n`` rate. (Theory mode's fixed ``N = 200`` floors at ``R^2 / 800``.)
    """
    return NoisyGradientDescent(steps=math.ceil(n / m), step_size=1.0)


def single_query_sweep(
    ns: Sequence[int], *, eps0: float = 1.0, delta0: float = 1e-6, reps: int = 100
) -> dict[str, list[float]]:
    """Worst mean excess risk of each row's single-query oracle at ``(eps0, delta0)``, per ``n``.

    Table 1's single-query column bounds the error on every dataset, so each row's
    measurement is the largest mean (over ``reps`` draws) over the datasets of
    :data:`SHARES`, on a loss linear on the ball (:func:`_linear_on_ball`; the strongly
    convex row adds ``(SIGMA/2) theta^2``). Linear queries: a count released with
    Laplace noise at ``eps0`` (Dwork, McSherry, Nissim, Smith 2006); every dataset is
    its worst case.
    """
    m = math.sqrt(2 * math.log(1.25 / delta0)) / eps0
    jain_thakurta = JainThakurtaGLM()
    out: dict[str, list[float]] = {row: [] for row in ROWS}
    out["uglm bound"] = []
    rng = np.random.default_rng(2015)
    for n in ns:
        noise = NumpyNoise(seed=n)
        draws = add_laplace(np.zeros(reps), 1.0 / (eps0 * n), noise=noise)
        out["linear"].append(float(np.mean(np.abs(draws))))
        oracles: dict[str, tuple[Any, Any]] = {
            "lipschitz": (gd_for(n, m), _linear_on_ball(0.0)),
            "uglm": (jain_thakurta, _linear_on_ball(0.0)),
            "strongly_convex": (OutputPerturbation(), _linear_on_ball(SIGMA)),
        }
        for row, (oracle, problem) in oracles.items():
            worst = 0.0
            for share in SHARES:
                weights = np.array([(1 + share) / 2, (1 - share) / 2, 0.0, 0.0])
                data = OracleInput(problem=problem, weights=weights, n=n)
                if isinstance(oracle, NoisyGradientDescent):
                    # Vectorised over the draws (pmwcm.audit.oracles.NoisyGDModel,
                    # cross-checked against the real oracle by `pmwcm audit`).
                    model = NoisyGDModel(oracle=oracle, problem=problem, n=n, noise_level=m)
                    thetas = model(weights, reps, rng)[:, 0]
                else:
                    thetas = [float(oracle.answer(data, noise_level=m, noise=noise)[0])
                              for _ in range(reps)]  # fmt: skip
                errs = [_linear_excess(problem, weights, float(t)) for t in thetas]
                worst = max(worst, float(np.mean(errs)))
            out[row].append(worst)
        out["uglm bound"].append(jain_thakurta.excess_risk_bound(_linear_on_ball(0.0), n, m))
    return out


TINY = Domain.from_sizes({"a": 2, "b": 2, "c": 2})


def _row_queries(row: str) -> list[Any]:
    """18 queries on three binary attributes: conjunctions, or logistic regressions."""
    if row == "linear":
        singles = [LinearQuery.conjunction({a: v}) for a in "abc" for v in (0, 1)]
        pairs = [
            LinearQuery.conjunction({a: u, b: v})
            for a, b in (("a", "b"), ("a", "c"), ("b", "c"))
            for u in (0, 1)
            for v in (0, 1)
        ]
        return singles + pairs
    l2 = SIGMA_K if row == "strongly_convex" else 0.0
    out = []
    for target in "abc":
        others = tuple(x for x in "abc" if x != target)
        for features in (others, others[:1], others[1:]):
            for intercept in (True, False):
                out.append(
                    CMQuery(
                        loss="logistic",
                        target=target,
                        features=features,
                        intercept=intercept,
                        l2=l2,
                    )
                )
    return out


ORACLE_ROW: dict[str, Table1Row] = {
    "linear": "lipschitz",
    "lipschitz": "lipschitz",
    "uglm": "uglm",
    "strongly_convex": "strongly_convex",
}
#: The strong convexity of the k-query strongly convex row's logistic queries.
SIGMA_K = 0.5
#: Table 1's k-query column at the regime these constants reach (alpha ~ n^slope); see
#: the section's text for the terms of each max.
MANY_SLOPE = {"linear": -0.5, "lipschitz": -0.5, "uglm": -1 / 3, "strongly_convex": -0.5}


def _params(row: str, alpha: float, *, k: int, epsilon: float, delta: float, beta: float) -> Any:
    return TheoryParameters(
        epsilon=epsilon,
        delta=delta,
        alpha=alpha,
        beta=beta,
        k=k,
        scale=1.0 if row == "linear" else 2.0,
        log_size=TINY.log_size,
    )


def oracle_requirement_met(row: str, params: Any, n: int, problems: Sequence[Any]) -> bool:
    """Is the oracle ``(alpha0, beta0)``-accurate at ``(eps0, delta0)`` on ``n`` records?

    UGLM: the Jain-Thakurta oracle's own stated bound (every query). The other rows
    use Table 1's single-query ``n'`` with the ``O`` constant 1, the classical Gaussian
    multiplier ``m = sqrt(2 log(1.25/delta0))/eps0`` for ``polylog(1/delta0)/eps0``:
    ``sqrt(d) m / alpha0`` (BST14), ``sqrt(d / (sigma alpha0)) m`` (BST14, strongly
    convex); linear queries: the Laplace tail ``m log(1/beta0) / alpha0``.
    """
    m, a0 = params.oracle_noise_multiplier, params.oracle_alpha
    if row == "linear":
        return n >= m * math.log(1 / params.oracle_beta) / a0
    if row == "uglm":
        oracle = table1_oracle("uglm", params)
        assert isinstance(oracle, JainThakurtaGLM)
        return all(oracle.excess_risk_bound(p, n, m) <= a0 for p in problems)
    d = max(p.dim for p in problems)
    if row == "lipschitz":
        return n >= math.sqrt(d) * m / a0
    return n >= math.sqrt(d / (SIGMA_K * a0)) * m


def theorem_alpha(row: str, n: int, *, k: int, epsilon: float, delta: float, beta: float) -> float:
    """The smallest alpha the theorem guarantees at ``n`` (bisection on log alpha)."""
    problems = [q.compile(TINY) for q in _row_queries(row)] if row != "linear" else []

    def ok(alpha: float) -> bool:
        p = _params(row, alpha, k=k, epsilon=epsilon, delta=delta, beta=beta)
        return n >= p.required_n() and oracle_requirement_met(row, p, n, problems)

    lo, hi = 1e-6, 4.0
    if not ok(hi):
        return math.nan
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def _data(seed: int, n: int) -> PrivateData:
    rng = np.random.default_rng(seed)
    hist = DenseHistogram(TINY, rng.dirichlet(np.full(TINY.size, 0.7)).reshape(TINY.shape))
    return PrivateData(domain=TINY, n=n, histogram=hist)


def prior_error(row: str, seed: int) -> float:
    """Max error of the answers the uniform starting hypothesis gives, with no data read.

    Theory mode's error cannot exceed it by much (below threshold it answers from
    the hypothesis), so where ``alpha(n)`` is above it the guarantee does not bind
    and the measured error stays flat.
    """
    data = _data(seed, 1)
    worst = 0.0
    for q in _row_queries(row):
        marginal = data.marginal(q.clique)
        uniform = np.full(marginal.size, 1.0 / marginal.size)
        if row == "linear":
            err = abs(float((q.table(TINY) * marginal).sum()) - float(q.table(TINY).mean()))
        else:
            problem = q.compile(TINY)
            err = excess_risk(problem, marginal.ravel(), minimize(problem, uniform).theta)
        worst = max(worst, err)
    return worst


def many_query_run(
    row: str, n: int, alpha: float, seed: int, *, k: int, epsilon: float, delta: float, beta: float
) -> float:
    """Max error of theory mode over the row's queries (excess risk; |error| for counts)."""
    data = _data(seed, n)
    params = _params(row, alpha, k=k, epsilon=epsilon, delta=delta, beta=beta)
    # Counting queries use no oracle: any row's engine answers them with Laplace noise.
    engine = build_theory_engine(data, params, noise=NumpyNoise(seed=seed), row=ORACLE_ROW[row])
    worst = 0.0
    for q in _row_queries(row):
        marginal = data.marginal(q.clique)
        if row == "linear":
            value = engine.answer_linear(q).value
            err = abs(float((q.table(TINY) * marginal).sum()) - value)
        else:
            err = excess_risk(q.compile(TINY), marginal.ravel(), engine.answer(q).value)
        worst = max(worst, err)
    return worst


def _slope(ns: Sequence[float], values: Sequence[float]) -> float:
    x, y = np.log(np.asarray(ns, float)), np.log(np.asarray(values, float))
    return float(np.polyfit(x, y, 1)[0])


def table1(
    *, seeds: int = 5, reps: int = 100, epsilon: float = 1.0, delta: float = 1e-6, beta: float = 0.1
) -> None:
    """Runs both columns of Table 1, writes ``results/table1.md`` and ``docs/img/table1.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = time.perf_counter()
    # Up to 10^5: noisy GD's step count grows with n (gd_for).
    single_ns = [int(10**e) for e in np.arange(3.0, 5.01, 0.5)]
    single = single_query_sweep(single_ns, reps=reps)
    # Up to 10^9: beyond it the hypothesis solve's accuracy (~S/n) is below what
    # float64 resolves over the ball, and theory mode refuses the query.
    many_ns = [int(10**e) for e in np.arange(6.0, 9.01, 0.5)]
    k = len(_row_queries("lipschitz"))
    alphas = {
        row: [theorem_alpha(row, n, k=k, epsilon=epsilon, delta=delta, beta=beta) for n in many_ns]
        for row in ROWS
    }
    measured: dict[str, list[float]] = {row: [] for row in ROWS}
    failures = {row: 0 for row in ROWS}
    saturation = {row: max(prior_error(row, s) for s in range(seeds)) for row in ROWS}
    for row in ROWS:
        for n, alpha in zip(many_ns, alphas[row], strict=True):
            errs = [
                many_query_run(row, n, alpha, s, k=k, epsilon=epsilon, delta=delta, beta=beta)
                for s in range(seeds)
            ]
            measured[row].append(max(errs))
            failures[row] += sum(e > alpha for e in errs)
    seconds = time.perf_counter() - start
    binding = {row: [i for i, a in enumerate(alphas[row]) if a < saturation[row]] for row in ROWS}

    def binding_slope(row: str) -> float:
        points = binding[row]
        if len(points) < 2:
            return math.nan
        return _slope([many_ns[i] for i in points], [measured[row][i] for i in points])

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    colors = dict(zip(ROWS, ("tab:gray", "tab:blue", "tab:red", "tab:green"), strict=True))
    ax = axes[0]
    for row in ROWS:
        ys = single[row]
        ax.loglog(
            single_ns,
            ys,
            "o-",
            color=colors[row],
            label=f"{ROW_TITLES[row]}: slope {_slope(single_ns, ys):.2f} "
            f"(Table 1: {SINGLE_SLOPE[row]:.2f}, dotted)",
        )
        ref = [ys[0] * (n / single_ns[0]) ** SINGLE_SLOPE[row] for n in single_ns]
        ax.loglog(single_ns, ref, ":", color=colors[row])
    ax.loglog(
        single_ns,
        single["uglm bound"],
        "--",
        color=colors["uglm"],
        label="UGLM: the oracle's stated bound (beta = 0.05)",
    )
    ax.set(
        xlabel="n (records)",
        ylabel="mean excess risk (|error| for a count)",
        title="One query: each row's oracle at eps0 = 1, delta0 = 1e-6",
    )
    ax.legend(fontsize=7)
    ax = axes[1]
    for row in ROWS:
        ax.loglog(
            many_ns,
            alphas[row],
            "--",
            color=colors[row],
            label=f"{ROW_TITLES[row]}: theorem's alpha(n), slope "
            f"{_slope(many_ns, alphas[row]):.2f} (Table 1: {MANY_SLOPE[row]:.2f})",
        )
        ax.axhline(saturation[row], color=colors[row], lw=0.6, alpha=0.5)
        ax.loglog(
            many_ns,
            measured[row],
            "o-",
            color=colors[row],
            label=f"measured max error, slope {binding_slope(row):.2f} where alpha(n) binds",
        )
    ax.set(
        xlabel="n (records)",
        ylabel="error",
        title=f"k = {k} queries: theory mode, eps = {epsilon:g} (thin lines: prior error)",
    )
    ax.legend(fontsize=6)
    fig.tight_layout()
    TABLE1_PNG.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(TABLE1_PNG, dpi=110)

    lines = [
        "## The paper's Table 1, every row: error against n (theory mode)\n",
        "Table 1 gives, per class of loss, the n needed for error alpha; read as error against "
        "n, each row is a power law alpha ~ n^s. Both columns are measured here, with each "
        "row's oracle (`pmwcm.engine.theory.table1_oracle`): noisy gradient descent (BST14) "
        "for Lipschitz losses, the Jain-Thakurta output perturbation "
        "(`pmwcm.mechanisms.oracles.JainThakurtaGLM`, JT14) for unconstrained GLMs, output "
        "perturbation for strongly convex ones, the Laplace mechanism for counts. Command: "
        "`python benchmarks/accuracy/theory.py table1` "
        f"({seconds:.0f} s on a shared 2-core machine).\n",
        "![Table 1: error against n](img/table1.png)\n",
        f"**One query** (left): the mean excess risk of {reps} answers at eps0 = 1, "
        "delta0 = 1e-6, worst over 11 datasets whose mean gradient runs from G B down to "
        "2^-20 G B, of a one-feature Huber query that is linear on the ball R = 1/2 (d = 1); "
        f"the strongly convex row adds (sigma/2) theta^2, sigma = {SIGMA:g}.\n",
        "| row | Table 1, one query | predicted slope | measured slope |",
        "| --- | --- | --- | --- |",
    ]
    single_forms = {
        "linear": "O(1/alpha)",
        "lipschitz": "O~(sqrt(d)/alpha)",
        "uglm": "O~(1/alpha^2)",
        "strongly_convex": "O~(sqrt(d/(sigma alpha)))",
    }
    for row in ROWS:
        lines.append(
            f"| {ROW_TITLES[row]} | {single_forms[row]} | {SINGLE_SLOPE[row]:.2f} | "
            f"{_slope(single_ns, single[row]):.2f} |"
        )
    lines += [
        "",
        f"**k = {k} queries** (right): theory mode (`build_theory_engine`, the paper's "
        f"constants) on three binary attributes (|X| = 8), eps = {epsilon:g}, "
        f"delta = {delta:g}, beta = {beta:g}, at alpha(n), the smallest alpha for which "
        'Theorem "putittogetheronline" holds at n: n >= its data-size term and the oracle '
        "is alpha/4-accurate at (eps0, delta0, beta0). For UGLM that is the Jain-Thakurta "
        "oracle's own stated bound; for the other rows Table 1's single-query n' with "
        "O-constant 1 (documented in `oracle_requirement_met`). The histograms are "
        f"declared to hold n records; {seeds} runs per n (fresh data, noise), 18 queries "
        "each (conjunctions of 1-2 literals; logistic regressions, sigma = "
        f"{SIGMA_K:g} for the strongly convex row).\n",
        "The measured slope is fitted where the guarantee binds: where alpha(n) is below the "
        "error of the uniform starting hypothesis (the `prior error` column, largest over "
        "the runs' datasets); above it theory mode answers from that hypothesis and its "
        "error is flat.\n",
        "| row | Table 1, k queries | slope in this regime | theorem's alpha(n) slope | "
        "prior error | measured max-error slope where alpha(n) < prior error (n) | "
        "runs with error > alpha(n) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    many_forms = {
        "linear": "O~(sqrt(log|X|) log k / alpha^2)",
        "lipschitz": "O~(max{sqrt(d log|X|), log k sqrt(log|X|)} / alpha^2)",
        "uglm": "O~(max{sqrt(log|X|)/alpha^3, log k sqrt(log|X|)/alpha^2})",
        "strongly_convex": "O~(max{sqrt(d log|X| / (sigma alpha^3)), log k sqrt(log|X|)/alpha^2})",
    }
    for row in ROWS:
        points = binding[row]
        fitted = (
            f"{binding_slope(row):.2f} ({many_ns[points[0]]:.2g} to {many_ns[points[-1]]:.2g})"
            if len(points) >= 2
            else "-"
        )
        lines.append(
            f"| {ROW_TITLES[row]} | {many_forms[row]} | {MANY_SLOPE[row]:.2f} | "
            f"{_slope(many_ns, alphas[row]):.2f} | {saturation[row]:.3g} | {fitted} | "
            f"{failures[row]}/{seeds * len(many_ns)} |"
        )
    lines += [
        "",
        "| n | " + " | ".join(f"alpha(n) / measured, {r}" for r in ROWS) + " |",
        "| --- |" + " --- |" * len(ROWS),
    ]
    for i, n in enumerate(many_ns):
        cells = " | ".join(f"{alphas[r][i]:.3g} / {measured[r][i]:.2g}" for r in ROWS)
        lines.append(f"| {n:.2g} | {cells} |")
    lines += [
        "",
        "Reading. Every row's single-query slope is Table 1's, within 0.05. For k queries "
        "the theorem's alpha(n) has Table 1's slope in the regime the paper's constants "
        "reach, and theory mode's measured worst error follows it wherever the guarantee "
        "binds, never exceeding it. Which term of each max dominates: linear and Lipschitz "
        "rows are 1/alpha^2 throughout; for UGLM the oracle's 1/alpha^3 (JT14's 1/alpha0^2 "
        "times eps0 ~ alpha) dominates the data-size term for every alpha < 1, hence "
        "n^(-1/3); for the strongly convex row the sqrt(d log|X| / (sigma alpha^3)) term "
        "would give n^(-2/3), but with the theorem's 4096 on the 1/alpha^2 term it never "
        "dominates at d <= 3 (it needs sigma below about 1e-4 / alpha), so its slope is "
        "-1/2 here. Deviations from the paper's oracles, all in the direction of honesty: "
        "the Lipschitz sweep runs noisy GD with N = n/m steps (BST14 grow N with n; theory "
        "mode's fixed N = 200 leaves an optimisation floor R^2/(4N) that flattens the "
        "curve); the Jain-Thakurta oracle projects its answer onto the ball, as the "
        "paper's Figure requires, so its bound carries sqrt(d) (d = 1 in the sweep, 2 to 3 "
        "in the k-query runs) where JT14's unprojected one does not; and the other rows' "
        "n' use Table 1's forms with O-constant 1 (the UGLM row uses the oracle's own "
        "stated bound).",
        "",
    ]
    TABLE1_MD.parent.mkdir(parents=True, exist_ok=True)
    TABLE1_MD.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    if sys.argv[1:] == ["table1"]:
        table1()
    else:
        main()
