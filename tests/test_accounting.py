"""Contract tests for the accountants, the ledger and Gaussian calibration.

Reference values: :func:`kov_epsilon` (exact optimal composition of pure DP,
itself checked against Kairouz-Oh-Viswanath's Theorem 3.3 breakpoints) and
``dp_accounting.get_epsilon_gaussian`` (the exact analytic Gaussian mechanism,
Balle-Wang 2018). PLD results may exceed the optimum only by the documented
discretization error: at most ``h`` per (eps, delta) group, and about ``1e-6 h``
when eps0 lies on the grid.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from dp_accounting import dp_event as de
from dp_accounting import get_epsilon_gaussian
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from pmwcm.mechanisms.accounting import (
    Accountant,
    BudgetExceededError,
    DRVAccountant,
    EpsilonDeltaDpEvent,
    PLDAccountant,
    PrivacyLedger,
    ZCDPAccountant,
    calibrate_gaussian_multiplier,
    kov_epsilon,
)
from pmwcm.mechanisms.accounting.accountants import gaussian_pld

H = 1e-3  # the PLD default discretization


def pure(eps: float, k: int = 1) -> de.DpEvent:
    return de.SelfComposedDpEvent(EpsilonDeltaDpEvent(epsilon=eps), k)


def gauss(m: float, k: int = 1) -> de.DpEvent:
    return de.SelfComposedDpEvent(de.GaussianDpEvent(m), k)


ACCOUNTANTS: list[Accountant] = [PLDAccountant(), ZCDPAccountant(), DRVAccountant()]


@pytest.fixture(params=ACCOUNTANTS, ids=lambda a: a.name)
def accountant(request: pytest.FixtureRequest) -> Accountant:
    acc: Accountant = request.param
    return acc


# --- the contract every accountant must pass -------------------------------------------


def test_empty_compositions_cost_nothing(accountant: Accountant) -> None:
    for event in (de.NoOpDpEvent(), de.ComposedDpEvent([]), pure(0.5, 0), pure(0.0, 3)):
        assert accountant.epsilon(event, delta=1e-6) == 0.0


def test_non_private_is_infinite(accountant: Accountant) -> None:
    for event in (de.NonPrivateDpEvent(), EpsilonDeltaDpEvent(epsilon=math.inf)):
        assert accountant.epsilon(de.ComposedDpEvent([pure(0.1), event]), delta=1e-6) == math.inf


def test_one_pure_event_at_delta_zero_is_exact(accountant: Accountant) -> None:
    assert accountant.epsilon(pure(0.3), delta=0.0) == 0.3
    assert accountant.epsilon(pure(0.3, 4), delta=0.0) == pytest.approx(1.2, rel=1e-15)


@pytest.mark.parametrize("bad", [-0.1, 1.0, float("nan")])
def test_bad_delta_is_refused(accountant: Accountant, bad: float) -> None:
    with pytest.raises(ValueError, match=re.escape(f"delta={bad}")):
        accountant.epsilon(pure(0.1), delta=bad)


def test_bad_events_are_refused(accountant: Accountant) -> None:
    with pytest.raises(ValueError, match="count=-1"):
        accountant.epsilon(pure(0.1, -1), delta=1e-6)
    with pytest.raises(ValueError, match="UnsupportedDpEvent"):
        accountant.epsilon(de.UnsupportedDpEvent(), delta=1e-6)


@pytest.mark.parametrize("eps0", [0.01, 0.1, 0.7])
@pytest.mark.parametrize("k", [1, 5, 20])
def test_never_below_optimal_and_monotone_in_count(
    accountant: Accountant, eps0: float, k: int
) -> None:
    for delta in (1e-9, 1e-6, 1e-3):
        got = accountant.epsilon(pure(eps0, k), delta=delta)
        assert got >= kov_epsilon(eps0, k, delta) - 1e-12
        assert got <= k * eps0  # never worse than basic composition
        assert accountant.epsilon(pure(eps0, k + 1), delta=delta) >= got


# --- exact reference: Kairouz-Oh-Viswanath ---------------------------------------------


@pytest.mark.parametrize(("eps0", "k"), [(0.1, 10), (0.5, 7), (1.0, 4), (0.03, 60)])
def test_kov_matches_theorem_3_3_breakpoints(eps0: float, k: int) -> None:
    # KOV15 Thm. 3.3: (k - 2i) eps0 is optimal at
    # delta_i = sum_{l<i} C(k,l) (e^{(k-l) eps0} - e^{(k-2i+l) eps0}) / (1 + e^eps0)^k.
    for i in range(1, k // 2 + 1):
        delta_i = (
            sum(
                special.comb(k, ell)
                * (math.exp((k - ell) * eps0) - math.exp((k - 2 * i + ell) * eps0))
                for ell in range(i)
            )
            / (1 + math.exp(eps0)) ** k
        )
        if 1e-300 < delta_i < 1:
            assert kov_epsilon(eps0, k, delta_i) == pytest.approx((k - 2 * i) * eps0, abs=1e-9)


def test_kov_edge_cases() -> None:
    assert kov_epsilon(0.2, 5, 0.0) == pytest.approx(1.0)
    assert kov_epsilon(0.2, 0, 1e-6) == 0.0
    assert kov_epsilon(0.0, 5, 1e-6) == 0.0
    assert kov_epsilon(math.inf, 2, 1e-6) == math.inf
    assert kov_epsilon(0.1, 3, 0.999) == 0.0  # delta(0) < 0.999
    # k = 1: delta(eps) = (e^eps0 - e^eps) / (1 + e^eps0) on [0, eps0].
    eps0, delta = 0.5, 0.01
    assert kov_epsilon(eps0, 1, delta) == pytest.approx(
        math.log(math.exp(eps0) - delta * (1 + math.exp(eps0)))
    )
    for bad, match in [((-1.0, 2, 0.1), "eps0=-1.0"), ((0.1, -2, 0.1), "k=-2")]:
        with pytest.raises(ValueError, match=re.escape(match)):
            kov_epsilon(*bad)


@pytest.mark.parametrize("h", [1e-3, 1e-4])
@pytest.mark.parametrize("k", [1, 5, 20])
@pytest.mark.parametrize("eps0", [0.01, 0.0123, 0.1, 0.5, 1.0])
def test_pld_equals_kov_within_discretization(h: float, k: int, eps0: float) -> None:
    acc = PLDAccountant(value_discretization_interval=h)
    for delta in (1e-9, 1e-6, 1e-3):
        exact = kov_epsilon(eps0, k, delta)
        got = acc.epsilon(pure(eps0, k), delta=delta)
        assert exact <= got <= exact + h + 1e-8
        if eps0 != 0.0123:  # eps0 on the grid: exact up to the round-off margin
            assert got <= exact + 1e-8


# --- ordering: PLD <= zCDP <= DRV --------------------------------------------------------


@pytest.mark.parametrize("eps0", [0.01, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("k", [1, 5, 20, 100])
@pytest.mark.parametrize("delta", [1e-9, 1e-6, 1e-3])
def test_pure_ordering_pld_zcdp_drv(eps0: float, k: int, delta: float) -> None:
    pld, zcdp, drv = (a.epsilon(pure(eps0, k), delta=delta) for a in ACCOUNTANTS)
    assert pld <= zcdp + 1e-12
    assert zcdp <= drv + 1e-12


@pytest.mark.parametrize("m", [0.7, 2.0, 10.0, 50.0])
@pytest.mark.parametrize("k", [1, 10, 100])
def test_gaussian_pld_tight_and_below_zcdp(m: float, k: int) -> None:
    delta = 1e-6
    exact = get_epsilon_gaussian(m / math.sqrt(k), delta)
    pld = PLDAccountant().epsilon(gauss(m, k), delta=delta)
    zcdp = ZCDPAccountant().epsilon(gauss(m, k), delta=delta)
    assert exact - 1e-9 <= pld <= exact * (1 + 2e-3) + 1e-6
    assert pld <= zcdp
    # Composition of Gaussians is exact in quadrature, however it is written.
    spread = de.ComposedDpEvent([gauss(m, k - k // 2), gauss(m, k // 2)])
    assert PLDAccountant().epsilon(spread, delta=delta) == pld


@pytest.mark.parametrize("sd", [0.05, 0.3, 1.0, 4.6, 40.0])
@pytest.mark.parametrize("h", [H, 2.5e-3])
def test_gaussian_pld_is_the_librarys_own_element_for_element(sd: float, h: float) -> None:
    """The vectorised construction builds dp_accounting's PMF, not an approximation of it."""
    ours = gaussian_pld(sd, h)._pmf_remove
    theirs = pld_lib.from_gaussian_mechanism(sd, value_discretization_interval=h)._pmf_remove
    assert type(ours) is type(theirs)  # sparse at large sd, dense below
    ours, theirs = ours.to_dense_pmf(), theirs.to_dense_pmf()
    assert ours._lower_loss == theirs._lower_loss
    assert ours._infinity_mass == theirs._infinity_mass
    assert np.array_equal(ours._probs, theirs._probs)


