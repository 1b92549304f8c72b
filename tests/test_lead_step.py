"""The refit's lead step toward its newest measurement (issue 35, round 3 session 17).

* The direction is the newest clique's natural-gradient step,
  ``w (Dhat_C - y) / max(Dhat_C, sigma)``, and nothing on any other clique.
* The lead's trials take a rare-celled precise measurement closer, and the whole loss
  lower, than as many plain steps do; after a refit the precise pair it overlaps is
  back within its noise; the step never raises the loss (a trial that would is not
  taken).
* Every form of the fit takes the same step: the dense fused form, the per-clique
  passes, and a support of every cell.
* The measured update leads with the flagged clique (the last measurement).
"""

from __future__ import annotations

import numpy as np
import pytest

from pmwcm.engine.measured_update import MeasuredUpdate
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram, Histogram
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.priors import marginals as marginals_module
from pmwcm.mechanisms.priors.marginals import Measurement, lead_direction
from pmwcm.mechanisms.priors.refit import refit_to_measurements

DOMAIN = Domain.from_sizes({f"x{j}": 2 for j in range(6)})


def _every_cell(hypothesis: DenseHistogram) -> SupportHistogram:
    """A support holding every cell of the domain once, weighted as ``hypothesis``."""
    grid = np.indices(DOMAIN.shape).reshape(len(DOMAIN), -1).T
    return SupportHistogram(DOMAIN, grid, np.log(hypothesis.to_array().ravel()))


def _gap(hypothesis: Histogram, measurement: Measurement) -> float:
    table = hypothesis.clique_table(measurement.clique).table()
    return float(np.square(table - measurement.values).sum())


def _loss(hypothesis: Histogram, measurements: list[Measurement]) -> float:
    weights = marginals_module.precision_weights(measurements)
    return 0.5 * sum(w * _gap(hypothesis, m) for w, m in zip(weights, measurements, strict=True))


def _problem(seed: int) -> tuple[DenseHistogram, Measurement, Measurement]:
    """A population with rare cells, the prior's start fitted to a precise pair of it,
    and a precise triple of it (the new measurement, rare cells among its eight)."""
    rng = np.random.default_rng(seed)
    population = DenseHistogram(DOMAIN, rng.dirichlet(np.full(64, 0.2)).reshape(DOMAIN.shape))

    def measured(clique: tuple[str, ...], sigma: float) -> Measurement:
        table = population.clique_table(clique).table()
        noisy = table + rng.normal(0, sigma, table.shape)
        return Measurement(clique=clique, values=noisy, sigma=sigma)

    pair, triple = measured(("x0", "x1"), 2e-4), measured(("x1", "x2", "x3"), 2e-4)
    start = refit_to_measurements(DenseHistogram.uniform(DOMAIN), [pair], iterations=300)
    assert isinstance(start, DenseHistogram)
    return start, pair, triple


def test_the_direction_is_the_clique_step_divided_by_its_mass_floored_at_sigma() -> None:
    values = np.array([0.5, 0.3, 0.2, 0.0])
    mass = np.array([0.4, 0.4, 0.2 - 1e-9, 1e-9])
    weighted = 0.25 * (mass - values)
    direction = lead_direction(weighted, values, weight=0.25, sigma=1e-3)
    expected = 0.25 * (mass - values) / np.array([0.4, 0.4, 0.2 - 1e-9, 1e-3])
    np.testing.assert_allclose(direction, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("backend", ["dense", "support"])
def test_the_lead_step_absorbs_more_than_plain_steps_of_its_cost(backend: str, seed: int) -> None:
    """After the lead's trials, against as many plain steps: the rare-celled triple's table
    is closer to its measurement and the whole loss is lower (every seed of 0..99 on both
    backends). After a 30-step refit the precise pair the triple overlaps is back within
    twice its noise energy of where it was (at most 1.05 times over seeds 0..99)."""
    start, pair, triple = _problem(seed)
    begin: Histogram = start if backend == "dense" else _every_cell(start)
    every = [pair, triple]
    trials = marginals_module.LEAD_TRIALS
    plain = refit_to_measurements(begin, every, iterations=trials, continuation=1)
    led = refit_to_measurements(begin, every, iterations=trials, continuation=1, lead=-1)
    assert _gap(led, triple) < _gap(plain, triple) < _gap(begin, triple)
    assert _loss(led, every) < _loss(plain, every)
    refit = refit_to_measurements(begin, every, iterations=30, lead=-1)
    assert _gap(refit, pair) <= _gap(begin, pair) + 2 * pair.values.size * pair.sigma**2
    # the input is not changed
    np.testing.assert_array_equal(start.to_array(), _problem(seed)[0].to_array())


def test_a_lead_trial_that_raises_the_loss_is_not_taken() -> None:
    """A precise measurement putting 30% on a cell the hypothesis holds at 1e-12: every
    scale of the lead step overshoots (that cell's log-mass jumps by about 10^10), so
    the refit's first ``LEAD_TRIALS`` evaluations leave the hypothesis as it was."""
    weights = np.full(DOMAIN.shape, 1.0)
    weights[0, 0, 0] = 1e-12 * weights.size
    start = DenseHistogram(DOMAIN, weights / weights.sum())
    clique = ("x0", "x1", "x2")
    table = start.clique_table(clique).table().copy()
    table[0, 0, 0], table[1, 1, 1] = 0.3, table[1, 1, 1] - 0.3
    wrong = Measurement(clique=clique, values=table, sigma=1e-9)
    trials = marginals_module.LEAD_TRIALS
    kept = refit_to_measurements(start, [wrong], iterations=trials, continuation=1, lead=0)
    np.testing.assert_array_equal(kept.to_array(), start.to_array())
    # the plain steps of the same budget do move it (the loss is not at its minimum)
    plain = refit_to_measurements(start, [wrong], iterations=trials, continuation=1)
    assert _loss(plain, [wrong]) < _loss(start, [wrong])


def test_every_form_of_the_fit_takes_the_same_lead_step(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    start, pair, triple = _problem(seed)
    every = [pair, triple]
    fused = refit_to_measurements(start, every, iterations=12, lead=-1).to_array()
    on_support = refit_to_measurements(_every_cell(start), every, iterations=12, lead=-1)
    np.testing.assert_allclose(on_support.to_array(), fused, rtol=1e-8, atol=1e-13)
    monkeypatch.setattr(marginals_module, "FUSED_MAX_CELLS", 0)
    monkeypatch.setattr(marginals_module, "FUSED_HIGHER_ORDER_MAX_CELLS", 0)
    per_clique = refit_to_measurements(start, every, iterations=12, lead=-1).to_array()
    # the two forms sum in different orders; over 12 steps that reaches 4e-9 (seed 65)
    np.testing.assert_allclose(per_clique, fused, rtol=1e-7, atol=0)


def test_the_measured_update_leads_with_the_flagged_clique(seed: int) -> None:
    start, pair, triple = _problem(seed)
    update = MeasuredUpdate(kind="measure", noise_multiplier=1.0, refit_iterations=30)
    absorbed = update.absorb(start, [pair, triple])
    led = refit_to_measurements(start, [pair, triple], iterations=30, lead=1)
    np.testing.assert_array_equal(absorbed.to_array(), led.to_array())
