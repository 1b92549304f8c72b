"""Accountants: a composition of privacy events in, the epsilon it guarantees at delta out."""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from dp_accounting.dp_event import DpEvent
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.pld import privacy_loss_mechanism
from scipy import optimize, special

from pmwcm.mechanisms.accounting.events import (
    EventTotals,
    check_count,
    check_delta,
    check_nonneg,
    flatten,
)


class Accountant(ABC):
    """Stateless composition: ``epsilon(event, delta=...)`` of a (composed) event.

    Every implementation returns an upper bound on the smallest epsilon for
    which the event is (epsilon, delta)-DP (never less), ``0.0`` for an empty
    composition, ``inf`` when no finite epsilon is certified, and raises
    :class:`ValueError` for events it cannot represent or a delta outside
    ``[0, 1)``. Each also takes the minimum with basic composition where that
    applies (both are valid bounds).
    """

    name: str

    @abstractmethod
    def epsilon(self, event: DpEvent, *, delta: float) -> float:
        """The epsilon at which ``event`` is ``(epsilon, delta)``-DP."""


_SNAP = 1e-6  # grid steps: losses this close above a grid point are snapped onto it
_NOT_BUILT = object()  # a cache miss (``None`` caches "no discrete groups")
#: The most grid steps a composition's loss range may span: beyond, the interval grows.
PLD_MAX_GRID = 100_000
#: The coarsest interval used; a wider loss range (beyond any budget the service
#: accepts) gets basic composition, or ``inf`` with a Gaussian: valid upper bounds.
PLD_MAX_INTERVAL = 50.0


