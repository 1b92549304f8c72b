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

from collections.abc import Iterable, Sequence

from pmwcm.engine.composition_mode import EveryQueryToOracle
from pmwcm.engine.config import (
    ACCOUNTANTS,
    BUDGET_RULES,
    FIXED_PRIOR_FRACTION,
    FIXED_SV_FRACTION,
    INFORMED_UPDATES,
    MODES,
    PAID_PRIORS,
    PRIORS,
    REFIT_ITERATIONS,
    SHORT_STREAM_QUERIES,
    SPARSE_VECTORS,
    SWEEP_WINDOW,
    AccountantName,
    BudgetRuleName,
    ModeName,
    PMWConfig,
    PriorName,
    SparseVectorName,
)
from pmwcm.engine.modes import COMPOSITION, HYBRID
from pmwcm.engine.noise_levels import (
    calibrate_oracle,
    default_threshold,
    dwork_roth_epsilon_per_run,
    make_accountant,
    make_sparse_vector,
)
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.plan import BudgetPlan, plan_budget, split_fits
from pmwcm.kernels.array_device import resolve_device
from pmwcm.kernels.histogram import Histogram
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.accounting import PrivacyLedger
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.priors.marginals import (
    TRIPLE_ITERATIONS,
    Measurement,
    PriorRelease,
    marginal_prior,
    measurement_event,
)
from pmwcm.mechanisms.priors.support import post_processing_rng, support_marginal_prior
from pmwcm.mechanisms.priors.workload import workload_prior
from pmwcm.mechanisms.private_data import PrivateData
from pmwcm.mechanisms.sparse_vector import SparseVector

__all__ = [
    "ACCOUNTANTS",
    "BUDGET_RULES",
    "FIXED_PRIOR_FRACTION",
    "FIXED_SV_FRACTION",
    "INFORMED_UPDATES",
    "MODES",
    "PAID_PRIORS",
    "PRIORS",
    "REFIT_ITERATIONS",
    "SHORT_STREAM_QUERIES",
    "SPARSE_VECTORS",
    "SWEEP_WINDOW",
    "AccountantName",
    "BudgetPlan",
    "BudgetRuleName",
    "ModeName",
    "PMWConfig",
    "PriorName",
    "SparseVectorName",
    "build_engine",
    "calibrate_oracle",
    "default_threshold",
    "dwork_roth_epsilon_per_run",
    "make_accountant",
    "make_sparse_vector",
    "plan_budget",
    "split_fits",
]


def _paid_marginal_prior(
    data: PrivateData,
    plan: BudgetPlan,
    *,
    ledger: PrivacyLedger,
    noise: NoiseSource,
) -> PriorRelease[Histogram]:
    """Charges, then measures the plan's cliques (``plan.prior_cliques``: the pairs whose
    noise does not swamp them and the 1-ways of the attributes they leave out, or every
    triple where ``plan.prior_order`` says) at the plan's multiplier, and fits them on the
    plan's backend (dense, or a support of ``M`` records:
    :mod:`pmwcm.mechanisms.priors.support`; the same release and charge either way)."""
    multiplier, order = plan.prior_multiplier, plan.prior_order
    assert multiplier is not None  # planned for the marginal prior (public)
    singles = sum(len(c) == 1 for c in plan.prior_cliques)
    measured = f"noisy {order}-way marginals" + (f" and {singles} 1-way ones" if singles else "")
    ledger.spend(measurement_event(multiplier), label=f"prior: {measured}")
    workload = plan.workload
    if workload is not None:  # charged whole before any selection reads the data
        ledger.spend(workload.event(), label="prior: workload clique rounds")
    release: PriorRelease[Histogram]
    cliques = list(plan.prior_cliques)  # the same event whatever they are: sigma scales
    if plan.backend.kind == "support":
        release = support_marginal_prior(
            data, noise_multiplier=multiplier, noise=noise, size=plan.backend.support_size,
            cliques=cliques, device=resolve_device(plan.config.device),
        )  # fmt: skip
    else:
        release = marginal_prior(
            data, noise_multiplier=multiplier, noise=noise, cliques=cliques,
            iterations=TRIPLE_ITERATIONS if order == 3 else None,
        )  # fmt: skip
    if workload is None:
        return release
    return workload_prior(data, release, workload, noise=noise)


