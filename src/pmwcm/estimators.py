"""A scikit-learn face: private fits returned as fitted scikit-learn models.

An analyst asks for a model by name; :class:`Session` turns the request into a
:class:`~pmwcm.kernels.queries.CMQuery`, has it answered privately (by a local
:class:`~pmwcm.engine.online.OnlinePMW` or by a ``pmwcm serve`` session through
:class:`~pmwcm.service.client.Client`), and returns a :class:`PrivateModel`: a
scikit-learn :class:`~sklearn.pipeline.Pipeline` of :class:`SchemaFeatures`
(value labels to the raw features the query encodes) and a fitted
``LogisticRegression`` or ``LinearRegression`` whose ``coef_`` and
``intercept_`` are the released ``theta`` on the natural scale
(:func:`pmwcm.kernels.coefficients.natural_coefficients`). ``predict``,
``predict_proba`` and ``score`` then work on public test data as for any
scikit-learn model. Nothing here reads private data: the model is
post-processing of one released answer, at that answer's privacy cost.

Each model carries its provenance: ``source`` (``hypothesis``, ``oracle`` or
``synthetic``), a :class:`Certificate` (what, if anything, checked the answer
against the data), ``epsilon_spent`` and ``delta`` (the session's running
total after this answer) and ``on_boundary`` (the radius binds).

Natural scale: ``theta`` acts on features divided by ``sqrt(blocks)``; the
model's ``coef_`` is ``theta / sqrt(blocks)`` on the raw features (``+1/-1``
for a binary feature, one column per value for a one-hot feature, the code
scaled onto ``[-1, 1]`` for an ordinal one, products for interactions), named
by ``feature_names``. For a regression, predictions are target codes ``0..s-1``
(the bin index of a binned target): the engine fits the code scaled onto
``[-1, 1]``, and the model maps it back.

Needs the ``sklearn`` extra (``pip install 'pmwcm[sklearn]'``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pmwcm.data.schema import Schema
from pmwcm.data.table import Dataset
from pmwcm.kernels.coefficients import block_count, coefficient_names, on_boundary
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import CMQuery

try:
    from sklearn.base import BaseEstimator, TransformerMixin
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.pipeline import Pipeline
except ModuleNotFoundError as err:  # pragma: no cover - exercised without the extra only
    raise ModuleNotFoundError(
        "pmwcm.estimators needs the 'sklearn' extra: pip install 'pmwcm[sklearn]'",
        name=err.name,
    ) from None

__all__ = ["Certificate", "PrivateModel", "SchemaFeatures", "Session"]

_STATEMENTS = {
    "hypothesis": "checked: the sparse vector found this fit's excess risk on the private data "
    "below the engine's threshold (up to its noise)",
    "oracle": "a fresh private fit by the oracle; the hypothesis was then updated towards it",
    "synthetic": "NOT checked: the engine had halted, so this fit comes from its final "
    "hypothesis without any accuracy check against the data",
}


@dataclass(frozen=True, kw_only=True)
class Certificate:
    """What checked a released answer against the private data.

    Attributes:
        source: ``"hypothesis"``, ``"oracle"`` or ``"synthetic"``.
        checked: whether the answer's accuracy was checked against the data (a
            hypothesis answer certified by the sparse vector, or an oracle fit).
        statement: one sentence saying what the check was.
    """

    source: str
    checked: bool
    statement: str

    @classmethod
    def of(cls, source: str) -> Certificate:
        """The certificate of an answer from ``source``.

        >>> Certificate.of("synthetic").checked
        False
        """
        return cls(
            source=source,
            checked=source in ("hypothesis", "oracle"),
            statement=_STATEMENTS.get(source, f"answered by {source}"),
        )


@dataclass(frozen=True)
class _Answer:
    theta: tuple[float, ...]
    source: str
    epsilon_spent: float
    delta: float


class SchemaFeatures(TransformerMixin, BaseEstimator):
    """Value labels of a table to the raw features of one query (a stateless transformer).

    ``transform(frame)`` takes a DataFrame with one column per feature
    attribute, holding the domain's value labels (:meth:`Session.table` makes
    one from a raw public file) and returns the raw features, one column per
    name of :func:`~pmwcm.kernels.coefficients.coefficient_names` but the
    intercept.

    Args:
        domain: the universe the query was answered on (public).
        query: the answered query.
    """

    def __init__(self, domain: Domain, query: CMQuery) -> None:
        self.domain = domain
        self.query = query
        names = coefficient_names(query, domain)
        self.feature_names_out_ = np.asarray(
            [n for n in names if not (query.intercept and n == names[-1])], dtype=object
        )
        self.n_features_in_ = len(query.features)

    def fit(self, frame: Any = None, y: Any = None) -> SchemaFeatures:
        """Nothing to learn: the encoding is fixed by the query and the domain."""
        return self

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """The raw features' names (the coefficient names without the intercept)."""
        return self.feature_names_out_

    def transform(self, frame: pd.DataFrame) -> np.ndarray:
        """The raw features of each row: shape ``(rows, len(feature_names_out_))``."""
        sub = self.domain.project(self.query.features)
        schema = Schema.from_domain(sub)
        codes = Dataset.from_dataframe(pd.DataFrame(frame), schema).records
        target = np.zeros((codes.shape[0], 1), dtype=np.int64)  # any label: only X is used
        cells = np.concatenate([codes, target], axis=1)
        problem = self.query.compile(self.domain, cells=cells)
        raw = np.asarray(problem.features) * math.sqrt(block_count(self.query))
        return raw[:, : len(self.feature_names_out_)]