def test_pld_remembers_the_discrete_groups_without_changing_a_total() -> None:
    """A ledger's checks (groups fixed, the merged Gaussian growing) equal the library's
    composition built from scratch each time, on one accountant and on fresh ones."""
    delta, shared = 1e-6, PLDAccountant()
    groups = [pure(0.0068, 56), EpsilonDeltaDpEvent(epsilon=0.1, delta=1e-8)]
    laplace = de.SelfComposedDpEvent(de.LaplaceDpEvent(20.0), 3)
    for i, m in enumerate([9.0, 6.0, 4.6, 4.6, 3.0]):
        event = de.ComposedDpEvent([*groups, laplace, gauss(m, i + 1)])
        group_plds = [
            PLDAccountant()._group_pld(0.0068, 0.0, 56, H),
            PLDAccountant()._group_pld(0.1, 1e-8, 1, H),
            pld_lib.from_laplace_mechanism(20.0, value_discretization_interval=H).self_compose(3),
            pld_lib.from_gaussian_mechanism(m / math.sqrt(i + 1), value_discretization_interval=H),
        ]
        scratch = group_plds[0]
        for p in group_plds[1:]:
            scratch = scratch.compose(p)
        expected = float(scratch.get_epsilon_for_delta(delta))
        expected += 1e-6 * H + 1e-12 * max(1.0, expected)
        assert shared.epsilon(event, delta=delta) == expected
        assert PLDAccountant().epsilon(event, delta=delta) == expected
    # No discrete group at all: the Gaussian alone, as before.
    alone = PLDAccountant().epsilon(gauss(3.0), delta=delta)
    assert alone == shared.epsilon(gauss(3.0), delta=delta)


