"""Practical mode: the paper's algorithm with tight accounting and tuned constants.

The user gives a total ``(epsilon, delta)``. :func:`build_engine` splits it:

* the online sparse vector gets ``sv_fraction * epsilon`` as a pure-DP
  mechanism (Lyu-Su-Li 2017 Alg. 1 by default, the best known correct variant;
  or Dwork-Roth "Sparse", whose ``T`` runs are composed tightly);
* the ``T`` oracle calls get the rest: their noise multiplier ``m`` is the
  smallest for which the privacy-loss-distribution composition of the sparse
  vector and ``T`` oracle calls is exactly ``(epsilon, delta)``-DP.

So the *total* is the user's budget under tight composition, whatever ``T``.
The shares are one object, :class:`~pmwcm.mechanisms.accounting.BudgetSplit`
(``PMWConfig.split``): :func:`build_engine` charges the prior, sizes the sparse
vector and calibrates the oracle calls from it, and every calibration goes
through ``dp_accounting``'s ``calibrate_dp_mechanism``
(:mod:`pmwcm.mechanisms.accounting.calibration`).

Defaults (fixed constants, so they never look at the user's private data):

* ``T = 50``: docs/design.md section 6 found the noiseless algorithm converges in
  about 60 updates on Adult, and more updates cost every oracle call accuracy.
* ``learning_rate`` (``eta S``) = 4 and ``sweeps = 2`` (two MWEM-style
  post-processing replays of every past update after each new one), with
  ``sv_fraction = 0.3``: chosen on the bundled public Adult data with a random
  logistic query stream (seed 0) that the benchmarks do not reuse. The paper's
  regret-optimal ``sqrt(log|X| / T)`` (``learning_rate=None``) is worst-case
  safe but measured far worse (mean excess risk 0.044 vs 0.0015 at eps = 30,
  300 queries): each update then moves the hypothesis too little.
* ``threshold`` (in units of each query's sensitivity) = ``b ln(max(e, k/T))``,
  ``b`` the sparse vector's query-noise scale in the same units and ``k`` the
  expected stream length: at zero true error a query crosses it with
  probability ``<= T / (2k)`` (a Laplace tail), so noise alone spends at most
  about half of the ``T`` updates over the stream.

The budget split with the default paid prior (``prior="marginals"``) follows the
prior's *signal* ``s = epsilon n / sqrt(d (d - 1))`` (``budget_rule="signal"``,
:func:`~pmwcm.engine.budget_rule.plan_for_budget`; every input public): at
``s >= 2,200`` (full-resolution Adult and TV16 at ``epsilon = 1``) the old fixed
rule, **prior 40%, sparse vector 30%, oracle calls 30%** of ``epsilon`` (and the
prior 40% of ``delta``), with ``T = 10``; at small ``s`` (a table of ``10^4`` rows)
the prior gets 95%, the sparse vector and the oracle calls 2.5% each, and
``T = 1``, because there every answer came from the prior and its pair
marginals were too noisy at 40%. ``budget_rule="fixed"`` keeps the shares as
given (:meth:`PMWConfig.resolved_for`). ``k = 10,000`` in the threshold rule, or the
announced stream's length (at least 1,000) when the caller announces it.
The reasoning for the old rule at large ``s``: the prior answers
every query's low-order structure at once, so it gets the largest share; the
sparse vector must check every query of a long stream, so its share does not
shrink with ``T``; the oracle calls only fix what the prior misses, so there
are few of them (``T = 10`` instead of 50) and each gets ``0.3 / T`` of the
budget in PLD terms. The three shares were compared on the public Adult file
with the seed-0 stream only (docs/design.md section 6); no benchmark stream (seeds
1000+) was used to choose them, nor the small-``s`` end (docs/design.md
section 9). ``docs/results.md`` reports where the rule
serves well and where it does not (e.g. ``epsilon = 0.1``, where each oracle
call is so noisy that the updates hurt and MST wins).
(Issue 15's ``(epsilon, n)`` rule for ``T`` alone,
:func:`~pmwcm.engine.budget_rule.updates_for_budget`, stays opt-in through
:meth:`PMWConfig.with_updates_for`.)

Since issue 15 each update moves by the calibrated step
(:mod:`pmwcm.engine.step_size`: the released answer shrunk towards the
hypothesis's by how far it stands out of the oracle's own noise, and the step
that makes it optimal on the hypothesis), and the default oracle is noisy
gradient descent configured by its per-call budget
(:mod:`pmwcm.mechanisms.oracles.tuning`). docs/design.md section 9 has where
each rule comes from.

A caller who announces ``k`` (``announced_queries``) lets the budget rule answer
the stream in composition mode where ``k`` composed oracle calls beat the
hybrid (large ``n`` for the ``k``; :func:`~pmwcm.engine.budget_rule.prefers_composition`,
:mod:`pmwcm.engine.composition_mode`); unannounced, the engine is always the hybrid.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal, get_args

import dp_accounting

from pmwcm.engine.budget_rule import chooses_composition, plan_for_budget, updates_for_budget
from pmwcm.engine.composition_mode import EveryQueryToOracle
from pmwcm.engine.measured_update import (
    UPDATE_KINDS,
    MeasuredUpdate,
    UpdateKind,
    calibrate_update_noise,
    measured_updates,
)
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.settings import (
    AFTER_HALT,
    PRACTICAL_HYPOTHESIS_SOLVE,
    STEP_RULES,
    AfterHalt,
    EngineSettings,
    StepRule,
    check_count,
)
from pmwcm.kernels.backend import (
    BACKENDS,
    DEFAULT_HYPOTHESIS_MEMORY,
    BackendChoice,
    BackendName,
    choose_backend,
)
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import Histogram
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.accounting import (
    Accountant,
    BudgetSplit,
    EpsilonDeltaDpEvent,
    PLDAccountant,
    PrivacyLedger,
    ZCDPAccountant,
    calibrate_gaussian_multiplier,
    calibrate_noise_level,
    calibrate_parameter,
)
from pmwcm.mechanisms.accounting.events import check_budget
from pmwcm.mechanisms.noise import NoiseSource, NumpyNoise
from pmwcm.mechanisms.oracles import BudgetTunedGradientDescent, Oracle
from pmwcm.mechanisms.priors.marginals import (
    Measurement,
    PriorRelease,
    marginal_prior,
    measurement_event,
)
from pmwcm.mechanisms.priors.support import post_processing_rng, support_marginal_prior
from pmwcm.mechanisms.private_data import PrivateData
from pmwcm.mechanisms.sparse_vector import DworkRothSparse, LyuSuLiSparse, SparseVector

SparseVectorName = Literal["lyu_su_li", "dwork_roth"]
AccountantName = Literal["pld", "zcdp"]
PriorName = Literal["marginals", "uniform", "aim", "mst", "public"]
BudgetRuleName = Literal["signal", "fixed"]
ModeName = Literal["auto", "hybrid", "composition"]
SPARSE_VECTORS: tuple[SparseVectorName, ...] = get_args(SparseVectorName)
ACCOUNTANTS: tuple[AccountantName, ...] = get_args(AccountantName)
PRIORS: tuple[PriorName, ...] = get_args(PriorName)
BUDGET_RULES: tuple[BudgetRuleName, ...] = get_args(BudgetRuleName)
MODES: tuple[ModeName, ...] = get_args(ModeName)
#: The fixed shares (the split below ``SIGNAL_LARGE`` when ``budget_rule="fixed"``).
FIXED_PRIOR_FRACTION = 0.4
FIXED_SV_FRACTION = 0.3
#: ``T`` for an informed start when ``max_updates`` is left at 0.
INFORMED_UPDATES = 10
#: The least ``k`` the threshold rule takes from an announced stream. The rule lets noise
#: alone trigger about ``T / 2`` updates over ``k`` queries; below 1,000 queries that
#: would make a short file's few updates (``T = 1`` at small n) mostly noise, so a
#: short stream keeps the threshold of 1,000 queries (``T / 2000`` per query).
SHORT_STREAM_QUERIES = 1000
#: The updates each post-processing sweep replays (the most recent): every update of
#: an informed start's default ``T``; beyond it an oracle round's cost stops growing.
SWEEP_WINDOW = INFORMED_UPDATES
#: Steps of the prior's fit back onto its released marginals after each update
#: (:mod:`pmwcm.mechanisms.priors.refit`; measured in docs/results.md, "Do updates help?").
REFIT_ITERATIONS = 3
#: The priors measured from the private data and paid from the budget.
PAID_PRIORS: tuple[PriorName, ...] = ("marginals", "aim", "mst")


@dataclass(frozen=True, kw_only=True)
class PMWConfig:
    """Practical-mode parameters; see the module docstring for the defaults.

    Attributes:
        epsilon: total privacy budget (> 0).
        delta: total delta, in (0, 1).
        max_updates: ``T``, the number of oracle calls and updates; ``0``
            (default) for 10 with a paid or public prior, 50 with the uniform one
            (:meth:`with_updates_for` applies the ``(epsilon, n)`` rule of
            :mod:`pmwcm.engine.budget_rule` instead).
        sparse_vector: ``"lyu_su_li"`` or ``"dwork_roth"``.
        sv_fraction: the share of ``epsilon`` given to the sparse vector.
        learning_rate: ``eta S``; ``None`` for the paper's ``sqrt(log|X| / T)``.
        threshold: in units of each query's sensitivity; ``None`` for the rule.
        expected_queries: ``k`` in the threshold rule (public, not a limit);
            ``0`` (default): ``announced_queries`` when the stream's length is
            announced (at least :data:`SHORT_STREAM_QUERIES`), else 10,000 with a
            paid or public prior, 1,000 with the uniform one.
        prior: ``"marginals"`` (noisy 2-way marginals fitted into the starting
            histogram, paid from the budget; :mod:`pmwcm.mechanisms.priors.marginals`), ``"aim"`` or
            ``"mst"`` (the full contingency table of OpenDP's AIM or MST, paid
            from the budget; needs ``pmwcm[mbi]``; :mod:`pmwcm.mechanisms.priors.synthetic`)
            ``"public"`` (a histogram from public data, passed to
            :func:`build_engine` as ``prior=``; free: see
            :func:`pmwcm.mechanisms.priors.marginals.public_prior`) or ``"uniform"``
            (the paper's start).
        prior_fraction: the share of ``(epsilon, delta)`` a paid prior gets
            (with ``sv_fraction`` and ``max_updates`` at their defaults, the
            marginal prior's shares and ``T`` follow ``budget_rule``).
        sensitivity_factor: 2 (docs/design.md) or 3 (the paper) in ``c S / n + tau``.
        solver_tol: ``tau``, the certified solver gap.
        after_halt: ``"refuse"`` or ``"synthetic"``.
        sweeps: post-processing replays of past updates after each update.
        sweep_window: each sweep replays the ``sweep_window`` most recent updates
            (default :data:`SWEEP_WINDOW` = 10, the largest ``T`` the budget rule
            picks, so a default engine replays every update it made; a caller
            who sets a larger ``T`` gets oracle rounds whose cost stops growing
            with ``T``), or all of them with ``None``.
        step_rule: ``"calibrated"`` (default: each update, and each replay, moves
            by the multiple of ``eta`` that minimises the released answer's excess
            risk on the updated hypothesis; :mod:`pmwcm.engine.step_size`) or
            ``"fixed"`` (the paper's ``eta``).
        refit_iterations: after each update and its sweeps, this many steps of
            the marginal prior's fit from the updated hypothesis back onto the
            prior's released marginals (default :data:`REFIT_ITERATIONS`; free
            post-processing, :mod:`pmwcm.mechanisms.priors.refit`). Only the
            paid marginal prior has measurements; with any other prior it does
            nothing.
        oracle: the single-query oracle; by default noisy gradient descent
            configured by its per-call budget
            (:class:`~pmwcm.mechanisms.oracles.BudgetTunedGradientDescent`).
        accountant: ``"pld"`` (tight) or ``"zcdp"``.
        backend: the hypothesis backend, ``"auto"`` (dense while it fits
            ``hypothesis_memory``, a weighted support beyond), ``"dense"`` or
            ``"support"`` (:func:`~pmwcm.kernels.backend.choose_backend`).
        hypothesis_memory: bytes the hypothesis may take.
        support_size: ``M`` for the support backend; 0 for the default.
        announced_queries: ``k``, announced up front (public): at most ``k`` queries
            will be asked. ``None`` (default): not announced.
        mode: ``"auto"`` (default: with ``announced_queries``, composition mode where
            :func:`~pmwcm.engine.budget_rule.prefers_composition` says ``k`` composed
            oracle calls are more accurate than the hybrid; the hybrid otherwise),
            ``"hybrid"`` (never composition mode) or ``"composition"`` (always; needs
            ``announced_queries``). Composition mode: no paid prior, no sparse vector,
            ``T = k`` oracle calls at the whole budget
            (:mod:`pmwcm.engine.composition_mode`).

    The string choices are the ``Literal`` types :data:`SparseVectorName`,
    :data:`PriorName`, :data:`AccountantName` and
    :data:`~pmwcm.engine.settings.AfterHalt`, checked at run time; the fields
    stay annotated ``str`` so that callers passing a plain ``str`` (the CLI,
    the service) still type-check. :attr:`split` is the budget split and
    :meth:`engine_settings` the engine's frozen settings.
    """

    epsilon: float
    delta: float
    max_updates: int = 0
    sparse_vector: SparseVectorName = "lyu_su_li"
    sv_fraction: float = FIXED_SV_FRACTION
    learning_rate: float | None = 4.0
    threshold: float | None = None
    expected_queries: int = 0
    prior: PriorName = "marginals"
    prior_fraction: float = FIXED_PRIOR_FRACTION
    budget_rule: BudgetRuleName = "signal"
    sensitivity_factor: float = 2.0
    solver_tol: float = PRACTICAL_HYPOTHESIS_SOLVE.tol
    after_halt: AfterHalt = "refuse"
    sweeps: int = 2
    sweep_window: int | None = SWEEP_WINDOW
    step_rule: StepRule = "calibrated"
    refit_iterations: int = REFIT_ITERATIONS
    oracle: Oracle = field(default_factory=BudgetTunedGradientDescent)
    accountant: AccountantName = "pld"
    backend: BackendName = "auto"
    hypothesis_memory: int = DEFAULT_HYPOTHESIS_MEMORY
    support_size: int = 0
    announced_queries: int | None = None
    mode: ModeName = "auto"

    def __post_init__(self) -> None:
        if self.prior not in PRIORS:
            raise ValueError(f"prior must be one of {PRIORS}, got prior={self.prior!r}.")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got mode={self.mode!r}.")
        if self.announced_queries is not None and not (
            isinstance(self.announced_queries, int)
            and not isinstance(self.announced_queries, bool)
            and self.announced_queries >= 1
        ):
            raise ValueError(
                "announced_queries must be a positive integer or None, "
                f"got announced_queries={self.announced_queries!r}."
            )
        if self.mode == "composition" and self.announced_queries is None:
            raise ValueError(
                "mode='composition' answers k announced queries: give announced_queries."
            )
        if self.budget_rule not in BUDGET_RULES:
            raise ValueError(
                f"budget_rule must be one of {BUDGET_RULES}, got budget_rule={self.budget_rule!r}."
            )
        paid = self.prior in PAID_PRIORS
        # An informed start (paid or public) leaves the updates only what it misses.
        informed = self.prior != "uniform"
        if self.max_updates == 0:
            object.__setattr__(self, "max_updates", INFORMED_UPDATES if informed else 50)
        if self.expected_queries == 0:
            expected = 10_000 if informed else 1000
            if self.announced_queries is not None:  # the stream's length itself, floored
                expected = max(self.announced_queries, SHORT_STREAM_QUERIES)
            object.__setattr__(self, "expected_queries", expected)
        if paid and not 0 < self.prior_fraction < 1 - self.sv_fraction:
            raise ValueError(
                f"prior_fraction must lie in (0, 1 - sv_fraction) = (0, {1 - self.sv_fraction}), "
                f"got prior_fraction={self.prior_fraction}."
            )
        check_budget(self.epsilon, self.delta)
        if not (isinstance(self.max_updates, int) and self.max_updates >= 1):
            raise ValueError(f"max_updates must be a positive integer, got {self.max_updates!r}.")
        if self.sparse_vector not in SPARSE_VECTORS:
            raise ValueError(
                f"sparse_vector must be one of {SPARSE_VECTORS}, got {self.sparse_vector!r}."
            )
        if not 0 < self.sv_fraction < 1:
            raise ValueError(f"sv_fraction must lie in (0, 1), got sv_fraction={self.sv_fraction}.")
        if not (isinstance(self.expected_queries, int) and self.expected_queries >= 1):
            raise ValueError(f"expected_queries must be >= 1, got {self.expected_queries!r}.")
        if self.sensitivity_factor < 2:
            raise ValueError(
                "sensitivity_factor below 2 breaks the privacy proof, got "
                f"sensitivity_factor={self.sensitivity_factor}."
            )
        if self.after_halt not in AFTER_HALT:
            raise ValueError(f"after_halt must be one of {AFTER_HALT}, got {self.after_halt!r}.")
        if self.step_rule not in STEP_RULES:
            raise ValueError(f"step_rule must be one of {STEP_RULES}, got {self.step_rule!r}.")
        check_count("refit_iterations", self.refit_iterations)
        if self.accountant not in ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {self.accountant!r}.")
        self.split  # noqa: B018  (validates the shares)
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got backend={self.backend!r}.")
        if not (isinstance(self.hypothesis_memory, int) and self.hypothesis_memory > 0):
            raise ValueError(
                f"hypothesis_memory must be a positive integer (bytes), "
                f"got hypothesis_memory={self.hypothesis_memory!r}."
            )
        if not (isinstance(self.support_size, int) and self.support_size >= 0):
            raise ValueError(
                "support_size must be a non-negative integer, "
                f"got support_size={self.support_size!r}."
            )

    def resolved_for(self, n: int, attributes: int) -> PMWConfig:
        """This config with the budget rule applied for ``n`` records on ``attributes``
        attributes (public; :func:`~pmwcm.engine.budget_rule.plan_for_budget`), or its
        composition mode (:meth:`composition_config`) where :attr:`mode` asks for it.

        ``mode="auto"`` with ``announced_queries`` set: composition mode iff
        :func:`~pmwcm.engine.budget_rule.prefers_composition` of ``(epsilon, delta,
        n, k)``; otherwise, and in ``mode="hybrid"``, the hybrid below, exactly as
        if nothing had been announced.
        """
        if chooses_composition(self.epsilon, self.delta, n, self.announced_queries, self.mode):
            return self.composition_config()
        return self._hybrid_for(n, attributes)

    def composition_config(self) -> PMWConfig:
        """This config in composition mode (:mod:`pmwcm.engine.composition_mode`): no paid
        prior (a public prior stays the start), ``T = k``, no sweeps, the paper's
        fixed step for the (free) updates that serve ``after_halt="synthetic"``.

        Raises:
            ValueError: ``announced_queries`` is not set.
        """
        if self.announced_queries is None:
            raise ValueError("composition mode needs announced_queries (k).")
        return replace(
            self,
            mode="composition",
            prior="uniform" if self.prior in PAID_PRIORS else self.prior,
            max_updates=self.announced_queries,
            sweeps=0,
            step_rule="fixed",
            refit_iterations=0,
            budget_rule="fixed",
        )

    def _hybrid_for(self, n: int, attributes: int) -> PMWConfig:
        """The hybrid's budget rule (:meth:`resolved_for`).

        The rule (``budget_rule="signal"``, the default) sets the shares and ``T`` of
        the default marginal prior when they hold their default values (shares
        ``0.4`` / ``0.3``, ``T`` = 0 or the 10 it stands for; the values are what is
        compared, so a config copied with :func:`dataclasses.replace` keeps the
        rule). Any other prior, ``budget_rule="fixed"``, or shares set otherwise
        keep the config as given. :func:`build_engine` calls this with the data's
        ``n`` and ``d``.
        """
        if self.budget_rule == "fixed" or self.prior != "marginals":
            return self
        shares = (self.prior_fraction, self.sv_fraction) == (
            FIXED_PRIOR_FRACTION,
            FIXED_SV_FRACTION,
        )
        if not shares:
            return self
        plan = plan_for_budget(self.epsilon, n, attributes)
        changes: dict[str, object] = {
            "prior_fraction": plan.prior_fraction,
            "sv_fraction": plan.sv_fraction,
            "budget_rule": "fixed",  # resolved: applying it again changes nothing
        }
        if self.max_updates == INFORMED_UPDATES:
            changes["max_updates"] = plan.max_updates
        ruled = replace(self, **changes)  # type: ignore[arg-type]
        # At the edge of the accepted budgets (epsilon ~ 1e-3) the accountant's
        # discretisation can leave a 95% prior no room for the rest: keep the
        # fixed split there, which the CLI's pre-flight checks (public values only).
        return ruled if split_fits(ruled) else replace(self, budget_rule="fixed")

    def with_updates_for(self, n: int) -> PMWConfig:
        """This config with ``T`` by :func:`~pmwcm.engine.budget_rule.updates_for_budget`
        of ``(epsilon, n)`` (public), for an informed start; the uniform start is kept.

        Opt-in, not the default: see :mod:`pmwcm.engine.budget_rule` for why.
        """
        if self.prior == "uniform":
            return self
        return replace(self, max_updates=updates_for_budget(self.epsilon, n))

    def backend_choice(self, domain: Domain, n: int | None = None) -> BackendChoice:
        """The hypothesis backend for ``domain`` (and ``n`` records, when known: it
        sets the default support size) under these settings (public).

        Raises:
            ValueError: naming the setting that does not fit.
        """
        choice = choose_backend(
            domain,
            memory_budget=self.hypothesis_memory,
            support_size=self.support_size,
            backend=self.backend,
            n=n,
        )
        return choice

    @property
    def split(self) -> BudgetSplit:
        """The budget split: ``prior_fraction`` to a paid prior (``0`` otherwise),
        ``sv_fraction`` to the sparse vector, the rest to the oracle calls."""
        prior = self.prior_fraction if self.prior in PAID_PRIORS else 0.0
        return BudgetSplit.from_shares(prior=prior, sparse_vector=self.sv_fraction)

    def engine_settings(self, *, learning_rate: float, threshold: float) -> EngineSettings:
        """The engine's settings from this config, with the resolved ``learning_rate``
        (``eta S``) and ``threshold`` (:func:`build_engine` resolves the ``None`` rules)."""
        return EngineSettings(
            max_updates=self.max_updates,
            learning_rate=learning_rate,
            threshold=threshold,
            sensitivity_factor=self.sensitivity_factor,
            solver_tol=self.solver_tol,
            after_halt=self.after_halt,
            sweeps=self.sweeps,
            sweep_window=self.sweep_window,
            step_rule=self.step_rule,
            refit_iterations=self.refit_iterations,
        )


def split_fits(config: PMWConfig) -> bool:
    """Whether ``config``'s paid marginal prior and sparse vector, calibrated to their
    shares, compose to at most ``epsilon (1 - oracle / 2)``, leaving the oracle calls
    at least half their share (public: the config alone, no data)."""
    return _split_fits(
        config.epsilon,
        config.delta,
        config.prior_fraction,
        config.sv_fraction,
        config.max_updates,
        config.sparse_vector,
        config.accountant,
    )


@functools.lru_cache(maxsize=256)
def _split_fits(
    epsilon: float,
    delta: float,
    prior_fraction: float,
    sv_fraction: float,
    max_updates: int,
    sparse_vector: SparseVectorName,
    accountant_name: AccountantName,
) -> bool:
    """:func:`split_fits` on the public numbers it reads (memoised: a PLD calibration)."""
    config = PMWConfig(
        epsilon=epsilon,
        delta=delta,
        prior_fraction=prior_fraction,
        sv_fraction=sv_fraction,
        max_updates=max_updates,
        sparse_vector=sparse_vector,
        accountant=accountant_name,
        budget_rule="fixed",
    )
    accountant = make_accountant(accountant_name)
    eps_p, delta_p = config.split.prior_budget(epsilon, delta)
    try:
        multiplier = calibrate_gaussian_multiplier(
            fixed=None, gaussian_count=1, epsilon=eps_p, delta=delta_p, accountant=accountant
        )
    except ValueError:
        return False
    # The sparse vector only stores its noise source; this one is never drawn from.
    sv, _ = make_sparse_vector(config, accountant=accountant, noise=NumpyNoise(seed=0))
    fixed = dp_accounting.ComposedDpEvent([measurement_event(multiplier), sv.privacy_event()])
    return accountant.epsilon(fixed, delta=delta) <= epsilon * (1.0 - config.split.oracle / 2.0)


def make_accountant(name: str) -> Accountant:
    """The accountant called ``name`` (``"pld"`` or ``"zcdp"``)."""
    return PLDAccountant() if name == "pld" else ZCDPAccountant()


def make_sparse_vector(
    config: PMWConfig, *, accountant: Accountant, noise: NoiseSource
) -> tuple[SparseVector, float]:
    """The sparse vector at its share of the budget (``config.split``), and its
    query-noise scale ``b``.

    ``b`` is in units of the (unit) sensitivity: Lyu-Su-Li ``2c / eps_2``,
    Dwork-Roth ``4 / eps'``.
    """
    eps_sv, delta_sv = config.split.sparse_vector_budget(config.epsilon, config.delta)
    cutoff = config.max_updates
    if config.sparse_vector == "lyu_su_li":
        sv = LyuSuLiSparse.from_total(epsilon=eps_sv, cutoff=cutoff, noise=noise)
        return sv, 2.0 * cutoff / sv.epsilon_queries
    per_run = dwork_roth_epsilon_per_run(eps_sv, cutoff, delta=delta_sv, accountant=accountant)
    return DworkRothSparse(epsilon_per_run=per_run, cutoff=cutoff, noise=noise), 4.0 / per_run


def dwork_roth_epsilon_per_run(
    epsilon: float, cutoff: int, *, delta: float, accountant: Accountant
) -> float:
    """The largest ``eps'`` whose ``cutoff``-fold composition is ``(epsilon, delta)``-DP.

    Found by :func:`~pmwcm.mechanisms.accounting.calibrate_parameter` between
    ``epsilon / cutoff`` (basic composition: always fits) and ``epsilon``, to
    relative precision ``1e-12``; the value returned fits.
    """
    if cutoff == 1:
        return epsilon
    return calibrate_parameter(
        lambda eps: dp_accounting.SelfComposedDpEvent(EpsilonDeltaDpEvent(epsilon=eps), cutoff),
        epsilon=epsilon,
        delta=delta,
        accountant=accountant,
        bracket=(epsilon / cutoff, epsilon),
        rtol=1e-12,
    )


def calibrate_oracle(
    event_for: Callable[[float], dp_accounting.DpEvent],
    config: PMWConfig,
    *,
    fixed: dp_accounting.DpEvent,
    accountant: Accountant,
) -> float:
    """The oracle calls' noise level: the smallest for which ``fixed`` (the prior's
    and the sparse vector's events) and ``T`` oracle calls compose to the total
    ``(epsilon, delta)``, i.e. the oracle takes its share ``config.split.oracle``
    and whatever tight composition saves on the other two.

    Gaussian events: :func:`~pmwcm.mechanisms.accounting.calibrate_gaussian_multiplier`
    (from the zCDP estimate); any other monotone family:
    :func:`~pmwcm.mechanisms.accounting.calibrate_noise_level`; both to relative
    precision 1e-6 (the hand-written bisections this replaces stopped at 1e-4
    for Gaussians, so levels now sit closer to the optimum, never above it by
    more than the old slack). Both go
    through ``dp_accounting``'s ``calibrate_dp_mechanism`` and return a level
    that fits.

    Raises:
        ValueError: if ``fixed`` alone exceeds the budget.
    """
    if isinstance(event_for(1.0), dp_accounting.GaussianDpEvent):
        return calibrate_gaussian_multiplier(
            fixed=fixed,
            gaussian_count=config.max_updates,
            epsilon=config.epsilon,
            delta=config.delta,
            accountant=accountant,
        )
    return calibrate_noise_level(
        event_for,
        count=config.max_updates,
        fixed=fixed,
        epsilon=config.epsilon,
        delta=config.delta,
        accountant=accountant,
    )


def _paid_marginal_prior(
    data: PrivateData,
    config: PMWConfig,
    *,
    ledger: PrivacyLedger,
    noise: NoiseSource,
    backend: BackendChoice,
) -> tuple[PriorRelease[Histogram], list[dp_accounting.DpEvent]]:
    """Charges, then measures, all 2-way marginals at the prior's share of the budget,
    and fits them on the chosen backend (dense, or a support of ``M`` records:
    :mod:`pmwcm.mechanisms.priors.support`; the same release and charge either way).

    Returns the prior with its measurements, and the events charged for it.
    """
    epsilon, delta = config.split.prior_budget(config.epsilon, config.delta)
    multiplier = calibrate_gaussian_multiplier(
        fixed=None, gaussian_count=1, epsilon=epsilon, delta=delta, accountant=ledger.accountant
    )
    event = measurement_event(multiplier)
    ledger.spend(event, label="prior: noisy 2-way marginals")
    release: PriorRelease[Histogram]
    if backend.kind == "support":
        release = support_marginal_prior(
            data, noise_multiplier=multiplier, noise=noise, size=backend.support_size
        )
    else:
        release = marginal_prior(data, noise_multiplier=multiplier, noise=noise)
    return release, [event]


def _paid_synthetic_prior(
    data: PrivateData,
    config: PMWConfig,
    *,
    ledger: PrivacyLedger,
    noise: NoiseSource,
    backend: BackendChoice,
) -> tuple[Histogram, list[dp_accounting.DpEvent]]:
    """Charges, then runs AIM or MST at the prior's share of the budget.

    See :mod:`pmwcm.mechanisms.priors.synthetic` (imported here: it is the optional mbi
    backend, and raises its ImportError before charging anything). On the dense
    backend the prior is the model's full table, on a support ``M`` records
    sampled from the model (the same release and charge). Returns the prior and
    the events charged for it.
    """
    from pmwcm.mechanisms.priors.synthetic import paid_synthetic_prior

    epsilon, delta = config.split.prior_budget(config.epsilon, config.delta)
    before = len(ledger.entries)
    on_support = backend.kind == "support"
    prior = paid_synthetic_prior(
        data,
        config.prior,
        epsilon=epsilon,
        delta=delta,
        ledger=ledger,
        support_size=backend.support_size if on_support else None,
        rng=post_processing_rng(noise) if on_support else None,
    )
    return prior, [entry.event for entry in ledger.entries[before:]]


def default_threshold(noise_scale: float, config: PMWConfig) -> float:
    """``b ln(max(e, k / T))`` (module docstring)."""
    return noise_scale * math.log(max(math.e, config.expected_queries / config.max_updates))


def build_engine(
    data: PrivateData,
    config: PMWConfig,
    *,
    noise: NoiseSource,
    prior: Histogram | None = None,
    ledger: PrivacyLedger | None = None,
    kind: str = "cm",
    update: UpdateKind = "oracle",
) -> OnlinePMW:
    """An :class:`~pmwcm.engine.online.OnlinePMW` whose total spend is exactly the budget.

    Args:
        data: the private data.
        config: practical-mode parameters.
        noise: random source for the sparse vector and the oracle.
        prior: starting hypothesis; if it was computed from the private data,
            pass the ``ledger`` that already paid for it. If ``None`` and
            ``config.prior`` is a paid prior (``"marginals"``, ``"aim"``,
            ``"mst"``), it is charged to the ledger first and then computed here.
        ledger: an existing ledger (its budget and accountant must equal the config's).
        kind: ``"cm"`` (the oracle's events) or ``"linear"`` (Laplace answers).
        update: what a flagged CM query buys (issue 35;
            :mod:`pmwcm.engine.measured_update`): ``"oracle"`` (default: the paper's
            oracle answer and tilt), ``"measure"`` (the clique's marginal measured
            with the Gaussian mechanism, the hypothesis refitted to every
            measurement, its answer released; updates paced over the expected
            stream) or ``"both"``. A measured engine plans at least
            :data:`~pmwcm.engine.measured_update.MIN_MEASURED_UPDATES` updates, whose
            measurements (and oracle calls) share one calibrated noise multiplier.
            Composition mode and linear queries keep ``"oracle"``. (A keyword of the
            builder, not yet a :class:`PMWConfig` field: the service mirrors every
            field, so the field waits for the service's session parameters.)
    """
    if update not in UPDATE_KINDS:
        raise ValueError(f"update must be one of {UPDATE_KINDS}, got update={update!r}.")
    accountant = make_accountant(config.accountant)
    if ledger is None:
        ledger = PrivacyLedger(epsilon=config.epsilon, delta=config.delta, accountant=accountant)
    elif (ledger.epsilon, ledger.delta, ledger.accountant.name) != (
        config.epsilon,
        config.delta,
        accountant.name,
    ):
        # The calibration below fits the config's budget under the config's accountant;
        # a ledger enforcing anything else would refuse oracle calls mid-stream.
        raise ValueError(
            f"The ledger's budget (epsilon={ledger.epsilon}, delta={ledger.delta}, "
            f"{ledger.accountant.name}) must equal the config's (epsilon={config.epsilon}, "
            f"delta={config.delta}, {accountant.name})."
        )
    if prior is None and config.prior == "public":
        raise ValueError(
            "prior='public' needs the public histogram as build_engine(..., prior=...); "
            "see pmwcm.mechanisms.priors.marginals.public_prior."
        )
    # The budget rule reads only public values (n, the schema's d, epsilon).
    config = config.resolved_for(data.n, len(data.domain))
    measuring = update != "oracle" and kind == "cm" and config.mode != "composition"
    if measuring:  # issue 35's hook: paced measurements need a few updates (public)
        config = replace(config, max_updates=measured_updates(config.max_updates))
    backend = config.backend_choice(data.domain, data.n)
    # Whatever the caller's ledger already holds (e.g. a prior it paid for) counts.
    fixed_events = [entry.event for entry in ledger.entries]
    measurements: tuple[Measurement, ...] = ()
    if prior is None and config.prior == "marginals":
        release, prior_events = _paid_marginal_prior(
            data, config, ledger=ledger, noise=noise, backend=backend
        )
        prior, measurements = release.hypothesis, release.measurements
        fixed_events += prior_events
    elif prior is None and config.prior == "uniform" and backend.kind == "support":
        rng = post_processing_rng(noise)
        prior = SupportHistogram.uniform(data.domain, backend.support_size, rng=rng)
    elif prior is None and config.prior in ("aim", "mst"):
        prior, prior_events = _paid_synthetic_prior(
            data, config, ledger=ledger, noise=noise, backend=backend
        )
        fixed_events += prior_events
    sv: SparseVector
    if config.mode == "composition":
        # Every query to the oracle: the stand-in reads nothing and costs nothing.
        sv, noise_scale = EveryQueryToOracle(cutoff=config.max_updates), 0.0
    else:
        sv, noise_scale = make_sparse_vector(config, accountant=accountant, noise=noise)
    fixed = dp_accounting.ComposedDpEvent([*fixed_events, sv.privacy_event()])
    if kind == "cm":
        event_for: Callable[[float], dp_accounting.DpEvent] = config.oracle.privacy_event
    elif kind == "linear":
        event_for = dp_accounting.LaplaceDpEvent
    else:
        raise ValueError(f"kind must be 'cm' or 'linear', got kind={kind!r}.")
    measured: MeasuredUpdate | None = None
    if measuring:
        # Issue 35's hook: the T updates' measurements (and, for "both", oracle calls)
        # share one multiplier calibrated to the rest of the budget.
        multiplier = calibrate_update_noise(
            update,
            config.oracle,
            updates=config.max_updates,
            fixed=fixed,
            epsilon=config.epsilon,
            delta=config.delta,
            accountant=accountant,
        )
        measured = MeasuredUpdate(
            kind=update,
            noise_multiplier=multiplier,
            refit_iterations=config.refit_iterations,
            pace_queries=config.expected_queries,
        )
    else:
        multiplier = calibrate_oracle(event_for, config, fixed=fixed, accountant=accountant)
    learning_rate = config.learning_rate
    if learning_rate is None:
        learning_rate = math.sqrt(data.domain.log_size / config.max_updates)
    threshold = config.threshold
    if threshold is None:
        threshold = default_threshold(noise_scale, config)
    settings = config.engine_settings(learning_rate=learning_rate, threshold=threshold)
    return OnlinePMW(
        data,
        settings=settings,
        sparse_vector=sv,
        oracle=config.oracle,
        oracle_noise_level=multiplier,
        ledger=ledger,
        noise=noise,
        prior=prior,
        prior_measurements=measurements,
        backend=backend,
        measured_update=measured,
    )
