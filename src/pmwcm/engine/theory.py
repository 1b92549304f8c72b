"""Theory mode: the paper's exact constants, for reproducing its claims.

From Ullman 2015, Figure "Online Private Multiplicative Weights for CM Queries"
and Theorem "putittogetheronline":

    T = 64 S^2 log|X| / alpha^2          eta = sqrt(log|X| / T) / S
    eps0 = eps / sqrt(8 T log(4/delta))   delta0 = delta / (4 T)
    alpha0 = alpha / 4                    beta0 = beta / (2 T)
    SV = SV(T, k, alpha, eps/2, delta/2)
    n >= 4096 S^2 sqrt(log|X| log(4/delta)) log(8k/beta) / (eps alpha^2)  (and n >= n')

Deviations, each forced by the text: ``eta`` carries ``1/S`` because the regret
lemma ``2 S sqrt(log|X|/T)`` is for ``eta = sqrt(log|X|/T)/S`` when
``u in [-S, S]`` (the figure's ``eta`` is the ``S = 1`` case); the update uses
``exp(-eta u)`` (the figure's ``+`` is a typo, docs/design.md section 3); the
sparse vector is Dwork-Roth "Sparse" with ``T`` runs of ``eps'``-DP
AboveThreshold, ``eps' = (eps/2) / sqrt(8 T log(2/delta))`` (Dwork, Roth 2014,
Theorem 3.28, at ``(eps/2, delta/2)``), with threshold ``3 alpha / 4`` between
the theorem's ``alpha/2`` and ``alpha``; the sensitivity is the paper's
``3 S / n``; each oracle call is the classical Gaussian mechanism at
``(eps0, delta0)``, ``sigma = sqrt(2 log(1.25/delta0)) / eps0`` (Dwork, Roth
2014, Theorem A.1, valid for ``eps0 < 1``). The ledger composes these events
with the PLD accountant, which is never looser than the Dwork-Rothblum-Vadhan
bound the paper uses.

**Table 1's rows** pick the oracle ``M'`` (:func:`table1_oracle`): Lipschitz,
``d``-bounded losses get noisy gradient descent (BST14, the paper's Theorem
"oneboundedlipschitz"); unconstrained GLMs (UGLM) the Jain-Thakurta output
perturbation (:class:`~pmwcm.mechanisms.oracles.JainThakurtaGLM`, Theorem
"oneglm"), with its accuracy tuned at the paper's ``beta0 = beta / (2T)``;
``sigma``-strongly convex losses output perturbation (CMS11; the paper cites
BST14's Theorem "onestronglyconvex" for the rate). Linear queries need no
oracle: their round answers with the Laplace mechanism
(:meth:`~pmwcm.engine.online.OnlinePMW.answer_linear`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import dp_accounting

from pmwcm.engine.modes import THEORY
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.settings import THEORY_HYPOTHESIS_SOLVE, EngineSettings
from pmwcm.mechanisms.accounting import EpsilonDeltaDpEvent, PLDAccountant, PrivacyLedger
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.oracles import (
    JainThakurtaGLM,
    NoisyGradientDescent,
    Oracle,
    OutputPerturbation,
)
from pmwcm.mechanisms.private_data import PrivateData
from pmwcm.mechanisms.sparse_vector import DworkRothSparse


@dataclass(frozen=True, kw_only=True)
class TheoryParameters:
    """The paper's parameters for a query family with scale ``S`` on universe ``X``.

    Attributes:
        epsilon, delta: total privacy budget.
        alpha, beta: target accuracy: every answer has excess risk ``<= alpha``
            with probability ``>= 1 - beta``.
        k: number of queries the stream may hold.
        scale: ``S``, a bound on every query's scaling constant.
        log_size: ``log |X|``.
    """

    epsilon: float
    delta: float
    alpha: float
    beta: float
    k: int
    scale: float
    log_size: float

    def __post_init__(self) -> None:
        for name in ("epsilon", "alpha", "scale", "log_size"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be positive and finite, got {name}={value}.")
        for name in ("delta", "beta"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise ValueError(f"{name} must lie in (0, 1), got {name}={value}.")
        if not (isinstance(self.k, int) and self.k >= 1):
            raise ValueError(f"k must be a positive integer, got k={self.k!r}.")

    @property
    def max_updates(self) -> int:
        """``T = ceil(64 S^2 log|X| / alpha^2)``."""
        return math.ceil(64 * self.scale**2 * self.log_size / self.alpha**2)

    @property
    def learning_rate(self) -> float:
        """``eta S = sqrt(log|X| / T)``."""
        return math.sqrt(self.log_size / self.max_updates)

    @property
    def oracle_epsilon(self) -> float:
        """``eps0 = eps / sqrt(8 T log(4/delta))``."""
        return self.epsilon / math.sqrt(8 * self.max_updates * math.log(4 / self.delta))

    @property
    def oracle_delta(self) -> float:
        """``delta0 = delta / (4T)``."""
        return self.delta / (4 * self.max_updates)

    @property
    def oracle_alpha(self) -> float:
        """``alpha0 = alpha / 4``: the accuracy the oracle must reach."""
        return self.alpha / 4

    @property
    def oracle_beta(self) -> float:
        """``beta0 = beta / (2T)``."""
        return self.beta / (2 * self.max_updates)

    @property
    def sparse_vector_epsilon_per_run(self) -> float:
        """``eps' = (eps/2) / sqrt(8 T log(2/delta))`` (DR14 Thm 3.28 at ``(eps/2, delta/2)``)."""
        return (self.epsilon / 2) / math.sqrt(8 * self.max_updates * math.log(2 / self.delta))

    @property
    def oracle_noise_multiplier(self) -> float:
        """``sqrt(2 log(1.25 / delta0)) / eps0`` (the classical Gaussian mechanism)."""
        return math.sqrt(2 * math.log(1.25 / self.oracle_delta)) / self.oracle_epsilon

    def required_n(self) -> float:
        """The data-size term of Theorem "putittogetheronline" (``n'`` is the oracle's)."""
        return (
            4096
            * self.scale**2
            * math.sqrt(self.log_size * math.log(4 / self.delta))
            * math.log(8 * self.k / self.beta)
            / (self.epsilon * self.alpha**2)
        )


