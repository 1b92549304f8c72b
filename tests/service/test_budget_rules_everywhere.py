"""One set of budget rules (issue 33 item 5, issue 34 item 1): the command line, the library
and the service accept and refuse the same budgets, with the same message naming the field.

One table of cases runs through all three: ``pmwcm run`` (in process), ``build_engine``
and ``POST /v1/sessions``, on the same 300-row file (so ``1/n = 1/300``) with the same
settings (uniform start, ``T = 5``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pmwcm.cli import app
from pmwcm.data.schema import Schema
from pmwcm.data.table import Dataset
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.mechanisms.accounting.budget_rules import BudgetRefused
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.private_data import PrivateData
from service.svc_support import BUILD_WAIT, Service

runner = CliRunner()

#: ``(epsilon, delta, the field refused or None)``; n = 300.
CASES: list[tuple[float, float, str | None]] = [
    (1.0, 1e-6, None),
    (1e-3, 1e-6, None),
    (1e3, 1e-6, None),
    (1.0, 1e-15, None),
    (5e-324, 1e-6, "epsilon"),  # was "math domain error" on the service
    (1e-4, 1e-6, "epsilon"),
    (2e3, 1e-6, "epsilon"),
    (1e6, 1e-6, "epsilon"),  # the service accepted up to 1e6
    (0.0, 1e-6, "epsilon"),
    (1.0, 0.9999999, "delta"),  # the service accepted any delta < 1
    (1.0, 1 / 300, "delta"),  # delta < 1/n
    (1.0, 0.01, "delta"),
    (1.0, 1e-30, "delta"),  # the command line refused 1e-30 ...
    (1.0, 1e-300, "delta"),  # ... and accepted 1e-300
    (1.0, 0.0, "delta"),
]
PARAMETERS = {"prior": "uniform", "max_updates": 5}


def _library(service: Service, epsilon: float, delta: float) -> str | None:
    """``None`` if ``build_engine`` accepts the budget, else its refusal's message."""
    records = Dataset.from_csv(service.data, Schema.from_json(service.schema)).records
    data = PrivateData.from_records(Schema.from_json(service.schema).domain(), records)
    try:
        config = PMWConfig(epsilon=epsilon, delta=delta, **PARAMETERS)  # type: ignore[arg-type]
        build_engine(data, config, noise=NumpyNoise(seed=0))
    except BudgetRefused as refused:
        return f"{refused.field}: {refused}"
    return None


def _cli(service: Service, tmp: Path, epsilon: float, delta: float) -> tuple[int, str]:
    queries = tmp / "q.jsonl"
    queries.write_text(json.dumps({"id": 1, "loss": "logistic", "target": "y", "features": ["a"]}))
    args = ["run", "--data", str(service.data), "--schema", str(service.schema),
            "--queries", str(queries), "--epsilon", repr(epsilon), "--delta", repr(delta),
            "--prior", "uniform", "--max-updates", "5", "--insecure-seeded-noise", "0",
            "-o", str(tmp / "out.jsonl")]  # fmt: skip
    result = runner.invoke(app, args)
    return result.exit_code, result.stderr


def _service(service: Service, epsilon: float, delta: float) -> Any:
    body = {"name": "s", "data_path": str(service.data), "schema_path": str(service.schema),
            "epsilon": epsilon, "delta": delta, "parameters": PARAMETERS}  # fmt: skip
    return service.client.post(
        "/v1/sessions", json=body, headers=service.auth(), params={"wait": BUILD_WAIT}
    )


@pytest.mark.parametrize(("epsilon", "delta", "field"), CASES)
def test_the_cli_the_library_and_the_service_accept_and_refuse_alike(
    service: Service, tmp_path: Path, epsilon: float, delta: float, field: str | None
) -> None:
    library = _library(service, epsilon, delta)
    code, stderr = _cli(service, tmp_path, epsilon, delta)
    response = _service(service, epsilon, delta)
    if field is None:
        assert library is None
        assert code == 0, stderr
        assert response.status_code == 201, response.text
        return
    assert library is not None and library.startswith(f"{field}: {field} ")
    message = library.split(": ", 1)[1]
    # The command line writes the field as its option, and says nothing else.
    assert stderr == f"error: --{message}\n"
    assert code == 1 and not (tmp_path / "out.jsonl").exists()
    # The service answers 422 with the very message, and creates nothing.
    assert response.status_code == 422, response.text
    assert message[:200] in json.dumps(response.json())
    listed = service.client.get("/v1/sessions", headers=service.auth()).json()
    assert listed == []


@pytest.mark.parametrize(("radius", "served"), [(100.0, True), (100.5, False), (1e12, False)])
def test_one_radius_cap_on_the_cli_the_library_and_the_service(
    service: Service, tmp_path: Path, radius: float, served: bool
) -> None:
    """The radius cap is the library's :data:`~pmwcm.kernels.queries.MAX_RADIUS` (100)
    everywhere: the command line answered radius 1e12 while the service capped at 100."""
    from pmwcm.engine.online import RadiusRefused
    from pmwcm.kernels.queries import CMQuery

    spec = {"id": 1, "loss": "logistic", "target": "y", "features": ["a"], "radius": radius}
    # The library: refused before anything is spent.
    records = Dataset.from_csv(service.data, Schema.from_json(service.schema)).records
    data = PrivateData.from_records(Schema.from_json(service.schema).domain(), records)
    engine = build_engine(data, PMWConfig(epsilon=1.0, delta=1e-6, **PARAMETERS),  # type: ignore[arg-type]
                          noise=NumpyNoise(seed=0))  # fmt: skip
    query = CMQuery.from_dict(spec)
    if served:
        engine.ask(query)
    else:
        with pytest.raises(RadiusRefused, match="radius must be at most 100"):
            engine.ask(query)
        assert engine.ledger.entries == () and not engine.answers
    # The command line: an error line naming the radius, the run goes on.
    (tmp_path / "q.jsonl").write_text(json.dumps(spec))
    args = ["run", "--data", str(service.data), "--schema", str(service.schema),
            "--queries", str(tmp_path / "q.jsonl"), "--epsilon", "1", "--delta", "1e-6",
            "--prior", "uniform", "--insecure-seeded-noise", "0",
            "-o", str(tmp_path / "o")]  # fmt: skip
    assert runner.invoke(app, args).exit_code == 0
    line = json.loads((tmp_path / "o").read_text())
    assert ("theta" in line) == served
    if not served:
        assert "radius" in line["error"]
    # The service: 422 naming the radius.
    assert service.create().status_code == 201
    answered = service.ask(service.analyst(), radius=radius)
    assert (answered.status_code == 200) == served, answered.text
    if not served:
        assert answered.status_code == 422 and "radius" in answered.text
