"""Single-query private oracles ``M'``: one CM query answered from the real data.

The engine calls an oracle on each above-threshold round (the paper's
Figure "Online Private Multiplicative Weights for CM Queries", ``a^j = top``).
Every oracle states its guarantee in its docstring and exposes it as a
``dp_accounting`` event, so that one accountant composes all of them.
"""

from pmwcm.mechanisms.oracles.base import Oracle, OracleInput, OracleRefused
from pmwcm.mechanisms.oracles.jain_thakurta import JainThakurtaGLM
from pmwcm.mechanisms.oracles.noisy_gd import NoisyGradientDescent
from pmwcm.mechanisms.oracles.objective_perturbation import ObjectivePerturbation
from pmwcm.mechanisms.oracles.output_perturbation import OutputPerturbation
from pmwcm.mechanisms.oracles.tuning import BudgetTunedGradientDescent

__all__ = [
    "BudgetTunedGradientDescent",
    "JainThakurtaGLM",
    "NoisyGradientDescent",
    "ObjectivePerturbation",
    "Oracle",
    "OracleInput",
    "OracleRefused",
    "OutputPerturbation",
]