Table1Row = Literal["lipschitz", "uglm", "strongly_convex"]
"""The CM rows of the paper's Table 1 (the linear row needs no oracle)."""

TABLE1_ROWS: tuple[Table1Row, ...] = ("lipschitz", "uglm", "strongly_convex")


def table1_oracle(row: Table1Row, params: TheoryParameters) -> Oracle:
    """The single-query oracle the paper plugs in for ``row`` of Table 1.

    Raises:
        ValueError: an unknown row.
    """
    if row == "lipschitz":
        return NoisyGradientDescent(steps=200)
    if row == "uglm":
        return JainThakurtaGLM(beta=params.oracle_beta)
    if row == "strongly_convex":
        return OutputPerturbation()
    raise ValueError(f"row must be one of {TABLE1_ROWS}, got row={row!r}.")


def build_theory_engine(
    data: PrivateData,
    params: TheoryParameters,
    *,
    noise: NoiseSource,
    oracle: Oracle | None = None,
    row: Table1Row = "lipschitz",
    enforce_n: bool = True,
) -> OnlinePMW:
    """The paper's engine, with its constants.

    Args:
        data: the private data.
        params: the paper's parameters.
        noise: the random source of the sparse vector and the oracle.
        oracle: the single-query oracle; ``None`` for :func:`table1_oracle` of ``row``.
        row: the Table 1 row whose oracle is used when ``oracle`` is ``None``.
        enforce_n: refuse ``n`` below the theorem's requirement.

    Raises:
        ValueError: if ``data.n`` is below the theorem's requirement (unless
            ``enforce_n=False``) or ``log_size`` does not match the data's domain.
    """
    if not math.isclose(params.log_size, data.domain.log_size, rel_tol=1e-12):
        raise ValueError(
            f"log_size={params.log_size} does not match the domain's {data.domain.log_size}."
        )
    needed = params.required_n()
    if enforce_n and data.n < needed:
        raise ValueError(
            f"Theory mode needs n >= {needed:.4g} for these parameters, got n={data.n}."
        )
    if params.oracle_epsilon >= 1:
        raise ValueError(
            f"The classical Gaussian mechanism needs eps0 < 1, got eps0={params.oracle_epsilon}."
        )
    chosen = oracle if oracle is not None else table1_oracle(row, params)
    T = params.max_updates
    ledger = PrivacyLedger(epsilon=params.epsilon, delta=params.delta, accountant=PLDAccountant())
    settings = EngineSettings(
        max_updates=T,
        learning_rate=params.learning_rate,
        threshold=0.0,
        absolute_threshold=3 * params.alpha / 4,
        sensitivity_factor=3.0,
        solver_tol=THEORY_HYPOTHESIS_SOLVE.tol,
        after_halt="refuse",
    )
    sv = DworkRothSparse(
        epsilon_per_run=params.sparse_vector_epsilon_per_run, cutoff=T, noise=noise
    )
    return OnlinePMW(
        data,
        settings=settings,
        sparse_vector=sv,
        oracle=chosen,
        oracle_noise_level=params.oracle_noise_multiplier,
        ledger=ledger,
        noise=noise,
        mode=THEORY,
    )


def theory_oracle_event(params: TheoryParameters) -> dp_accounting.DpEvent:
    """One oracle call as the paper states it: ``(eps0, delta0)``-DP."""
    return EpsilonDeltaDpEvent(epsilon=params.oracle_epsilon, delta=params.oracle_delta)
