"""Online Private Multiplicative Weights (Ullman 2015, Figure "Online PMW for CM Queries").

For each incoming query ``l^j`` (adaptively chosen after seeing earlier answers):

1. ``theta_hat = argmin L_{Dhat_t}`` -- free, ``Dhat_t`` is public;
2. ``q_j = err_l(D, Dhat_t) = L_D(theta_hat) - min L_D``, sensitivity ``c S/n + tau``;
3. the online sparse vector tests ``q_j`` against the threshold; **below**: answer
   ``theta_hat`` (source ``"hypothesis"``);
4. **above**: ``theta_priv = M'(D, l^j)`` (source ``"oracle"``), then
   ``Dhat_{t+1} ∝ exp(-eta u) Dhat_t`` with ``u(x) = <theta_priv - theta_hat,
   grad l_x(theta_hat)>`` and ``t += 1`` (``eta`` the paper's fixed step, or the
   calibrated one of :mod:`pmwcm.engine.step_size`; ``settings.step_rule``);
5. after ``T`` updates the sparse vector halts: further queries are refused
   (:class:`EngineHalted`), or, with ``after_halt="synthetic"``, answered from the
   final hypothesis (source ``"synthetic"``: post-processing, no privacy cost, and
   no accuracy check behind it).

**Privacy** (Ullman 2015, Theorem "dp"): the data is read only by the sparse
vector (an ``eps_sv``-DP mechanism for ``Delta``-sensitive queries; we feed it
``q_j / Delta_j`` so each query is 1-sensitive and per-query thresholds are
public) and by the oracle calls (each a privacy event of the oracle). The
ledger composes all of them -- the sparse vector charged whole before its
first test, each oracle call before its noise is drawn -- and refuses anything
that would exceed ``(epsilon, delta)``. Everything else (``theta_hat``, the
update, the post-processing sweeps, answers after the halt, repeats of a
released answer) is post-processing of released values.

Practical-mode construction lives in :mod:`pmwcm.engine.practical`, the paper's
constants in :mod:`pmwcm.engine.theory`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from pmwcm.engine.data_side import DataSide
from pmwcm.engine.measured_update import MeasuredUpdate, project_onto
from pmwcm.engine.modes import HYBRID, Mode
from pmwcm.engine.rounds import CMRound, LinearRound, QueryRound, as_table
from pmwcm.engine.settings import EngineSettings, StepRule
from pmwcm.engine.state import SYNTHETIC_ANSWER_WARNING as SYNTHETIC_ANSWER_WARNING
from pmwcm.engine.state import Answer as Answer  # the engine's values, re-exported
from pmwcm.engine.state import EngineState as EngineState
from pmwcm.engine.state import PastUpdate as PastUpdate
from pmwcm.engine.state import Source as Source
from pmwcm.engine.state import UpdateRecord as UpdateRecord
from pmwcm.engine.state import query_key as query_key
from pmwcm.engine.step_size import PublicContext, step_factor
from pmwcm.errors import Halted, PmwcmError, Refused
from pmwcm.kernels.backend import BackendChoice, choose_backend
from pmwcm.kernels.clique_table import MAX_CLIQUE_CELLS, is_dense
from pmwcm.kernels.counting import LinearQuery
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.fixed_budget import plan_solve
from pmwcm.kernels.histogram import DenseHistogram, Histogram
from pmwcm.kernels.lru import LRUCache
from pmwcm.kernels.queries import MAX_RADIUS, CMQuery, QueryError
from pmwcm.kernels.threads import blas_threads
from pmwcm.mechanisms.accounting import PrivacyLedger
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.oracles.base import Oracle
from pmwcm.mechanisms.priors.marginals import Measurement
from pmwcm.mechanisms.priors.refit import refit_to_measurements
from pmwcm.mechanisms.private_data import PrivateData
from pmwcm.mechanisms.sparse_vector import SparseVector

#: The least planned real-data work (rows times iterations) handed to the worker
#: thread: below it (small dense cliques) the hand-off costs more than it saves.
SECOND_CORE_MIN_WORK = 2**15


class EngineHalted(Halted, RuntimeError):
    """The sparse vector has made its ``T`` updates; the engine refuses new queries."""


#: Compiled rounds the engine keeps (see ``OnlinePMW._rounds``).
ROUND_CACHE_ENTRIES = 16


class OnlinePMW:
    """The online private multiplicative weights engine for CM queries.

    Args:
        data: the private data (read only through its marginals).
        settings: loop parameters.
        sparse_vector: a fresh online sparse vector with cutoff ``T`` and
            sensitivity 1 (queries are normalised by their own sensitivity).
        oracle: the single-query oracle ``M'``.
        oracle_noise_level: the calibrated noise level of each oracle call.
        ledger: the privacy ledger owning the whole interaction.
        noise: the random source for the oracle (the sparse vector holds its own).
        prior: the starting hypothesis (default uniform). A prior computed from
            the private data must already be paid for in ``ledger``.
        prior_measurements: the released marginals ``prior`` was fitted to, for
            the refit after each update (``settings.refit_iterations``); public.
        backend: the hypothesis backend chosen and why (public; reported, not used).
        mode: how a round decides between hypothesis and oracle
            (:mod:`pmwcm.engine.modes`; default the paper's loop, :data:`HYBRID`).
        measured_update: issue 35's measured-marginal update
            (:mod:`pmwcm.engine.measured_update`); ``None`` (default) for the
            paper's oracle update alone. Its measurements join
            ``prior_measurements`` (and so the state and the refit).
    """

    def __init__(
        self,
        data: PrivateData,
        *,
        settings: EngineSettings,
        sparse_vector: SparseVector,
        oracle: Oracle,
        oracle_noise_level: float,
        ledger: PrivacyLedger,
        noise: NoiseSource,
        prior: Histogram | None = None,
        prior_measurements: Iterable[Measurement] = (),
        backend: BackendChoice | None = None,
        mode: Mode = HYBRID,
        measured_update: MeasuredUpdate | None = None,
    ) -> None:
        if sparse_vector.cutoff != settings.max_updates:
            raise ValueError(
                f"The sparse vector's cutoff {sparse_vector.cutoff} must equal "
                f"max_updates={settings.max_updates}."
            )
        if prior is not None and prior.domain != data.domain:
            raise ValueError("The prior is over a different domain than the data.")
        if prior is None and choose_backend(data.domain).kind != "dense":
            raise ValueError(
                f"The uniform start is a dense tensor, and |X| = {data.domain.size:.3g} is too "
                "large for one: pass a prior (build_engine chooses a support by itself)."
            )
        oracle.privacy_event(oracle_noise_level)  # validates the level
        self.data = data
        self.settings = settings
        self.sparse_vector = sparse_vector
        self.oracle = oracle
        self.oracle_noise_level = oracle_noise_level
        self.ledger = ledger
        self.noise = noise
        self.hypothesis: Histogram = (
            prior.copy() if prior is not None else DenseHistogram.uniform(data.domain)
        )
        self.prior_measurements: tuple[Measurement, ...] = tuple(prior_measurements)
        for measurement in self.prior_measurements:
            shape = tuple(data.domain.size_of(name) for name in measurement.clique)
            if np.shape(measurement.values) != shape:
                raise ValueError(
                    f"The prior measurement on {measurement.clique} has shape "
                    f"{np.shape(measurement.values)}; the schema's clique has {shape}."
                )
        self.updates: list[UpdateRecord] = []
        self.answers: list[Answer] = []
        #: released answers by :func:`query_key` (repeats are answered from here).
        self.released: dict[str, Answer] = {}
        #: whether the sparse vector's event is in the ledger.
        self.sv_paid = False
        #: the hypothesis backend and why (``build_engine`` chooses it; public).
        self.backend = backend
        #: the strategy that decides each round (hybrid, theory or composition).
        self.mode = mode
        #: issue 35's measured update, or None for the oracle's alone (public settings).
        self.measured_update = measured_update
        #: the real-data side of rounds: worker threads, the only reader of ``data``.
        self._data_side = DataSide(data)
        #: compiled CM rounds by :func:`query_key` (public inputs only), so that a
        #: query is compiled once however often it is planned, answered or certified.
        #: Each entry keeps the settings and oracle it was compiled with, and is used
        #: only while both are still the engine's (callers may replace either). Few
        #: entries: a query is planned and answered back to back, a released one is
        #: answered from ``released``, and a round holds its problems compiled on the
        #: tables it has read (megabytes on a full-resolution clique; 256 entries kept
        #: 2.8 GB alive over 10,000 Adult queries).
        self._rounds: LRUCache[str, tuple[CMRound, EngineSettings, Oracle]] = LRUCache(
            maxsize=ROUND_CACHE_ENTRIES
        )

    @property
    def domain(self) -> Domain:
        """The data universe."""
        return self.data.domain

    @property
    def halted(self) -> bool:
        """Whether the ``T`` updates are spent, or the sparse vector has halted.

        The two agree except after crash recovery: a positive whose oracle debit
        was committed but whose answer never was (an orphan) still counts towards
        the sparse vector's cutoff, with no update behind it. The sparse vector
        can then halt first; the engine is halted from then on, so
        ``after_halt="synthetic"`` serves the final hypothesis as promised
        instead of refusing every later query.
        """
        return len(self.updates) >= self.settings.max_updates or self.sparse_vector.halted

    def state(self) -> EngineState:
        """The engine's state as one frozen value (secret; see :class:`EngineState`)."""
        return EngineState(
            hypothesis=self.hypothesis,
            updates=tuple(PastUpdate(query=u.query, private=u.private) for u in self.updates),
            answers=tuple(self.answers),
            released={key: answer.index for key, answer in self.released.items()},
            sv_paid=self.sv_paid,
            sparse_vector=self.sparse_vector.export_state(),
            ledger=tuple(self.ledger.entries),
            prior_measurements=self.prior_measurements,
        )

    @classmethod
    def restore(
        cls,
        data: PrivateData,
        *,
        settings: EngineSettings,
        sparse_vector: SparseVector,
        oracle: Oracle,
        oracle_noise_level: float,
        ledger: PrivacyLedger,
        noise: NoiseSource,
        state: EngineState,
        backend: BackendChoice | None = None,
        mode: Mode = HYBRID,
        measured_update: MeasuredUpdate | None = None,
    ) -> OnlinePMW:
        """An engine continuing from ``state``, built from its public ingredients.

        Nothing is drawn and nothing is measured: the hypothesis is the state's,
        the update rounds are compiled again from public inputs, and the sparse
        vector takes the state's threshold noise and positives, so the engine's
        next answers are the ones the saved engine would have given (with the
        same noise stream).

        Args:
            data, settings, oracle, oracle_noise_level, noise: as for :class:`OnlinePMW`.
            sparse_vector: a sparse vector of the same kind and cutoff; its state
                is replaced by ``state.sparse_vector`` (so it must not serve
                another engine afterwards).
            ledger: the ledger owning the interaction. An empty one is filled with
                ``state.ledger``; otherwise its entries must begin with
                ``state.ledger`` (crash recovery's ledger also holds debits that
                were committed after the state was saved).
            state: what :meth:`state` returned.
            backend, mode: as for :class:`OnlinePMW`.
            measured_update: as for :class:`OnlinePMW` (the state's measurements
                are in ``state.prior_measurements``).

        Raises:
            ValueError: the state does not fit these ingredients.
            BudgetExceededError: the state's ledger does not fit ``ledger``'s budget.
        """
        engine = cls(
            data,
            settings=settings,
            sparse_vector=sparse_vector,
            oracle=oracle,
            oracle_noise_level=oracle_noise_level,
            ledger=ledger,
            noise=noise,
            # The state's hypothesis as the start: a default uniform start would be a
            # dense tensor, which a universe on the support backend cannot hold.
            prior=state.hypothesis,
            prior_measurements=state.prior_measurements,
            backend=backend,
            mode=mode,
            measured_update=measured_update,
        )
        engine._load(state)
        return engine

    def resumed(self, state: EngineState, *, ledger: PrivacyLedger) -> OnlinePMW:
        """:meth:`restore` with this fresh engine's ingredients (its sparse vector
        included, whose state ``state``'s replaces: drop this engine afterwards)."""
        return type(self).restore(
            self.data,
            settings=self.settings,
            sparse_vector=self.sparse_vector,
            oracle=self.oracle,
            oracle_noise_level=self.oracle_noise_level,
            ledger=ledger,
            noise=self.noise,
            state=state,
            backend=self.backend,
            mode=self.mode,
            measured_update=self.measured_update,
        )

    def _load(self, state: EngineState) -> None:
        """Takes ``state`` into this freshly constructed engine (for :meth:`restore`).

        Everything that can fail (the checks, compiling the update rounds) runs
        before the ledger is touched, so a refused state leaves the caller's
        ledger as it was.
        """
        if len(state.updates) > self.settings.max_updates:
            raise ValueError(
                f"The state holds {len(state.updates)} updates; max_updates is "
                f"{self.settings.max_updates}."
            )
        if state.hypothesis.domain != self.domain:
            raise ValueError("The state's hypothesis is over a different domain than the data.")
        updates = [
            UpdateRecord(query=u.query, round=self.round_for(u.query), private=u.private)
            for u in state.updates
        ]
        entries = self.ledger.entries
        if entries and (
            len(entries) < len(state.ledger)
            or any(
                (mine.label, mine.event) != (theirs.label, theirs.event)
                for mine, theirs in zip(entries, state.ledger, strict=False)
            )
        ):
            raise ValueError("The ledger's entries do not begin with the state's ledger.")
        self.sparse_vector.import_state(dict(state.sparse_vector))
        if not entries:
            for entry in state.ledger:
                self.ledger.spend(entry.event, label=entry.label)
        self.hypothesis = state.hypothesis  # shared: see EngineState.hypothesis
        self.sv_paid = state.sv_paid
        self.updates = updates
        self.answers = list(state.answers)
        self.released = {key: self.answers[index] for key, index in state.released.items()}

    def round_for(self, query: CMQuery | LinearQuery) -> QueryRound:
        """The round ``query`` runs (compiled from public inputs only; see :meth:`cm_round`)."""
        if isinstance(query, LinearQuery):
            return LinearRound(
                clique=query.clique,
                table=query.table(self.domain),
                learning_rate=self.settings.learning_rate,
            )
        return self.cm_round(query)

    def cm_round(self, query: CMQuery) -> CMRound:
        """Compiles ``query`` into the round the loop runs, from public inputs only.

        Compiled once per :func:`query_key` and coordinate order, and cached: the round
        depends on the canonical spec, the order, the domain, ``n`` and the settings alone.
        The door (:meth:`ask`) compiles the canonical form; a caller who compiles a
        query in another order gets that order's round.

        Plans the real-data solve (:func:`~pmwcm.kernels.fixed_budget.plan_solve`) for
        the gap ``tau = rho c S / n``; all of it reads the spec, the domain and
        ``n``, never the data.

        Raises:
            QueryError: the spec is invalid for this domain.
            SolveRefused: the query's constants need more than
                ``max_solver_iterations`` for a bounded real-data solve.
        """
        # Memoised on the query (CMQuery.canonical_json): the door keyed it already. A
        # query in another coordinate order than its canonical form (the door compiles
        # the canonical one) is the same problem permuted: it gets a round of its own.
        key = query_key(query, self.domain)
        order = query.coordinate_order(self.domain)
        if order is not None:
            key = f"{key} in order {order}"
        cached = self._rounds.get(key)
        if cached is not None and cached[1] is self.settings and cached[2] is self.oracle:
            return cached[0]
        round_ = self._compile_round(query)
        self._rounds.put(key, (round_, self.settings, self.oracle))
        return round_

    def _compile_round(self, query: CMQuery) -> CMRound:
        """:meth:`cm_round` without the cache."""
        settings = self.settings
        shape = self.domain.sizes_of(query.clique)
        if math.prod(shape) >= MAX_CLIQUE_CELLS:
            raise QueryError(
                f"The query's clique {list(query.clique)} has {math.prod(shape):.3g} cells; "
                f"at most {MAX_CLIQUE_CELLS:.3g} can be addressed. Use fewer or coarser attributes."
            )
        # A large clique is never enumerated: its tables are sparse and the
        # problem is compiled on their cells (CMRound.problem_on); here only its constants.
        cells = None if is_dense(shape) else np.zeros((0, len(shape)), dtype=np.int64)
        problem = query.compile(self.domain, cells=cells)
        hypothesis_tol = settings.solver_tol
        if problem.smoothness is None:
            hypothesis_tol = max(hypothesis_tol, settings.nonsmooth_tol)
        tau = settings.data_gap_fraction * settings.sensitivity_factor * problem.scale / self.data.n
        return CMRound(
            problem=problem,
            oracle=self.oracle,
            hypothesis_tol=hypothesis_tol,
            data_solve=plan_solve(problem, gap=tau, max_iterations=settings.max_solver_iterations),
            sensitivity_factor=settings.sensitivity_factor,
            learning_rate=settings.learning_rate,
        )

    def ask(
        self,
        query: CMQuery | LinearQuery,
        *,
        ahead: Iterable[CMQuery] | None = None,
        proceed: Callable[[], None] | None = None,
    ) -> Answer:
        """Answers one query: the engine's one door (the CLI, the service, the estimators).

        The query is keyed once (:func:`query_key`, its canonical form: the same
        problem in any spelling, its features in any order, is one key), a repeat is
        answered from the released answers, a new query is compiled once, in its
        canonical coordinate order, and its round is handed to the engine's mode
        (:mod:`pmwcm.engine.modes`). The answer's ``value`` is in the coordinate
        order ``query`` asked for (:meth:`CMQuery.coordinate_order`).

        Args:
            query: a CM query (or a counting query, on an engine built with
                ``kind="linear"``).
            ahead: the queries to be asked next, in order, if known (a batch): their
                real-data solves may start while this one is answered. It changes
                when that work is done, never what is computed or released.
            proceed: called once everything public is done (the query keyed, compiled
                and found servable), right before the data is read; raising from it
                gives the query up with nothing spent (the service's deadline).

        Raises:
            QueryError: the spec is invalid for this domain (nothing is spent).
            Refused: over the radius cap, or a real-data solve too costly (nothing spent).
            EngineHalted: ``T`` updates are spent and ``after_halt="refuse"``.
            BudgetExceededError: the ledger refuses (nothing is drawn).
        """
        key = query_key(query, self.domain)
        if ahead is not None:  # announced from this query on
            self._data_side.expect([(key, query), *self._keyed(ahead)], self._plan_ahead)
        return self._ask(query, key, proceed)

    def ask_each(self, queries: Iterable[CMQuery]) -> Iterator[Answer | PmwcmError]:
        """:meth:`ask` for a batch known in advance: the answer of each, in order, or the
        refusal it met (a :class:`~pmwcm.errors.PmwcmError`, decided from public inputs;
        any other exception propagates). The batch is announced first, so each query's
        real-data solve may start while the one before it is answered; each query is
        canonicalised once (its key is memoised on it, :meth:`CMQuery.canonical_json`)."""
        keyed = self._keyed(queries)
        self._data_side.expect(keyed, self._plan_ahead)
        for _, query in keyed:
            try:
                yield self.ask(query)
            except PmwcmError as refusal:
                yield refusal

    def _keyed(self, queries: Iterable[CMQuery]) -> list[tuple[str | None, CMQuery]]:
        """Each query with its key (``None`` for one that will be refused when asked)."""
        items: list[tuple[str | None, CMQuery]] = []
        for query in queries:
            try:
                items.append((query_key(query, self.domain), query))
            except QueryError:
                items.append((None, query))
        return items

    def answer(self, query: CMQuery) -> Answer:
        """:meth:`ask` for one CM query (the paper's loop body)."""
        return self.ask(query)

    def answer_linear(self, query: LinearQuery) -> Answer:
        """:meth:`ask` for one counting query (Hardt-Rothblum PMW on the same loop).

        The engine's noise level is then the Laplace multiplier (build it with
        :func:`pmwcm.engine.practical.build_engine` and ``kind="linear"``).
        """
        return self.ask(query)

    def _ask(
        self, query: CMQuery | LinearQuery, key: str, proceed: Callable[[], None] | None
    ) -> Answer:
        """:meth:`ask` once ``query`` is keyed."""
        released = self.released.get(key)
        if released is not None:  # a repeat: nothing to compile, nothing to spend
            if proceed is not None:
                proceed()
            return self._as_asked(query, self._record(released.value, released.source,
                                                      repeated=True))  # fmt: skip
        canonical = query
        if isinstance(query, CMQuery):
            _check_radius(query)
            canonical = query.canonical(self.domain)
        round_ = self.round_for(canonical)
        round_.privacy_event(self.oracle_noise_level)  # can it be served? (before any test)
        if proceed is not None:
            proceed()  # the last point at which giving up costs nothing
        with blas_threads(1):
            return self._as_asked(query, self._run(canonical, round_, key))

    def _as_asked(self, query: CMQuery | LinearQuery, answer: Answer) -> Answer:
        """``answer`` (in the canonical coordinate order) in the order ``query`` asked."""
        if not isinstance(query, CMQuery):
            return answer
        order = query.coordinate_order(self.domain)
        if order is None:
            return answer
        return replace(answer, value=np.asarray(answer.value)[list(order)])

    def recorded(self, answer: Answer) -> Answer:
        """The engine's own record of ``answer`` (its transcript entry, canonical order):
        what a log that the engine is restored from must hold."""
        return self.answers[answer.index]

    def _run(self, query: CMQuery | LinearQuery, round_: QueryRound, key: str) -> Answer:
        """The round of a new, servable query: after the halt, refused or synthetic;
        before, its mode decides (:mod:`pmwcm.engine.modes`)."""
        if self.halted:
            if self.settings.after_halt == "refuse":
                raise EngineHalted(
                    f"The privacy budget is spent: all {self.settings.max_updates} updates "
                    "were used, so no further query can be answered with an accuracy check. "
                    "Use after_halt='synthetic' to answer from the final hypothesis."
                )
            hyp_marginal = self.hypothesis.clique_table(round_.clique)
            return self._release(key, round_.hypothesis_answer(hyp_marginal), "synthetic")
        return self.mode.run(self, query, round_, key)

    # The steps of a round, for the modes (pmwcm.engine.modes.RoundSteps).

    def hypothesis_side(self, round_: QueryRound) -> tuple[Any, Any]:
        """The hypothesis's clique table and its answer (public)."""
        table = self.hypothesis.clique_table(round_.clique)
        return table, round_.hypothesis_answer(table)

    def begin_data_side(self, key: str, round_: QueryRound) -> Callable[[Any], tuple[Any, float]]:
        """Starts the real-data side (its counts, then the fixed-work solve, independent
        of the answer) on a worker thread, unless it already ran ahead or the clique is
        small (then it runs when the answer is known: :mod:`pmwcm.engine.data_side`)."""
        if isinstance(round_, CMRound) and self._worth_a_second_core(round_):
            pending = self._data_side.start(key, round_)

            def finish_pending(hyp_answer: Any) -> tuple[Any, float]:
                table, error_of = pending.result()
                return table, error_of(hyp_answer)

            return finish_pending

        def finish_inline(hyp_answer: Any) -> tuple[Any, float]:
            table = self._data_side.table(round_.clique)
            return table, round_.error(table, hyp_answer)

        return finish_inline

    def data_table(self, round_: QueryRound) -> Any:
        """The data's clique table (what the oracle reads)."""
        return self._data_side.table(round_.clique)

    def sparse_vector_test(self, round_: QueryRound, error: float) -> bool:
        """Charges the sparse vector's event (once, before its first test), then tests
        ``error`` in units of the round's sensitivity; ``True`` above the threshold."""
        if not self.sv_paid:
            self.ledger.spend(self.sparse_vector.privacy_event(), label="sparse vector")
            self.sv_paid = True
        # Issue 35's pacing: an update due by the public schedule skips the sparse
        # vector's test (it reads only the released count of answers and updates).
        if self.measured_update is not None and self.measured_update.due(
            answered=len(self.released), updates=len(self.updates), cutoff=self.settings.max_updates
        ):
            return True
        sensitivity = round_.sensitivity(self.data.n)
        threshold = self._threshold_units(sensitivity)
        return self.sparse_vector.above(error / sensitivity, threshold=threshold)

    def count_oracle_call(self) -> None:
        """Counts an unconditional oracle call (composition mode's 0-DP counter)."""
        self.sparse_vector.above(0.0, threshold=0.0)  # reads nothing

    def oracle_release(
        self,
        query: CMQuery | LinearQuery,
        round_: QueryRound,
        key: str,
        hypothesis: tuple[Any, Any],
        data_table: Any,
    ) -> Answer:
        """A paid oracle answer, the update it defines, and its release (source ``oracle``).

        With issue 35's measured update the flagged clique's marginal is measured (and
        paid) first; ``update="measure"`` then releases the hypothesis's answer after
        it absorbs the measurement, with no oracle call (:meth:`_measured_release`).
        """
        measurement = self._measurement(round_, data_table)
        measured_only = self.measured_update is not None and not self.measured_update.calls_oracle
        if measurement is not None and measured_only:
            return self._measured_release(query, round_, key, measurement)
        private = self.private_answer(round_, data_table)
        self._update(query, round_, hypothesis[0], hypothesis[1], private, measurement)
        return self._release(key, private, "oracle")

    def _measurement(self, round_: QueryRound, data_marginal: Any) -> Measurement | None:
        """The flagged clique's noisy marginal, charged to the ledger before any noise
        is drawn, when the measured update asks for it (a public decision: the
        setting and the clique's shape); ``None`` otherwise."""
        update = self.measured_update
        if update is None or not update.measures(self.domain, round_.clique):
            return None
        self.ledger.spend(update.event(), label=f"clique measurement {len(self.updates) + 1}")
        table = as_table(data_marginal).table()
        return update.measure(table, round_.clique, n=self.data.n, noise=self.noise)

    def _measured_release(
        self, query: CMQuery | LinearQuery, round_: QueryRound, key: str, measurement: Measurement
    ) -> Answer:
        """``update="measure"``: the hypothesis absorbs the measurement and its answer
        is released (source ``"oracle"``: a private release paid in this round; its
        certificate is :meth:`~pmwcm.engine.measured_update.MeasuredUpdate.certificate`).
        Post-processing of the measurement; committed at once."""
        assert self.measured_update is not None
        every = (*self.prior_measurements, measurement)
        updated = self.measured_update.absorb(self.hypothesis, measurement, every)
        answer = round_.hypothesis_answer(updated.clique_table(round_.clique))
        self.hypothesis = updated
        self.prior_measurements = every
        self.updates.append(UpdateRecord(query=query, round=round_, private=answer))
        return self._release(key, answer, "oracle")

    def release(self, key: str, value: Any, source: Source) -> Answer:
        """Records and releases ``value`` under ``key``."""
        return self._release(key, value, source)

    def certified_error(self, query: CMQuery, *, beta: float, queries: int) -> float:
        """The excess risk a ``"hypothesis"`` answer to ``query`` is certified not to exceed.

        A below-threshold answer ``theta_hat`` passed the sparse vector's test
        ``q / Delta + nu < threshold + rho`` with ``q = L_D(theta_hat) - L_D(theta_D)``
        and ``L_D(theta_D) <= min L_D + tau`` (the fixed-budget solve's a-priori gap). With
        probability ``>= 1 - beta`` over the sparse vector's noise on a stream of
        ``queries`` queries, ``|nu| + |rho| <= alpha``
        (:meth:`~pmwcm.mechanisms.sparse_vector.LyuSuLiSparse.accuracy_margin`), so::

            L_D(theta_hat) - min L_D  <=  (threshold + alpha) Delta + tau.

        This holds whatever the starting hypothesis was (uniform, a private prior
        or public data): a prior can make answers better, never worse than this.
        Depends only on public quantities (``n``, the query, the settings).
        """
        round_ = self.cm_round(query.canonical(self.domain))  # the door's round
        sensitivity = round_.sensitivity(self.data.n)
        alpha = self.sparse_vector.accuracy_margin(queries=queries, beta=beta)
        return (self._threshold_units(sensitivity) + alpha) * sensitivity + round_.tau

    def _threshold_units(self, sensitivity: float) -> float:
        """The sparse vector's threshold in units of the query's sensitivity."""
        if self.settings.absolute_threshold is not None:
            return self.settings.absolute_threshold / sensitivity
        return self.settings.threshold

    def _plan_ahead(self, key: str, query: CMQuery) -> CMRound | None:
        """An announced query's round, if its data side should start ahead (public inputs)."""
        if self.halted or key in self.released or not self.mode.solves_ahead:
            return None
        try:
            _check_radius(query)
            round_ = self.cm_round(query.canonical(self.domain))
            round_.privacy_event(self.oracle_noise_level)
        except (QueryError, Refused):
            return None
        return round_ if self._worth_a_second_core(round_) else None

    def _worth_a_second_core(self, round_: CMRound) -> bool:
        """Whether the round's real-data solve runs on a worker thread: a public rule.

        A large clique's data table is sparse and its row count is the data's
        occupied cells, so it always goes (deciding by the count would let the data
        choose); a small one goes when its cells times the planned iterations are
        many, since below that the hand-off costs more than it saves.
        """
        shape = self.domain.sizes_of(round_.clique)
        if not is_dense(shape):
            return True
        return math.prod(shape) * round_.data_solve.iterations >= SECOND_CORE_MIN_WORK

    def private_answer(self, round_: QueryRound, data_marginal: Any) -> Any:
        """A fresh private answer, paid for in the ledger before any noise is drawn."""
        event = round_.privacy_event(self.oracle_noise_level)
        self.ledger.spend(event, label=f"oracle call {len(self.updates) + 1}")
        return round_.private_answer(
            data_marginal, n=self.data.n, noise_level=self.oracle_noise_level, noise=self.noise
        )

    def _update(
        self,
        query: CMQuery | LinearQuery,
        round_: QueryRound,
        marginal: Any,
        answer: Any,
        private: Any,
        measurement: Measurement | None = None,
    ) -> None:
        """Applies the update and its sweeps to a copy, then commits both at once.

        With a ``measurement`` (``update="both"``, issue 35) the copy is first
        projected onto it (:func:`~pmwcm.engine.measured_update.project_onto`), the
        tilt then starts from the projected hypothesis, and the measurement joins
        the refit's and is kept with the prior's.

        The hypothesis is replaced, never changed in place: states taken earlier
        (:meth:`state`) share the old one and must keep seeing it.

        After the sweeps, ``settings.refit_iterations`` steps of the prior's fit
        pull the hypothesis back onto the prior's released marginals
        (:mod:`pmwcm.mechanisms.priors.refit`; public, so free).

        A sweep that raised after the record was appended would leave an update
        on file that every later round replays and fails on again; working on a
        copy keeps the engine's hypothesis and updates as they were until the
        whole step has succeeded.
        """
        record = UpdateRecord(query=query, round=round_, private=private)
        updated = self.hypothesis.copy()
        measurements = self.prior_measurements
        if measurement is not None:  # issue 35: the measured clique first, then the tilt
            updated = project_onto(updated, measurement)
            marginal = updated.clique_table(round_.clique)
            answer = round_.hypothesis_answer(marginal)
            measurements = (*measurements, measurement)
        rule = self.settings.step_rule
        context = self._step_context()
        factor = step_factor(rule, round_, marginal, answer, private, context=context)
        updated.reweight_table(round_.clique, marginal, factor)
        history = [*self.updates, record]
        if self.settings.sweep_window is not None:  # a constant cost per round, whatever T
            history = history[-self.settings.sweep_window :]
        for _ in range(self.settings.sweeps):
            for past in history:
                _replay(updated, past, rule, context)
        updated = refit_to_measurements(
            updated, measurements, iterations=self.settings.refit_iterations
        )
        self.hypothesis = updated
        self.prior_measurements = measurements
        self.updates.append(record)

    def _step_context(self) -> PublicContext:
        """The public values a calibrated update reads besides the hypothesis: n, the noise."""
        return PublicContext(n=self.data.n, noise_level=self.oracle_noise_level)

    def _release(self, key: Any, value: Any, source: Source) -> Answer:
        answer = self._record(value, source, repeated=False)
        self.released[key] = answer
        return answer

    def _record(self, value: Any, source: Source, *, repeated: bool) -> Answer:
        answer = Answer(
            index=len(self.answers),
            value=value,
            source=source,
            updates=len(self.updates),
            epsilon_spent=self.ledger.spent_epsilon(),
            delta=self.ledger.delta,
            repeated=repeated,
        )
        self.answers.append(answer)
        return answer

    def synthetic_records(self, n: int, *, rng: np.random.Generator) -> np.ndarray:
        """``n`` records sampled from the current hypothesis (post-processing)."""
        return self.hypothesis.sample(n, rng=rng)


def _replay(
    hypothesis: Histogram, past: UpdateRecord, rule: StepRule, context: PublicContext
) -> None:
    """Re-applies a past update at ``hypothesis``, in place (MWEM-style; free), with
    the step ``rule`` of the new updates (a calibrated replay moves only as far as
    the past released answer is still off on the current hypothesis)."""
    table = hypothesis.clique_table(past.round.clique)
    answer = past.round.hypothesis_answer(table)
    factor = step_factor(rule, past.round, table, answer, past.private, context=context)
    hypothesis.reweight_table(past.round.clique, table, factor)


def _check_radius(query: CMQuery) -> None:
    """Refuses a radius over :data:`~pmwcm.kernels.queries.MAX_RADIUS`, from the spec.

    The one cap the command line, the library and the service apply: every noise
    scale grows with ``R``, and past it the real-data solve's objective range leaves
    float64's resolution for common losses.
    """
    if query.radius > MAX_RADIUS:
        raise RadiusRefused(
            f"radius must be at most {MAX_RADIUS:g}, got radius={query.radius:g}: every "
            "noise scale grows with the radius, and beyond it the answers carry no signal."
        )


class RadiusRefused(Refused, ValueError):
    """A query whose radius is over the cap (refused before anything is spent)."""
