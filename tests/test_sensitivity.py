"""The sparse vector's query is as sensitive as the engine says, and no less.

The engine feeds the sparse vector ``q(D) = L_D(theta_hat) - L_D(theta_D)``
(``theta_hat`` fixed by the public hypothesis, ``theta_D`` certified within
``tau`` of ``min L_D``) divided by :meth:`CMRound.sensitivity`, ``c S / n +
tau``. The privacy of the whole engine rests on that bound (DESIGN.md section
3): under replace-one, ``q(D') - q(D) = (1/n) [g(theta_hat) - g(theta*)]`` for
``g = l_x' - l_x`` and ``theta*`` one of the two minimisers, and each record's
loss moves by at most ``S`` between two points of ``Theta``, so ``2 S / n``.

For every loss of the catalogue at several radii and L2 strengths, on small
domains with a few records, we compute ``q`` exactly as the engine does
(:class:`~pmwcm.rounds.CMRound` at the engine's tolerance) for

* random neighbours (one random record replaced by a random cell), and
* adversarial neighbours (every record moved to every cell of the universe,
  the exhaustive search, keeping the largest change),

and ``theta_hat`` both the minimiser of a random hypothesis (what the engine
uses) and a random point of the sphere ``||theta|| = R`` (any public
``theta_hat`` must be covered). Every change must be ``<= 2 S / n + tau`` (and
so ``<= 3 S / n + tau``, the paper's constant). ``test_two_s_over_n_is_tight``
shows the test has teeth: a hand-checkable hinge example moves ``q`` by exactly
``2 S / n``, so a ``S / n`` bound (or a sensitivity factor below 2) is wrong.
These checks are deterministic given the seed and pass for seeds 0..99.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from pmwcm.domain import Domain
from pmwcm.histogram import DenseHistogram
from pmwcm.oracles import NoisyGradientDescent
from pmwcm.private_data import PrivateData
from pmwcm.queries import CMQuery
from pmwcm.rounds import CMRound

BINARY = Domain.from_sizes({"a": 2, "b": 3, "y": 2})  # 12 cells, d = 5
REAL = Domain.from_sizes({"a": 2, "b": 3, "y": 3})  # 18 cells, d = 5
SMOOTH = [("logistic", None), ("squared", None), ("huber", 0.5), ("smoothed_hinge", 1.0)]
NONSMOOTH = [("hinge", None), ("quantile", 0.2), ("absolute", None)]
CLASSIFICATION = {"logistic", "smoothed_hinge", "hinge"}


@dataclass(frozen=True)
class Case:
    """A catalogue query on a small universe, with the engine's solver tolerance."""

    loss: str
    param: float | None
    radius: float
    l2: float
    tol: float

    @property
    def domain(self) -> Domain:
        return BINARY if self.loss in CLASSIFICATION else REAL

    def round(self) -> CMRound:
        query = CMQuery(
            loss=self.loss,
            target="y",
            features=("a", "b"),
            radius=self.radius,
            l2=self.l2,
            loss_param=self.param,
        )
        return CMRound(
            problem=query.compile(self.domain),
            oracle=NoisyGradientDescent(),
            tol=self.tol,
            sensitivity_factor=2.0,
            learning_rate=1.0,
        )

    def __str__(self) -> str:
        return f"{self.loss}({self.param})-R{self.radius}-l2{self.l2}"


# Smooth losses at the practical default tau = 1e-8. The Moreau-smoothed solves of the
# non-smooth losses are slow on these tiny sparse tables below tau ~ 1e-4 (one quantile
# table took 0.02 s at 1e-4, 1.2 s at 1e-5, 25 s at 1e-8) and do not certify at all
# beyond R = 1, so they run at tau = 1e-4 (the engine's tau is a setting and enters the
# bound; here it is < 0.1% of S / n) and R <= 1.
CASES = [
    Case(loss, param, radius, l2, 1e-8)
    for loss, param in SMOOTH
    for radius, l2 in [(0.5, 0.0), (1.0, 0.0), (3.0, 0.0), (1.0, 0.1)]
] + [
    Case(loss, param, radius, l2, 1e-4)
    for loss, param in NONSMOOTH
    for radius, l2 in [(0.5, 0.0), (1.0, 0.0), (0.5, 0.1)]
]


def q_of(round_: CMRound, domain: Domain, records: np.ndarray, theta_hat: np.ndarray) -> float:
    """The engine's sparse-vector query on ``records`` (read through PrivateData)."""
    data = PrivateData.from_records(domain, records)
    return round_.error(data.marginal(round_.clique), theta_hat)


