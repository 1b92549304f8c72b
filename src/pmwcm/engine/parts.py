"""The parts an engine is built from: :class:`EngineParts`, one frozen value.

An :class:`~pmwcm.engine.online.OnlinePMW` is its parts (fixed for its lifetime)
plus its state (:class:`~pmwcm.engine.state.EngineState`, which only the engine
changes). A caller who needs an engine with another part -- the audit's recording
sparse vector or deliberately broken settings, a benchmark's timed oracle -- builds
a new engine from ``dataclasses.replace(engine.parts, ...)`` and the old engine's
state (:meth:`~pmwcm.engine.online.OnlinePMW.from_parts`), instead of assigning an
attribute of a running engine.

Four parts are objects with a life of their own, driven by the engine: the ledger
(it records every spend), the sparse vector (its positives and threshold noise),
the noise source and the private data. An engine built from another's parts takes
them over: drop the first engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from pmwcm.engine.measured_update import MeasuredUpdate
from pmwcm.engine.modes import HYBRID, Mode
from pmwcm.engine.settings import EngineSettings
from pmwcm.kernels.backend import BackendChoice
from pmwcm.kernels.domain import Domain
from pmwcm.mechanisms.accounting import PrivacyLedger
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.oracles.base import Oracle
from pmwcm.mechanisms.private_data import PrivateData
from pmwcm.mechanisms.sparse_vector import SparseVector

__all__ = ["EngineParts", "PartsView"]


@dataclass(frozen=True, kw_only=True)
class EngineParts:
    """What an engine is built from, besides its starting state.

    Attributes:
        data: the private data (read only through its marginals, by the data side).
        settings: loop parameters.
        sparse_vector: the online sparse vector with cutoff ``T`` and sensitivity 1
            (queries are normalised by their own sensitivity).
        oracle: the single-query oracle ``M'``.
        oracle_noise_level: the calibrated noise level of each oracle call.
        ledger: the privacy ledger owning the whole interaction.
        noise: the random source for the oracle (the sparse vector holds its own).
        backend: the hypothesis backend chosen and why (public; reported, not used).
        mode: how a round decides between hypothesis and oracle
            (:mod:`pmwcm.engine.modes`; default the paper's loop, :data:`HYBRID`).
        measured_update: issue 35's measured-marginal update
            (:mod:`pmwcm.engine.measured_update`); ``None`` for the paper's oracle
            update alone.

    Raises:
        ValueError: the sparse vector's cutoff is not ``settings.max_updates``, or the
            oracle refuses the noise level.
    """

    data: PrivateData
    settings: EngineSettings
    sparse_vector: SparseVector
    oracle: Oracle
    oracle_noise_level: float
    ledger: PrivacyLedger
    noise: NoiseSource
    backend: BackendChoice | None = None
    mode: Mode = HYBRID
    measured_update: MeasuredUpdate | None = None

    def __post_init__(self) -> None:
        if self.sparse_vector.cutoff != self.settings.max_updates:
            raise ValueError(
                f"The sparse vector's cutoff {self.sparse_vector.cutoff} must equal "
                f"max_updates={self.settings.max_updates}."
            )
        self.oracle.privacy_event(self.oracle_noise_level)  # validates the level


class PartsView:
    """Read-only attributes for an engine's parts (``engine.settings`` for
    ``engine.parts.settings``); no setters: a new part means a new engine."""

    _parts: EngineParts

    @property
    def parts(self) -> EngineParts:
        """The engine's parts (frozen)."""
        return self._parts

    @property
    def data(self) -> PrivateData:
        """The private data (read only by the engine's data side)."""
        return self._parts.data

    @property
    def domain(self) -> Domain:
        """The data universe."""
        return self._parts.data.domain

    @property
    def settings(self) -> EngineSettings:
        """Loop parameters."""
        return self._parts.settings

    @property
    def sparse_vector(self) -> SparseVector:
        """The online sparse vector (its state is the engine's)."""
        return self._parts.sparse_vector

    @property
    def oracle(self) -> Oracle:
        """The single-query oracle ``M'``."""
        return self._parts.oracle

    @property
    def oracle_noise_level(self) -> float:
        """The calibrated noise level of each oracle call."""
        return self._parts.oracle_noise_level

    @property
    def ledger(self) -> PrivacyLedger:
        """The privacy ledger owning the whole interaction."""
        return self._parts.ledger

    @property
    def noise(self) -> NoiseSource:
        """The oracle's random source."""
        return self._parts.noise

    @property
    def backend(self) -> BackendChoice | None:
        """The hypothesis backend chosen and why (public)."""
        return self._parts.backend

    @property
    def mode(self) -> Mode:
        """The strategy that decides each round (hybrid, theory or composition)."""
        return self._parts.mode

    @property
    def measured_update(self) -> MeasuredUpdate | None:
        """Issue 35's measured update, or ``None`` for the oracle's alone."""
        return self._parts.measured_update
