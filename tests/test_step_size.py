"""The calibrated update (issue 15): it reads only public values, and it does not overshoot.

* Public values only: an engine whose private data is swapped for a decoy right
  after each oracle answer (so every update and sweep runs with the decoy in
  place) follows the same hypothesis trajectory as one that keeps the real
  data, on both hypothesis backends. A broken update that also reads the data
  fails the same comparison.
* Known truth (the parity world of ``test_hybrid_certificate``): where the
  hypothesis is already right, today's fixed ``eta`` follows a noisy oracle
  answer away from the data's optimum, and the calibrated step stays put;
  where the prior misses the parity, the calibrated step gets closer to the
  optimum than the fixed one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import dp_accounting
import numpy as np
import pytest

from pmwcm.engine.baselines import NonPrivateBaseline, excess_risk
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.engine.settings import EngineSettings
from pmwcm.engine.step_size import (
    PublicContext,
    calibrated_scale,
    conditional_factor,
    expected_oracle_error,
    label_axis,
    noise_margin,
    released_answer_error,
    reweighted_mass,
    shrinkage_weight,
    step_factor,
)
from pmwcm.engine.steps import EngineSteps
from pmwcm.kernels.clique_table import CliqueTable
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram, Histogram
from pmwcm.kernels.problem import ConvexProblem, FloatArray
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.noise import NoiseSource, NumpyNoise
from pmwcm.mechanisms.oracles import NoisyGradientDescent, OracleInput
from pmwcm.mechanisms.priors.marginals import Measurement, fit_histogram, pairwise_cliques
from pmwcm.mechanisms.private_data import PrivateData

DOMAIN = Domain.from_sizes({"a": 2, "b": 2, "c": 2, "y": 2})
N = 1_000_000


def parity_data(flip: float = 0.05) -> PrivateData:
    """y = a XOR b with ``flip`` of labels flipped; a, b, c skewed (as test_hybrid_certificate)."""
    p = np.zeros(DOMAIN.shape)
    for a, b, c, y in np.ndindex(*DOMAIN.shape):
        base = (0.6 if a else 0.4) * (0.3 if b else 0.7) * (0.8 if c else 0.2)
        p[a, b, c, y] = base * (1 - flip if y == (a ^ b) else flip)
    return PrivateData(domain=DOMAIN, n=N, histogram=DenseHistogram(DOMAIN, p))


def max_entropy_prior(data: PrivateData) -> DenseHistogram:
    """The 2-way maximum-entropy fit of the exact data: right on pairs, blind to the parity."""
    exact = [
        Measurement(clique=clique, values=data.marginal(clique), sigma=0.0)
        for clique in pairwise_cliques(DOMAIN)
    ]
    return fit_histogram(DOMAIN, exact, iterations=300)


PARITY = CMQuery(
    loss="logistic", target="y", features=("a", "b", "c"), interactions=(("a", "b"),), radius=4.0
)
STREAM = [
    CMQuery(loss="logistic", target=t, features=f, interactions=i, radius=r)
    for t, f, i in [
        ("y", ("a", "b"), (("a", "b"),)),
        ("y", ("c",), ()),
        ("c", ("a", "b"), ()),
        ("y", ("a", "b", "c"), (("a", "b"),)),
        ("a", ("c", "y"), ()),
    ]
    for r in (1.0, 2.0, 4.0)
]


@dataclass(frozen=True)
class AfterAnswer:
    """An oracle that calls ``hook`` once its answer is drawn (the release point)."""

    inner: NoisyGradientDescent
    hook: list[Callable[[], None]]
    name: str = "noisy_gd"

    def privacy_event(self, noise_level: float) -> dp_accounting.DpEvent:
        return self.inner.privacy_event(noise_level)

    def check(self, problem: ConvexProblem) -> None:
        self.inner.check(problem)

    def answer(self, data: OracleInput, *, noise_level: float, noise: NoiseSource) -> FloatArray:
        out = self.inner.answer(data, noise_level=noise_level, noise=noise)
        for hook in self.hook:
            hook()
        return out


class SwappableData(PrivateData):
    """The parity data, whose marginals are a decoy's while :attr:`swapped` is set."""

    def __init__(self) -> None:
        real = parity_data()
        super().__init__(domain=DOMAIN, n=N, histogram=real.histogram())
        self.decoy = parity_data(flip=0.4)
        self.swapped = False

    def marginal(self, clique: Sequence[str]) -> np.ndarray:
        return self.decoy.marginal(clique) if self.swapped else super().marginal(clique)

    def clique_table(self, clique: Sequence[str]) -> CliqueTable:
        if self.swapped:
            return self.decoy.clique_table(clique)
        return super().clique_table(clique)


