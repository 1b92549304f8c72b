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
