"""The multiplicative-weights update an oracle answer defines, with its free sweeps.

Step 4 of the engine's loop (Ullman 2015): after a paid oracle answer
``theta_priv`` to the query ``l`` whose hypothesis answer was ``theta_hat``,

    Dhat_{t+1}(x) ∝ exp(-eta u(x)) Dhat_t(x),
    u(x) = <theta_priv - theta_hat, grad l_x(theta_hat)>,

with ``eta`` the paper's fixed step or the calibrated one
(:mod:`pmwcm.engine.step_size`; ``settings.step_rule``). Then, MWEM-style, the
recent updates are replayed ``settings.sweeps`` times on the new hypothesis, and
``settings.refit_iterations`` steps of the prior's fit pull it back onto the
released marginals (:mod:`pmwcm.mechanisms.priors.refit`). Everything here reads
released values and public settings only: it is post-processing, and free.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pmwcm.engine.settings import EngineSettings, StepRule
from pmwcm.engine.state import UpdateRecord
from pmwcm.engine.step_size import PublicContext, step_factor
from pmwcm.kernels.histogram import Histogram
from pmwcm.mechanisms.priors.marginals import Measurement
from pmwcm.mechanisms.priors.refit import refit_to_measurements

__all__ = ["updated_hypothesis"]


def updated_hypothesis(
    hypothesis: Histogram,
    past: Sequence[UpdateRecord],
    record: UpdateRecord,
    *,
    marginal: Any,
    answer: Any,
    measurements: Sequence[Measurement],
    settings: EngineSettings,
    context: PublicContext,
) -> Histogram:
    """The hypothesis after the update ``record`` defines.

    Works on a copy: ``hypothesis`` is never changed in place (states taken earlier
    share it and must keep seeing it), and a sweep that raises leaves the caller's
    hypothesis and updates as they were.

    With ``update="both"`` (issue 35) the clique's new measurement is the last of
    ``measurements``: the refit after the tilt pulls towards it too
    (:mod:`pmwcm.engine.measured_update`, step 2).

    Args:
        hypothesis: ``Dhat_t``.
        past: the updates made before this one, in order (the sweeps replay them).
        record: this update: its query, round and private answer ``theta_priv``.
        marginal: ``Dhat_t``'s table on the round's clique.
        answer: ``theta_hat``, the hypothesis's answer on that table.
        measurements: the released marginals the refit pulls towards.
        settings: the engine's settings (step rule, sweeps, window, refit).
        context: the public values a calibrated step reads (``n``, the noise level).
    """
    round_ = record.round
    updated = hypothesis.copy()
    rule = settings.step_rule
    factor = step_factor(rule, round_, marginal, answer, record.private, context=context)
    updated.reweight_table(round_.clique, marginal, factor)
    history = [*past, record]
    if settings.sweep_window is not None:  # a constant cost per round, whatever T
        history = history[-settings.sweep_window :]
    for _ in range(settings.sweeps):
        for earlier in history:
            _replay(updated, earlier, rule, context)
    return refit_to_measurements(updated, measurements, iterations=settings.refit_iterations)


def _replay(
    hypothesis: Histogram, past: UpdateRecord, rule: StepRule, context: PublicContext
) -> None:
    """Re-applies a past update at ``hypothesis``, in place (MWEM-style; free), with
    the step ``rule`` of the new updates (a calibrated replay moves only as far as
    the past released answer is still off on the current hypothesis)."""
    table = hypothesis.clique_table(past.round.clique)
    answer = past.round.hypothesis_answer(table)
    factor = step_factor(rule, past.round, table, answer, past.private, context=context)
    hypothesis.reweight_table(past.round.clique, table, factor)