def trajectory(backend: str, *, swap: bool, seed: int = 3) -> list[np.ndarray]:
    """The hypothesis's marginals after every query; with ``swap``, the data is a decoy
    from each oracle answer until the query's answer is returned."""
    data = SwappableData()
    hooks: list[Callable[[], None]] = []
    config = PMWConfig(
        epsilon=2.0,
        delta=1e-9,
        max_updates=6,
        threshold=0.0,  # many updates, so the comparison has something to compare
        expected_queries=len(STREAM),
        backend=backend,  # type: ignore[arg-type]
        support_size=1000 if backend == "support" else 0,
        oracle=AfterAnswer(NoisyGradientDescent(steps=20), hooks),
        after_halt="synthetic",
        # The pairs leave the updates work here; the triples the rule picks at this n
        # answer most of the stream themselves.
        prior_cliques="pairs",
    )
    assert config.step_rule == "calibrated"  # the default under test
    assert config.refit_iterations > 0  # and the refit onto the prior's marginals after it
    engine = build_engine(data, config, noise=NumpyNoise(seed=seed))
    if swap:
        hooks.append(lambda: setattr(data, "swapped", True))
    out = []
    for query in STREAM:
        engine.answer(query)
        data.swapped = False  # the real data again before the next test
        out.append(engine.hypothesis.marginal(DOMAIN.names))
    assert len(engine.updates) >= 3
    return out


@pytest.mark.parametrize("backend", ["dense", "support"])
def test_the_update_reads_only_public_values(backend: str) -> None:
    """Swapping the private data after every release changes no hypothesis."""
    kept, swapped = trajectory(backend, swap=False), trajectory(backend, swap=True)
    for before, after in zip(kept, swapped, strict=True):
        np.testing.assert_array_equal(before, after)