class PLDAccountant(Accountant):
    """Numerical composition of privacy loss distributions (Meiser-Mohammadi 2018;
    Koskela et al. 2020), via ``dp_accounting.pld`` with pessimistic rounding.

    Each ``(eps, delta)`` group of ``k`` events is built directly as its exact
    ``k``-fold worst-case PLD (losses ``(k - 2j) eps`` with binomial weights,
    mass ``1 - (1 - delta)^k`` at infinity; KOV 2015 Thm. 3.3) and rounded up
    onto the grid once, so its epsilon exceeds the exact optimum
    (:func:`kov_epsilon`) by at most one ``value_discretization_interval`` (``h``).
    (``dp_accounting`` 0.6.0's own accountant drops ``count`` for randomized
    response and has no (eps, delta) event; hence this path.) Gaussian events
    are merged exactly (``mu^2 = sum k_i / m_i^2``) into one connect-the-dots
    PLD. Binomial points of mass below 1e-30 are moved to the infinite loss.
    Float round-off: a loss within ``1e-6 h`` above a grid point (e.g.
    ``0.5 / 1e-3 = 500.00000000000006``) is snapped to it, and
    ``1e-6 h + 1e-12 max(1, eps)`` is added to the result to stay pessimistic.

    **Bounded memory.** A PLD is a dense array over its loss range, which grows
    with epsilon (``k eps`` for ``k`` pure events), so a fixed ``h`` costs
    memory and time in proportion to the budget (eps 1,000 took gigabytes). Each
    call therefore uses the interval ``max(h, range / PLD_MAX_GRID)``, where
    ``range`` bounds the composition's loss range (:func:`_loss_range`): at most
    about :data:`PLD_MAX_GRID` points whatever the budget. Below a range of
    ``h * PLD_MAX_GRID`` (100 at the default) nothing changes; above, the result
    reads high by at most ``range / PLD_MAX_GRID`` per group (1e-5 relative).
    Pessimistic rounding keeps it an upper bound for any interval. A range over
    ``PLD_MAX_GRID * PLD_MAX_INTERVAL`` (5e6) is answered by basic composition
    (``inf`` if a Gaussian is in it), also an upper bound.

    Args:
        value_discretization_interval: ``h``. The default ``1e-3`` costs
            0.001-0.04 s per call at typical budgets (``1e-4``: ten times more)
            and reads high by at most ``h`` per (eps, delta) group; Gaussian
            compositions read ~1e-6 relative high at eps ~ 5 and ~1e-3 at
            eps ~ 0.03 (measured against the exact analytic Gaussian).
    """

    def __init__(self, *, value_discretization_interval: float = 1e-3) -> None:
        h = float(value_discretization_interval)
        if not (math.isfinite(h) and h > 0):
            raise ValueError(f"value_discretization_interval must be positive and finite, got {h}.")
        self.h = h
        self.name = f"pld(h={h:g})"
        self._groups: dict[tuple[float, float, int, float], pld_lib.PrivacyLossDistribution] = {}
        self._discrete_parts: dict[tuple[object, ...], pld_lib.PrivacyLossDistribution | None] = {}

    def _group_pld(
        self, eps: float, delta: float, k: int, h: float
    ) -> pld_lib.PrivacyLossDistribution:
        key = (eps, delta, k, h)
        cached = self._groups.get(key)
        if cached is not None:
            return cached
        j = np.arange(k + 1, dtype=np.float64)
        log_q = -np.log1p(np.exp(-eps))  # P(loss = +eps) = 1 / (1 + e^-eps)
        logpmf = (
            special.gammaln(k + 1.0) - special.gammaln(j + 1) - special.gammaln(k - j + 1)
            + (k - j) * log_q + j * (log_q - eps) + k * math.log1p(-delta)
        )  # fmt: skip
        pmf = np.exp(logpmf)
        keep = pmf >= 1e-30
        idx = np.ceil((k - 2 * j[keep]) * eps / h - _SNAP).astype(np.int64)
        uniq, inv = np.unique(idx, return_inverse=True)
        mass = np.bincount(inv, weights=pmf[keep])
        infinity = float(-math.expm1(k * math.log1p(-delta)) + pmf[~keep].sum())
        group = pld_lib.PrivacyLossDistribution.create_from_rounded_probability(
            dict(zip(uniq.tolist(), mass.tolist(), strict=True)), min(infinity, 1.0), h
        )
        # Returned from the local, never read back: the service shares an
        # accountant between threads, and another may clear the cache meanwhile.
        if len(self._groups) > 256:
            self._groups.clear()
        self._groups[key] = group
        return group

    def _discrete_part(self, t: EventTotals, h: float) -> pld_lib.PrivacyLossDistribution | None:
        """The composition of every (eps, delta) and Laplace group; ``None`` if there are none.

        Remembered per set of groups: a ledger's later events are mostly
        Gaussian measurements, which change only the merged Gaussian, so a
        check composes this part with one fresh Gaussian PLD instead of
        recomposing every group (the same PLDs composed in the same order).
        """
        key = (tuple(sorted(t.approx.items())), tuple(sorted(t.laplace.items())), h)
        found = self._discrete_parts.get(key, _NOT_BUILT)
        if found is not _NOT_BUILT:
            return found
        plds = [self._group_pld(e, d, k, h) for (e, d), k in key[0]]
        plds += [
            pld_lib.from_laplace_mechanism(b, value_discretization_interval=h).self_compose(k)
            for b, k in key[1]
        ]
        part: pld_lib.PrivacyLossDistribution | None = None
        for p in plds:
            part = p if part is None else part.compose(p)
        if len(self._discrete_parts) > 256:
            self._discrete_parts.clear()
        self._discrete_parts[key] = part
        return part

    def epsilon(self, event: DpEvent, *, delta: float) -> float:
        """See :class:`Accountant`; refuses ``ZCDpEvent`` (no PLD)."""
        delta, t = check_delta(delta), flatten(event)
        if t.nonprivate:
            return math.inf
        if t.zcdp_rho > 0 or t.zcdp_xi > 0:
            raise ValueError("PLDAccountant cannot represent a ZCDpEvent; use ZCDPAccountant.")
        width = _loss_range(t)
        if width > PLD_MAX_GRID * PLD_MAX_INTERVAL:
            return max(0.0, t.basic_epsilon(delta))
        h = max(self.h, width / PLD_MAX_GRID)
        total = self._discrete_part(t, h)
        if t.gauss_mu2 > 0:
            gaussian = gaussian_pld(1.0 / math.sqrt(t.gauss_mu2), h)
            total = gaussian if total is None else total.compose(gaussian)
        if total is None:
            return 0.0
        eps = float(total.get_epsilon_for_delta(delta))
        eps += _SNAP * h + 1e-12 * max(1.0, eps)  # see the class docstring
        return max(0.0, min(eps, t.basic_epsilon(delta)))


class _GaussianLoss(privacy_loss_mechanism.GaussianPrivacyLoss):
    """``dp_accounting``'s Gaussian privacy loss, its hockey-stick divergence vectorised.

    The connect-the-dots construction asks ``get_delta_for_epsilon`` for every
    grid point of the loss range at once (tens of thousands at ``h = 1e-3``),
    and the library inverts the privacy loss one point at a time in Python.
    Without subsampling, for the add/remove pair (what :func:`gaussian_pld`
    builds), the inverse is linear, ``x = -Delta / 2 - eps sigma^2 / Delta``,
    and the divergence is ``P_upper(X <= x) - e^eps P_lower(X <= x)``: the same
    arithmetic on arrays, so the same floats (``tests/test_accounting.py``
    compares the PMFs with the library's own, element for element).
    """

    def get_delta_for_epsilon(self, epsilon: Any) -> Any:
        if self.sampling_prob != 1.0 or isinstance(epsilon, numbers.Number):
            return super().get_delta_for_epsilon(epsilon)
        eps = np.asarray(epsilon, dtype=np.float64)
        x = -0.5 * self.sensitivity - eps * (self._standard_deviation**2) / self.sensitivity
        deltas = self.mu_upper_cdf(x) - np.exp(eps + self.mu_lower_log_cdf(x))
        return np.clip(deltas, 0, 1)


