"""pmwcm: online Private Multiplicative Weights for convex-minimization queries.

Implements the algorithm of "Private Multiplicative Weights Beyond Linear
Queries" (J. Ullman, PODS 2015): an analyst streams adaptively chosen convex
minimisation (CM) queries -- logistic, linear, robust regression, SVM -- and the
engine answers all of them under one differential-privacy budget that grows
like log k rather than sqrt(k).

>>> import pmwcm
>>> data = pmwcm.load_adult()
>>> engine = pmwcm.build_engine(
...     pmwcm.PrivateData.from_records(data.domain, data.records),
...     pmwcm.PMWConfig(epsilon=1.0, delta=1e-6),
...     noise=pmwcm.NumpyNoise(seed=0),
... )
>>> q = pmwcm.CMQuery(loss="logistic", target="income>50K", features=("male", "age>=37"))
>>> answer = engine.answer(q)
>>> answer.source in ("hypothesis", "oracle"), len(answer.value)
(True, 3)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names, for type checkers; at run time they load on first use
    from pmwcm.data.bundled import adult_schema, load_adult
    from pmwcm.data.schema import Schema, SchemaError
    from pmwcm.data.schema_draft import draft_schema
    from pmwcm.data.table import DataError, Dataset
    from pmwcm.engine.baselines import CompositionBaseline, NonPrivateBaseline, excess_risk
    from pmwcm.engine.online import Answer, EngineHalted, EngineState, OnlinePMW
    from pmwcm.engine.practical import PMWConfig, build_engine
    from pmwcm.engine.settings import EngineSettings
    from pmwcm.engine.theory import TheoryParameters, build_theory_engine
    from pmwcm.errors import BudgetExhausted, Halted, InvalidQuery, PmwcmError, Refused
    from pmwcm.kernels.counting import LinearQuery
    from pmwcm.kernels.domain import Domain
    from pmwcm.kernels.histogram import DenseHistogram, Histogram
    from pmwcm.kernels.problem import CallableProblem, ConvexProblem
    from pmwcm.kernels.queries import CMQuery, QueryError
    from pmwcm.kernels.solvers import Solution, SolverError, minimize
    from pmwcm.mechanisms.accounting import (
        BudgetExceededError,
        DRVAccountant,
        PLDAccountant,
        PrivacyLedger,
        ZCDPAccountant,
    )
    from pmwcm.mechanisms.noise import NoiseSource, NumpyNoise, OpenDPNoise, default_noise
    from pmwcm.mechanisms.oracles import (
        JainThakurtaGLM,
        NoisyGradientDescent,
        ObjectivePerturbation,
        Oracle,
        OutputPerturbation,
    )
    from pmwcm.mechanisms.private_data import PrivateData
    from pmwcm.mechanisms.sparse_vector import DworkRothSparse, LyuSuLiSparse, SparseVectorHalted

# Importing the whole library costs seconds (dp-accounting alone ~2.4 s), which
# a `pmwcm --help` should not pay: names are resolved on first access (PEP 562).
_EXPORTS = {
    "Answer": "pmwcm.engine.online",
    "BudgetExhausted": "pmwcm.errors",
    "Halted": "pmwcm.errors",
    "InvalidQuery": "pmwcm.errors",
    "PmwcmError": "pmwcm.errors",
    "Refused": "pmwcm.errors",
    "BudgetExceededError": "pmwcm.mechanisms.accounting",
    "CMQuery": "pmwcm.kernels.queries",
    "CallableProblem": "pmwcm.kernels.problem",
    "CompositionBaseline": "pmwcm.engine.baselines",
    "ConvexProblem": "pmwcm.kernels.problem",
    "DRVAccountant": "pmwcm.mechanisms.accounting",
    "DataError": "pmwcm.data.table",
    "Dataset": "pmwcm.data.table",
    "DenseHistogram": "pmwcm.kernels.histogram",
    "Domain": "pmwcm.kernels.domain",
    "DworkRothSparse": "pmwcm.mechanisms.sparse_vector",
    "EngineHalted": "pmwcm.engine.online",
    "EngineSettings": "pmwcm.engine.settings",
    "EngineState": "pmwcm.engine.online",
    "Histogram": "pmwcm.kernels.histogram",
    "JainThakurtaGLM": "pmwcm.mechanisms.oracles",
    "LinearQuery": "pmwcm.kernels.counting",
    "LyuSuLiSparse": "pmwcm.mechanisms.sparse_vector",
    "NoiseSource": "pmwcm.mechanisms.noise",
    "NoisyGradientDescent": "pmwcm.mechanisms.oracles",
    "NonPrivateBaseline": "pmwcm.engine.baselines",
    "NumpyNoise": "pmwcm.mechanisms.noise",
    "ObjectivePerturbation": "pmwcm.mechanisms.oracles",
    "OnlinePMW": "pmwcm.engine.online",
    "OpenDPNoise": "pmwcm.mechanisms.noise",
    "Oracle": "pmwcm.mechanisms.oracles",
    "OutputPerturbation": "pmwcm.mechanisms.oracles",
    "PLDAccountant": "pmwcm.mechanisms.accounting",
    "PMWConfig": "pmwcm.engine.practical",
    "PrivacyLedger": "pmwcm.mechanisms.accounting",
    "PrivateData": "pmwcm.mechanisms.private_data",
    "QueryError": "pmwcm.kernels.queries",
    "Schema": "pmwcm.data.schema",
    "SchemaError": "pmwcm.data.schema",
    "Solution": "pmwcm.kernels.solvers",
    "SolverError": "pmwcm.kernels.solvers",
    "SparseVectorHalted": "pmwcm.mechanisms.sparse_vector",
    "TheoryParameters": "pmwcm.engine.theory",
    "ZCDPAccountant": "pmwcm.mechanisms.accounting",
    "adult_schema": "pmwcm.data.bundled",
    "build_engine": "pmwcm.engine.practical",
    "build_theory_engine": "pmwcm.engine.theory",
    "default_noise": "pmwcm.mechanisms.noise",
    "draft_schema": "pmwcm.data.schema_draft",
    "excess_risk": "pmwcm.engine.baselines",
    "load_adult": "pmwcm.data.bundled",
    "minimize": "pmwcm.kernels.solvers",
}


# Modules reachable as attributes without an explicit import (``pmwcm.workload.random_stream``).
_MODULES = {
    "workload": "pmwcm.kernels.workload",
    "estimators": "pmwcm.estimators",
    "audit": "pmwcm.audit",
    "cli": "pmwcm.cli",
    "data": "pmwcm.data",
    "engine": "pmwcm.engine",
    "errors": "pmwcm.errors",
    "kernels": "pmwcm.kernels",
    "mechanisms": "pmwcm.mechanisms",
    "service": "pmwcm.service",
}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        submodule = importlib.import_module(_MODULES[name])
        globals()[name] = submodule
        return submodule
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pmwcm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, *_MODULES])


__all__ = [
    "Answer",
    "BudgetExceededError",
    "BudgetExhausted",
    "CMQuery",
    "CallableProblem",
    "CompositionBaseline",
    "ConvexProblem",
    "DRVAccountant",
    "DataError",
    "Dataset",
    "DenseHistogram",
    "Domain",
    "DworkRothSparse",
    "EngineHalted",
    "EngineSettings",
    "EngineState",
    "Halted",
    "Histogram",
    "InvalidQuery",
    "JainThakurtaGLM",
    "LinearQuery",
    "LyuSuLiSparse",
    "NoiseSource",
    "NoisyGradientDescent",
    "NonPrivateBaseline",
    "NumpyNoise",
    "ObjectivePerturbation",
    "OnlinePMW",
    "OpenDPNoise",
    "Oracle",
    "OutputPerturbation",
    "PLDAccountant",
    "PMWConfig",
    "PmwcmError",
    "PrivacyLedger",
    "PrivateData",
    "QueryError",
    "Refused",
    "Schema",
    "SchemaError",
    "Solution",
    "SolverError",
    "SparseVectorHalted",
    "TheoryParameters",
    "ZCDPAccountant",
    "adult_schema",
    "build_engine",
    "build_theory_engine",
    "default_noise",
    "draft_schema",
    "excess_risk",
    "load_adult",
    "minimize",
]
