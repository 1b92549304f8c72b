"""The sparse vector's query is as sensitive as the engine says, and no less.

The engine feeds the sparse vector ``q(D) = max(0, L_D(theta_hat) - L_D(theta_D))``
(``theta_hat`` fixed by the public hypothesis, ``theta_D`` from the fixed-budget
real-data solve, within its a-priori gap ``tau`` of ``min L_D``) divided by
:meth:`CMRound.sensitivity`, ``c S / n + tau`` with ``tau = rho c S / n``
(``rho = EngineSettings.data_gap_fraction``). The privacy of the whole engine
rests on that bound (docs/design.md section 3): under replace-one, ``err(D') -
err(D) = (1/n) [g(theta_hat) - g(theta*)]`` for ``g = l_x' - l_x`` and
``theta*`` one of the two minimisers, and each record's loss moves by at most
``S`` between two points of ``Theta``, so ``2 S / n``; ``q`` lies in
``[err - tau, err]``, hence ``+ tau``.

Rounds are built as the engine builds them: an :class:`~pmwcm.engine.online.OnlinePMW`
on the dataset (settings from the ``EngineSettings`` defaults) compiles the
query with :meth:`~pmwcm.engine.online.OnlinePMW.cm_round`, which plans the
real-data solve for the engine's ``tau``. For every loss of the catalogue at
several radii (up to 32) and L2 strengths, with interactions and an ordinal
encoding, on small domains with a few records, we compute ``q`` exactly as the
engine does for

* random neighbours (one random record replaced by a random cell), and
* adversarial neighbours (every record moved to every cell of the universe,
  the exhaustive search, keeping the largest change),

and ``theta_hat`` both the minimiser of a random hypothesis (what the engine
uses) and a random point of the sphere ``||theta|| = R`` (any public
``theta_hat`` must be covered). Every change must be ``<= 2 S / n + tau`` (and
so ``<= 3 S / n + tau``, the paper's constant). ``test_two_s_over_n_is_tight``
shows the test has teeth: a hand-checkable hinge example moves ``q`` by ``2 S /
n`` (up to the solve's actual gap, far below ``tau``), so a ``S / n`` bound (or a
sensitivity factor below 2) is wrong. These checks are deterministic given the
seed and pass for seeds 0..99.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pytest

from pmwcm.audit.sensitivity import engine_settings, search_engine
from pmwcm.engine.rounds import CMRound
from pmwcm.engine.settings import EngineSettings
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.private_data import PrivateData

BINARY = Domain.from_sizes({"a": 2, "b": 3, "y": 2})  # 12 cells, d = 5
REAL = Domain.from_sizes({"a": 2, "b": 3, "y": 3})  # 18 cells, d = 5
SMOOTH = [("logistic", None), ("squared", None), ("huber", 0.5), ("smoothed_hinge", 1.0)]
NONSMOOTH = [("hinge", None), ("quantile", 0.2), ("absolute", None)]
CLASSIFICATION = {"logistic", "smoothed_hinge", "hinge"}
RHO = EngineSettings.data_gap_fraction  # the engine's default tau = RHO c S / n


@dataclass(frozen=True)
class Case:
    """A catalogue query on a small universe (the engine's own settings)."""

    loss: str
    param: float | None
    radius: float
    l2: float
    spec: dict[str, object] = field(default_factory=dict, hash=False)

    @property
    def domain(self) -> Domain:
        return BINARY if self.loss in CLASSIFICATION else REAL

    def query(self) -> CMQuery:
        return CMQuery(
            loss=self.loss,
            target="y",
            features=("a", "b"),
            radius=self.radius,
            l2=self.l2,
            loss_param=self.param,
            **self.spec,  # type: ignore[arg-type]
        )

    def round(self, records: np.ndarray) -> CMRound:
        """The round an engine on ``records`` compiles (it reads only ``n`` and the domain)."""
        data = PrivateData.from_records(self.domain, records)
        return search_engine(data, engine_settings()).cm_round(self.query())

    def __str__(self) -> str:
        extra = "".join(f"-{k}" for k in sorted(self.spec))
        return f"{self.loss}({self.param})-R{self.radius}-l2{self.l2}{extra}"


INTERACTION: dict[str, object] = {"interactions": (("a", "b"),)}
ORDINAL: dict[str, object] = {"encodings": {"b": "ordinal"}}
# Every loss at small and large radii (the fixed-budget solve has no trouble with either),
# with an L2 term, an interaction block and an ordinal encoding. The non-smooth losses'
# real-data solve is the ellipsoid method (~5 ms a call at d = 5, three times more at
# d = 8), so they skip R = 3, which the smooth losses cover, and take their interaction
# on the ordinal encoding (d = 4 instead of 8).
CASES = (
    [Case(loss, param, 3.0, 0.0) for loss, param in SMOOTH]
    + [
        Case(loss, param, radius, l2)
        for loss, param in SMOOTH + NONSMOOTH
        for radius, l2 in [(0.5, 0.0), (1.0, 0.1), (32.0, 0.0)]
    ]
    + [Case(loss, param, 1.0, 0.0, INTERACTION) for loss, param in SMOOTH]
    + [Case(loss, param, 1.0, 0.0, INTERACTION | ORDINAL) for loss, param in NONSMOOTH]
    + [Case(loss, param, 32.0, 0.05, ORDINAL) for loss, param in SMOOTH + NONSMOOTH]
)


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
    domain = case.domain
    cells = np.indices(domain.shape).reshape(len(domain), -1).T
    worst_random = worst_adversarial = 0.0
    worst_ratio = 0.0  # max over both of |change| * n / S
    for _ in range(datasets):
        n = int(rng.integers(3, 8))
        records = cells[rng.integers(0, domain.size, n)]
        round_ = case.round(records)
        assert round_.tau == pytest.approx(RHO * 2.0 * round_.scale / n)
        for theta_hat in hypothesis_points(case, round_, rng):
            base = q_of(round_, domain, records, theta_hat)
            bound = round_.sensitivity(n)
            paper_bound = 3.0 * round_.scale / n + round_.tau  # the paper's 3 S / n (+ tau)
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


def tight_example(rho: float) -> tuple[CMRound, float, float]:
    """``(round, q(D), q(D'))`` of :func:`test_two_s_over_n_is_tight`'s example at ``rho``."""
    domain = Domain.from_sizes({"a": 2, "y": 2})
    query = CMQuery(loss="hinge", target="y", features=("a",), radius=1.0)
    d = np.array([[0, 0], [0, 0], [0, 0]])
    d_prime = np.array([[0, 1], [0, 0], [0, 0]])
    settings = engine_settings(data_gap_fraction=rho)
    round_ = search_engine(PrivateData.from_records(domain, d), settings).cm_round(query)
    theta_hat = np.array([-1.0, 1.0]) / math.sqrt(2)
    q, q_prime = (q_of(round_, domain, r, theta_hat) for r in (d, d_prime))
    return round_, q, q_prime


def test_two_s_over_n_is_tight() -> None:
    """Hinge, ``R = 1``, one binary feature: ``q`` moves by ``2 S / n``.

    ``phi(a=0) = (-1, 1) / sqrt(2)`` (feature, intercept), ``theta_hat = (-1, 1) /
    sqrt(2)``, so ``z = 1`` and ``S = 2 R G B = 2``. ``D``: three records
    ``(a=0, y=-1)``: ``L_D(theta_hat) = 2``, ``min L_D = 0`` (at ``z = -1``), ``q = 2``.
    ``D'``: one of them relabelled ``y=+1``: ``L_D'(theta_hat) = 4/3``, ``min L_D' =
    min_{|z| <= 1} (3 + z)/3 = 2/3``, ``q = 2/3``. The change ``4/3`` is ``2 S / n``.
    At the engine's ``tau = 0.1 c S / n = 0.13`` the a-priori gap allows ``q`` to be
    up to ``tau`` low, yet the fixed-budget solve is far closer (~1e-6), so the change
    still exceeds ``1.99 S / n``: the factor 2 cannot be lowered.
    """
    round_, q, q_prime = tight_example(RHO)
    n, scale, tau = 3, round_.scale, round_.tau
    assert scale == pytest.approx(2.0)
    assert tau == pytest.approx(RHO * 2.0 * scale / n)
    assert 2.0 - tau <= q <= 2.0 + 1e-12
    assert 2.0 / 3.0 - tau <= q_prime <= 2.0 / 3.0 + 1e-12
    change = q - q_prime
    assert change > 1.99 * scale / n  # S / n is violated twice over
    assert change <= round_.sensitivity(n)  # 2 S / n + tau holds
    assert round_.sensitivity(n) - change <= 2 * tau


def test_the_a_priori_gap_holds_for_a_small_tau() -> None:
    # The same example with rho = 1e-6 (tau = 1.3e-6, i.e. rho = 0.1 at n = 3 * 10^5):
    # q(D) = 2 - (L_D(theta_D) - min L_D) must be >= 2 - tau.
    round_, q, q_prime = tight_example(1e-6)
    assert 2.0 - round_.tau <= q
    assert 2.0 / 3.0 - round_.tau <= q_prime