def test_an_update_that_reads_the_data_fails_the_swap_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check has teeth: a step that peeks at the data (here, through the
    engine's data part) gives a different trajectory once the data is swapped."""
    import pmwcm.engine.update_step as update_step

    honest = update_step.step_factor
    engines: list[EngineSteps] = []
    original_update = EngineSteps._update

    def remember(self: EngineSteps, *args: Any) -> None:
        engines.append(self)
        original_update(self, *args)

    def peeking(rule: Any, round_: Any, table: CliqueTable, *args: Any, **kwargs: Any) -> Any:
        factor = honest(rule, round_, table, *args, **kwargs)
        data_mass = engines[-1].parts.data.clique_table(round_.clique).mass
        return factor + 1e-3 * data_mass.reshape(np.shape(factor))

    monkeypatch.setattr(EngineSteps, "_update", remember)
    monkeypatch.setattr(update_step, "step_factor", peeking)
    kept, swapped = trajectory("dense", swap=False), trajectory("dense", swap=True)
    assert any(not np.array_equal(a, b) for a, b in zip(kept, swapped, strict=True))


def one_update(
    prior: Histogram, data: PrivateData, rule: str, *, epsilon: float, seed: int
) -> tuple[float, float, float]:
    """(err of the prior's answer, of the oracle's, of the updated hypothesis's answer)
    on the data, after one update on :data:`PARITY` with a real oracle draw."""
    config = PMWConfig(epsilon=epsilon, delta=1e-9, prior="uniform", max_updates=10)
    engine = build_engine(data, config, noise=NumpyNoise(seed=seed), prior=prior.copy())
    round_ = engine.cm_round(PARITY)
    table = prior.clique_table(round_.clique)
    hat = round_.hypothesis_answer(table)
    private = round_.private_answer(
        data.clique_table(round_.clique),
        n=N,
        noise_level=engine.oracle_noise_level,
        noise=NumpyNoise(seed=seed),
    )
    context = PublicContext(n=N, noise_level=engine.oracle_noise_level)
    factor = step_factor(rule, round_, table, hat, private, context=context)  # type: ignore[arg-type]
    updated = prior.copy()
    updated.reweight_table(round_.clique, table, factor)
    new = round_.hypothesis_answer(updated.clique_table(round_.clique))
    problem = PARITY.compile(DOMAIN)
    weights = data.marginal(problem.clique).ravel()
    return tuple(excess_risk(problem, weights, t) for t in (hat, private, new))  # type: ignore[return-value]


#: The draw whose discrepancy sits at the shrinkage margin's edge
#: (:func:`~pmwcm.engine.step_size.noise_margin`, the oracle error's 95th percentile):
#: 2.150e-4 against an edge of ``margin e_or``, with the simulated ``e_or`` 9.2e-5 under
#: OpenBLAS's Haswell kernels (just short: weight 0.05) and above 9.7e-5 under
#: SandyBridge's (weight 0). Which side it falls is the simulation's rounding, so this
#: draw is held only to a small step, which the rule allows beyond the margin.
EDGE_SEED = 0


@pytest.mark.parametrize("seed", range(7))
def test_a_right_hypothesis_is_not_pushed_off_by_a_noisy_answer(seed: int) -> None:
    """Known truth: the hypothesis is the data itself. The fixed eta follows the oracle's
    noise away from the optimum (overshoot); the calibrated step does not move, or at the
    margin's edge (:data:`EDGE_SEED`) moves by under 1% of the oracle's error (its weight
    0.05 gives 4.8e-7, 0.2%; the fixed step 5.0e-6)."""
    data = parity_data()
    prior = DenseHistogram(DOMAIN, data.histogram().to_array())
    prior_err, oracle_err, fixed_err = one_update(prior, data, "fixed", epsilon=0.05, seed=seed)
    _, _, calibrated_err = one_update(prior, data, "calibrated", epsilon=0.05, seed=seed)
    assert prior_err < 1e-9 < 1e-6 < oracle_err
    assert fixed_err > 1000 * max(prior_err, 1e-10)  # the fixed step overshoots the truth
    if seed == EDGE_SEED:
        assert calibrated_err <= 0.01 * oracle_err < fixed_err
    else:
        assert calibrated_err <= prior_err + 1e-9


@pytest.mark.parametrize("seed", [0, 1])
def test_a_wrong_prior_is_corrected_further_than_by_the_fixed_step(seed: int) -> None:
    """Known truth: the 2-way prior misses the parity; one calibrated update removes
    almost all of the error, the fixed step about half."""
    data = parity_data()
    prior = max_entropy_prior(data)
    prior_err, _, fixed_err = one_update(prior, data, "fixed", epsilon=1.0, seed=seed)
    _, _, calibrated_err = one_update(prior, data, "calibrated", epsilon=1.0, seed=seed)
    assert prior_err > 0.1
    assert calibrated_err < fixed_err / 10
    assert calibrated_err < prior_err / 1000


def test_shrinkage_weight_is_positive_part_james_stein() -> None:
    assert shrinkage_weight(1.0, 0.25) == pytest.approx(0.75)
    assert shrinkage_weight(0.2, 0.25) == 0.0  # within the oracle's own noise: no move
    assert shrinkage_weight(0.0, 0.0) == 0.0
    assert shrinkage_weight(1.0, 0.0) == 1.0
    assert shrinkage_weight(1.0, 0.25, 2.0) == pytest.approx(0.5)  # a margin above the mean


def test_the_noise_margin_is_the_chi_square_quantile_per_dimension() -> None:
    data = parity_data()
    engine = build_engine(
        data,
        PMWConfig(epsilon=1.0, delta=1e-9, prior="uniform", max_updates=3),
        noise=NumpyNoise(seed=0),
        prior=max_entropy_prior(data),
    )
    round_ = engine.cm_round(PARITY)  # theta in R^5: a, b, c, a*b, intercept
    assert round_.problem.dim == 5
    assert noise_margin(round_) == pytest.approx(11.0705 / 5, rel=1e-4)


@dataclass(frozen=True)
class ParityStep:
    """The parity query on the 2-way prior, stepped towards the data's exact answer."""

    prior: DenseHistogram
    round_: Any
    table: CliqueTable
    target: FloatArray
    factor: FloatArray


def parity_step() -> ParityStep:
    data = parity_data()
    prior = max_entropy_prior(data)
    engine = build_engine(
        data,
        PMWConfig(epsilon=1.0, delta=1e-9, prior="uniform", max_updates=3),
        noise=NumpyNoise(seed=0),
        prior=prior.copy(),
    )
    round_ = engine.cm_round(PARITY)
    table = prior.clique_table(round_.clique)
    hat = round_.hypothesis_answer(table)
    target = NonPrivateBaseline(data).answer(PARITY)
    return ParityStep(prior, round_, table, target, round_.log_factor(table, hat, target))


def test_calibrated_scale_makes_the_target_optimal_on_the_hypothesis() -> None:
    """On a dense clique table, the chosen step leaves the target (nearly) optimal."""
    step = parity_step()
    round_, table, target, factor = step.round_, step.table, step.target, step.factor
    scale = calibrated_scale(round_, table, factor, target)
    problem = round_.problem_on(table)
    for s, bound in ((scale, 1e-6), (0.0, None)):
        err = excess_risk(problem, reweighted_mass(table, factor, s), target)
        if bound is not None:
            assert err < bound
        else:
            assert err > 1e-3  # the prior itself is far from making the target optimal


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_the_conditional_tilt_keeps_the_features_and_tilts_the_label(
    axis: int, sparse: bool, seed: int
) -> None:
    """In every cell of the other attributes the tilted mass sums to what it was, and
    across the label it is the plain tilt ``mass exp(f)`` times one constant."""
    rng = np.random.default_rng(seed)
    shape = (3, 2, 4)
    cells = np.arange(24)
    if sparse:  # occupied cells only: some feature cells lose a label value, one all
        cells = np.sort(rng.choice(24, size=15, replace=False))
    mass = rng.dirichlet(np.ones(cells.size))
    table = CliqueTable(shape=shape, codes=cells if sparse else None, mass=mass)
    factor = rng.normal(0.0, 3.0, cells.size)
    tilted = conditional_factor(table, factor, axis)
    coords = np.stack(np.unravel_index(cells, shape), axis=1)
    others = [tuple(np.delete(c, axis)) for c in coords]
    for cell in set(others):
        at = np.array([o == cell for o in others])
        kept = (mass[at] * np.exp(tilted[at])).sum()
        assert kept == pytest.approx(mass[at].sum(), rel=1e-12)
        shift = tilted[at] - factor[at]
        np.testing.assert_allclose(shift, shift[0], rtol=0, atol=1e-12)


def test_the_conditional_tilt_survives_a_feature_cell_far_below_the_rest() -> None:
    """A feature cell whose factor is 2,000 below the top (exp underflows there) still
    keeps its mass, with finite factors everywhere."""
    table = CliqueTable(shape=(2, 2), codes=None, mass=np.array([0.1, 0.2, 0.3, 0.4]))
    factor = np.array([0.0, 1.0, -2000.0, -1999.0])  # label is axis 1; rows are features
    tilted = conditional_factor(table, factor, 1)
    assert np.all(np.isfinite(tilted))
    for row in (slice(0, 2), slice(2, 4)):
        kept = (table.mass[row] * np.exp(tilted[row])).sum()
        assert kept == pytest.approx(table.mass[row].sum(), rel=1e-12)
    np.testing.assert_allclose(tilted[3] - tilted[2], 1.0, rtol=1e-12)


def test_a_calibrated_update_moves_the_label_not_the_features() -> None:
    """One calibrated update on the parity query leaves the hypothesis's joint of the
    features (a, b, c) as it was, to rounding, and still fixes the parity; the joint
    tilt (the same scale search without ``keep_axis``) moves the features."""
    step = parity_step()
    prior, round_, table, target, factor = (
        step.prior, step.round_, step.table, step.target, step.factor
    )  # fmt: skip
    axis = label_axis(round_)
    assert axis is not None and axis == round_.clique.index("y")
    scale = calibrated_scale(round_, table, factor, target, keep_axis=axis)
    conditional = prior.copy()
    moved = conditional_factor(table, factor * scale, axis)
    conditional.reweight_table(round_.clique, table, moved)
    joint = prior.copy()
    joint.reweight_table(
        round_.clique, table, factor * calibrated_scale(round_, table, factor, target)
    )
    features = ("a", "b", "c")
    before = prior.marginal(features)
    np.testing.assert_allclose(conditional.marginal(features), before, rtol=0, atol=1e-12)
    assert np.abs(joint.marginal(features) - before).max() > 1e-3
    problem = round_.problem_on(table)
    fitted = conditional.clique_table(round_.clique).mass
    assert excess_risk(problem, fitted, target) < 1e-6


def test_theory_settings_keep_the_fixed_step() -> None:
    """The paper's eta stays the default of EngineSettings (theory mode builds on it)."""
    settings = EngineSettings(max_updates=3, learning_rate=1.0, threshold=1.0)
    assert settings.step_rule == "fixed"
    with pytest.raises(ValueError, match="step_rule must be one of"):
        replace(settings, step_rule="bold")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="step_rule must be one of"):
        PMWConfig(epsilon=1.0, delta=1e-6, step_rule="bold")  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(4))