def test_gaussian_refuses_pure_delta() -> None:
    for acc in (PLDAccountant(), ZCDPAccountant()):
        assert acc.epsilon(gauss(3.0), delta=0.0) == math.inf
        assert acc.epsilon(gauss(0.0), delta=1e-6) == math.inf
        assert acc.epsilon(gauss(math.inf), delta=1e-6) == 0.0


# --- zCDP ---------------------------------------------------------------------------------


def test_zcdp_conversion_is_at_least_as_tight_as_bun_steinke() -> None:
    acc = ZCDPAccountant()
    for rho in (1e-4, 0.01, 0.5, 5.0):
        for delta in (1e-10, 1e-6, 1e-2):
            got = acc.epsilon(de.ZCDpEvent(rho), delta=delta)
            assert got <= rho + 2 * math.sqrt(rho * math.log(1 / delta)) + 1e-12
            # ... and never below the exact Gaussian with that rho (m = 1/sqrt(2 rho)).
            assert got >= get_epsilon_gaussian(1 / math.sqrt(2 * rho), delta) - 1e-9
    assert acc.epsilon(de.ZCDpEvent(0.1, xi=0.2), delta=1e-6) == pytest.approx(
        0.2 + acc.epsilon(de.ZCDpEvent(0.1), delta=1e-6)
    )


