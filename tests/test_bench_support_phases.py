"""``benchmarks/support_scale.py --phases`` (issue 37 item 1's breakdown of a round).

The timers must see the steps of real rounds on a support (the hypothesis's clique
table, the problem on its cells, the solve) within the round's wall time, and leave
the kernels as they found them.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import support_scale  # noqa: E402

from pmwcm.kernels import solvers  # noqa: E402
from pmwcm.kernels.glm_problem import GLMProblem  # noqa: E402
from pmwcm.kernels.support import SupportHistogram  # noqa: E402


def test_phases_time_the_steps_of_real_rounds_and_restore_the_engine() -> None:
    originals = (SupportHistogram.clique_table, GLMProblem.on_cells, solvers._compiled_newton)
    row = support_scale.cell("adult-full", 2**14, 6, announced=False, phases=True)
    phases = row["phase_ms_per_answer"]
    assert row["backend"] == "support" and row["k"] == 6
    assert set(phases) == {
        "clique table",
        "problem on its cells",
        "Newton solve",
        "rest of the round",
    }
    # every step seen, and together within the round's wall time (the rest is what is left)
    assert all(ms > 0 for ms in phases.values())
    assert originals == (
        SupportHistogram.clique_table,
        GLMProblem.on_cells,
        solvers._compiled_newton,
    )
    assert "phase_ms_per_answer" not in support_scale.cell("adult-full", 2**14, 2, False)


def test_below_threshold_rounds_are_grouped_by_their_table_cells() -> None:
    row = support_scale.cell("adult-full", 2**14, 8, announced=False)
    groups = row["below_threshold_round_ms_by_table_cells"]
    assert sum(g["rounds"] for g in groups.values()) == row["hypothesis_answers"] > 0
    assert all(0 < g["median_ms"] <= g["max_ms"] for g in groups.values())
    assert set(groups) <= {"<= 1,000", "<= 10,000", "<= 100,000", "<= 1,000,000", "> 1,000,000"}
    announced = support_scale.cell("adult-full", 2**14, 2, announced=True)
    assert "below_threshold_round_ms_by_table_cells" not in announced
