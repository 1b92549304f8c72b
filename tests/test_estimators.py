"""The scikit-learn face (issue 17): private fits as fitted scikit-learn models, local or HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import Pipeline

from pmwcm.data.schema import Schema
from pmwcm.data.table import Dataset
from pmwcm.engine.baselines import NonPrivateBaseline
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.estimators import Certificate, PrivateModel, Session
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.private_data import PrivateData
from pmwcm.service import SQLiteStore, bootstrap_curator, create_app
from pmwcm.service.client import Client
from service.svc_support import TestClient

SCHEMA = Schema.from_json(
    {"attributes": [
        {"name": "age", "bins": [0, 30, 45, 60, 120]},
        {"name": "sex", "values": ["female", "male"]},
        {"name": "income", "values": ["low", "high"]},
    ]}
)  # fmt: skip


def _raw(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age, male = rng.integers(18, 80, rows), rng.random(rows) < 0.5
    high = (male + 1.5 * (age > 45) + rng.random(rows)) > 1.7
    return pd.DataFrame({"age": age, "sex": np.where(male, "male", "female"),
                         "income": np.where(high, "high", "low")})  # fmt: skip


@pytest.fixture(scope="module")
def private() -> Dataset:
    return Dataset.from_dataframe(_raw(3000, 1), SCHEMA)


def _local(private: Dataset, seed: int) -> Session:
    data = PrivateData.from_records(private.domain, private.records)
    engine = build_engine(data, PMWConfig(epsilon=5.0, delta=1e-6), noise=NumpyNoise(seed=seed))
    return Session.local(engine, SCHEMA)


def test_a_local_logistic_fit_is_a_working_scikit_learn_model(private: Dataset, seed: int) -> None:
    session = _local(private, seed)
    model = session.logistic_regression("income", ["age", "sex"], radius=4.0)
    assert isinstance(model, PrivateModel) and isinstance(model, Pipeline)
    assert isinstance(model[-1], LogisticRegression)
    assert model.feature_names == ("age=[0, 30)", "age=[30, 45)", "age=[45, 60)",
                                   "age=[60, 120)", "sex=male")  # fmt: skip
    assert model.coef_.shape == (1, 5) and np.shape(model.intercept_) == (1,)
    assert model.classes_.tolist() == ["low", "high"]
    test = session.table(_raw(2000, 99))  # public test data, raw as the private file was
    predicted = model.predict(test)
    assert set(predicted) <= {"low", "high"}
    proba = model.predict_proba(test)
    assert proba.shape == (2000, 2) and np.allclose(proba.sum(axis=1), 1.0)
    # The rule behind the data: high income iff older than 45 or male-and-lucky; a useful
    # private fit beats the majority class on fresh public data.
    majority = max((test["income"] == v).mean() for v in ("low", "high"))
    assert model.score(test, test["income"]) > majority
    assert model.source in ("hypothesis", "oracle")
    assert model.certificate == Certificate.of(model.source) and model.certificate.checked
    assert 0 < model.epsilon_spent <= 5.0 and model.delta == 1e-6
    assert isinstance(model.on_boundary, bool) and len(model.theta) == 6


def test_coef_is_theta_on_the_natural_scale(private: Dataset) -> None:
    """The pipeline's decision equals <theta, phi(x)> of the engine's own encoding."""
    exact = NonPrivateBaseline(PrivateData.from_records(private.domain, private.records))

    class Exact:
        domain = private.domain

        def answer(self, query: CMQuery) -> object:
            theta = exact.answer(query)
            return type("A", (), {"value": theta, "source": "nonprivate",
                                  "epsilon_spent": 0.0, "delta": 0.0})()  # fmt: skip

    model = Session.local(Exact(), SCHEMA).logistic_regression("income", ["age", "sex"])
    query = model.query
    problem = query.compile(private.domain)
    cells = np.indices(private.domain.project(query.clique).shape).reshape(3, -1).T
    frame = pd.DataFrame({
        "age": [private.domain.values_of("age")[c] for c in cells[:, 0]],
        "sex": [private.domain.values_of("sex")[c] for c in cells[:, 1]],
    })  # fmt: skip
    decision = model.decision_function(frame)
    assert np.allclose(decision, problem.features @ np.asarray(model.theta))
    assert model.certificate.checked is False  # nonprivate is not a private check


def test_linear_regression_predicts_target_codes(private: Dataset, seed: int) -> None:
    session = _local(private, seed)
    model = session.linear_regression("age", ["sex", "income"], radius=2.0)
    assert isinstance(model[-1], LinearRegression)
    prediction = model.predict(session.table(_raw(500, 7)))
    assert prediction.shape == (500,) and np.all((prediction > -0.5) & (prediction < 3.5))


def test_an_unknown_attribute_is_refused_before_anything_is_asked(private: Dataset) -> None:
    asked: list[CMQuery] = []
    session = Session(asked.append, SCHEMA)
    with pytest.raises(ValueError, match="Unknown attribute 'income2'"):
        session.logistic_regression("income2", ["sex"])
    assert asked == []


def test_the_same_face_works_over_http(tmp_path: Path, private: Dataset) -> None:
    data, schema = tmp_path / "data.csv", tmp_path / "schema.json"
    _raw(3000, 1).to_csv(data, index=False)
    schema.write_text(SCHEMA.to_json())
    store = SQLiteStore(tmp_path / "state")
    curator = bootstrap_curator(store)
    assert curator is not None
    with TestClient(create_app(store, data_dirs=[tmp_path])) as http:
        admin = Client("http://testserver", curator, http=http)
        admin.create_session("s", data_path=str(data), schema_path=str(schema), epsilon=5.0,
                             delta=1e-6)  # fmt: skip
        analyst = Client("http://testserver", admin.issue_token("s"), http=http)
        session = Session.remote(analyst, "s", Schema.from_json(json.loads(schema.read_text())))
        model = session.logistic_regression("income", ["age", "sex"], radius=4.0)
    test = session.table(_raw(2000, 99))
    majority = max((test["income"] == v).mean() for v in ("low", "high"))
    assert model.score(test, test["income"]) > majority
    assert model.source in ("hypothesis", "oracle") and 0 < model.epsilon_spent <= 5.0
    assert model.feature_names[-1] == "sex=male"


def test_submodules_are_reachable_without_an_explicit_import() -> None:
    import subprocess
    import sys

    code = "import pmwcm; print(pmwcm.workload.random_queries.__name__, pmwcm.estimators.Session)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("random_queries <class 'pmwcm.estimators.Session'>")
