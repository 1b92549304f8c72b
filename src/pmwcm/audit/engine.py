"""Auditing the whole online PMW engine on a tiny universe.

**Output.** For each query of a fixed stream, the source of its answer
(hypothesis, oracle, refused) and, for an oracle answer, the sign of
``theta[0]``: codes ``0`` hypothesis, ``1`` / ``2`` oracle with ``theta[0] <
0`` / ``>= 0``, ``3`` refused because the engine halted
(:class:`~pmwcm.engine.online.EngineHalted`), ``4`` any other exception the engine
raised (a :class:`~pmwcm.kernels.fixed_budget.SolveRefused`, a solver failure, ...).
**A refusal is an output**: it is observable, so it is compared across the
neighbours like any answer and never dropped; a refusal that depends on the
data makes its code's probability differ between ``D0`` and ``D1``, which the
Neyman-Pearson sets of the sequence pick up. Hypothesis answers are computed
from the public hypothesis, so they carry nothing beyond their source.

**Vectorised trials** (:class:`EngineModel`, for engines with ``T = 1`` and
the output-perturbation oracle). Before the first update the hypothesis is
fixed, so the sparse vector's inputs ``err_l(D, Dhat) / Delta_l`` and
thresholds are deterministic: the model runs the *real* engine once with a
recording sparse vector that always answers "below", then replays the real
sparse vector's rule (:class:`~pmwcm.audit.sparse.SparseVectorModel`) and the
oracle's noise (:func:`~pmwcm.audit.oracles.probe`) on arrays of trials; with
``T = 1`` the engine halts after its only update. A query on which that run
raises is recorded as raised: always, if compiling it or pricing its oracle
call raised (the engine does both before its halt check), else only while the
engine has not halted (after the halt it refuses first). Such a query never
reaches the sparse vector, so it draws no noise. :func:`crosscheck_engine`
runs the real engine end to end on the same draws and counts disagreements.

**Neighbours** (:func:`adversarial_pair`). Attributes ``a, b, y`` (binary),
hinge queries of ``y`` on ``a`` ("up") and on ``b`` ("down"), no intercept,
``R = 1/2`` (linear on the ball), and a public prior whose minimiser is ``+R``
while the data's is ``-R``. Then ``err = 2 R |E[y a]|``, and moving one record
from ``(a=+1, b=-1, y=+1)`` to ``y=-1`` raises every "up" error by ``4R/n =
2S/n`` and lowers every "down" error by as much: the sensitivity bound is
attained, with queries moving in opposite directions (:mod:`pmwcm.audit.sparse`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pmwcm.audit.cases import AuditCase
from pmwcm.audit.events import CategoricalFamily, row_codes
from pmwcm.audit.oracles import probe
from pmwcm.audit.sparse import SparseVectorModel
from pmwcm.engine.online import EngineHalted, OnlinePMW
from pmwcm.engine.practical import PMWConfig, build_engine, make_accountant, make_sparse_vector
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.accounting import PrivacyLedger
from pmwcm.mechanisms.noise import NoiseSource, NumpyNoise
from pmwcm.mechanisms.oracles import OracleInput, OutputPerturbation
from pmwcm.mechanisms.private_data import PrivateData

__all__ = [
    "EngineModel",
    "adversarial_pair",
    "crosscheck_engine",
    "engine_builder",
    "engine_case",
    "engine_family",
    "outcome_code",
]

FloatArray = NDArray[np.float64]
HYPOTHESIS, ORACLE_NEG, ORACLE_POS, REFUSED, RAISED = 0, 1, 2, 3, 4
#: How a query of the traced run ended: at the sparse vector, or raised before the
#: engine's halt check ("public": compiling or pricing it) or after it ("data").
SV, PUBLIC, DATA = "sv", "public", "data"
Build = Callable[[PrivateData, NoiseSource], OnlinePMW]


class _Recorder:
    """A sparse vector that answers "below" and records what the engine asked."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.calls: list[tuple[float, float]] = []
        self.closed = False

    cutoff = property(lambda self: self.real.cutoff)
    positives = property(lambda self: 0)
    halted = property(lambda self: self.closed)

    def close(self) -> None:
        """Halts (never asked by the engine: a recorder never flags)."""
        self.closed = True

    def above(self, value: float, *, threshold: float) -> bool:
        self.calls.append((value, threshold))
        return False

    def privacy_event(self) -> Any:
        return self.real.privacy_event()

    def accuracy_margin(self, *, queries: int, beta: float) -> float:
        return float(self.real.accuracy_margin(queries=queries, beta=beta))

    def export_state(self) -> dict[str, float | int | None]:
        return {"positives": 0, "rho": None}

    def import_state(self, state: dict[str, float | int | None]) -> None:
        """Takes a fresh engine's state (nothing to restore: it always answers "below")."""
        if state.get("positives"):
            raise ValueError("a recorder starts a fresh engine: it has no positives to restore")


