"""Negative controls of the pipeline audit: deliberately broken pipelines it must flag.

Each is a ``build(data, config, noise)`` for :func:`~pmwcm.audit.pipeline.pipeline_case`
that plants one bug in the shipped builder (:func:`~pmwcm.engine.practical.build_engine`):
the pre-fix real-data solve, which certified its gap on the data and raised when it
could not (a free, data-dependent refusal: must be caught); and, to measure what a
whole-pipeline audit can and cannot see, the sparse vector fed a sensitivity 10
times too small and the prior measured at the add/remove calibration. A planted bug
in an engine part is a new engine built from the shipped one's parts
(:meth:`~pmwcm.engine.online.OnlinePMW.from_parts`), never an attribute assigned on it.
"""

from __future__ import annotations

import dataclasses
import math

from pmwcm.audit.pipeline import Build
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.plan import plan_budget
from pmwcm.engine.practical import PMWConfig, build_engine, make_accountant
from pmwcm.engine.rounds import CMRound, as_table
from pmwcm.kernels.clique_table import CliqueTable
from pmwcm.kernels.histogram import FloatArray
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.solvers import SolverError, minimize
from pmwcm.mechanisms.accounting import PrivacyLedger, calibrate_gaussian_multiplier
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.priors.marginals import (
    marginal_prior,
    measurement_event,
    pairwise_cliques,
)
from pmwcm.mechanisms.private_data import PrivateData

__all__ = ["BROKEN", "CERTIFY_BUDGET", "add_remove_prior", "refusing_solve", "small_sv_sensitivity"]


class _CertifiedDataRound(CMRound):
    """The pre-fix real-data side: a certified solve that raises when it cannot certify.

    The pre-fix code allowed 1000 Newton steps; this one allows
    :data:`CERTIFY_BUDGET` (counting the FISTA steps its fallback takes), so the
    refusal shows on a small worst-case pair. Any budget that some datasets exceed
    is the same bug: whether the solve succeeds depends on the data.
    """

    def error(self, data_marginal: FloatArray | CliqueTable, answer: FloatArray) -> float:
        table = as_table(data_marginal)
        weights = table.mass
        p = self.problem_on(table)
        tol = self.hypothesis_tol  # the pre-fix tolerance (1e-5 non-smooth, 1e-8 smooth)
        solution = minimize(p, weights, tol=tol, max_iter=1000)
        if not solution.converged or solution.iterations > CERTIFY_BUDGET:
            raise SolverError(
                f"Solver could not certify gap {tol} in {CERTIFY_BUDGET} iterations "
                f"(reached {solution.gap:.3g})."
            )
        return p.objective(answer, weights) - p.objective(solution.theta, weights)


#: Iterations the broken certified solve may take (on :func:`parity_pair`, ``D0``'s
#: tables certify within 1 and ``D1``'s hinge and Huber tables need 10 and 3).
CERTIFY_BUDGET = 2


class _CertifyingEngine(OnlinePMW):
    def cm_round(self, query: CMQuery) -> CMRound:
        r = super().cm_round(query)
        fields = {f.name: getattr(r, f.name) for f in dataclasses.fields(r)}
        return _CertifiedDataRound(**fields)


def refusing_solve(data: PrivateData, config: PMWConfig, noise: NoiseSource) -> OnlinePMW:
    """Broken: the real-data solve certifies its gap on the data within
    :data:`CERTIFY_BUDGET` iterations and raises :class:`~pmwcm.kernels.solvers.SolverError` when
    it cannot (the pre-fix code, whose budget was 1000 steps)."""
    engine = build_engine(data, config, noise=noise)
    return _CertifyingEngine.from_parts(engine.parts, state=engine.state())


def small_sv_sensitivity(data: PrivateData, config: PMWConfig, noise: NoiseSource) -> OnlinePMW:
    """Broken: the sparse vector's query divided by a sensitivity 10 times too small
    (``c = 0.2`` instead of 2 in ``c S / n + tau``)."""
    engine = build_engine(data, config, noise=noise)
    settings = dataclasses.replace(engine.settings, sensitivity_factor=0.2)
    parts = dataclasses.replace(engine.parts, settings=settings)
    return type(engine).from_parts(parts, state=engine.state())


def add_remove_prior(data: PrivateData, config: PMWConfig, noise: NoiseSource) -> OnlinePMW:
    """Broken: the prior charged for ``sigma = m sqrt(2K) / n`` but measured with the
    add/remove ``sigma = m sqrt(K) / n`` (as in ``tests/test_audit_prior.py``)."""
    ledger = PrivacyLedger(epsilon=config.epsilon, delta=config.delta,
                           accountant=make_accountant(config.accountant))  # fmt: skip
    multiplier = calibrate_gaussian_multiplier(
        fixed=None,
        gaussian_count=1,
        epsilon=config.prior_fraction * config.epsilon,
        delta=config.prior_fraction * config.delta,
        accountant=ledger.accountant,
    )
    ledger.spend(measurement_event(multiplier), label="prior: noisy 2-way marginals")
    prior = marginal_prior(data, noise_multiplier=multiplier / math.sqrt(2), noise=noise).hypothesis
    return build_engine(data, config, noise=noise, prior=prior, ledger=ledger)


def triples_prior(data: PrivateData, config: PMWConfig, noise: NoiseSource) -> OnlinePMW:
    """The shipped pipeline with the all-triples prior (``prior_cliques="triples"``: what
    the rule picks at high signal, forced here at the audit pair's ``n``)."""
    return build_engine(data, dataclasses.replace(config, prior_cliques="triples"), noise=noise)


#: Fit steps of the broken triples prior: its leak is the noiseless release, not the
#: fit, and the shipped 1,000 steps on exact marginals cost ~1.5 s a trial.
_BROKEN_FIT_STEPS = 30


def noiseless_triples_prior(data: PrivateData, config: PMWConfig, noise: NoiseSource) -> OnlinePMW:
    """Broken: the triples prior charged as planned but fitted to the data's exact 3-way
    marginals (a multiplier of ``1e-9`` in place of the plan's)."""
    config = dataclasses.replace(config, prior_cliques="triples")
    plan = plan_budget(config, n=data.n, domain=data.domain)
    assert plan.prior_multiplier is not None and plan.prior_order == 3
    ledger = PrivacyLedger(epsilon=config.epsilon, delta=config.delta,
                           accountant=make_accountant(config.accountant))  # fmt: skip
    ledger.spend(measurement_event(plan.prior_multiplier), label="prior: noisy 3-way marginals")
    prior = marginal_prior(
        data, noise_multiplier=1e-9, noise=noise,
        cliques=pairwise_cliques(data.domain, order=3), iterations=_BROKEN_FIT_STEPS,
    ).hypothesis  # fmt: skip
    return build_engine(data, config, noise=noise, prior=prior, ledger=ledger)


#: The negative controls by label.
BROKEN: dict[str, Build] = {
    "refusing real-data solve": refusing_solve,
    "sparse vector sensitivity / 10": small_sv_sensitivity,
    "prior at add/remove sigma": add_remove_prior,
    "noiseless triples prior": noiseless_triples_prior,
}