def test_zcdp_maps_each_event_to_rho() -> None:
    acc, delta = ZCDPAccountant(), 1e-6
    same = [  # (compositions long enough that basic composition is not the better bound)
        (pure(0.05, 40), de.ZCDpEvent(40 * 0.05**2 / 2)),
        (gauss(2.0, 4), de.ZCDpEvent(4 / (2 * 2.0**2))),
        (de.SelfComposedDpEvent(de.LaplaceDpEvent(20.0), 40), de.ZCDpEvent(40 * 0.05**2 / 2)),
    ]
    for event, reference in same:
        assert acc.epsilon(event, delta=delta) == pytest.approx(
            acc.epsilon(reference, delta=delta), rel=1e-12
        )


def test_zcdp_and_pld_refuse_what_they_cannot_represent() -> None:
    with pytest.raises(ValueError, match="delta > 0"):
        ZCDPAccountant().epsilon(EpsilonDeltaDpEvent(epsilon=0.1, delta=1e-7), delta=1e-6)
    with pytest.raises(ValueError, match="ZCDpEvent"):
        PLDAccountant().epsilon(de.ZCDpEvent(0.1), delta=1e-6)
    with pytest.raises(ValueError, match="Gaussian"):
        DRVAccountant().epsilon(gauss(1.0), delta=1e-6)


# --- DRV (theory mode) --------------------------------------------------------------------


def test_drv_is_the_papers_formula() -> None:
    eps0, delta0, k, delta = 0.01, 1e-9, 200, 1e-5
    event = de.SelfComposedDpEvent(EpsilonDeltaDpEvent(epsilon=eps0, delta=delta0), k)
    dprime = delta - k * delta0
    expected = math.sqrt(2 * k * math.log(1 / dprime)) * eps0 + 2 * k * eps0**2
    assert DRVAccountant().epsilon(event, delta=delta) == pytest.approx(expected, rel=1e-12)
    # Not enough delta for k * delta0: only basic composition, which needs k * delta0 <= delta.
    assert DRVAccountant().epsilon(event, delta=k * delta0 / 2) == math.inf


@pytest.mark.parametrize(("eps", "delta", "t"), [(1.0, 1e-6, 50), (0.5, 1e-9, 1000)])
def test_drv_reproduces_the_papers_parameter_choice(eps: float, delta: float, t: int) -> None:
    # Ullman 2015, composition theorem: eps0 = eps / sqrt(8 T log(2/delta)), delta0 = delta/(2T).
    eps0, delta0 = eps / math.sqrt(8 * t * math.log(2 / delta)), delta / (2 * t)
    event = de.SelfComposedDpEvent(EpsilonDeltaDpEvent(epsilon=eps0, delta=delta0), t)
    assert DRVAccountant().epsilon(event, delta=delta) <= eps


def test_drv_heterogeneous_splits_delta_over_groups() -> None:
    a, b, delta = (0.02, 100), (0.8, 3), 1e-6
    event = de.ComposedDpEvent([pure(*a), pure(*b)])
    share = delta / 2
    first = math.sqrt(2 * a[1] * math.log(1 / share)) * a[0] + 2 * a[1] * a[0] ** 2
    second = min(  # eps0 > 1/2: Dwork-Roth Thm. 3.20, or basic composition
        math.sqrt(2 * b[1] * math.log(1 / share)) * b[0] + b[1] * b[0] * math.expm1(b[0]),
        b[1] * b[0],
    )
    assert DRVAccountant().epsilon(event, delta=delta) == pytest.approx(first + second)


# --- calibration ------------------------------------------------------------------------


@pytest.mark.parametrize("acc", [PLDAccountant(), ZCDPAccountant()], ids=lambda a: a.name)
@pytest.mark.parametrize("fixed", [None, pure(0.02, 50)], ids=["alone", "with_sv"])
def test_calibration_round_trip(acc: Accountant, fixed: de.DpEvent | None) -> None:
    eps, delta, count, rtol = 1.0, 1e-6, 20, 1e-4
    base = de.NoOpDpEvent() if fixed is None else fixed

    def total(m: float) -> float:
        return acc.epsilon(de.ComposedDpEvent([base, gauss(m, count)]), delta=delta)

    m = calibrate_gaussian_multiplier(
        fixed=fixed, gaussian_count=count, epsilon=eps, delta=delta, accountant=acc, rtol=rtol
    )
    assert total(m) <= eps  # fits ...
    assert total(m / (1 + 2 * rtol)) > eps  # ... and is (nearly) the smallest that does
    # multiplier -> epsilon -> multiplier
    again = calibrate_gaussian_multiplier(
        fixed=fixed, gaussian_count=count, epsilon=total(m), delta=delta, accountant=acc
    )
    assert again == pytest.approx(m, rel=2 * rtol)


