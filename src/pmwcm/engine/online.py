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
   no accuracy check behind it). A measured engine (issue 35) that answers after its
   halt, whose paced updates take slots without a positive, tests on past its
   ``T``-th update and halts at the first flag with no slot left
   (:attr:`~pmwcm.engine.running_state.StateView.halted`).

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

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Self

import numpy as np

from pmwcm.engine.measured_update import MeasuredUpdate
from pmwcm.engine.modes import HYBRID, Mode
from pmwcm.engine.parts import EngineParts, PartsView
from pmwcm.engine.round_compiler import ROUND_CACHE_ENTRIES as ROUND_CACHE_ENTRIES
from pmwcm.engine.round_compiler import RadiusRefused as RadiusRefused
from pmwcm.engine.round_compiler import RoundCompiler, check_radius
from pmwcm.engine.rounds import CMRound, QueryRound
from pmwcm.engine.running_state import RunningState, StateView
from pmwcm.engine.settings import EngineSettings
from pmwcm.engine.state import SYNTHETIC_ANSWER_WARNING as SYNTHETIC_ANSWER_WARNING
from pmwcm.engine.state import Answer as Answer  # the engine's values, re-exported
from pmwcm.engine.state import EngineState as EngineState
from pmwcm.engine.state import PastUpdate as PastUpdate
from pmwcm.engine.state import Source as Source
from pmwcm.engine.state import UpdateRecord as UpdateRecord
from pmwcm.engine.state import query_key as query_key
from pmwcm.engine.steps import EngineHalted as EngineHalted
from pmwcm.engine.steps import EngineSteps, worth_a_second_core
from pmwcm.errors import PmwcmError, Refused
from pmwcm.kernels.backend import BackendChoice, choose_backend
from pmwcm.kernels.counting import LinearQuery
from pmwcm.kernels.histogram import DenseHistogram, Histogram
from pmwcm.kernels.queries import CMQuery, QueryError
from pmwcm.kernels.threads import blas_threads
from pmwcm.mechanisms.accounting import PrivacyLedger
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.oracles.base import Oracle
from pmwcm.mechanisms.priors.marginals import Measurement
from pmwcm.mechanisms.private_data import PrivateData
from pmwcm.mechanisms.sparse_vector import SparseVector


