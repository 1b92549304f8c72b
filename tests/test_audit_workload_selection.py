"""Privacy audit of the workload-aware start's selection
(:func:`pmwcm.mechanisms.priors.workload.select_clique`, issue 35 item 4).

Two candidate cliques on 6 binary attributes, n = 8, the uniform hypothesis; the
neighbour moves both qualities by the full sensitivity 2/n in opposite directions
(:func:`~pmwcm.audit.workload_selection.selection_pair`). Claimed: pure eps_0 = 1.
Audits use ``alpha = 1e-6`` (a correct release is flagged with probability at most
1e-6) and 100,000 trials per input; the planted bug (the quality's sensitivity taken
as 1/n, the add/remove unit's, where replace-one needs 2/n: twice the epsilon) reaches
a lower bound near 1.4 on every seed tried, the correct selection about 0.8.
"""

from __future__ import annotations

import numpy as np

from pmwcm.audit.workload_selection import CANDIDATES, selection_pair, workload_selection_case
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.priors.workload import select_clique, selection_quality

ALPHA = 1e-6
TRIALS = 100_000


def half_sensitivity_select(
    data: object,
    hypothesis: DenseHistogram,
    candidates: object,
    *,
    epsilon: float,
    sigma: float,
    noise: NoiseSource,
) -> int:
    """Broken (test-only): the exponential mechanism at ``Delta = 1/n`` (twice the epsilon)."""
    return select_clique(
        data,  # type: ignore[arg-type]
        hypothesis,
        candidates,  # type: ignore[arg-type]
        epsilon=2.0 * epsilon,
        sigma=sigma,
        noise=noise,
    )


def test_the_pair_moves_both_qualities_by_the_sensitivity_in_opposite_directions() -> None:
    d0, d1 = selection_pair()
    hypothesis = DenseHistogram.uniform(d0.domain)
    q0, q1 = (
        [selection_quality(d.marginal(c), hypothesis.marginal(c), sigma=0.01) for c in CANDIDATES]
        for d in (d0, d1)
    )
    assert np.allclose(np.subtract(q1, q0), [2 / 8, -2 / 8])
    r0, r1 = np.asarray(d0.held_records()), np.asarray(d1.held_records())
    assert int(np.sum(np.any(r0 != r1, axis=1))) == 1  # one record replaced


def test_correct_selection_is_not_flagged(seed: int) -> None:
    r = workload_selection_case().run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.verdict == "consistent", r
    assert r.epsilon_lower_bound > 0.5


def test_selection_at_the_add_remove_sensitivity_is_caught(seed: int) -> None:
    case = workload_selection_case(label="half sensitivity", select=half_sensitivity_select)
    r = case.run(trials=TRIALS, rng=np.random.default_rng(seed), alpha=ALPHA)
    assert r.violated, r