@dataclass(frozen=True, kw_only=True)
class _Trace:
    sv: SparseVectorModel
    kinds: tuple[str, ...]  # per query: SV, PUBLIC or DATA
    values: FloatArray  # per query reaching the sparse vector (in order)
    thresholds: FloatArray
    centers: FloatArray  # (sv queries, d): noiseless oracle answers
    sigmas: FloatArray  # (sv queries,)
    radius: FloatArray  # (sv queries,)

    @property
    def sv_queries(self) -> int:
        """How many queries reach the sparse vector."""
        return self.values.size


def _raises_before_halt_check(engine: OnlinePMW, query: CMQuery) -> bool:
    """Whether the engine raises on ``query`` before it looks at its halt state."""
    try:
        engine.cm_round(query).privacy_event(engine.oracle_noise_level)
    except Exception:
        return True
    return False


class _Replay:
    """Laplace streams by scale (the sparse vector) and one Gaussian vector (the oracle)."""

    def __init__(self, streams: dict[float, FloatArray], z: FloatArray) -> None:
        self._streams = {s: list(v.tolist()) for s, v in streams.items()}
        self._z: FloatArray | None = z

    name = "replay"

    def laplace(self, scale: float, size: int) -> FloatArray:
        stream = self._streams[float(scale)]
        return np.array([stream.pop(0) for _ in range(size)])

    def gaussian(self, sigma: float, size: int) -> FloatArray:
        assert self._z is not None and self._z.size == size, "unexpected Gaussian draw"
        z, self._z = self._z, None
        return z * sigma

    def uniform(self, size: int) -> FloatArray:
        raise AssertionError("unexpected uniform draw")