class OnlinePMW(PartsView, StateView):
    """The online private multiplicative weights engine for CM queries.

    The engine is its parts (:class:`~pmwcm.engine.parts.EngineParts`, fixed) and its
    state (:class:`EngineState`), which only the engine changes: every attribute is
    read-only. An engine with another part is a new engine
    (:meth:`from_parts`), and a saved state comes back through :meth:`restore`.

    Args:
        data, settings, sparse_vector, oracle, oracle_noise_level, ledger, noise,
            backend, mode, measured_update: the engine's parts (see
            :class:`~pmwcm.engine.parts.EngineParts`).
        prior: the starting hypothesis (default uniform). A prior computed from
            the private data must already be paid for in ``ledger``.
        prior_measurements: the released marginals ``prior`` was fitted to, for
            the refit after each update (``settings.refit_iterations``); public.
            Issue 35's measurements join them (and so the state and the refit).
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
        parts = EngineParts(
            data=data,
            settings=settings,
            sparse_vector=sparse_vector,
            oracle=oracle,
            oracle_noise_level=oracle_noise_level,
            ledger=ledger,
            noise=noise,
            backend=backend,
            mode=mode,
            measured_update=measured_update,
        )
        if prior is not None and prior.domain != data.domain:
            raise ValueError("The prior is over a different domain than the data.")
        if prior is None and choose_backend(data.domain).kind != "dense":
            raise ValueError(
                f"The uniform start is a dense tensor, and |X| = {data.domain.size:.3g} is too "
                "large for one: pass a prior (build_engine chooses a support by itself)."
            )
        start = prior.copy() if prior is not None else DenseHistogram.uniform(data.domain)
        self._start(parts, start, tuple(prior_measurements))

    def _start(
        self, parts: EngineParts, hypothesis: Histogram, measurements: tuple[Measurement, ...]
    ) -> None:
        """Sets the parts, the start and the engine's private helpers."""
        for measurement in measurements:
            shape = tuple(parts.data.domain.size_of(name) for name in measurement.clique)
            if np.shape(measurement.values) != shape:
                raise ValueError(
                    f"The prior measurement on {measurement.clique} has shape "
                    f"{np.shape(measurement.values)}; the schema's clique has {shape}."
                )
        self._parts = parts
        self._running = RunningState(hypothesis, measurements)
        #: compiled rounds (public inputs only), the last few kept.
        self._rounds = RoundCompiler(
            domain=parts.data.domain, n=parts.data.n, settings=parts.settings, oracle=parts.oracle
        )
        #: the steps of a round: the only writer of the running state.
        self._steps = EngineSteps(parts, self._running, self.cm_round)

    @classmethod
    def from_parts(cls, parts: EngineParts, *, state: EngineState) -> Self:
        """An engine of ``parts`` continuing from ``state``: the one way to vary a part.

        Nothing is drawn and nothing is measured: the hypothesis is the state's,
        the update rounds are compiled again from public inputs, and the sparse
        vector takes the state's threshold noise and positives, so the engine's
        next answers are the ones the saved engine would have given (with the
        same noise stream). ``parts.sparse_vector``'s state is replaced by
        ``state.sparse_vector`` (so it must not serve another engine afterwards).
        ``parts.ledger``, if empty, is filled with ``state.ledger``; otherwise its
        entries must begin with ``state.ledger`` (crash recovery's ledger also holds
        debits committed after the state was saved).

        Raises:
            ValueError: the state does not fit these parts.
            BudgetExceededError: the state's ledger does not fit the ledger's budget.
        """
        engine = cls.__new__(cls)
        engine._start(parts, state.hypothesis, state.prior_measurements)
        engine._load(state)
        return engine

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
    ) -> Self:
        """:meth:`from_parts` with the parts spelled out (as for :class:`OnlinePMW`)."""
        parts = EngineParts(
            data=data,
            settings=settings,
            sparse_vector=sparse_vector,
            oracle=oracle,
            oracle_noise_level=oracle_noise_level,
            ledger=ledger,
            noise=noise,
            backend=backend,
            mode=mode,
            measured_update=measured_update,
        )
        return cls.from_parts(parts, state=state)

    def resumed(self, state: EngineState, *, ledger: PrivacyLedger) -> Self:
        """:meth:`from_parts` with this fresh engine's parts and ``ledger`` (its sparse
        vector included, whose state ``state``'s replaces: drop this engine afterwards)."""
        return self.from_parts(replace(self._parts, ledger=ledger), state=state)

    def _load(self, state: EngineState) -> None:
        """Takes ``state`` into this freshly started engine (for :meth:`from_parts`); its
        updates' rounds are compiled again, through :meth:`round_for`, before anything
        is changed (:meth:`~pmwcm.engine.running_state.RunningState.adopt`)."""
        updates = [
            UpdateRecord(query=u.query, round=self.round_for(u.query), private=u.private)
            for u in state.updates
        ]
        self._running.adopt(state, updates, self._parts)

    def round_for(self, query: CMQuery | LinearQuery) -> QueryRound:
        """The round ``query`` runs (compiled from public inputs only; see :meth:`cm_round`)."""
        if isinstance(query, LinearQuery):
            return self._rounds.linear_round(query)
        return self.cm_round(query)

    def cm_round(self, query: CMQuery) -> CMRound:
        """Compiles ``query`` into the round the loop runs, from public inputs only, once
        per :func:`query_key` and coordinate order
        (:meth:`~pmwcm.engine.round_compiler.RoundCompiler.cm_round`).

        The door (:meth:`ask`) compiles the canonical form; a caller who compiles a
        query in another order gets that order's round.

        Raises:
            QueryError: the spec is invalid for this domain.
            SolveRefused: the query's constants need more than
                ``max_solver_iterations`` for a bounded real-data solve.
        """
        return self._rounds.cm_round(query)

    def ask(
        self,
        query: CMQuery | LinearQuery,
        *,
        ahead: Iterable[CMQuery] | None = None,
        proceed: Callable[[], None] | None = None,
        log_repeat: bool = True,
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
            log_repeat: whether a repeat is appended to :attr:`answers`. A caller that
                writes its own record of every line (a streamed query file) passes
                ``False``, so the transcript grows with the distinct queries only; the
                repeat's answer is the same either way, its ``index`` then the
                released answer's.

        Raises:
            QueryError: the spec is invalid for this domain (nothing is spent).
            Refused: over the radius cap, or a real-data solve too costly (nothing spent).
            EngineHalted: ``T`` updates are spent and ``after_halt="refuse"``.
            BudgetExceededError: the ledger refuses (nothing is drawn).
        """
        key = query_key(query, self.domain)
        if ahead is not None:  # announced from this query on
            self._steps.data_side.expect([(key, query), *self._keyed(ahead)], self._plan_ahead)
        return self._ask(query, key, proceed, log_repeat)

    def ask_each(self, queries: Iterable[CMQuery]) -> Iterator[Answer | PmwcmError]:
        """:meth:`ask` for a batch known in advance: the answer of each, in order, or the
        refusal it met (a :class:`~pmwcm.errors.PmwcmError`, decided from public inputs;
        any other exception propagates). The batch is announced first, so each query's
        real-data solve may start while the one before it is answered; each query is
        canonicalised once (its key is memoised on it, :meth:`CMQuery.canonical_json`)."""
        keyed = self._keyed(queries)
        self._steps.data_side.expect(keyed, self._plan_ahead)
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
        self,
        query: CMQuery | LinearQuery,
        key: str,
        proceed: Callable[[], None] | None,
        log_repeat: bool = True,
    ) -> Answer:
        """:meth:`ask` once ``query`` is keyed."""
        released = self._running.log.repeat_of(key)
        if released is not None:  # a repeat: nothing to compile, nothing to spend
            if proceed is not None:
                proceed()
            return self._as_asked(query, self._steps.repeat(released, log=log_repeat))
        canonical = query
        if isinstance(query, CMQuery):
            check_radius(query)
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
        return self._running.log.answers[answer.index]

    def _run(self, query: CMQuery | LinearQuery, round_: QueryRound, key: str) -> Answer:
        """The round of a new, servable query: after the halt, refused or synthetic;
        before, its mode decides (:mod:`pmwcm.engine.modes`)."""
        if self.halted:
            return self._steps.after_halt(key, round_)
        return self.mode.run(self._steps, query, round_, key)

    def certified_error(self, query: CMQuery, *, beta: float, queries: int) -> float:
        """The excess risk a ``"hypothesis"`` answer to ``query`` is certified not to exceed.

        A below-threshold answer ``theta_hat`` passed the sparse vector's test
        ``q / Delta + nu < threshold + rho`` with ``q = L_D(theta_hat) - L_D(theta_D)``
        and ``L_D(theta_D) <= min L_D + tau`` (the fixed-budget solve's a-priori gap). With
        probability ``>= 1 - beta`` over the sparse vector's noise on a stream of
        ``queries`` queries, ``|nu| + |rho| <= alpha``
        (:meth:`~pmwcm.mechanisms.sparse_vector.LyuSuLiSparse.accuracy_margin`), so::

            L_D(theta_hat) - min L_D  <=  (threshold + alpha) Delta + tau,

        ``threshold`` the one the query's test would use now: the rule's, three times it on
        a clique a support plan's measured update cannot measure, doubled for each update
        the flags have run ahead of the pacing's reserve
        (:meth:`~pmwcm.engine.steps.EngineSteps.round_threshold_units`). This holds
        whatever the starting hypothesis was (uniform, a private prior or public data): a
        prior can make answers better, never worse than this. Depends only on public
        quantities (``n``, the query, the settings, the plan).
        """
        round_ = self.cm_round(query.canonical(self.domain))  # the door's round
        sensitivity = round_.sensitivity(self.data.n)
        alpha = self.sparse_vector.accuracy_margin(queries=queries, beta=beta)
        return (self._steps.round_threshold_units(round_) + alpha) * sensitivity + round_.tau

    def _plan_ahead(self, key: str, query: CMQuery) -> CMRound | None:
        """An announced query's round, if its data side should start ahead (public inputs)."""
        if self.halted or key in self.released or not self.mode.solves_ahead:
            return None
        try:
            check_radius(query)
            round_ = self.cm_round(query.canonical(self.domain))
            round_.privacy_event(self.oracle_noise_level)
        except (QueryError, Refused):
            return None
        return round_ if worth_a_second_core(self.domain, round_) else None

    def synthetic_records(self, n: int, *, rng: np.random.Generator) -> np.ndarray:
        """``n`` records sampled from the current hypothesis (post-processing)."""
        return self.hypothesis.sample(n, rng=rng)