def test_the_oracle_error_stops_early_only_where_the_weight_is_already_zero(seed: int) -> None:
    """``known_above`` ends the simulations once their sum proves ``e_or >= bound``; the
    weight that results is exactly the full computation's, zero or not, on hypotheses
    near the data (the answer within its noise: w = 0) and far from it (w > 0)."""
    data = parity_data()
    config = PMWConfig(epsilon=1.0, delta=1e-9, prior="uniform", max_updates=10)
    stopped = []
    for prior in (DenseHistogram(DOMAIN, data.histogram().to_array()), max_entropy_prior(data)):
        engine = build_engine(data, config, noise=NumpyNoise(seed=seed), prior=prior.copy())
        round_ = engine.cm_round(PARITY)
        table = prior.clique_table(round_.clique)
        hat = round_.hypothesis_answer(table)
        context = PublicContext(n=N, noise_level=engine.oracle_noise_level)
        private = round_.private_answer(
            data.clique_table(round_.clique), n=N, noise_level=context.noise_level,
            noise=NumpyNoise(seed=seed),
        )  # fmt: skip
        margin = noise_margin(round_)
        discrepancy = released_answer_error(round_, table, table.mass, private, minimiser=hat)
        full = expected_oracle_error(round_, table, context, private, hat)
        early = expected_oracle_error(
            round_, table, context, private, hat, known_above=discrepancy / margin
        )
        assert early <= full * (1 + 1e-12)
        assert shrinkage_weight(discrepancy, early, margin) == shrinkage_weight(
            discrepancy, full, margin
        )
        stopped.append(early < full)
    assert stopped == [True, False]  # the right hypothesis stopped early, the wrong one not