def hypothesis_points(case: Case, round_: CMRound, rng: np.random.Generator) -> list[np.ndarray]:
    """``theta_hat`` as the engine makes it, and a random point of the sphere."""
    dhat = DenseHistogram(
        case.domain, rng.dirichlet(np.full(case.domain.size, 0.5)).reshape(case.domain.shape)
    )
    engine_like = round_.hypothesis_answer(dhat.marginal(round_.clique))
    sphere = rng.normal(size=round_.problem.dim)
    return [engine_like, case.radius * sphere / np.linalg.norm(sphere)]


def largest_changes(
    case: Case, rng: np.random.Generator, *, datasets: int = 2, random_pairs: int = 6
) -> tuple[float, float, float]:
    """Max ``|q(D) - q(D')|`` over random and over adversarial neighbours, and ``n``-scaled."""
    round_ = case.round()
    domain = case.domain
    cells = np.indices(domain.shape).reshape(len(domain), -1).T
    worst_random = worst_adversarial = 0.0
    worst_ratio = 0.0  # max over both of |change| * n / S
    for _ in range(datasets):
        n = int(rng.integers(3, 8))
        records = cells[rng.integers(0, domain.size, n)]
        for theta_hat in hypothesis_points(case, round_, rng):
            base = q_of(round_, domain, records, theta_hat)
            bound = round_.sensitivity(n)
            paper_bound = 3.0 * round_.scale / n + case.tol  # the paper's 3 S / n (+ tau)
            for _ in range(random_pairs):
                other = records.copy()
                other[rng.integers(n)] = cells[rng.integers(domain.size)]
                change = abs(q_of(round_, domain, other, theta_hat) - base)
                assert change <= bound, (str(case), "random", records.tolist(), other.tolist())
                worst_random = max(worst_random, change / bound)
            # Exhaustive: every record (one per distinct cell suffices) to every cell.
            _, first = np.unique(records, axis=0, return_index=True)
            for i in first:
                for cell in cells:
                    other = records.copy()
                    other[i] = cell
                    change = abs(q_of(round_, domain, other, theta_hat) - base)
                    assert change <= bound, (str(case), "adversarial", records.tolist(), i, cell)
                    assert change <= paper_bound
                    worst_adversarial = max(worst_adversarial, change / bound)
                    worst_ratio = max(worst_ratio, change * n / round_.scale)
    return worst_random, worst_adversarial, worst_ratio


@pytest.mark.parametrize("case", CASES, ids=str)
def test_query_change_within_engine_sensitivity(case: Case, seed: int) -> None:
    rng = np.random.default_rng([seed, CASES.index(case)])
    worst_random, worst_adversarial, ratio = largest_changes(case, rng)
    # The bound c S / n + tau is sound (asserted inside) and the search is not vacuous:
    # the adversarial neighbours move q by a sizeable part of S / n.
    assert worst_adversarial >= worst_random
    assert ratio > 0.05


def test_two_s_over_n_is_tight() -> None:
    """Hinge, ``R = 1``, one binary feature: ``q`` moves by exactly ``2 S / n``.

    ``phi(a=0) = (-1, 1) / sqrt(2)`` (feature, intercept), ``theta_hat = (-1, 1) /
    sqrt(2)``, so ``z = 1`` and ``S = 2 R G B = 2``. ``D``: three records
    ``(a=0, y=-1)``: ``L_D(theta_hat) = 2``, ``min L_D = 0`` (at ``z = -1``), ``q = 2``.
    ``D'``: one of them relabelled ``y=+1``: ``L_D'(theta_hat) = 4/3``, ``min L_D' =
    min_{|z| <= 1} (3 + z)/3 = 2/3``, ``q = 2/3``. The change ``4/3`` is ``2 S / n``.
    """
    domain = Domain.from_sizes({"a": 2, "y": 2})
    query = CMQuery(loss="hinge", target="y", features=("a",), radius=1.0)
    tol = 1e-9
    round_ = CMRound(
        problem=query.compile(domain),
        oracle=NoisyGradientDescent(),
        tol=tol,
        sensitivity_factor=2.0,
        learning_rate=1.0,
    )
    theta_hat = np.array([-1.0, 1.0]) / math.sqrt(2)
    d = np.array([[0, 0], [0, 0], [0, 0]])
    d_prime = np.array([[0, 1], [0, 0], [0, 0]])
    n, scale = 3, round_.scale
    assert scale == pytest.approx(2.0)
    q, q_prime = (q_of(round_, domain, r, theta_hat) for r in (d, d_prime))
    assert q == pytest.approx(2.0, abs=tol)
    assert q_prime == pytest.approx(2.0 / 3.0, abs=tol)
    change = q - q_prime
    assert change > 1.99 * scale / n  # S / n is violated twice over
    assert change <= round_.sensitivity(n)  # 2 S / n + tau holds, with equality up to tau
    assert round_.sensitivity(n) - change <= 2 * tol