@dataclass(frozen=True, kw_only=True)
class EngineModel:
    """``mechanism(data, trials, rng)``: the engine's output codes on a query stream.

    Attributes:
        build: ``build(data, noise) -> OnlinePMW`` with ``T = 1`` and output perturbation.
        queries: the stream.
    """

    build: Build
    queries: tuple[CMQuery, ...]

    def trace(self, data: PrivateData) -> _Trace:
        """Everything data-dependent, read from the real engine before any update."""
        engine = self.build(data, NumpyNoise(seed=0))
        if engine.settings.max_updates != 1 or not isinstance(engine.oracle, OutputPerturbation):
            raise ValueError("EngineModel needs T = 1 and the output-perturbation oracle.")
        if engine.settings.after_halt != "refuse":
            raise ValueError("EngineModel needs after_halt='refuse'.")
        sv = SparseVectorModel.of(engine.sparse_vector)  # type: ignore[arg-type]
        recorder = _Recorder(engine.sparse_vector)
        parts = replace(engine.parts, sparse_vector=recorder)
        engine = type(engine).from_parts(parts, state=engine.state())  # its own class
        kinds: list[str] = []
        centers, sigmas, radii = [], [], []
        for q in self.queries:
            asked = len(recorder.calls)
            try:
                engine.answer(q)
            except Exception:  # a refusal is an output: recorded, never dropped
                if len(recorder.calls) != asked:
                    raise ValueError("the engine raised after its sparse vector's test.") from None
                kinds.append(PUBLIC if _raises_before_halt_check(engine, q) else DATA)
                continue
            if len(recorder.calls) != asked + 1:
                raise ValueError("every query must reach the sparse vector (no repeats).")
            kinds.append(SV)
            problem = engine.cm_round(q).problem
            inp = OracleInput(problem=problem, weights=data.marginal(problem.clique).ravel(),
                              n=data.n)  # fmt: skip
            center, sigma = probe(engine.oracle, inp, engine.oracle_noise_level)
            centers.append(center)
            sigmas.append(sigma)
            radii.append(problem.radius)
        calls = np.array(recorder.calls, dtype=np.float64).reshape(-1, 2)
        dim = centers[0].size if centers else 0
        return _Trace(
            sv=sv,
            kinds=tuple(kinds),
            values=calls[:, 0],
            thresholds=calls[:, 1],
            centers=np.array(centers).reshape(-1, dim),
            sigmas=np.array(sigmas),
            radius=np.array(radii),
        )

    def codes(
        self, trace: _Trace, rho: FloatArray, nu: FloatArray, z: FloatArray
    ) -> NDArray[np.int8]:
        """Output codes for the draws ``rho``, ``nu`` (sparse vector) and ``z`` (oracle)."""
        trials = rho.shape[0]
        answers = trace.sv.decide(trace.values, trace.thresholds, rho, nu)
        at_sv = np.where(answers == 0, HYPOTHESIS, REFUSED).astype(np.int8)
        rows, cols = np.nonzero(answers == 1)
        theta = trace.centers[cols] + trace.sigmas[cols, None] * z[rows]
        norms = np.linalg.norm(theta, axis=1)
        theta0 = theta[:, 0] * np.minimum(1.0, trace.radius[cols] / np.maximum(norms, 1e-300))
        at_sv[rows, cols] = np.where(theta0 < 0, ORACLE_NEG, ORACLE_POS)
        positives = np.zeros(trials, dtype=np.int64)  # positives so far, per trial
        codes = np.empty((trials, len(trace.kinds)), dtype=np.int8)
        j = 0  # the next sparse-vector query
        for i, kind in enumerate(trace.kinds):
            if kind == SV:
                codes[:, i] = at_sv[:, j]
                positives += answers[:, j] == 1
                j += 1
            elif kind == PUBLIC:
                codes[:, i] = RAISED
            else:  # raised reading the data, unless the halt check refused it first
                codes[:, i] = np.where(positives >= trace.sv.cutoff, REFUSED, RAISED)
        return codes

    def __call__(self, data: PrivateData, trials: int, rng: np.random.Generator, /) -> Any:
        """``trials`` independent interactions on ``data``."""
        trace = self.trace(data)
        rho, nu = trace.sv.draw(trials, trace.sv_queries, rng)
        return self.codes(trace, rho, nu, rng.standard_normal((trials, trace.centers.shape[1])))


def outcome_code(engine: OnlinePMW, query: CMQuery) -> int:
    """The real engine's output code for ``query`` (any exception is an output too)."""
    try:
        answer = engine.answer(query)
    except EngineHalted:
        return REFUSED
    except Exception:  # a refusal is an output, never dropped
        return RAISED
    if answer.source == "oracle":
        return ORACLE_NEG if float(answer.value[0]) < 0 else ORACLE_POS
    return HYPOTHESIS if answer.source == "hypothesis" else REFUSED


def crosscheck_engine(
    model: EngineModel, data: PrivateData, *, trials: int, rng: np.random.Generator
) -> int:
    """Trials on which the real engine's output differs from the model's, on identical draws."""
    trace = model.trace(data)
    rho, nu = trace.sv.draw(trials, trace.sv_queries, rng)
    z = rng.standard_normal((trials, trace.centers.shape[1]))
    expected = model.codes(trace, rho, nu, z)
    mismatches = 0
    for i in range(trials):
        engine = model.build(
            data, _Replay({trace.sv.threshold_scale: rho[i], trace.sv.query_scale: nu[i]}, z[i])
        )
        got = [outcome_code(engine, q) for q in model.queries]
        mismatches += bool(np.any(np.array(got) != expected[i]))
    return mismatches


def engine_family() -> CategoricalFamily:
    """Neyman-Pearson sets of the whole output sequence."""
    return CategoricalFamily(key=lambda o: row_codes(o, low=0, high=RAISED), name="output code")