class PrivateModel(Pipeline):
    """A fitted scikit-learn pipeline (features, then a linear model) from one private answer.

    ``coef_``, ``intercept_`` (and ``classes_`` for a classifier) are the last
    step's; ``feature_names`` name ``coef_``. Provenance: ``source``,
    ``certificate``, ``epsilon_spent``, ``delta``, ``on_boundary``, ``theta``
    (the released vector, on the engine's scale) and ``query``.
    """

    source: str
    certificate: Certificate
    epsilon_spent: float
    delta: float
    on_boundary: bool
    theta: tuple[float, ...]
    query: CMQuery

    @property
    def coef_(self) -> np.ndarray:
        """The weights on the raw features (natural scale)."""
        return np.asarray(self.steps[-1][1].coef_)

    @property
    def intercept_(self) -> Any:
        """The intercept (natural scale; 0 without one)."""
        return self.steps[-1][1].intercept_

    @property
    def classes_(self) -> np.ndarray:
        """A classifier's labels: the target's values, the second one is ``+1``."""
        return np.asarray(self.steps[-1][1].classes_)

    @property
    def feature_names(self) -> tuple[str, ...]:
        """The name of each coordinate of ``coef_``."""
        return tuple(str(n) for n in self.steps[0][1].feature_names_out_)


