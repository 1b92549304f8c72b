"""``benchmarks/support_scale.py --phases`` (issue 37 item 1's breakdown of a round).

The timers must see the steps of real rounds on a support (the table and the solve
inside the hypothesis side), and leave the engine's methods as they found them.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import support_scale  # noqa: E402

from pmwcm.engine import rounds, steps  # noqa: E402
from pmwcm.kernels import solvers  # noqa: E402
from pmwcm.kernels.support import SupportHistogram  # noqa: E402


def test_phases_time_the_steps_of_real_rounds_and_restore_the_engine() -> None:
    originals = (
        steps.EngineSteps.hypothesis_side, steps.EngineSteps.begin_data_side,
        SupportHistogram.clique_table, rounds.CMRound.problem_on, solvers._compiled_newton,
    )  # fmt: skip
    row = support_scale.cell("adult-full", 2**14, 6, announced=False, phases=True)
    phases = row["phase_ms_per_answer"]
    assert row["backend"] == "support" and row["k"] == 6
    assert set(phases) == {
        "hypothesis side", "hypothesis: clique table", "hypothesis: problem",
        "hypothesis: Newton", "data side: wait",
    }  # fmt: skip
    assert all(ms > 0 for ms in phases.values())
    parts = phases["hypothesis: clique table"] + phases["hypothesis: Newton"]
    assert parts <= phases["hypothesis side"]
    assert originals == (
        steps.EngineSteps.hypothesis_side, steps.EngineSteps.begin_data_side,
        SupportHistogram.clique_table, rounds.CMRound.problem_on, solvers._compiled_newton,
    )  # fmt: skip
    assert "phase_ms_per_answer" not in support_scale.cell("adult-full", 2**14, 2, False)
