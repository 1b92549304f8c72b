"""Fixtures for the service tests: an in-process app over a fresh state directory."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from pmwcm.service import SQLiteStore, StateStore, bootstrap_curator, create_app
from service.svc_support import Service, TestClient, write_tiny


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[Path, Path]:
    """A tiny CSV and its schema."""
    return write_tiny(tmp_path)


@pytest.fixture
def service(tmp_path: Path, tiny: tuple[Path, Path]) -> Iterator[Service]:
    """A fresh app (its store is closed when the client exits)."""
    store = SQLiteStore(tmp_path / "state")
    curator = bootstrap_curator(store)
    assert curator is not None
    bundled = Path(str(resources.files("pmwcm.data.bundled").joinpath("files")))
    dirs = [tmp_path, bundled, Path(__file__).parents[1] / "data"]  # + tests/data
    with TestClient(create_app(store, data_dirs=dirs)) as client:
        yield Service(client, curator, tiny[0], tiny[1], tmp_path / "state")


@pytest.fixture
def pg_database(postgres_url: str) -> Iterator[str]:
    """The URL of a fresh, empty database on the test PostgreSQL server (dropped after)."""
    import psycopg

    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")  # a name we made: no injection
    head, _, _ = postgres_url.rpartition("/")
    yield f"{head}/{name}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_kind(request: pytest.FixtureRequest) -> str:
    """Which state store a store-contract test runs on (each runs on both)."""
    return str(request.param)


@pytest.fixture
def open_store(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Callable[[], StateStore]:
    """Opens (again) the test's one store of ``store_kind``: a state directory, or a
    fresh database on the real PostgreSQL server."""
    if store_kind == "sqlite":
        return lambda: SQLiteStore(tmp_path / "state")
    from pmwcm.service.postgres_store import PostgresStore

    url: Any = request.getfixturevalue("pg_database")
    return lambda: PostgresStore(url)
