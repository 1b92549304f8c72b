"""Shared test configuration.

Randomised tests take their seed from the ``seed`` fixture: 42 by default,
overridden by ``pytest --seed N`` or the environment variable
``PMWCM_TEST_SEED``. Every test that uses it must pass for any seed in 0..99
(``for s in $(seq 0 99); do pytest --seed $s; done``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st
from numpy.typing import NDArray

from pmwcm.kernels.domain import Domain
from pmwcm.kernels.queries import GLMProblem
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.private_data import PrivateData

DEFAULT_SEED = 42


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--seed",
        type=int,
        default=None,
        help=f"seed for randomised tests (default: $PMWCM_TEST_SEED or {DEFAULT_SEED})",
    )


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """The seed for randomised tests (``--seed``, else ``$PMWCM_TEST_SEED``, else 42)."""
    option = request.config.getoption("--seed")
    if option is not None:
        return int(option)
    return int(os.environ.get("PMWCM_TEST_SEED", DEFAULT_SEED))


# --- Engine-level test doubles and toy data (tests/test_engine.py and friends) ---


@dataclass(frozen=True)
class Draw:
    """One recorded call on a :class:`RecordingNoise`.

    Attributes:
        kind: ``"laplace"``, ``"gaussian"`` or ``"uniform"``.
        scale: the Laplace scale or Gaussian sigma (0 for uniform draws).
        size: how many values were drawn.
        probe: what the ``probe`` callable returned at the moment of the draw
            (e.g. the number of ledger entries), or ``None``.
    """

    kind: str
    scale: float
    size: int
    probe: Any = None


class RecordingNoise:
    """A :class:`~pmwcm.mechanisms.noise.NoiseSource` double: seeded draws, every call recorded.

    Set ``probe`` to a callable to snapshot some state (say, the ledger) at each draw.
    """

    def __init__(self, seed: int) -> None:
        self.inner = NumpyNoise(seed=seed)
        self.calls: list[Draw] = []
        self.probe: Callable[[], Any] | None = None

    @property
    def name(self) -> str:
        return f"recording({self.inner.name})"

    def _record(self, kind: str, scale: float, size: int) -> None:
        self.calls.append(Draw(kind, float(scale), int(size), self.probe() if self.probe else None))

    def laplace(self, scale: float, size: int) -> NDArray[np.float64]:
        self._record("laplace", scale, size)
        return self.inner.laplace(scale, size)

    def gaussian(self, sigma: float, size: int) -> NDArray[np.float64]:
        self._record("gaussian", sigma, size)
        return self.inner.gaussian(sigma, size)

    def uniform(self, size: int) -> NDArray[np.float64]:
        self._record("uniform", 0.0, size)
        return self.inner.uniform(size)


@pytest.fixture
def recording_noise(seed: int) -> RecordingNoise:
    """A fresh :class:`RecordingNoise` seeded with the ``seed`` fixture."""
    return RecordingNoise(seed)


#: A small universe with one ternary attribute: 2*2*3*2*2*2 = 96 cells.
TOY_DOMAIN = Domain.from_sizes({"a": 2, "b": 2, "c": 3, "d": 2, "e": 2, "y": 2})


def toy_records(seed: int, n: int = 4000) -> NDArray[np.int64]:
    """``n`` records on :data:`TOY_DOMAIN` whose label ``y`` depends on ``a``, ``b``, ``c``."""
    rng = np.random.default_rng(seed)
    x = np.stack([rng.integers(0, s, n) for s in TOY_DOMAIN.sizes[:-1]], axis=1)
    logit = 1.5 * (2 * x[:, 0] - 1) - 1.0 * (2 * x[:, 1] - 1) + 0.7 * (x[:, 2] - 1)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    return np.column_stack([x, y]).astype(np.int64)


@pytest.fixture
def toy_data(seed: int) -> PrivateData:
    """4,000 records on :data:`TOY_DOMAIN` drawn with the ``seed`` fixture."""
    return PrivateData.from_records(TOY_DOMAIN, toy_records(seed))


@st.composite
def degenerate_weights(draw: Any, cells: int) -> NDArray[np.float64]:
    """Cell weights summing to one that stress a solver: spikes, zeros and dust."""
    kind = draw(st.sampled_from(["spike", "two", "dust", "dirichlet"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if kind == "spike":
        w = np.zeros(cells)
        w[rng.integers(cells)] = 1.0
        w[rng.integers(cells)] += draw(st.sampled_from([0.0, 1e-12, 1e-8, 1e-4]))
    elif kind == "two":
        w = np.zeros(cells)
        i, j = rng.choice(cells, 2, replace=False)
        share = draw(st.sampled_from([1e-8, 1e-3, 0.5]))
        w[i], w[j] = 1.0 - share, share
    elif kind == "dust":
        w = rng.random(cells) * 1e-12
        w[rng.integers(cells)] = 1.0
    else:
        w = rng.dirichlet(np.full(cells, draw(st.sampled_from([0.01, 0.1, 1.0]))))
    return w / w.sum()


class CountingProblem(GLMProblem):
    """A GLM problem that counts its data-gradient evaluations (``evaluations``).

    Every solver step evaluates the gradient once, so the count is the work a
    solve did; tests compare it across datasets.
    """

    evaluations: int

    def data_gradient(self, theta: NDArray[np.float64], weights: NDArray[np.float64]) -> Any:
        object.__setattr__(self, "evaluations", self.evaluations + 1)
        return super().data_gradient(theta, weights)


def counting(problem: GLMProblem) -> CountingProblem:
    """``problem`` as a :class:`CountingProblem` starting at zero evaluations."""
    copy = CountingProblem(**{f: getattr(problem, f) for f in problem.__dataclass_fields__})
    object.__setattr__(copy, "evaluations", 0)
    return copy


# --- A real PostgreSQL server (tests/postgres_cluster.py), one per xdist worker ---


@pytest.fixture(scope="session")
def postgres_url() -> Any:
    """The URL of a running, throw-away PostgreSQL server (started, never mocked).

    If the server cannot start, every test using this fixture fails with the
    server's own message; it is never skipped.
    """
    from postgres_cluster import PostgresCluster

    with PostgresCluster() as cluster:
        yield cluster.url


# --- A real Spark in local mode (pmwcm.data.sources.spark), one per xdist worker ---


@pytest.fixture(scope="session")
def spark() -> Any:
    """One local Spark (``local[1]``) for the session: a real JVM, never skipped."""
    import warnings

    from pyspark.sql import SparkSession

    with warnings.catch_warnings():  # pyspark warns that it predates pandas 3
        warnings.simplefilter("ignore", FutureWarning)
        session = (
            SparkSession.builder.master("local[1]")
            .appName("pmwcm-tests")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