def test_calibration_refuses_impossible_budgets() -> None:
    acc = ZCDPAccountant()
    with pytest.raises(ValueError, match="fixed alone"):
        calibrate_gaussian_multiplier(
            fixed=pure(0.5, 3), gaussian_count=3, epsilon=1.0, delta=1e-6, accountant=acc
        )
    with pytest.raises(ValueError, match="No Gaussian multiplier"):
        calibrate_gaussian_multiplier(
            fixed=None, gaussian_count=3, epsilon=1.0, delta=0.0, accountant=acc
        )
    with pytest.raises(ValueError, match="gaussian_count=0"):
        calibrate_gaussian_multiplier(
            fixed=None, gaussian_count=0, epsilon=1.0, delta=1e-6, accountant=acc
        )
    with pytest.raises(ValueError, match="epsilon=nan"):
        calibrate_gaussian_multiplier(
            fixed=None, gaussian_count=1, epsilon=math.nan, delta=1e-6, accountant=acc
        )


# --- events and the ledger ------------------------------------------------------------------


def test_epsilon_delta_event_validates_and_serializes() -> None:
    with pytest.raises(ValueError, match=re.escape("epsilon=-0.5")):
        EpsilonDeltaDpEvent(epsilon=-0.5)
    with pytest.raises(ValueError, match=re.escape("delta=1.5")):
        EpsilonDeltaDpEvent(epsilon=0.5, delta=1.5)
    with pytest.raises(ValueError, match="epsilon=nan"):
        EpsilonDeltaDpEvent(epsilon=math.nan)
    event = de.SelfComposedDpEvent(EpsilonDeltaDpEvent(epsilon=0.5, delta=1e-7), 3)
    assert de.DpEvent.from_named_tuple(event.to_named_tuple()) == event


def ledger(acc: Accountant | None = None, epsilon: float = 1.0) -> PrivacyLedger:
    return PrivacyLedger(epsilon=epsilon, delta=1e-6, accountant=acc or PLDAccountant())


def test_ledger_records_spends() -> None:
    book = ledger()
    assert book.spent_epsilon() == 0.0 and book.entries == ()
    assert book.spent_event() == de.NoOpDpEvent()
    first = book.spend(pure(0.5), label="sv")
    second = book.spend(pure(0.5), label="oracle 1")  # an exact split fits the budget
    assert book.entries == (first, second)
    assert first.label == "sv" and 0.5 - 1e-5 < first.epsilon_after <= 0.5
    assert second.epsilon_after <= 1.0 and book.spent_epsilon() == second.epsilon_after
    assert book.remaining_epsilon() == 1.0 - second.epsilon_after
    assert book.spent_event() == de.ComposedDpEvent([pure(0.5), pure(0.5)])


def test_ledger_refuses_over_budget_with_no_side_effect() -> None:
    book = ledger()
    book.spend(pure(0.6), label="sv")
    before = (book.entries, book.spent_epsilon())
    with pytest.raises(BudgetExceededError, match=r"oracle.*over the budget epsilon=1\.0.*left"):
        book.spend(pure(0.6), label="oracle")
    with pytest.raises(BudgetExceededError, match="this event"):
        book.check(gauss(0.5))
    assert (book.entries, book.spent_epsilon()) == before
    book.check(pure(0.3))  # fits: no error, still no side effect
    assert (book.entries, book.spent_epsilon()) == before


def test_ledger_is_atomic_when_the_accountant_refuses() -> None:
    book = ledger(ZCDPAccountant())
    with pytest.raises(ValueError, match="delta > 0"):
        book.spend(EpsilonDeltaDpEvent(epsilon=0.1, delta=1e-8), label="approx")
    assert book.entries == ()


