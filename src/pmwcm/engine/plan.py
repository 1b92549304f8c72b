"""The budget plan: every number an engine's budget decides, computed once, before any data.

:func:`plan_budget` reads only public inputs -- the total ``(epsilon, delta)``,
``n``, the schema (its number of attributes and ``log|X|``), the announced
``k`` and the settings (:class:`~pmwcm.engine.config.PMWConfig`) -- and
returns a frozen :class:`BudgetPlan`:

1. the budget rules (:func:`~pmwcm.mechanisms.accounting.budget_rules.check_total_budget`:
   epsilon in ``[1e-3, 1e3]``, delta in ``[1e-15, 1/n)``);
2. the mode (hybrid or composition, :func:`~pmwcm.engine.budget_rule.chooses_composition`)
   and, for the hybrid, the split and ``T`` (:func:`~pmwcm.engine.budget_rule.plan_for_budget`);
3. the hypothesis backend;
4. every calibrated noise level: the paid prior's events (the marginal prior's
   Gaussian multiplier, or AIM/MST's event), the sparse vector's epsilons and
   query-noise scale ``b``, the oracle calls' level (the smallest for which
   everything composes to exactly ``(epsilon, delta)``);
5. the threshold ``b ln(max(e, k/T))`` and the step ``eta S``.

The command line (``pmwcm run --dry-run`` prints it), the service's session
creation and :func:`~pmwcm.engine.practical.build_engine` all call this one
function; ``build_engine`` takes a plan made earlier and only draws the noise
it prescribes. A budget that no noise level fits is refused here, naming the
field, before the prior reads the data.

Epsilon's way::

    (epsilon, delta), n, schema, k, settings
        -> check_total_budget                      the rules, once
        -> mode, split, T                          budget_rule (public)
        -> prior events, sparse vector, oracle     each level calibrated once
        -> BudgetPlan (frozen)  -> build_engine -> PrivacyLedger(epsilon, delta)
                                                   charges exactly the planned events
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import dp_accounting

from pmwcm.engine.budget_rule import chooses_composition, mode_reason, plan_for_budget
from pmwcm.engine.config import (
    FIXED_PRIOR_FRACTION,
    FIXED_SV_FRACTION,
    INFORMED_UPDATES,
    REFIT_ITERATIONS,
    PMWConfig,
)
from pmwcm.engine.measured_update import (
    MeasuredUpdate,
    UpdateKind,
    calibrate_update_noise,
    measured_positions,
    measured_updates,
)
from pmwcm.engine.noise_levels import calibrate_oracle, default_threshold, make_accountant
from pmwcm.engine.prior_plan import PriorLevels, prior_levels, workload_levels
from pmwcm.engine.settings import EngineSettings
from pmwcm.engine.sparse_vector_plan import SparseVectorPlan
from pmwcm.engine.update_slots import FallbackRule
from pmwcm.kernels.backend import BackendChoice
from pmwcm.kernels.domain import Domain
from pmwcm.mechanisms.accounting import Accountant
from pmwcm.mechanisms.accounting.budget_rules import BudgetRefused, check_total_budget
from pmwcm.mechanisms.priors.marginals import noise_limited_pairs, pairwise_cliques, prior_order
from pmwcm.mechanisms.priors.workload import WorkloadPlan, uses_workload, workload_candidates

Kind = Literal["cm", "linear"]


@dataclass(frozen=True, kw_only=True)
class BudgetPlan:
    """Everything the budget decides for one engine (module docstring); public.

    Attributes:
        requested: the config as given.
        config: the config resolved for ``n`` and the schema (split, ``T``, mode).
        n: the number of records (public).
        attributes: the schema's number of attributes.
        kind: ``"cm"`` (the oracle's events) or ``"linear"`` (Laplace answers).
        mode: ``"hybrid"`` or ``"composition"``; ``mode_reason`` says why.
        backend: the hypothesis backend and why.
        spent: the events a caller's ledger already holds (counted, not charged again).
        prior_supplied: the caller passes the start (no prior is paid by the engine).
        prior_multiplier: the paid marginal prior's Gaussian multiplier, if any.
        prior_events: the events the prior built here will charge.
        sparse_vector: the sparse vector's parameters (``None`` in composition mode).
        oracle_noise_level: each oracle call's calibrated noise level (the measured
            update's multiplier when ``update`` is not ``"oracle"``).
        learning_rate: ``eta S``.
        threshold: in units of each query's sensitivity.
        update: the update the engine makes (``config.update_kind``; ``"oracle"`` in
            composition mode and for linear queries).
        workload: the workload-aware start's rounds, if the prior runs them.
        announced_cliques: the candidate cliques the workload named (public).
        measured_positions: where the workload's queries that a measured update would
            measure stand in it (:func:`~pmwcm.engine.measured_update.measured_positions`;
            empty without one): the measured update paces the stream over them.
        prior_order: the paid marginal prior measures every clique of this many
            attributes: 3 on a dense hypothesis without workload rounds where the triples'
            noise is small (:func:`~pmwcm.mechanisms.priors.marginals.prior_order`), else 2.
        prior_cliques: the cliques the paid marginal prior measures (public): every
            triple at order 3; at order 2 every pair with ``prior_cliques="pairs"``, else
            the pairs its noise does not swamp and the 1-ways of the attributes they
            leave out (:func:`~pmwcm.mechanisms.priors.marginals.noise_limited_pairs`);
            empty without a paid marginal prior.
    """

    requested: PMWConfig
    config: PMWConfig
    n: int
    attributes: int
    kind: Kind
    mode: Literal["hybrid", "composition"]
    mode_reason: str
    backend: BackendChoice
    spent: tuple[dp_accounting.DpEvent, ...]
    prior_supplied: bool
    prior_multiplier: float | None
    prior_events: tuple[dp_accounting.DpEvent, ...]
    sparse_vector: SparseVectorPlan | None
    oracle_noise_level: float
    learning_rate: float
    threshold: float
    update: UpdateKind = "oracle"
    workload: WorkloadPlan | None = None
    announced_cliques: tuple[tuple[str, ...], ...] = ()
    measured_positions: tuple[int, ...] = ()
    prior_order: int = 2
    prior_cliques: tuple[tuple[str, ...], ...] = ()

    @property
    def epsilon(self) -> float:
        """The total epsilon."""
        return self.config.epsilon

    @property
    def delta(self) -> float:
        """The total delta."""
        return self.config.delta

    def measured_update(self) -> MeasuredUpdate | None:
        """Issue 35's measured update under this plan (its kind, the one calibrated
        multiplier, the pacing over the expected stream), or ``None`` for the oracle's."""
        if self.update == "oracle" or self.kind != "cm" or self.mode == "composition":
            return None
        return MeasuredUpdate(
            kind=self.update,
            noise_multiplier=self.oracle_noise_level,
            # the config's default is the oracle update's; a measured one refits longer,
            # by its own rule (``None``: measured_update.measured_refit_iterations)
            refit_iterations=(
                None
                if self.config.refit_iterations == REFIT_ITERATIONS
                else self.config.refit_iterations
            ),
            # the announced distinct queries themselves (the threshold rule's floor of
            # 1,000 would put a short file's updates after its end), else the rule's k
            pace_queries=self.config.announced_queries or self.config.expected_queries,
            measured_positions=self.measured_positions,
            fallback=_fallback(self.update, self.backend.kind, self.config),
        )

    def engine_settings(self) -> EngineSettings:
        """The engine's frozen settings under this plan."""
        return self.config.engine_settings(
            learning_rate=self.learning_rate, threshold=self.threshold
        )

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready numbers (what ``pmwcm run --dry-run`` prints)."""
        split = self.config.split
        sv = self.sparse_vector
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "n": self.n,
            "attributes": self.attributes,
            "mode": self.mode,
            "mode_reason": self.mode_reason,
            "prior": self.config.prior,
            "shares": {
                "prior": split.prior,
                "sparse_vector": split.sparse_vector,
                "oracle": split.oracle,
            },
            "max_updates": self.config.max_updates,
            "prior_multiplier": self.prior_multiplier,
            "prior_order": self.prior_order,
            "prior_cliques": {
                "pairs": sum(len(c) == 2 for c in self.prior_cliques),
                "one_way": sum(len(c) == 1 for c in self.prior_cliques),
                "triples": sum(len(c) == 3 for c in self.prior_cliques),
            },
            "sparse_vector": None if sv is None else sv.to_dict(),
            "oracle_noise_level": self.oracle_noise_level,
            "threshold": self.threshold,
            "learning_rate": self.learning_rate,
            "update": self.update,
            "announced_measurable": len(self.measured_positions),
            "workload": None if self.workload is None else self.workload.to_dict(),
            "backend": self.backend.to_dict(),
        }

    def matches(
        self,
        config: PMWConfig,
        *,
        n: int,
        domain: Domain,
        kind: str,
        spent: Iterable[Any],
        prior_supplied: bool,
        workload: Iterable[Sequence[str]] = (),
    ) -> bool:
        """Whether this plan was made for these inputs (``build_engine`` checks a plan given)."""
        return (
            self.requested == config
            and self.prior_supplied == prior_supplied
            and self.n == n
            and self.attributes == len(domain)
            and self.kind == kind
            and self.spent == tuple(spent)
            # a plan whose prior measures triples chose them over the rounds
            and self.announced_cliques
            == _round_candidates(
                domain, workload, epsilon=self.epsilon, n=n, triples=self.prior_order == 3
            )
        )


def plan_budget(
    config: PMWConfig,
    *,
    n: int,
    domain: Domain,
    kind: str = "cm",
    spent: Iterable[dp_accounting.DpEvent] = (),
    prior_supplied: bool = False,
    workload: Iterable[Sequence[str]] = (),
) -> BudgetPlan:
    """The budget plan of ``config`` for ``n`` records on ``domain`` (module docstring).

    Args:
        config: the settings and total budget.
        n: the number of records (public).
        domain: the schema's universe (public).
        kind: ``"cm"`` or ``"linear"``.
        spent: events already in the ledger the engine will use (a prior the
            caller paid, or a rebuilt session's genesis debits).
        prior_supplied: the caller passes the start, so no prior is paid here.
        workload: the announced queries' cliques (public: ``pmwcm run`` reads its
            file first); the marginal prior on a dense hypothesis then measures
            those the pairs describe worst (:mod:`pmwcm.mechanisms.priors.workload`).

    Raises:
        BudgetRefused: a budget rule fails, or no noise level fits (names the field).
        ValueError: a setting that does not fit the schema (the backend), or ``kind``.
    """
    if kind not in ("cm", "linear"):
        raise ValueError(f"kind must be 'cm' or 'linear', got kind={kind!r}.")
    epsilon, delta = check_total_budget(config.epsilon, config.delta, n=n)
    spent, accountant = tuple(spent), make_accountant(config.accountant)
    composition = chooses_composition(epsilon, delta, n, config.announced_queries, config.mode)
    try:
        if composition:
            resolved, prior = config.composition_config(), PriorLevels.none()
        else:
            resolved, prior = _hybrid(config, n, len(domain), accountant, prior_supplied)
    except (ValueError, ArithmeticError) as exc:
        raise _no_level(epsilon, delta, exc) from None
    backend = resolved.backend_choice(domain, n)  # ValueError naming the setting
    # The measured update refits onto cliques of any size, on either backend (the support's
    # passes take any clique: pmwcm.kernels.support_passes).
    measuring = config.update_kind != "oracle" and kind == "cm" and not composition
    if measuring:  # issue 35: paced measurements, as many as the update budget's signal
        updates = measured_updates(
            resolved.max_updates,
            config.announced_queries,
            update_signal=_update_signal(epsilon, n, resolved, backend.kind),
        )
        pool = _fallback(config.update_kind, backend.kind, resolved).pool
        resolved = replace(resolved, max_updates=updates + pool)
    workload = [tuple(clique) for clique in workload]  # read twice below
    candidates = _round_candidates(
        domain, workload, epsilon=epsilon, n=n,
        triples=_triples_instead(config, domain, n, prior, backend.kind),
    )  # fmt: skip
    try:
        if candidates and prior.multiplier is not None:
            prior = workload_levels(resolved, accountant, candidates, attributes=len(domain))
        sv = None if composition else SparseVectorPlan.of(resolved, accountant)
        fixed = dp_accounting.ComposedDpEvent(
            [*spent, *prior.events, *([] if sv is None else [sv.event()])]
        )
        level = _update_level(resolved, kind, measuring, fixed, accountant)
    except (ValueError, ArithmeticError) as exc:
        raise _no_level(epsilon, delta, exc) from None
    learning_rate = resolved.learning_rate
    if learning_rate is None:
        learning_rate = math.sqrt(domain.log_size / resolved.max_updates)
    threshold = resolved.threshold
    if threshold is None:
        threshold = default_threshold(0.0 if sv is None else sv.noise_scale, resolved)
    order = _prior_order(config, domain, n, prior, backend.kind)
    return BudgetPlan(
        requested=config, config=resolved, n=n, attributes=len(domain),
        kind="cm" if kind == "cm" else "linear",
        mode="composition" if composition else "hybrid",
        mode_reason=mode_reason(epsilon, delta, n, config.announced_queries, config.mode),
        backend=backend, spent=spent, prior_supplied=prior_supplied,
        prior_multiplier=prior.multiplier, prior_events=prior.events, sparse_vector=sv,
        oracle_noise_level=level, learning_rate=learning_rate, threshold=threshold,
        update=config.update_kind if measuring else "oracle", workload=prior.workload,
        measured_positions=measured_positions(domain, workload),
        announced_cliques=candidates,
        prior_order=order,
        prior_cliques=_prior_cliques(config, domain, n, prior, order),
    )  # fmt: skip


def _prior_cliques(
    config: PMWConfig, domain: Domain, n: int, prior: PriorLevels, order: int
) -> tuple[tuple[str, ...], ...]:
    """What the paid marginal prior measures (public; ``BudgetPlan.prior_cliques``)."""
    if prior.multiplier is None:
        return ()
    if order == 3:
        return tuple(pairwise_cliques(domain, order=3))
    if config.prior_cliques == "pairs":
        return tuple(pairwise_cliques(domain))
    return tuple(noise_limited_pairs(domain, n=n, noise_multiplier=prior.multiplier))


def _round_candidates(
    domain: Domain,
    workload: Iterable[Sequence[str]],
    *,
    epsilon: float,
    n: int,
    triples: bool,
) -> tuple[tuple[str, ...], ...]:
    """The announced cliques the workload rounds choose from (public): none below their
    signal (:func:`~pmwcm.mechanisms.priors.workload.uses_workload`), nor where the prior
    measures every triple instead (``triples``: :func:`_triples_instead`)."""
    if triples or not uses_workload(epsilon, n):
        return ()
    return workload_candidates(domain, workload)


def _triples_instead(
    config: PMWConfig, domain: Domain, n: int, prior: PriorLevels, backend: str
) -> bool:
    """Whether the paid prior measures every triple instead of running the workload rounds
    (public): where ``config.prior_cliques`` is ``"auto"`` and the triples' noise at the
    whole prior budget is small (:func:`_prior_order` of the pairs' levels is 3).

    Measured (``benchmarks/accuracy/online_updates.py``, binary Adult, seeds 0-2,
    docs/results.md "Issue 35", session 27): where the triples qualify, the measured
    engine from the all-triples prior beat the same engine from the pairs and the rounds
    on every cell, the mean 1.29-1.42x lower at eps = 1.5, 2 and 4 (k = 2,000) and
    1.63x at eps = 4 (k = 10,000), the max 1.4-2.1x; at eps = 1 (pairs, the triples'
    noise too large) the rounds lowered it (0.89x, 0.92x). The rounds measure at most
    ``4 d`` of the announced cliques (56 of binary Adult's 1,348 on a 2,000-query file),
    each at about the noise a cell at which the triples measure all 364 (0.86x at
    eps = 4).
    """
    return config.prior_cliques == "auto" and _prior_order(config, domain, n, prior, backend) == 3


def _prior_order(
    config: PMWConfig, domain: Domain, n: int, prior: PriorLevels, backend: str
) -> int:
    """``config.prior_cliques`` as a clique order: with ``"auto"``, all triples for a paid
    dense prior without workload rounds where their noise is small
    (:func:`~pmwcm.mechanisms.priors.marginals.prior_order`), else all pairs.

    The workload rounds already measure the announced wider cliques on top of the
    pairs (with the triples there the max rose 47% on binary Adult at eps = 4), and
    the support's prior fits pairs over ``M`` records (not measured with triples).
    Where the triples qualify, ``"auto"`` measures them instead of running the rounds
    (:func:`_triples_instead`), so the rounds run only on a pairs prior.

    Raises:
        ValueError: ``"triples"`` where the prior measures pairs only (names the field).
    """
    misfit = (
        f"the backend is {backend!r}" if backend != "dense"
        else "the workload-aware start runs" if prior.workload is not None
        else "the schema has fewer than 3 attributes" if len(domain) < 3
        else None
    )  # fmt: skip
    fits = misfit is None
    if config.prior_cliques == "triples" and prior.multiplier is not None and not fits:
        raise ValueError(
            "prior_cliques='triples' needs a dense hypothesis without the workload-aware "
            f"start and at least 3 attributes; here {misfit}."
        )
    if prior.multiplier is None or not fits or config.prior_cliques == "pairs":
        return 2
    if config.prior_cliques == "triples":
        return 3
    return prior_order(domain, n=n, noise_multiplier=prior.multiplier)


def _update_level(
    config: PMWConfig,
    kind: str,
    measuring: bool,
    fixed: dp_accounting.DpEvent,
    accountant: Accountant,
) -> float:
    """The one noise level of the updates: the measurements' (and, for ``"both"``, the
    oracle calls') multiplier, or the oracle's level, at which they and ``fixed``
    compose to exactly the budget.

    Raises:
        ValueError: no level fits.
    """
    if measuring:
        return calibrate_update_noise(
            config.update_kind, config.oracle, updates=config.max_updates, fixed=fixed,
            epsilon=config.epsilon, delta=config.delta, accountant=accountant,
        )  # fmt: skip
    event_for: Callable[[float], dp_accounting.DpEvent] = (
        config.oracle.privacy_event if kind == "cm" else dp_accounting.LaplaceDpEvent
    )
    return calibrate_oracle(event_for, config, fixed=fixed, accountant=accountant)


def _update_signal(epsilon: float, n: int, config: PMWConfig, backend: str) -> float:
    """The update budget's ``epsilon n`` that sets a measured plan's ``T`` on a dense
    hypothesis (:func:`~pmwcm.engine.measured_update.measured_updates`); ``0`` on a
    weighted support (public).

    On a support (full resolution) a flagged clique too large to measure gets an oracle
    call, and the sparse vector's cutoff is ``T``: its noise grows like ``T`` and its
    threshold like ``ln(k / T)`` falls, so at large ``T`` far more such queries are
    flagged on noise alone, each call a noisy answer. On full-resolution Adult (eps = 1,
    k = 2,000, noise seed 7) ``T = 195`` lowered the mean excess risk from 6.7e-5 to
    6.1e-5 and raised the max from 5.6e-4 to 1.7e-3 (three such calls), with the
    calls' slots scaled to keep their share of the update budget.
    """
    if backend != "dense":
        return 0.0
    return epsilon * n * config.split.oracle


def _fallback(update: str, backend: str, config: PMWConfig) -> FallbackRule:
    """The plan's :class:`~pmwcm.engine.update_slots.FallbackRule` (public)."""
    gaussian = isinstance(config.oracle.privacy_event(1.0), dp_accounting.GaussianDpEvent)
    return FallbackRule.of(update, backend=backend, gaussian_oracle=gaussian)


def _no_level(epsilon: float, delta: float, exc: BaseException) -> BudgetRefused:
    """The refusal of a budget no noise level fits (names both fields: either can fix it)."""
    reason = str(exc).rstrip(".")
    return BudgetRefused(
        "epsilon",
        f"no noise level fits epsilon={epsilon:g} with delta={delta:g} ({reason}); raise "
        "epsilon, or choose delta between 1e-12 and 1/n (1e-6 is usual).",
    )


def _hybrid(
    config: PMWConfig, n: int, attributes: int, accountant: Accountant, prior_supplied: bool
) -> tuple[PMWConfig, PriorLevels]:
    """The hybrid's config for ``n`` and ``d`` (:func:`resolve_config`) and the prior's
    levels at its share (none when the caller supplies the start)."""
    ruled = _ruled(config, n, attributes)
    if ruled is None:
        return config, PriorLevels.none() if prior_supplied else prior_levels(config, accountant)
    try:
        prior = prior_levels(ruled, accountant)
    except ValueError:
        prior = None
    if prior is not None and _fits(ruled, prior, accountant):
        return ruled, PriorLevels.none() if prior_supplied else prior
    fixed = replace(config, budget_rule="fixed")
    return fixed, PriorLevels.none() if prior_supplied else prior_levels(fixed, accountant)


def _ruled(config: PMWConfig, n: int, attributes: int) -> PMWConfig | None:
    """The signal rule's shares and ``T`` for the default marginal prior, or ``None`` where
    the rule does not apply.

    The rule (``budget_rule="signal"``, the default) sets the shares and ``T`` of the
    default marginal prior when they hold their default values (shares ``0.4`` /
    ``0.3``, ``T`` = 0 or the 10 it stands for; the values are what is compared, so
    a config copied with :func:`dataclasses.replace` keeps the rule). Any other
    prior, ``budget_rule="fixed"``, or shares set otherwise keep the config as given.
    """
    if config.budget_rule == "fixed" or config.prior != "marginals":
        return None
    if (config.prior_fraction, config.sv_fraction) != (FIXED_PRIOR_FRACTION, FIXED_SV_FRACTION):
        return None
    rule = plan_for_budget(config.epsilon, n, attributes, measured=config.update_kind != "oracle")
    changes: dict[str, Any] = {
        "prior_fraction": rule.prior_fraction,
        "sv_fraction": rule.sv_fraction,
        "budget_rule": "fixed",  # resolved: applying it again changes nothing
    }
    if config.max_updates == INFORMED_UPDATES:
        changes["max_updates"] = rule.max_updates
    return replace(config, **changes)


def _fits(config: PMWConfig, prior: PriorLevels, accountant: Accountant) -> bool:
    """Whether the prior's and the sparse vector's events compose to at most
    ``epsilon (1 - oracle / 2)``, leaving the oracle calls at least half their share.

    At the edge of the accepted budgets (epsilon ~ 1e-3) the accountant's
    discretisation can leave a 95% prior no room for the rest; the rule's split
    is then dropped for the fixed one.
    """
    try:
        sv = SparseVectorPlan.of(config, accountant)
    except ValueError:
        return False
    fixed = dp_accounting.ComposedDpEvent([*prior.events, sv.event()])
    spent = accountant.epsilon(fixed, delta=config.delta)
    return spent <= config.epsilon * (1.0 - config.split.oracle / 2.0)


def split_fits(config: PMWConfig) -> bool:
    """Whether ``config``'s paid marginal prior and sparse vector, calibrated to their
    shares, leave the oracle calls at least half their share (public: the config alone)."""
    accountant = make_accountant(config.accountant)
    fixed = replace(config, budget_rule="fixed")
    try:
        prior = prior_levels(replace(fixed, prior="marginals"), accountant)
    except ValueError:
        return False
    return _fits(fixed, prior, accountant)


def resolve_config(config: PMWConfig, n: int, attributes: int) -> PMWConfig:
    """``config`` with the mode and the budget rule applied for ``n`` records on
    ``attributes`` attributes (:meth:`PMWConfig.resolved_for`; public)."""
    if chooses_composition(config.epsilon, config.delta, n, config.announced_queries, config.mode):
        return config.composition_config()
    ruled = _ruled(config, n, attributes)
    if ruled is None:
        return config
    return ruled if split_fits(ruled) else replace(config, budget_rule="fixed")
