"""The baselines' fitted model as a population (``benchmarks/accuracy/methods.py``).

``model_population`` is the one cached fit of OpenDP's AIM or MST model table that
``online_updates.py``, ``small_n.py`` and ``methods.build`` answer queries on: its
cache is named by mechanism, unit, rounds, rho and run, a second call reads it back
(the same table, the original fit's seconds) without fitting again, and the table
is the model's own (normalised) marginals over the whole domain. On real, tiny
OpenDP releases.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ACCURACY = Path(__file__).resolve().parent.parent / "benchmarks" / "accuracy"
sys.path.insert(0, str(ACCURACY))

import methods  # noqa: E402
import synthetic  # noqa: E402

from pmwcm.kernels.domain import Domain  # noqa: E402
from pmwcm.mechanisms.private_data import PrivateData  # noqa: E402


def _tiny_data() -> PrivateData:
    domain = Domain.from_sizes({"a": 2, "b": 2, "c": 2})
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2, 300)
    records = np.stack([a, a ^ (rng.random(300) < 0.1), rng.integers(0, 2, 300)], axis=1)
    return PrivateData.from_records(domain, records.astype(np.int64))


@pytest.mark.parametrize(
    ("method", "unit", "rounds", "stem"),
    [
        ("mst", "addremove", None, "mst-model-{digest}-rho0.5-roundsdefault-seed4"),
        ("mst", "replace", None, "mst-model-changes1-{digest}-rho0.5-roundsdefault-seed4"),
        ("aim", "addremove", 16, "aim-model-{digest}-rho0.5-seed4"),
    ],
)
def test_model_population_fits_once_and_reads_its_cache_back(
    method: str,
    unit: str,
    rounds: int | None,
    stem: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(methods, "SYNTHETIC_CACHE", tmp_path)
    data = _tiny_data()
    fits: list[dict[str, Any]] = []
    real_fit = synthetic.model_table

    def counted_fit(*args: Any, **kwargs: Any) -> np.ndarray:
        fits.append(kwargs)
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(synthetic, "model_table", counted_fit)
    first, seconds = methods.model_population(
        data, rho=0.5, seed=4, method=method, unit=unit, rounds=rounds
    )
    assert [fit["unit"] for fit in fits] == [unit] and fits[0]["rounds"] == rounds
    cached = tmp_path / (stem.format(digest=methods.data_digest(data)) + ".npz")
    assert [p.name for p in tmp_path.iterdir()] == [cached.name]  # no partial file left
    table = first.marginal(data.domain.names)
    assert table.shape == data.domain.shape
    assert np.all(table >= 0) and table.sum() == pytest.approx(1.0)
    assert first.n == data.n and seconds > 0

    again, seconds_again = methods.model_population(
        data, rho=0.5, seed=4, method=method, unit=unit, rounds=rounds
    )
    assert len(fits) == 1  # read back, not fitted again
    np.testing.assert_array_equal(again.marginal(data.domain.names), table)
    assert seconds_again == seconds
