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
    from pmwcm.accounting import (
        BudgetExceededError,
        DRVAccountant,
        PLDAccountant,
        PrivacyLedger,
        ZCDPAccountant,
    )
    from pmwcm.baselines import CompositionBaseline, NonPrivateBaseline, excess_risk
    from pmwcm.dataset import DataError, Dataset
    from pmwcm.datasets import adult_schema, load_adult
    from pmwcm.domain import Domain
    from pmwcm.draft import draft_schema
    from pmwcm.engine import Answer, EngineHalted, EngineSettings, OnlinePMW
    from pmwcm.histogram import DenseHistogram, Histogram
    from pmwcm.linear import LinearQuery
    from pmwcm.noise import NoiseSource, NumpyNoise, OpenDPNoise, default_noise
    from pmwcm.oracles import (
        NoisyGradientDescent,
        ObjectivePerturbation,
        Oracle,
        OutputPerturbation,
    )
    from pmwcm.practical import PMWConfig, build_engine
    from pmwcm.private_data import PrivateData
    from pmwcm.problem import CallableProblem, ConvexProblem
    from pmwcm.queries import CMQuery, QueryError
    from pmwcm.schema import Schema, SchemaError
    from pmwcm.solvers import Solution, SolverError, minimize
    from pmwcm.sparse_vector import DworkRothSparse, LyuSuLiSparse, SparseVectorHalted
    from pmwcm.theory import TheoryParameters, build_theory_engine

# Importing the whole library costs seconds (dp-accounting alone ~2.4 s), which
# a `pmwcm --help` should not pay: names are resolved on first access (PEP 562).
_EXPORTS = {
    "Answer": "pmwcm.engine",
    "BudgetExceededError": "pmwcm.accounting",
    "CMQuery": "pmwcm.queries",
    "CallableProblem": "pmwcm.problem",
    "CompositionBaseline": "pmwcm.baselines",
    "ConvexProblem": "pmwcm.problem",
    "DRVAccountant": "pmwcm.accounting",
    "DataError": "pmwcm.dataset",
    "Dataset": "pmwcm.dataset",
    "DenseHistogram": "pmwcm.histogram",
    "Domain": "pmwcm.domain",
    "DworkRothSparse": "pmwcm.sparse_vector",
    "EngineHalted": "pmwcm.engine",
    "EngineSettings": "pmwcm.engine",
    "Histogram": "pmwcm.histogram",
    "LinearQuery": "pmwcm.linear",
    "LyuSuLiSparse": "pmwcm.sparse_vector",
    "NoiseSource": "pmwcm.noise",
    "NoisyGradientDescent": "pmwcm.oracles",
    "NonPrivateBaseline": "pmwcm.baselines",
    "NumpyNoise": "pmwcm.noise",
    "ObjectivePerturbation": "pmwcm.oracles",
    "OnlinePMW": "pmwcm.engine",
    "OpenDPNoise": "pmwcm.noise",
    "Oracle": "pmwcm.oracles",
    "OutputPerturbation": "pmwcm.oracles",
    "PLDAccountant": "pmwcm.accounting",
    "PMWConfig": "pmwcm.practical",
    "PrivacyLedger": "pmwcm.accounting",
    "PrivateData": "pmwcm.private_data",
    "QueryError": "pmwcm.queries",
    "Schema": "pmwcm.schema",
    "SchemaError": "pmwcm.schema",
    "Solution": "pmwcm.solvers",
    "SolverError": "pmwcm.solvers",
    "SparseVectorHalted": "pmwcm.sparse_vector",
    "TheoryParameters": "pmwcm.theory",
    "ZCDPAccountant": "pmwcm.accounting",
    "adult_schema": "pmwcm.datasets",
    "build_engine": "pmwcm.practical",
    "build_theory_engine": "pmwcm.theory",
    "default_noise": "pmwcm.noise",
    "draft_schema": "pmwcm.draft",
    "excess_risk": "pmwcm.baselines",
    "load_adult": "pmwcm.datasets",
    "minimize": "pmwcm.solvers",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pmwcm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "Answer",
    "BudgetExceededError",
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
    "Histogram",
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
    "PrivacyLedger",
    "PrivateData",
    "QueryError",
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