def _paid_synthetic_prior(
    data: PrivateData, plan: BudgetPlan, *, ledger: PrivacyLedger, noise: NoiseSource
) -> Histogram:
    """Charges, then runs AIM or MST at the prior's share of the budget (the event the
    plan counted: :func:`pmwcm.mechanisms.priors.synthetic.prior_event`).

    See :mod:`pmwcm.mechanisms.priors.synthetic` (imported here: it is the optional mbi
    backend, and raises its ImportError before charging anything). On the dense
    backend the prior is the model's full table, on a support ``M`` records
    sampled from the model (the same release and charge).
    """
    from pmwcm.mechanisms.priors.synthetic import paid_synthetic_prior

    config = plan.config
    epsilon, delta = config.split.prior_budget(config.epsilon, config.delta)
    on_support = plan.backend.kind == "support"
    return paid_synthetic_prior(
        data,
        config.prior,
        epsilon=epsilon,
        delta=delta,
        ledger=ledger,
        support_size=plan.backend.support_size if on_support else None,
        rng=post_processing_rng(noise) if on_support else None,
    )


def build_engine(
    data: PrivateData,
    config: PMWConfig,
    *,
    noise: NoiseSource,
    prior: Histogram | None = None,
    ledger: PrivacyLedger | None = None,
    kind: str = "cm",
    plan: BudgetPlan | None = None,
    workload: Iterable[Sequence[str]] = (),
) -> OnlinePMW:
    """An :class:`~pmwcm.engine.online.OnlinePMW` whose total spend is exactly the budget.

    Every number the budget decides comes from one :class:`~pmwcm.engine.plan.BudgetPlan`
    (:func:`~pmwcm.engine.plan.plan_budget`, made here unless the caller made it
    already, e.g. to show it first); this function pays the planned prior, builds
    the sparse vector and hands the engine the planned levels.

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
        plan: the plan of ``config`` for this data, ledger and ``kind``, if made already.
        workload: the announced queries' cliques (public), for a workload-aware
            start (:func:`~pmwcm.engine.plan.plan_budget`).
    Raises:
        BudgetRefused: the budget breaks a rule or no noise level fits (nothing read).
        ValueError: a setting that does not fit, or a ``plan`` made for other inputs.
    """
    accountant = make_accountant(config.accountant)
    if ledger is None:
        ledger = PrivacyLedger(epsilon=config.epsilon, delta=config.delta, accountant=accountant)
    elif (ledger.epsilon, ledger.delta, ledger.accountant.name) != (
        config.epsilon,
        config.delta,
        accountant.name,
    ):
        # The plan fits the config's budget under the config's accountant; a ledger
        # enforcing anything else would refuse oracle calls mid-stream.
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
    # Whatever the caller's ledger already holds (e.g. a prior it paid for) counts.
    spent = [entry.event for entry in ledger.entries]
    if plan is None:
        plan = plan_budget(config, n=data.n, domain=data.domain, kind=kind, spent=spent,
                           prior_supplied=prior is not None, workload=workload)  # fmt: skip
    elif not plan.matches(config, n=data.n, domain=data.domain, kind=kind, spent=spent,
                          prior_supplied=prior is not None, workload=workload):  # fmt: skip
        raise ValueError(
            "The budget plan was made for another config, data, ledger, start or kind."
        )
    return _engine_of_plan(data, plan, noise=noise, prior=prior, ledger=ledger)


def _engine_of_plan(
    data: PrivateData,
    plan: BudgetPlan,
    *,
    noise: NoiseSource,
    prior: Histogram | None,
    ledger: PrivacyLedger,
) -> OnlinePMW:
    """Pays the planned prior (reading the data), then builds the engine on the plan."""
    config = plan.config
    measurements: tuple[Measurement, ...] = ()
    if prior is None and config.prior == "marginals":
        release = _paid_marginal_prior(data, plan, ledger=ledger, noise=noise)
        prior, measurements = release.hypothesis, release.measurements
    elif prior is None and config.prior == "uniform" and plan.backend.kind == "support":
        rng = post_processing_rng(noise)
        prior = SupportHistogram.uniform(
            data.domain, plan.backend.support_size, rng=rng,
            device=resolve_device(config.device),
        )  # fmt: skip
    elif prior is None and config.prior in ("aim", "mst"):
        prior = _paid_synthetic_prior(data, plan, ledger=ledger, noise=noise)
    if plan.sparse_vector is None:
        # Composition mode: every query to the oracle; the counter reads nothing.
        sv: SparseVector = EveryQueryToOracle(cutoff=config.max_updates)
    else:
        sv = plan.sparse_vector.build(noise)
    return OnlinePMW(
        data,
        settings=plan.engine_settings(),
        sparse_vector=sv,
        oracle=config.oracle,
        oracle_noise_level=plan.oracle_noise_level,
        ledger=ledger,
        noise=noise,
        prior=prior,
        prior_measurements=measurements,
        backend=plan.backend,
        mode=COMPOSITION if plan.mode == "composition" else HYBRID,
        measured_update=plan.measured_update(),
    )