def adversarial_pair(
    *, up: int = 6, down: int = 3
) -> tuple[PrivateData, PrivateData, DenseHistogram, tuple[CMQuery, ...]]:
    """``(D0, D1, prior, queries)`` of the module docstring (``n = 20``).

    ``E[y a] = -0.1 -> -0.2`` and ``E[y b] = -0.2 -> -0.1``: in units of ``2S/n``
    the "up" errors go ``1 -> 2`` and the "down" errors ``2 -> 1``. Copies of a
    query differ only in ``l2`` (distinct queries with the same error).
    """
    domain = Domain.from_sizes({"a": 2, "b": 2, "y": 2})
    rows0 = [(1, 0, 1)] + [(1, 1, 0)] * 3 + [(1, 1, 1)] * 8 + [(0, 0, 1)] * 8
    rows1 = [(1, 0, 0), *rows0[1:]]
    d0 = PrivateData.from_records(domain, np.array(rows0))
    d1 = PrivateData.from_records(domain, np.array(rows1))
    favour = np.full((2, 2, 2), 0.5 / 8)
    favour[1, 1, 1] += 0.25
    favour[0, 0, 0] += 0.25  # E[y a] = E[y b] = 1/2 > 0: the prior's minimisers are +R
    prior = DenseHistogram(domain, favour)

    def query(feature: str, i: int) -> CMQuery:
        return CMQuery(loss="hinge", target="y", features=(feature,), radius=0.5,
                       l2=0.01 * (1 + i / 16), intercept=False)  # fmt: skip

    queries = tuple(query("a", i) for i in range(up)) + tuple(query("b", i) for i in range(down))
    return d0, d1, prior, queries


def engine_builder(
    config: PMWConfig, *, template: PrivateData, prior: DenseHistogram, **settings: Any
) -> Build:
    """``build(data, noise)``: the practical engine of ``config`` from the public ``prior``.

    The sparse-vector split and the oracle's noise level are calibrated once by
    :func:`~pmwcm.engine.practical.build_engine` (on ``template``, whose data they do
    not read); each build then gets a fresh sparse vector, ledger and noise.
    ``settings`` override :class:`~pmwcm.engine.settings.EngineSettings` fields (e.g.
    ``absolute_threshold``).
    """
    made = build_engine(template, config, noise=NumpyNoise(seed=0), prior=prior)
    engine_settings = replace(made.settings, **settings)

    def build(data: PrivateData, noise: NoiseSource) -> OnlinePMW:
        accountant = make_accountant(config.accountant)
        sv, _ = make_sparse_vector(config, accountant=accountant, noise=noise)
        return OnlinePMW(
            data,
            settings=engine_settings,
            sparse_vector=sv,
            oracle=config.oracle,
            oracle_noise_level=made.oracle_noise_level,
            ledger=PrivacyLedger(epsilon=config.epsilon, delta=config.delta, accountant=accountant),
            noise=noise,
            prior=prior,
        )

    return build


def engine_case(
    *, label: str = "engine", epsilon: float = 2.0, delta: float = 1e-6, **settings: Any
) -> AuditCase:
    """The practical engine (``T = 1``, output perturbation, Lyu-Su-Li at 90% of epsilon)
    on :func:`adversarial_pair`, threshold halfway between the two error levels."""
    d0, d1, prior, queries = adversarial_pair()
    config = PMWConfig(epsilon=epsilon, delta=delta, max_updates=1, prior="uniform",
                       sv_fraction=0.9, sweeps=0, oracle=OutputPerturbation())  # fmt: skip
    settings.setdefault("absolute_threshold", 1.5 * 2 * 1.0 / d0.n)  # 1.5 units of 2S/n, S = 1
    return AuditCase(
        name=f"{label}: T=1, LSL sparse vector, output perturbation",
        guarantee=f"({epsilon:g}, {delta:g})-DP by the engine's PLD ledger",
        mechanism=EngineModel(
            build=engine_builder(config, template=d0, prior=prior, **settings), queries=queries
        ),
        dataset0=d0,
        dataset1=d1,
        events=engine_family(),
        claimed_epsilon=epsilon,
        delta=delta,
    )