def gaussian_pld(standard_deviation: float, h: float) -> pld_lib.PrivacyLossDistribution:
    """``pld_lib.from_gaussian_mechanism(standard_deviation, value_discretization_interval=h)``.

    The same PLD (pessimistic connect-the-dots, sensitivity 1, add/remove),
    built about 3x faster through :class:`_GaussianLoss`. A ledger checks every
    Gaussian measurement against the merged Gaussian of all of them, so this
    runs once a debit.
    """
    loss = _GaussianLoss(
        standard_deviation,
        sensitivity=1,
        pessimistic_estimate=True,
        adjacency_type=privacy_loss_mechanism.AdjacencyType.REMOVE,
    )
    pmf = pld_lib._create_pld_pmf_from_monotone_privacy_loss(
        loss, pessimistic_estimate=True, value_discretization_interval=h, use_connect_dots=True
    )
    return pld_lib.PrivacyLossDistribution(pmf)


def _loss_range(t: EventTotals) -> float:
    """A bound, up to a constant, on the width of the composed PLD's loss range.

    ``k eps`` per pure group, ``k / b`` per Laplace group (unit sensitivity) and
    ``mu^2 + 20 mu`` for the merged Gaussian (``dp_accounting`` keeps about ten
    standard deviations ``mu`` either side of the mean ``mu^2 / 2``).
    """
    width = sum(k * e for (e, _), k in t.approx.items())
    width += sum(k / b for b, k in t.laplace.items())
    mu = math.sqrt(t.gauss_mu2)
    return float(width + mu * mu + 20.0 * mu)


def _zcdp_epsilon(rho: float, xi: float, delta: float) -> float:
    """(xi, rho)-zCDP -> (eps, delta): Canonne-Kamath-Steinke 2020, Prop. 12 / Cor. 13.

    For every order ``a > 1`` (Renyi divergence ``<= xi + a rho``), the mechanism
    is (eps, delta)-DP with ``eps = xi + a rho + log(1 - 1/a) + (log(1/delta) -
    log a) / (a - 1)``; any ``a`` is valid, so we minimise numerically and also
    keep Bun-Steinke 2016 Prop. 1.3, ``xi + rho + 2 sqrt(rho log(1/delta))``.
    """
    if rho == 0:
        return xi
    if delta == 0:
        return math.inf
    log_inv = -math.log(delta)

    def eps_at(log_a_minus_1: float) -> float:
        a = 1.0 + math.exp(log_a_minus_1)
        return xi + a * rho + math.log1p(-1.0 / a) + (log_inv - math.log(a)) / (a - 1.0)

    guess = math.log(math.sqrt(log_inv / rho))
    res = optimize.minimize_scalar(
        eps_at, bounds=(guess - 20.0, guess + 20.0), method="bounded", options={"xatol": 1e-9}
    )
    classic = xi + rho + 2.0 * math.sqrt(rho * log_inv)
    return max(0.0, min(float(res.fun), eps_at(guess), classic))


class ZCDPAccountant(Accountant):
    """Zero-concentrated DP (Bun-Steinke 2016): rho adds up under composition.

    Pure ``eps``-DP -> ``rho = eps^2 / 2`` (BS16 Prop. 1.4); Gaussian multiplier
    ``m`` -> ``rho = 1 / (2 m^2)`` (Prop. 1.6); Laplace ``b`` -> pure ``1/b``;
    ``ZCDpEvent(rho, xi)`` as is. Converted by :func:`_zcdp_epsilon`. Refuses
    (ValueError) ``EpsilonDeltaDpEvent`` with ``delta > 0``.
    """

    name = "zcdp"

    def epsilon(self, event: DpEvent, *, delta: float) -> float:
        """See :class:`Accountant`."""
        delta, t = check_delta(delta), flatten(event)
        if t.nonprivate:
            return math.inf
        groups = t.pure_groups()
        if any(d > 0 for _, d, _ in groups):
            raise ValueError("zCDP cannot represent an EpsilonDeltaDpEvent with delta > 0.")
        rho = t.zcdp_rho + t.gauss_mu2 / 2 + math.fsum(k * e * e / 2 for e, _, k in groups)
        return min(_zcdp_epsilon(rho, t.zcdp_xi, delta), t.basic_epsilon(delta))


