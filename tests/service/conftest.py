"""Fixtures for the service tests: an in-process app over a fresh state directory."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from pmwcm.service import SQLiteStore, bootstrap_curator, create_app
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