class Session:
    """Fits models privately through one answering engine; see the module docstring.

    Args:
        ask: answers one :class:`CMQuery` with an object that has ``theta`` or
            ``value``, ``source``, ``epsilon_spent`` and ``delta``.
        schema: the public schema of the private data (its domain is the
            engine's; :meth:`table` reads public files with it).

    >>> import pmwcm
    >>> data = pmwcm.load_adult()
    >>> engine = pmwcm.build_engine(
    ...     pmwcm.PrivateData.from_records(data.domain, data.records),
    ...     pmwcm.PMWConfig(epsilon=1.0, delta=1e-6), noise=pmwcm.NumpyNoise(seed=0))
    >>> session = Session.local(engine, pmwcm.adult_schema())
    >>> model = session.logistic_regression("income>50K", ["male", "age>=37"])
    >>> model.feature_names, model.classes_.tolist()
    (('male=yes', 'age>=37=yes'), ['no', 'yes'])
    >>> test = data.to_dataframe()[:1000]
    >>> 0.5 < model.score(test, test["income>50K"]) <= 1.0
    True
    """

    def __init__(self, ask: Callable[[CMQuery], Any], schema: Schema) -> None:
        self._ask = ask
        self.schema = schema
        self.domain = schema.domain()

    @classmethod
    def local(cls, engine: Any, schema: Schema | None = None) -> Session:
        """A session over a local :class:`~pmwcm.engine.online.OnlinePMW` (or a baseline).

        ``schema`` defaults to one whose labels are the engine's domain values.
        """
        domain: Domain = engine.domain
        # An engine's one door (OnlinePMW.ask), or a baseline's answer.
        ask = getattr(engine, "ask", None) or engine.answer
        return cls(ask, schema or Schema.from_domain(domain))

    @classmethod
    def remote(cls, client: Any, session: str, schema: Schema) -> Session:
        """A session over ``pmwcm serve``'s session ``session``, through ``client``
        (a :class:`~pmwcm.service.client.Client` holding an analyst token)."""
        return cls(lambda query: client.ask(session, query), schema)

    def table(self, frame: pd.DataFrame) -> pd.DataFrame:
        """A public raw table (source columns, as the private CSV) as value labels.

        Raises:
            DataError: a cell the schema cannot encode.
        """
        return Dataset.from_dataframe(frame, self.schema).to_dataframe()

    def logistic_regression(
        self,
        target: str,
        features: Sequence[str],
        *,
        radius: float = 1.0,
        l2: float = 0.0,
        intercept: bool = True,
        encodings: Mapping[str, str] | None = None,
        interactions: Sequence[Sequence[str]] = (),
    ) -> PrivateModel:
        """A private logistic regression of a binary ``target`` on ``features``.

        Returns a :class:`PrivateModel` ending in a ``LogisticRegression``;
        ``classes_`` are the target's values (the second is the positive class).

        Raises:
            QueryError, BudgetExhausted, Halted: as the engine refuses the query.
        """
        query = self._query("logistic", target, features, radius, l2, intercept, encodings,
                            interactions)  # fmt: skip
        return self._model(query, LogisticRegression())

    def linear_regression(
        self,
        target: str,
        features: Sequence[str],
        *,
        radius: float = 1.0,
        l2: float = 0.0,
        intercept: bool = True,
        encodings: Mapping[str, str] | None = None,
        interactions: Sequence[Sequence[str]] = (),
    ) -> PrivateModel:
        """A private least-squares regression of ``target``'s code on ``features``.

        Returns a :class:`PrivateModel` ending in a ``LinearRegression`` that
        predicts the target's code ``0..s-1`` (module docstring).
        """
        query = self._query("squared", target, features, radius, l2, intercept, encodings,
                            interactions)  # fmt: skip
        return self._model(query, LinearRegression())

    def _query(
        self,
        loss: str,
        target: str,
        features: Sequence[str],
        radius: float,
        l2: float,
        intercept: bool,
        encodings: Mapping[str, str] | None,
        interactions: Sequence[Sequence[str]],
    ) -> CMQuery:
        return CMQuery(
            loss=loss,
            target=target,
            features=tuple(features),
            radius=radius,
            l2=l2,
            intercept=intercept,
            encodings=dict(encodings or {}),
            interactions=tuple(tuple(g) for g in interactions),
        )

    def _model(self, query: CMQuery, estimator: Any) -> PrivateModel:
        coefficient_names(query, self.domain)  # refuses unknown attributes before asking
        released = self._ask(query)
        theta = tuple(float(v) for v in getattr(released, "theta", None) or released.value)
        answer = _Answer(theta, released.source, released.epsilon_spent, released.delta)
        features = SchemaFeatures(self.domain, query)
        scale = math.sqrt(block_count(query))
        width = len(features.feature_names_out_)
        coef = np.asarray(theta[:width]) / scale
        bias = theta[-1] / scale if query.intercept else 0.0
        if isinstance(estimator, LogisticRegression):
            estimator.classes_ = np.asarray(self.domain.values_of(query.target), dtype=object)
            estimator.coef_ = coef.reshape(1, -1)
            estimator.intercept_ = np.asarray([bias])
        else:  # predictions on the target's code scale: code = (y + 1) (s - 1) / 2
            half = (self.domain.size_of(query.target) - 1) / 2.0
            estimator.coef_ = coef * half
            estimator.intercept_ = (bias + 1.0) * half
        estimator.n_features_in_ = width
        model = PrivateModel([("features", features), ("model", estimator)])
        model.source = answer.source
        model.certificate = Certificate.of(answer.source)
        model.epsilon_spent = answer.epsilon_spent
        model.delta = answer.delta
        model.on_boundary = on_boundary(query, theta)
        model.theta = theta
        model.query = query
        return model
