"""The demo's figure: excess risk per query for the private methods (matplotlib, no pyplot).

Written for a reader who is not a DP researcher: the y-axis says what the
number is (how much worse each private answer fits than the exact, non-private
fit) and that lower is better; the non-private reference (excess risk 0) is
drawn as a line at the bottom of the log scale.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

FLOOR = 1e-6  # excess risks below this are drawn at it on the log scale
YLABEL = (
    "excess risk: how much worse each answer fits than the exact fit\n"
    f"(lower is better; log scale, values < {FLOOR:g} drawn at {FLOOR:g})"
)
REFERENCE_LABEL = f"non-private exact fit: excess risk 0 (drawn at {FLOOR:g})"
COLORS = {"pmw": "tab:blue", "composition": "tab:orange", "pmw_uniform": "tab:green"}
LABELS = {
    "pmw": "PMW-CM (noisy 2-way marginal prior)",
    "composition": "composition (budget split k ways)",
    "pmw_uniform": "PMW, the paper's uniform start",
}


def trailing_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last ``window`` values at each index (fewer at the start).

    >>> trailing_mean(np.array([1.0, 3.0, 5.0]), 2).tolist()
    [1.0, 2.0, 4.0]
    """
    sums = np.cumsum(np.concatenate([[0.0], values]))
    idx = np.arange(1, values.size + 1)
    lo = np.maximum(0, idx - window)
    return (sums[idx] - sums[lo]) / (idx - lo)


def plot_excess_risk(
    path: Path, risks: dict[str, np.ndarray], sources: list[str], summary: dict[str, Any]
) -> None:
    """Writes :func:`excess_risk_figure` as a PNG, atomically.

    Args:
        path: the PNG to write.
        risks: excess risk per query, keyed by method (``pmw``, ``composition``,
            optionally ``pmw_uniform``).
        sources: PMW-CM's answer source per query.
        summary: the demo summary (title, labels).
    """
    from pmwcm._atomic import atomic_open

    fig = excess_risk_figure(risks, sources, summary)
    with atomic_open(path) as fh:
        fig.savefig(fh.buffer, format="png")


def excess_risk_figure(
    risks: dict[str, np.ndarray], sources: list[str], summary: dict[str, Any]
) -> Any:
    """The figure: per-query points and trailing means, oracle rounds marked, the
    non-private reference drawn (arguments as :func:`plot_excess_risk`'s)."""
    from matplotlib.figure import Figure  # no pyplot: no global backend state

    k = len(sources)
    x = np.arange(1, k + 1)
    window = max(1, min(50, k // 10))
    fig = Figure(figsize=(9, 4.8), dpi=110)
    ax = fig.subplots()
    ax.axhline(FLOOR, color="black", lw=1.5, label=REFERENCE_LABEL)
    for key in ("pmw_uniform", "composition", "pmw"):
        if key not in risks:
            continue
        label = LABELS[key]
        if key != "pmw_uniform":
            ax.scatter(x, np.maximum(risks[key], FLOOR), s=7, alpha=0.35, color=COLORS[key],
                       linewidths=0)  # fmt: skip
        ax.plot(x, np.maximum(trailing_mean(risks[key], window), FLOOR), color=COLORS[key],
                lw=2 if key != "pmw_uniform" else 1.2, ls="-" if key != "pmw_uniform" else "--",
                label=f"{label}: mean {risks[key].mean():.5f}")  # fmt: skip
    oracle = [i + 1 for i, s in enumerate(sources) if s == "oracle"]
    if oracle:
        ax.plot(oracle, np.full(len(oracle), FLOOR), "|", color="black", ms=10,
                label=f"PMW-CM oracle call + update ({len(oracle)})")  # fmt: skip
    halt = summary["pmw"]["first_synthetic_answer"]
    if halt is not None:
        ax.axvline(halt + 1, color="gray", ls=":", lw=1, label="PMW-CM updates spent")
    ax.plot([], [], " ", label=f"points: one query; lines: mean of the last {window}")
    ax.set_yscale("log")
    ax.set_xlabel("query index")
    ax.set_ylabel(YLABEL, fontsize=8)
    ax.set_title(
        f"Adult, |X| = 2^14, eps = {summary['epsilon']:g}, delta = {summary['delta']:g}: "
        f"{k} random + stepwise queries"
    )
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: not labels[i].startswith("PMW-CM ("))
    ax.legend([handles[i] for i in order], [labels[i] for i in order], loc="upper right",
              fontsize=8)  # fmt: skip
    ax.grid(alpha=0.3, which="both", lw=0.5)
    fig.tight_layout()
    return fig
