"""The sparse vector's calibrated parameters in a budget plan (:mod:`pmwcm.engine.plan`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dp_accounting

from pmwcm.engine.config import PMWConfig
from pmwcm.engine.noise_levels import dwork_roth_epsilon_per_run
from pmwcm.mechanisms.accounting import Accountant
from pmwcm.mechanisms.noise import NoiseSource, NumpyNoise
from pmwcm.mechanisms.sparse_vector import DworkRothSparse, LyuSuLiSparse, SparseVector


@dataclass(frozen=True, kw_only=True)
class SparseVectorPlan:
    """The sparse vector's calibrated parameters; :meth:`build` makes it with its noise.

    Attributes:
        name: ``"lyu_su_li"`` or ``"dwork_roth"``.
        cutoff: ``T``.
        epsilons: Lyu-Su-Li's ``(eps1, eps2)``, or Dwork-Roth's ``(eps',)`` per run.
        noise_scale: ``b``, the query noise in units of the (unit) sensitivity:
            Lyu-Su-Li ``2c / eps_2``, Dwork-Roth ``4 / eps'``.
    """

    name: str
    cutoff: int
    epsilons: tuple[float, ...]
    noise_scale: float

    @classmethod
    def of(cls, config: PMWConfig, accountant: Accountant) -> SparseVectorPlan:
        """The sparse vector at ``config``'s share of the budget (``config.split``)."""
        eps_sv, delta_sv = config.split.sparse_vector_budget(config.epsilon, config.delta)
        cutoff = config.max_updates
        if config.sparse_vector == "lyu_su_li":
            # from_total's split; this noise source is never drawn from (only stored).
            sv = LyuSuLiSparse.from_total(epsilon=eps_sv, cutoff=cutoff, noise=NumpyNoise(seed=0))
            pair = (sv.epsilon_threshold, sv.epsilon_queries)
            return cls(name=config.sparse_vector, cutoff=cutoff, epsilons=pair,
                       noise_scale=2.0 * cutoff / sv.epsilon_queries)  # fmt: skip
        per_run = dwork_roth_epsilon_per_run(eps_sv, cutoff, delta=delta_sv, accountant=accountant)
        return cls(name=config.sparse_vector, cutoff=cutoff, epsilons=(per_run,),
                   noise_scale=4.0 / per_run)  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """The parameters as JSON-ready values."""
        return {"name": self.name, "epsilons": list(self.epsilons), "noise_scale": self.noise_scale}

    def build(self, noise: NoiseSource) -> SparseVector:
        """A fresh sparse vector with these parameters, drawing from ``noise``."""
        if self.name == "lyu_su_li":
            eps1, eps2 = self.epsilons
            return LyuSuLiSparse(
                epsilon_threshold=eps1, epsilon_queries=eps2, cutoff=self.cutoff, noise=noise
            )
        return DworkRothSparse(epsilon_per_run=self.epsilons[0], cutoff=self.cutoff, noise=noise)

    def event(self) -> dp_accounting.DpEvent:
        """Its privacy event (charged whole before its first test)."""
        return self.build(NumpyNoise(seed=0)).privacy_event()