def test_ledger_edge_cases() -> None:
    unlimited = ledger(epsilon=math.inf)
    assert unlimited.spend(de.NonPrivateDpEvent(), label="raw").epsilon_after == math.inf
    for bad, match in [(0.0, "epsilon=0.0"), (-1.0, "epsilon=-1.0"), (math.nan, "epsilon=nan")]:
        with pytest.raises(ValueError, match=re.escape(match)):
            ledger(epsilon=bad)
    with pytest.raises(ValueError, match=re.escape("delta=1.0")):
        PrivacyLedger(epsilon=1.0, delta=1.0, accountant=ZCDPAccountant())
    with pytest.raises(TypeError, match="Accountant"):
        PrivacyLedger(epsilon=1.0, delta=1e-6, accountant="pld")  # type: ignore[arg-type]


EVENTS = st.one_of(
    st.builds(pure, st.floats(0.01, 0.4), st.integers(1, 4)),
    st.builds(gauss, st.floats(1.0, 30.0), st.integers(1, 4)),
)


@settings(max_examples=25, deadline=None)
@given(events=st.lists(EVENTS, min_size=1, max_size=8), budget=st.floats(0.3, 3.0))
def test_ledger_invariants(events: list[de.DpEvent], budget: float) -> None:
    """spent_epsilon is monotone, never exceeds the budget, and a refusal changes nothing."""
    for acc in (PLDAccountant(), ZCDPAccountant()):
        book, spent = ledger(acc, epsilon=budget), 0.0
        for i, event in enumerate(events):
            before = book.entries
            try:
                book.spend(event, label=f"e{i}")
            except BudgetExceededError:
                assert book.entries == before
            assert spent <= book.spent_epsilon() <= budget
            spent = book.spent_epsilon()


# --- bounded memory at any budget ---------------------------------------------------------

_BOUNDED_PROBE = """
import math, time, tracemalloc
from dp_accounting import dp_event as de
from pmwcm.mechanisms.accounting import EpsilonDeltaDpEvent, PLDAccountant
acc = PLDAccountant()
events = [
    de.SelfComposedDpEvent(EpsilonDeltaDpEvent(epsilon=EPS / 20), 20),
    de.SelfComposedDpEvent(de.LaplaceDpEvent(1.0 / EPS), 3),
    de.SelfComposedDpEvent(de.GaussianDpEvent(1.0 / EPS), 4),
]
tracemalloc.start()
start = time.perf_counter()
for i, event in enumerate(events):
    got = acc.epsilon(event, delta=1e-6)
    assert got > 0 and (math.isfinite(got) or (i == 2 and EPS > 1e4)), (i, got)
peak = tracemalloc.get_traced_memory()[1]
print(time.perf_counter() - start, peak)
"""


@pytest.mark.parametrize("eps", [1e3, 1e6])
def test_pld_memory_is_bounded_at_any_epsilon(eps: float) -> None:
    """The grid spacing grows with the losses' range, so the grid never outgrows ~1e5 points
    (eps 1,000 once took 2.3 GB and 99 s; eps 10,000 a MemoryError), and stays an upper
    bound. The grid's size bounds the time too; time itself is not asserted (a loaded CI
    machine is no clock), only the memory the grid takes."""
    import subprocess
    import sys

    code = _BOUNDED_PROBE.replace("EPS", repr(eps))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    peak = float(out.stdout.split()[1])
    assert peak < 200 * 2**20, peak


def test_pld_grid_keeps_the_interval_at_typical_budgets_and_stays_an_upper_bound() -> None:
    """Below a range of 100 (h * 1e5) the configured interval is used as before; beyond,
    the coarser grid still rounds up: never below the optimum, at most one interval above."""
    acc = PLDAccountant()
    for eps0, k in ((1.0, 100), (0.5, 20)):
        exact = kov_epsilon(eps0, k, 1e-6)
        assert exact <= acc.epsilon(pure(eps0, k), delta=1e-6) <= exact + 1e-8
    for eps0, k in ((1.0, 400), (0.5, 600)):
        exact = kov_epsilon(eps0, k, 1e-6)
        assert exact <= acc.epsilon(pure(eps0, k), delta=1e-6) <= exact + eps0 * k * 1e-5 + 1e-8
