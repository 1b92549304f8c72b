"""Practical mode's parameters: :class:`PMWConfig`, the value every entry point builds.

The defaults and where they came from are in :mod:`pmwcm.engine.practical`'s
docstring; what the budget makes of a config for a given ``n`` and schema (the
split, ``T``, the mode, every noise level) is :class:`pmwcm.engine.plan.BudgetPlan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, get_args

from pmwcm.engine.budget_rule import updates_for_budget
from pmwcm.engine.measured_update import UpdateKind
from pmwcm.engine.settings import (
    AFTER_HALT,
    PRACTICAL_HYPOTHESIS_SOLVE,
    STEP_RULES,
    AfterHalt,
    EngineSettings,
    StepRule,
    check_count,
)
from pmwcm.kernels.array_device import DeviceName, resolve_device
from pmwcm.kernels.backend import (
    BACKENDS,
    DEFAULT_HYPOTHESIS_MEMORY,
    BackendChoice,
    BackendName,
    choose_backend,
)
from pmwcm.kernels.domain import Domain
from pmwcm.mechanisms.accounting import BudgetSplit
from pmwcm.mechanisms.accounting.events import check_budget
from pmwcm.mechanisms.oracles import BudgetTunedGradientDescent, Oracle

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
UpdateChoice = Literal["auto", "oracle", "measure", "both"]
UPDATE_CHOICES: tuple[UpdateChoice, ...] = get_args(UpdateChoice)
PriorCliques = Literal["auto", "pairs", "triples"]
PRIOR_CLIQUES: tuple[PriorCliques, ...] = get_args(PriorCliques)
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
            nothing. The measured update refits by its own rule where this keeps its
            default (:func:`~pmwcm.engine.measured_update.measured_refit_iterations`:
            30 steps, 100 on a weighted support with precise measurements).
        oracle: the single-query oracle; by default noisy gradient descent
            configured by its per-call budget
            (:class:`~pmwcm.mechanisms.oracles.BudgetTunedGradientDescent`).
        accountant: ``"pld"`` (tight) or ``"zcdp"``.
        backend: the hypothesis backend, ``"auto"`` (dense while it fits
            ``hypothesis_memory``, a weighted support beyond), ``"dense"`` or
            ``"support"`` (:func:`~pmwcm.kernels.backend.choose_backend`).
        hypothesis_memory: bytes the hypothesis may take.
        device: where a support hypothesis computes: ``"cpu"`` (default: NumPy and
            numba), ``"cuda"`` (a CUDA array library; refused here without a GPU) or
            ``"auto"`` (CUDA when one sees a device; :mod:`pmwcm.kernels.array_device`).
            The dense backend always runs on the CPU.
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
        update: what a flagged CM query buys (issue 35,
            :mod:`pmwcm.engine.measured_update`): ``"measure"`` (the clique's
            marginal measured with the Gaussian mechanism, the hypothesis refitted
            to every measurement and its answer released, updates paced over the
            expected stream, ``T >= 20``), ``"oracle"`` (the paper's oracle answer
            and tilt; theory mode always), ``"both"``, or ``"auto"`` (default:
            ``"measure"`` when the stream is announced, ``announced_queries`` set,
            as ``pmwcm run`` does; ``"oracle"`` otherwise; :attr:`update_kind`).
            Composition mode, linear queries and the support backend use the
            oracle's. The rule
            follows what was measured (docs/results.md, "Issue 35"): on announced
            streams ``measure`` spends 100% of epsilon (``oracle``: 82-85%),
            leaves 2.9% unchecked on average where ``oracle`` leaves up to 81%
            at small n, and is ahead on the mean in 3 of 4 cells and on the max
            in all; an unannounced stream has no length to pace over.
        prior_cliques: what the paid marginal prior measures: ``"auto"`` (default:
            every 3-way marginal where their noise per mean cell is small, on a dense
            hypothesis without workload rounds,
            :func:`~pmwcm.mechanisms.priors.marginals.prior_order`; otherwise the 2-way
            ones less those the noise swamps, with the 1-ways of attributes they leave
            out, :func:`~pmwcm.mechanisms.priors.marginals.noise_limited_pairs`),
            ``"pairs"`` (every 2-way marginal) or ``"triples"``. The same privacy event
            either way. The support backend and the workload-aware start measure pairs
            (``"triples"`` is refused there).

    The string choices are the ``Literal`` types :data:`SparseVectorName`,
    :data:`PriorName`, :data:`AccountantName`, :data:`UpdateChoice`, :data:`PriorCliques` and
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
    device: DeviceName = "cpu"
    support_size: int = 0
    announced_queries: int | None = None
    mode: ModeName = "auto"
    update: UpdateChoice = "auto"
    prior_cliques: PriorCliques = "auto"

    def __post_init__(self) -> None:
        if self.update not in UPDATE_CHOICES:
            raise ValueError(f"update must be one of {UPDATE_CHOICES}, got update={self.update!r}.")
        if self.prior_cliques not in PRIOR_CLIQUES:
            raise ValueError(
                f"prior_cliques must be one of {PRIOR_CLIQUES}, "
                f"got prior_cliques={self.prior_cliques!r}."
            )
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
        resolve_device(self.device)  # an unknown name, or cuda without a GPU, is refused here
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
        n, k)``; otherwise, and in ``mode="hybrid"``, the hybrid, exactly as if
        nothing had been announced. The budget plan
        (:func:`pmwcm.engine.plan.plan_budget`) resolves a config the same way and
        calibrates each level once; this is the config alone.
        """
        from pmwcm.engine.plan import resolve_config  # the plan builds on this module

        return resolve_config(self, n, attributes)

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
    def update_kind(self) -> UpdateKind:
        """The update :attr:`update` asks for, ``"auto"`` resolved (public)."""
        if self.update == "auto":
            return "measure" if self.announced_queries is not None else "oracle"
        return self.update

    @property
    def split(self) -> BudgetSplit:
        """The budget split: ``prior_fraction`` to a paid prior (``0`` otherwise),
        ``sv_fraction`` to the sparse vector, the rest to the oracle calls."""
        prior = self.prior_fraction if self.prior in PAID_PRIORS else 0.0
        return BudgetSplit.from_shares(prior=prior, sparse_vector=self.sv_fraction)

    def engine_settings(self, *, learning_rate: float, threshold: float) -> EngineSettings:
        """The engine's settings from this config, with the resolved ``learning_rate``
        (``eta S``) and ``threshold`` (the budget plan resolves the ``None`` rules)."""
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
