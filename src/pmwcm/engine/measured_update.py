"""The measured-marginal update: what a flagged query teaches the hypothesis (issue 35).

The paper's update (Ullman 2015, Figure "Online PMW for CM Queries") tilts the
hypothesis along the direction ``u`` that one private answer ``theta~`` defines:
one number's worth of information about the query's clique. A CM query on
discrete attributes depends on the data only through its clique's marginal
``D_C`` (docs/design.md section 2), so when the sparse vector flags a query,
this update *measures* that marginal instead (or as well) and refits the
hypothesis to every measurement made so far, as MWEM (Hardt, Ligett, McSherry
2012) and Private-PGM's estimation (McKenna et al. 2019) do:

1. charge ``GaussianDpEvent(m)`` to the ledger, then release
   ``y = D_C + N(0, sigma^2 I)``, ``sigma = m sqrt(2) / n``
   (:mod:`pmwcm.mechanisms.marginal_measurement`);
2. refit onto every released measurement (the prior's marginals, every
   earlier update's and ``y``) with the prior's entropic fit
   (:func:`~pmwcm.mechanisms.priors.refit.refit_to_measurements`): the fit
   weighs each by its precision, so ``y`` moves the hypothesis on ``C`` as far as
   its noise allows, and the more precise measurements hold the rest. Its first
   step is along ``C`` alone, each cell's residual over its mass
   (:func:`~pmwcm.mechanisms.priors.marginals.lead_direction`), so that ``C``'s
   rare cells move as far as its common ones.

**No projection first.** Step 2 used to begin with a projection: ``y`` shrunk
towards the hypothesis's marginal (positive-part James-Stein), projected onto the
simplex and made the clique's marginal by one iterative-proportional-fitting
step, the refit then pulling the rest back. On a clique of hundreds to thousands
of cells (full resolution) that step put the measurement's noise into the
hypothesis faster than 30 refit steps took it out. On full-resolution Adult at
``epsilon = 4`` (k = 2,000, stream seed 0) the projection alone raised a 150-query
panel's mean excess risk at 17 of the first 23 updates (up to 1.7x, on 2,380 and
2,550 cells; it left the other six alone, shrunk to nothing), and the final
hypothesis answered the stream's queries 0.90x as well as its start. With the
refit alone (``benchmarks/accuracy/online_updates.py``, seed 0, from the
workload-aware start):

* full-resolution Adult, ``epsilon = 4``: mean / max 7.0e-6 / 5.4e-5 became
  5.2e-6 / 2.9e-5 (the same-query gain 0.90x became 1.16x);
* TV16, ``epsilon = 4``: 1.4e-5 / 1.2e-4 became 8.9e-6 / 4.9e-5 (0.78x became 1.12x);
* full-resolution Adult, ``epsilon = 1``: mean 3.8e-5 became 3.6e-5;
* binary Adult (cliques of at most 32 cells): no change beyond the seeds' spread
  (mean over seeds 0-2, 7.43e-7 against 7.54e-7 at ``epsilon = 4`` and 8.79e-6
  against 8.85e-6 at ``epsilon = 1``).

Step 2 reads only released values (``y``, the earlier measurements, their
``sigma``, the hypothesis): post-processing (Dwork, Roth 2014, Prop. 2.1). The
engine keeps the measurements with the prior's in its state, so snapshots and
the refit after every later update carry them.

**Which update** (``PMWConfig(update=...)``, :data:`UpdateKind`; ``pmwcm run
--update``, the service's session field ``update``):

* ``"auto"`` (the default): ``"measure"`` on an announced stream, else ``"oracle"``.
* ``"oracle"`` (the paper's; theory mode always): the oracle's ``theta~`` is
  released and the hypothesis tilted towards it. Certificate: the oracle's.
* ``"measure"``: no oracle call; the released answer is the refitted
  hypothesis's ``theta'`` (source ``"oracle"``: a fresh private release paid in
  this round). Certificate, with probability ``>= 1 - beta`` over the
  measurement's noise (:func:`~pmwcm.mechanisms.marginal_measurement.excess_risk_certificate`)::

      L_D(theta') - min L_D <= S (||y - Dhat'_C||_1 + sigma (m sqrt(2/pi) + sqrt(2 m ln(1/beta))))

  with ``m`` the clique's cells; the bound is second-order loose (the real error
  is quadratic in ``||D_C - Dhat'_C||``), but every term is public.
* ``"both"``: the oracle answers (its ``theta~`` released, as today) and the
  clique is measured: the hypothesis is tilted towards ``theta~`` by the
  calibrated step, then refitted onto every measurement, ``y`` included.

**Budget.** ``T`` updates cost ``T`` measurements (``"measure"``) or ``T``
measurements and ``T`` oracle calls (``"both"``); :func:`calibrate_update_noise`
finds the multiplier at which they and the fixed events (prior, sparse vector)
compose to exactly ``(epsilon, delta)``. A clique too large to hold densely
(:func:`~pmwcm.kernels.clique_table.is_dense`, a public fact of the schema) is
not measured: its update is the oracle's, at the same multiplier.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, get_args

import dp_accounting

from pmwcm.engine.update_slots import FallbackRule
from pmwcm.kernels.clique_table import is_dense
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import FloatArray, Histogram
from pmwcm.kernels.queries import CMQuery
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.accounting import (
    Accountant,
    calibrate_gaussian_multiplier,
    calibrate_noise_level,
)
from pmwcm.mechanisms.marginal_measurement import (
    clique_measurement_event,
    excess_risk_certificate,
    measure_table,
)
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.oracles.base import Oracle
from pmwcm.mechanisms.priors.marginals import Measurement
from pmwcm.mechanisms.priors.refit import refit_to_measurements

__all__ = [
    "PRECISE_REFIT_SIGMA",
    "PRECISE_SUPPORT_REFIT_ITERATIONS",
    "UPDATE_KINDS",
    "MeasuredUpdate",
    "UpdateKind",
    "calibrate_update_noise",
    "measured_positions",
    "measured_refit_iterations",
    "measured_updates",
    "part_to_measure",
]

UpdateKind = Literal["oracle", "measure", "both"]
UPDATE_KINDS: tuple[UpdateKind, ...] = get_args(UpdateKind)
#: The failure probability of a measured answer's certificate.
CERTIFICATE_BETA = 0.05


def calibrate_update_noise(
    kind: UpdateKind,
    oracle: Oracle,
    *,
    updates: int,
    fixed: dp_accounting.DpEvent,
    epsilon: float,
    delta: float,
    accountant: Accountant,
) -> float:
    """The one noise multiplier of the measurements (and, for ``"both"``, the oracle
    calls) at which ``fixed`` and ``updates`` updates compose to exactly
    ``(epsilon, delta)``: ``updates`` Gaussian events (``"measure"``), ``2 updates``
    when the oracle's event is Gaussian too (``"both"``), otherwise the composed pair
    per update by bisection. Public inputs only.

    Raises:
        ValueError: ``kind`` is ``"oracle"`` (calibrated by the engine's builder), or
            ``fixed`` alone exceeds the budget.
    """
    if kind == "oracle":
        raise ValueError("update='oracle' is calibrated by build_engine's oracle calibration.")
    oracle_gaussian = isinstance(oracle.privacy_event(1.0), dp_accounting.GaussianDpEvent)
    if kind == "measure" or oracle_gaussian:
        return calibrate_gaussian_multiplier(
            fixed=fixed,
            gaussian_count=updates if kind == "measure" else 2 * updates,
            epsilon=epsilon,
            delta=delta,
            accountant=accountant,
        )
    return calibrate_noise_level(
        lambda m: dp_accounting.ComposedDpEvent(
            [oracle.privacy_event(m), clique_measurement_event(m)]
        ),
        count=updates,
        fixed=fixed,
        epsilon=epsilon,
        delta=delta,
        accountant=accountant,
    )


#: The paced updates are spread over this share of the expected stream (the last
#: ones fall due before its end, where a repeat would otherwise skip them).
PACE_END = 0.95
#: The fewest updates a measured engine plans (the budget rule's ``T`` where larger).
MIN_MEASURED_UPDATES = 20
#: The update budget's ``epsilon n`` per measurement (:func:`measured_updates`): above
#: ``20 x 50 = 1,000`` a measured engine cuts its update budget into more measurements.
EPS_N_PER_MEASUREMENT = 50.0
#: The most measurements the signal rule plans: the refit after each update visits every
#: measurement so far, so a stream's refit work grows with ``T`` (binary Adult, k = 2,000,
#: eps = 4, one stream: 3 s at ``T = 20``, 12 s at 240, 22 s at 480, where the mean
#: excess risk fell 1.3e-6, 7.0e-7, 6.1e-7: past 200, little accuracy for much time).
MAX_MEASURED_UPDATES = 200
#: The share of ``T`` the pacing keeps for the sparse vector (at least
#: :attr:`MeasuredUpdate.reserve`): 6 of ``T = 20``. Measured on
#: ``benchmarks/accuracy/online_updates.py``'s streams (k = 2,000, seeds 0-2, bundled
#: Adult): with 2, the sparse vector's late flags spent the last update 231 answers
#: before the end of stream seed 0 in all four cells (8.7% unchecked), and from the
#: workload-aware start on all of Adult at ``epsilon = 4`` 354 before it (17.7%); with 4
#: the first went, the second stayed; with 6 neither stream left an answer
#: unchecked, at a cost of 8% on the mean of the 8,000-row table at ``epsilon = 4``.
RESERVE_SHARE = 0.3
#: The refit's steps after each measured update (where the config keeps its default
#: :data:`~pmwcm.engine.config.REFIT_ITERATIONS`, the oracle update's 3). With the
#: likelihood-weighted fit, the refit is what turns a noisy measurement into
#: information: on ``benchmarks/accuracy/online_updates.py``'s streams (k = 2,000,
#: seeds 0-2) the same-query gain on all of Adult at ``epsilon = 4`` was 0.99x at 3
#: steps, 1.31x at 10 and 2.44x at 30 (mean excess risk 2.3e-6, 2.1e-6, 1.6e-6), and
#: on the 8,000-row table 1.17x, 1.59x, 1.81x; 100 steps gave 1.85x there.
MEASURED_REFIT_ITERATIONS = 30
#: The refit's steps on a weighted support after a measurement more precise than
#: :data:`PRECISE_REFIT_SIGMA` (:func:`measured_refit_iterations`).
PRECISE_SUPPORT_REFIT_ITERATIONS = 100
#: Below this ``sigma`` a support's measured update refits
#: :data:`PRECISE_SUPPORT_REFIT_ITERATIONS` steps: TV16 and full-resolution Adult at
#: ``epsilon = 4`` (2.5e-4 and 3.3e-4), where it was measured; at ``epsilon = 1`` their
#: measurements (8.5e-4 and 1.1e-3) keep the 30 steps, unmeasured there.
PRECISE_REFIT_SIGMA = 5e-4


def measured_refit_iterations(hypothesis: Histogram, every: Sequence[Measurement]) -> int:
    """The refit's steps after a measured update, where the config keeps its default.

    :data:`MEASURED_REFIT_ITERATIONS` (30), and :data:`PRECISE_SUPPORT_REFIT_ITERATIONS`
    (100) on a weighted support after a measurement (the last of ``every``: the one just
    made) of ``sigma`` below :data:`PRECISE_REFIT_SIGMA` (public: the released sigma and
    the backend). There the entropic descent moves the support's rare cells
    slowly (each record's log-weight moves by the step times its cells' residuals, and
    the step is held down by the precise pairs every record shares), so 30 steps leave
    a new measurement mostly unabsorbed. Measured at TV16's first measured update
    (stepwise analyst, ``epsilon = 4``, noise seed 8: the clique ``state x female``, 102
    cells, measured with ``sigma = 2.5e-4`` where the prior's pair had ``4.3e-4``), the
    squared distance of the fit's table on that clique to the data's: 8.6e-6 before the
    update, 6.2e-6 after 30 steps, 4.6e-6 after 100, 3.4e-6 after 300 (the two
    measurements' precision-weighted mean: 3.8e-6). On the stream (noise seeds 7-9,
    never the benchmark's) 100 steps took the mean excess risk from 1.17e-5 to 1.01e-5
    and the largest error from 3.1e-4 to 2.4e-4, at 2.1 times the stream's CPU (85 s
    to 180 s). Above the cut the 30 steps stay, as the longer refit was measured only at
    ``epsilon = 4``; the dense hypothesis makes up to 200 measurements, each refit
    visiting every one (``pmwcm run``'s cost), so its 30 stay too.
    """
    precise = bool(every) and every[-1].sigma < PRECISE_REFIT_SIGMA
    if isinstance(hypothesis, SupportHistogram) and precise:
        return PRECISE_SUPPORT_REFIT_ITERATIONS
    return MEASURED_REFIT_ITERATIONS


def measured_updates(
    planned: int, announced: int | None = None, *, update_signal: float = 0.0
) -> int:
    """``T`` for a measured engine: one measurement per :data:`EPS_N_PER_MEASUREMENT` of
    the update budget's ``epsilon n`` (``update_signal``), between
    :data:`MIN_MEASURED_UPDATES` and :data:`MAX_MEASURED_UPDATES`, and at least the
    budget rule's ``planned``.

    The rule's ``T = 1`` at small ``n`` left one update for the whole stream, and
    the engine halted after it (up to 98% of a 2,000-query stream unchecked,
    issue 35). With pacing (:meth:`MeasuredUpdate.due`) the updates are spent over
    the stream whatever the sparse vector does, so ``T`` sets only how the
    update budget is cut: more, coarser measurements of more cliques.

    **Why it grows with the signal.** A measurement's noise per cell, in records, is
    ``sqrt(2) m``, and ``m`` grows like ``sqrt(T) / epsilon_u`` for the update budget
    ``epsilon_u``; what the noise costs is that over ``n``. Where ``epsilon_u n`` is
    large, each of 20 measurements is far more precise than a stream needs, and cutting
    the budget finer measures more of the cliques the stream asks. Measured on tuning
    streams no benchmark row uses (noise seeds 7-9, bundled Adult, binary schema; the
    stepwise analyst, k = 644, and random streams, k = 2,000), mean excess risk at
    ``T`` = 20 / 60 / 120 / 240:

    * all 48,842 rows, ``epsilon = 1`` (``epsilon_u n = 9,768``): stepwise 1.35e-5 /
      8.8e-6 / 5.7e-6 / 5.2e-6, random 1.15e-5 / 9.5e-6 / 9.0e-6 / 8.4e-6;
    * all rows, ``epsilon = 0.5`` (3,968): stepwise 3.1e-5 / 2.6e-5 / 2.0e-5 / 2.0e-5,
      random 3.4e-5 / 3.3e-5 / 3.3e-5 / 3.2e-5;
    * all rows, ``epsilon = 4``: stepwise 2.0e-6 / 1.7e-6 / 8.4e-7 (120), random
      1.5e-6 / 1.1e-6 / 9.8e-7;
    * 8,000 rows, ``epsilon = 4`` (6,400): stepwise 2.5e-5 / 1.9e-5 / 1.5e-5 / 1.5e-5,
      random 2.5e-5 / 2.4e-5 / 2.4e-5 / 2.3e-5;
    * 8,000 rows, ``epsilon = 1`` (200; the prior takes 95%): stepwise flat (1.3e-4),
      random 1.8e-4 at 20 and 2.0e-4 beyond: there the rule keeps 20.

    (The earlier fixed 20 beat 10 and 40 on random streams of an older engine, before the
    likelihood-weighted refit.) Public: ``epsilon``, ``n`` and the split.

    An announced stream of ``k`` distinct queries gets at most ``k`` (each distinct
    query is one round at most: more would leave budget the pacing cannot spend).

    >>> measured_updates(1), measured_updates(10), measured_updates(30)
    (20, 20, 30)
    >>> measured_updates(10, announced=3)
    3
    >>> measured_updates(10, update_signal=0.2 * 48_842), measured_updates(10, update_signal=1e6)
    (195, 200)
    """
    by_signal = min(MAX_MEASURED_UPDATES, round(update_signal / EPS_N_PER_MEASUREMENT))
    wanted = max(planned, MIN_MEASURED_UPDATES, by_signal)
    return wanted if announced is None else max(1, min(wanted, announced))


def measured_positions(domain: Domain, cliques: Sequence[Sequence[str]]) -> tuple[int, ...]:
    """The positions among ``cliques`` (the announced distinct queries', in the order they
    will be asked) of those a flagged query would measure (:meth:`MeasuredUpdate.measures`:
    a dense clique). Public: the schema and the query file.

    >>> from pmwcm.kernels.domain import Domain
    >>> domain = Domain.from_sizes({"a": 2, "b": 3, "c": 5000})
    >>> measured_positions(domain, [("a", "b"), ("a", "c"), ("b", "a")])
    (0, 2)
    """
    return tuple(
        position
        for position, clique in enumerate(cliques)
        if is_dense(domain.sizes_of(tuple(clique)))
    )


def part_to_measure(
    domain: Domain, query: CMQuery, measured: Sequence[Sequence[str]]
) -> CMQuery | None:
    """The part of ``query`` a paced update measures in its place
    (:meth:`MeasuredUpdate.measures_parts`): the same problem on its target and as
    many of its features as fit a measurable clique
    (:func:`~pmwcm.kernels.clique_table.is_dense`; its interactions within them), of
    those parts the one whose clique was ``measured`` least often (the cliques
    measured so far, as sets), ties in the order of ``itertools.combinations``
    over the features; canonical on ``domain``. ``None`` where no feature fits
    beside the target. Public: the schema, the query and the released measurements.

    The largest part keeps most of the query's joint structure (its pairs with the
    target are in the prior already), and a part measured before is measured again
    only once every other part of that size has been.

    >>> from pmwcm.kernels.domain import Domain
    >>> domain = Domain.from_sizes({"y": 2, "a": 50, "b": 50, "c": 3})
    >>> query = CMQuery(loss="logistic", target="y", features=("a", "b", "c"))
    >>> part_to_measure(domain, query, []).features
    ('a', 'c')
    >>> part_to_measure(domain, query, [("y", "a", "c")]).features
    ('b', 'c')
    """
    seen: dict[frozenset[str], int] = {}
    for clique in measured:
        seen[frozenset(clique)] = seen.get(frozenset(clique), 0) + 1
    target = query.target
    for size in range(len(query.features), 0, -1):
        fitting = [
            part
            for part in itertools.combinations(query.features, size)
            if is_dense(domain.sizes_of((target, *part)))
        ]
        if fitting:
            kept = min(fitting, key=lambda part: seen.get(frozenset((target, *part)), 0))
            return dataclasses.replace(
                query,
                features=kept,
                encodings={f: e for f, e in query.encodings.items() if f in kept},
                interactions=tuple(g for g in query.interactions if set(g) <= set(kept)),
            ).canonical(domain)
    return None


class _Schedule(NamedTuple):
    """The pacing schedule's counts at one place (:meth:`MeasuredUpdate.due`)."""

    made: int  #: updates made outside the oracle pool
    paced: int  #: the slots the schedule paces (the pool's unused ones joining it)
    reserve: int  #: the slots left to the sparse vector's flags
    due_by: int  #: the paced updates due by this place


@dataclass(frozen=True, kw_only=True)
class MeasuredUpdate:
    """How the engine's flagged queries update the hypothesis (module docstring).

    Attributes:
        kind: ``"oracle"``, ``"measure"`` or ``"both"``.
        noise_multiplier: ``m`` of each clique measurement (``sigma = m sqrt(2) / n``).
        refit_iterations: the refit's steps onto every measurement after each one;
            ``None`` (the default): :func:`measured_refit_iterations`' rule.
        pace_queries: the expected stream's length ``k`` for the pacing
            (:meth:`due`); ``None``: no pacing, the sparse vector alone decides.
        reserve: the fewest updates the pacing leaves to the sparse vector until the
            end (:data:`RESERVE_SHARE` of ``T`` where that is more).
        measured_positions: where the announced distinct queries whose clique is
            measured stand in the stream (:func:`measured_positions`; public: the query
            file); empty when none are announced. The pacing then runs over them.
        fallback: how an oracle call on a clique too large to measure is paid
            (:class:`~pmwcm.engine.update_slots.FallbackRule`: its slots, the pool of
            them beyond ``T`` the pacing leaves to such calls, its threshold).
    """

    kind: UpdateKind
    noise_multiplier: float
    refit_iterations: int | None = None
    pace_queries: int | None = None
    reserve: int = 2
    measured_positions: tuple[int, ...] = ()
    fallback: FallbackRule = field(default_factory=FallbackRule)

    def __post_init__(self) -> None:
        if self.kind not in UPDATE_KINDS:
            raise ValueError(f"update must be one of {UPDATE_KINDS}, got update={self.kind!r}.")
        clique_measurement_event(self.noise_multiplier)  # validates it
        if self.pace_queries is not None and not (
            isinstance(self.pace_queries, int) and self.pace_queries >= 1
        ):
            raise ValueError(
                f"pace_queries must be a positive integer or None, got {self.pace_queries!r}."
            )
        if not (isinstance(self.reserve, int) and self.reserve >= 0):
            raise ValueError(f"reserve must be a non-negative integer, got {self.reserve!r}.")
        positions = self.measured_positions
        if positions and (
            positions[0] < 0 or any(b <= a for a, b in itertools.pairwise(positions))
        ):
            raise ValueError("measured_positions must be increasing non-negative positions.")

    def due(
        self, *, answered: int, updates: int, cutoff: int, measured: bool = True, pooled: int = 0
    ) -> bool:
        """Whether the next fresh query gets an update without the sparse vector's test.

        The pacing schedule (issue 35, "no unspent budget"), over the
        ``k = pace_queries`` expected distinct queries (``answered`` counts the
        distinct queries answered so far: a repeat is answered from the released
        answers without a round, so it neither gets nor spends an update; ``pmwcm
        run`` announces its file's distinct queries as ``k``):

        * the ``T - reserve`` paced updates fall due evenly over the first
          ``k' = ceil(0.95 k)`` answers, the first at the stream's first fresh query
          and the ``i``-th (``i >= 2``) at the first fresh query from answer
          ``ceil(i k' / (T - reserve))`` on, each on a query whose clique is ``measured``
          (:meth:`measures`), whenever the updates made so far (paced or flagged) lag
          behind it: a paced update teaches the hypothesis a measured marginal, where
          an unmeasured clique's would be an oracle call at the measurement's noise
          level, a noisy released answer (on full-resolution Adult at ``epsilon = 1``
          the stream's worst answers were such calls); at the end of the stream,
          where :meth:`measures_parts` holds, the engine measures a part of such a
          clique instead (:meth:`part_due`; its round then runs its own test);
        * the ``reserve`` left (``max(reserve, ceil(0.3 T))``) are the sparse vector's,
          so that an error it flags
          late in the stream still has an update behind it; the fallback's pool of
          slots beyond ``T`` is kept for unmeasurable cliques' oracle calls, the
          unused ones joining the schedule in step with the stream (all of them by
          answer ``k'``), so a stream with few such calls still spends its budget;
        * what is left at the end is spent there: from answer ``k - r`` on, with
          ``r`` updates left, every fresh query on a measured clique gets one.

        Where the stream was announced with its queries (``measured_positions``), the
        same schedule runs over the announced queries on a measured clique instead of
        all answers: ``k`` is their number and a query's place is how many of them
        have been reached. Only those can take a paced update, and they need not be
        spread like the stream: on full-resolution Adult (k = 10,000, seeds 0 and
        1007) 8% of the distinct queries are measurable, a quarter of them in the
        first tenth of the stream and almost none in the last, so a schedule over all
        answers found no measured query when its last updates fell due and left 4-7%
        of the budget unspent.

        **The first at the first query** (round 3, session 16). Until the first update
        every answer rests on the prior alone, and the stream's first queries are as
        likely as any to be ones the prior describes worst: on TV16's stepwise analyst
        the first query (``female`` on ``state``, a 102-cell pair) was the stream's
        largest error in every stream at ``epsilon = 4``. The first paced update,
        which fell due after ``k' / (T - reserve)`` answers, now falls on the first
        (measured) query; the others stay where they were. On tuning streams (noise
        seeds 7-9; ``benchmarks/accuracy/online_updates.py``'s cells, which use 0-2):
        TV16's stepwise analyst at ``epsilon = 4`` mean / largest max 1.27e-5 /
        3.7e-4 before, 1.17e-5 / 3.1e-4 after, at ``epsilon = 1`` 7.7e-5 / 1.36e-3
        before, 7.9e-5 / 1.00e-3 after; at low signal no change beyond the streams'
        spread (TV16's 8,000 rows, stepwise, ``epsilon = 1``, 12 streams: 1.87e-3
        before, 1.83e-3 after; binary Adult's 8,000 rows, 30 streams: 1.54e-4 both).

        So a stream that runs to ``k`` spends its budget, and the engine halts
        before its end only if the sparse vector flags more than ``reserve``
        queries beyond the schedule, each of those at twice the last one's threshold
        (:meth:`threshold_factor`). Reads only released counts (answers given,
        updates made) and public settings: post-processing of the sparse vector's
        outputs, so skipping its test costs nothing.

        >>> pace = MeasuredUpdate(kind="measure", noise_multiplier=1.0, pace_queries=100)
        >>> made = []
        >>> for j in range(100):
        ...     if pace.due(answered=j, updates=len(made), cutoff=5):
        ...         made.append(j)
        >>> made
        [0, 63, 94, 98, 99]
        """
        if self.pace_queries is None or self.kind == "oracle" or updates >= cutoff:
            return False
        if not measured:
            return False
        place, total = self._place(answered)
        if total - place < cutoff - updates:
            return True  # the end of the expected stream: spend what is left
        schedule = self._schedule(place, total, updates=updates, pooled=pooled, cutoff=cutoff)
        if schedule.paced < 1 or schedule.made >= schedule.paced:
            return False
        return schedule.due_by > schedule.made

    def threshold_factor(
        self, *, answered: int, updates: int, cutoff: int, pooled: int = 0
    ) -> float:
        """The sparse vector's threshold for the next fresh query, in units of its
        threshold otherwise: ``2^j`` once the updates made run ``j >= 1`` ahead of the
        pacing schedule beyond its reserve (:meth:`due`), else 1.

        The reserve is what the schedule leaves to the sparse vector's flags. A flag
        beyond it takes a slot the schedule needs later, and the engine halts (every
        later answer synthetic, unchecked) once the flags have taken them all, so from
        there each further flag must clear twice the last threshold. Measured with a
        throw-away wrapper on tuning streams (binary Adult, 8,000 rows, stepwise
        analyst, noise seeds 7-46, ``epsilon`` 0.5 and 1; docs/design.md section 11):
        one stream in 40 had halted at its 478th of 644 answers (25.8% unchecked), its
        sparse vector 10 updates ahead where the reserve is 6, flagging the same answers
        at both budgets (its noise, not the queries' errors); with the doubling it
        left 4.0% unchecked, its mean excess risk 1.01x and 0.99x, and no other stream
        of the 80 changed. A hypothesis answer is certified to the threshold its test
        used (:meth:`~pmwcm.engine.steps.EngineSteps.round_threshold_units`).

        Reads only released counts and public settings, as :meth:`due` does: a public
        per-query threshold, which the sparse vector's guarantee allows (Lyu, Su, Li
        2017, Algorithm 1 takes any public thresholds ``T_i``).

        >>> pace = MeasuredUpdate(kind="measure", noise_multiplier=1.0, pace_queries=100)
        >>> [pace.threshold_factor(answered=0, updates=u, cutoff=20) for u in (6, 7, 8, 9)]
        [1.0, 2.0, 4.0, 8.0]
        >>> [pace.threshold_factor(answered=50, updates=u, cutoff=20) for u in (12, 13, 14)]
        [1.0, 2.0, 4.0]
        """
        if self.pace_queries is None or self.kind == "oracle" or updates >= cutoff:
            return 1.0
        place, total = self._place(answered)
        schedule = self._schedule(place, total, updates=updates, pooled=pooled, cutoff=cutoff)
        beyond = schedule.made - schedule.due_by - schedule.reserve + 1
        return 2.0**beyond if beyond > 0 else 1.0

    def _schedule(
        self, place: int, total: int, *, updates: int, pooled: int, cutoff: int
    ) -> _Schedule:
        """The pacing schedule at ``place`` of ``total`` (:meth:`due`)."""
        # The schedule counts the slots outside the oracle pool (``pooled`` of ``updates``);
        # the pool's unused slots join it in step with the stream.
        horizon = max(1, math.ceil(PACE_END * total))
        pool = self.fallback.pool
        measuring, made = cutoff - pool, updates - pooled
        reserve = max(self.reserve, math.ceil(RESERVE_SHARE * measuring))
        paced = measuring - reserve
        paced += (pool - pooled) * min(place, horizon) // horizon
        # Due at place j (1-based) once floor(j paced / k') exceeds the count, and at the
        # first place of all (the first paced update, moved from place k' / paced).
        due_by = max(min(place, 1), place * paced // horizon) if paced >= 1 else 0
        return _Schedule(made=made, paced=paced, reserve=reserve, due_by=due_by)

    def measures(self, domain: Domain, clique: tuple[str, ...]) -> bool:
        """Whether a flagged query on ``clique`` is measured (public: kind and schema)."""
        return self.kind != "oracle" and is_dense(domain.sizes_of(clique))

    def measures_parts(self, domain: Domain, clique: tuple[str, ...]) -> bool:
        """Whether an update due at the end of the stream on ``clique`` measures a part
        of it (:func:`part_to_measure`, :meth:`part_due`) before the round:
        ``kind="measure"``, a clique too large to measure, and no announced measured
        queries to pace over (public).

        Where the stream was announced with queries it can measure, the pacing runs
        over those (:meth:`due`) and never falls due elsewhere. Announced by its
        length alone (an interactive analyst, a session), or with none it can
        measure, the pacing cannot know which later queries it could measure: on
        full-resolution Adult's stepwise analyst (k = 92, eps = 1) the measurable
        queries came first (a target and one or two features) and the updates that
        fell due on the wider ones later were never made, 10% of the budget unspent.
        """
        return (
            self.kind == "measure"
            and self.pace_queries is not None
            and not self.measured_positions
            and not self.measures(domain, clique)
        )

    def part_due(self, *, answered: int, updates: int, cutoff: int) -> bool:
        """Whether the next fresh query's part is measured (where :meth:`measures_parts`):
        at the end of the expected stream only, where :meth:`due` spends what is left
        (from answer ``k - r`` on, with ``r`` slots left), and with two slots left at
        least, so that a flag of the round's own test still has one. Public counts.

        Only at the end: through the stream the schedule keeps waiting for a query it
        can measure whole. Parts due wherever the schedule fell due were tried first
        (``benchmarks/accuracy/online_updates.py``, 3 streams a cell): on the random
        full-resolution streams they took the slots of later measurable queries, the
        means rose up to 3.3% and the final hypothesis's same-query gain fell (full
        Adult at 8,000 rows, eps = 4: 1.55x to 1.43x); at the end only, those streams'
        answers are the same as without parts (TV16 and full Adult at 8,000 rows,
        eps = 4: gains 1.24-1.89x a stream), and the stepwise analyst still spends
        99.3%.

        >>> pace = MeasuredUpdate(kind="measure", noise_multiplier=1.0, pace_queries=100)
        >>> [pace.part_due(answered=j, updates=28, cutoff=32) for j in (94, 95, 96)]
        [False, False, True]
        >>> pace.part_due(answered=99, updates=31, cutoff=32)
        False
        """
        if self.pace_queries is None or updates + 2 > cutoff:
            return False
        place, total = self._place(answered)
        return total - place < cutoff - updates  # :meth:`due`'s end of the stream

    def _place(self, answered: int) -> tuple[int, int]:
        """The next fresh query's place (1-based) among the ``total`` queries the
        schedule runs over: the announced measured ones where there are any, else
        the ``pace_queries`` expected (:meth:`due`; needs ``pace_queries``)."""
        if self.measured_positions:
            place = bisect.bisect_right(self.measured_positions, answered)
            return place, len(self.measured_positions)
        assert self.pace_queries is not None
        return answered + 1, self.pace_queries

    @property
    def calls_oracle(self) -> bool:
        """Whether a flagged query also gets the oracle's answer."""
        return self.kind != "measure"

    def event(self) -> dp_accounting.DpEvent:
        """The measurement's privacy event, charged before :meth:`measure`."""
        return clique_measurement_event(self.noise_multiplier)

    def measure(
        self, table: FloatArray, clique: tuple[str, ...], *, n: int, noise: NoiseSource
    ) -> Measurement:
        """The clique's noisy marginal (already paid for; see :meth:`event`)."""
        return measure_table(
            table, clique, n=n, noise_multiplier=self.noise_multiplier, noise=noise
        )

    def absorb(self, hypothesis: Histogram, every: Sequence[Measurement]) -> Histogram:
        """The hypothesis refitted onto ``every`` released measurement, the flagged
        clique's last, which the refit steps toward alone first (module docstring, step
        2; :func:`~pmwcm.mechanisms.priors.marginals.lead_direction`). Post-processing."""
        iterations = self.refit_iterations
        if iterations is None:
            iterations = measured_refit_iterations(hypothesis, every)
        return refit_to_measurements(hypothesis, every, iterations=iterations, lead=-1)

    @staticmethod
    def certificate(
        scale: float, measurement: Measurement, fitted: Histogram, *, beta: float = CERTIFICATE_BETA
    ) -> float:
        """The excess risk the fitted hypothesis's answer on the measured clique is
        certified not to exceed (``1 - beta`` over the measurement's noise)."""
        table = fitted.clique_table(measurement.clique).table()
        return excess_risk_certificate(
            scale=scale, measurement=measurement, fitted=table, beta=beta
        )