def test_each_sweep_replays_only_the_window_of_recent_updates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ``sweep_window = W`` an update's sweeps replay its W most recent updates
    (the new one included), so an oracle round costs the same whatever T; within the
    window the engine is the unwindowed one, transcript for transcript."""
    from pmwcm.engine import update_step

    data = parity_data()
    replayed: list[int] = []
    honest = update_step._replay

    def counting(hypothesis: Any, past: Any, *args: Any) -> None:
        replayed.append(id(past))
        honest(hypothesis, past, *args)

    monkeypatch.setattr(update_step, "_replay", counting)
    transcripts = {}
    for window in (None, 3, 6):
        config = PMWConfig(
            epsilon=1.0, delta=1e-9, prior="uniform", max_updates=5, threshold=-1.0,
            sweeps=2, sweep_window=window,
        )  # fmt: skip
        engine = build_engine(data, config, noise=NumpyNoise(seed=3))
        replayed.clear()
        per_update = []
        for query in STREAM[:5]:
            before = len(replayed)
            answer = engine.answer(query)
            assert answer.source == "oracle"
            per_update.append(len(replayed) - before)
        transcripts[window] = (engine.hypothesis.to_array(), [a.value for a in engine.answers])
        assert per_update == [2 * min(t + 1, window or 5) for t in range(5)]
    for window in (6,):  # T = 5 updates fit the window: nothing changes
        assert np.array_equal(transcripts[window][0], transcripts[None][0])
    assert not np.array_equal(transcripts[3][0], transcripts[None][0])
    with pytest.raises(ValueError, match="sweep_window must be a positive integer or None"):
        EngineSettings(max_updates=1, learning_rate=1.0, threshold=0.0, sweep_window=0)