def _drv_group(eps0: float, delta0: float, k: int, dprime: float) -> float:
    dprime = min(dprime, 0.5)  # a smaller delta' is a valid (weaker) claim
    if eps0 <= 0.5 and delta0 <= 0.5:  # the paper's statement (Thm. 3.9, hypotheses hold)
        return math.sqrt(2 * k * math.log(1 / dprime)) * eps0 + 2 * k * eps0**2
    # Dwork-Roth 2014 Thm. 3.20, valid for every eps0.
    return math.sqrt(2 * k * math.log(1 / dprime)) * eps0 + k * eps0 * math.expm1(eps0)


class DRVAccountant(Accountant):
    """Strong composition (Dwork-Rothblum-Vadhan 2010) as the paper states it (theory mode).

    ``k``-fold ``(eps0, delta0)``-DP is ``(eps, delta' + k delta0)``-DP with
    ``eps = sqrt(2 k log(1/delta')) eps0 + 2 k eps0^2`` (Ullman 2015, composition
    theorem; needs ``eps0, delta0, delta' <= 1/2``, else Dwork-Roth 2014 Thm.
    3.20 with ``k eps0 (e^eps0 - 1)`` is used). Heterogeneous compositions: the
    slack ``delta - sum k_g delta0_g`` is split equally over the homogeneous
    groups ``g``, each group takes the better of DRV and ``k_g eps0_g``, and the
    groups add up by basic composition. Refuses Gaussian and zCDP events: in
    theory mode an oracle reports itself as ``EpsilonDeltaDpEvent(eps0, delta0)``.
    """

    name = "drv"

    def epsilon(self, event: DpEvent, *, delta: float) -> float:
        """See :class:`Accountant`."""
        delta, t = check_delta(delta), flatten(event)
        if t.nonprivate:
            return math.inf
        if t.gauss_mu2 > 0 or t.zcdp_rho > 0 or t.zcdp_xi > 0:
            raise ValueError("DRVAccountant composes (eps0, delta0) events only, not Gaussian.")
        groups, basic = t.pure_groups(), t.basic_epsilon(delta)
        slack = delta - math.fsum(k * d for _, d, k in groups)
        if not groups or slack <= 0:
            return 0.0 if not groups else basic
        share = slack / len(groups)
        total = math.fsum(min(_drv_group(e, d, k, share), k * e) for e, d, k in groups)
        return min(total, basic)


def kov_epsilon(eps0: float, k: int, delta: float) -> float:
    """Optimal epsilon of the ``k``-fold adaptive composition of pure ``eps0``-DP.

    Exact (Kairouz-Oh-Viswanath 2015, Thm. 3.3; Murtagh-Vadhan 2016 for every
    epsilon): with ``L_j = (k - 2j) eps0`` and ``p_j = C(k,j) e^{(k-j) eps0} /
    (1 + e^eps0)^k``, ``delta(eps) = sum_{L_j > eps} p_j (1 - e^{eps - L_j})``;
    on each segment between losses this is ``P - e^eps Q``, inverted in closed
    form. Returns the smallest ``eps >= 0`` with ``delta(eps) <= delta``.
    """
    eps0, k, delta = check_nonneg(eps0, "eps0"), check_count(k, name="k"), check_delta(delta)
    if k == 0 or eps0 == 0:
        return 0.0
    if math.isinf(eps0):
        return math.inf
    j = np.arange(k + 1, dtype=np.float64)
    loss = (k - 2 * j) * eps0
    log_q = -np.log1p(np.exp(-eps0))
    logpmf = special.gammaln(k + 1.0) - special.gammaln(j + 1) - special.gammaln(k - j + 1)
    logpmf += (k - j) * log_q + j * (log_q - eps0)
    pos = loss > 0
    p_cum, q_cum = np.cumsum(np.exp(logpmf[pos])), np.cumsum(np.exp(logpmf[pos] - loss[pos]))
    lower = np.append(loss[pos][1:], 0.0)  # segment m is [lower_m, L_m]
    # delta(L_m) rises with m and delta(L_0) = 0: the answer lies in the last
    # segment whose upper end already meets delta.
    m = int(np.nonzero(p_cum - np.exp(loss[pos]) * q_cum <= delta)[0][-1])
    if p_cum[m] <= delta:
        return float(lower[m])
    return float(min(max(math.log((p_cum[m] - delta) / q_cum[m]), lower[m]), loss[m]))
