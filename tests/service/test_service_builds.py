"""Session builds off the request path: 202 at once, a status to poll, a cancel that stops
the build's process, refusals before the start, and a build's memory within its declared
bound. No timed assertions: every wait is bounded generously, and what is checked is a
state (the process has exited, the status says so), never a duration."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pmwcm.service import SQLiteStore, bootstrap_curator, create_app
from pmwcm.service.build_child import process_resident_bytes
from pmwcm.service.limits import BuildLimits
from service.svc_support import Service, TestClient

WIDE = Path(__file__).parents[1] / "data"
WIDE_DATA, WIDE_SCHEMA = WIDE / "loans-wide.csv", WIDE / "loans-wide.schema.json"
#: A support this size on the 30-attribute table (435 measured pairs) builds for minutes.
SLOW_SUPPORT = 2**21
#: The longest any test here waits for a state (generous: the machine may be loaded).
PATIENCE = 600.0


def _wide_body(name: str, **parameters: Any) -> dict[str, Any]:
    return {
        "name": name,
        "data_path": str(WIDE_DATA),
        "schema_path": str(WIDE_SCHEMA),
        "epsilon": 1.0,
        "delta": 1e-6,
        "parameters": {"backend": "support", "max_updates": 5} | parameters,
    }


def _until(check: Any, what: str) -> Any:
    """Polls ``check()`` until it is truthy (bounded by :data:`PATIENCE`)."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not reached within {PATIENCE:g} s")


def _build(service: Service, name: str) -> dict[str, Any]:
    response = service.client.get(f"/v1/sessions/{name}/build", headers=service.auth())
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_creation_answers_202_and_the_status_polls_to_ready(service: Service) -> None:
    body = {
        "name": "s",
        "data_path": str(service.data),
        "schema_path": str(service.schema),
        "epsilon": 1.0,
        "delta": 1e-6,
        "parameters": {"max_updates": 5},  # the default paid prior
    }
    created = service.client.post("/v1/sessions", json=body, headers=service.auth())
    assert created.status_code == 202, created.text
    assert created.headers["location"] == "/v1/sessions/s/build"
    assert created.json()["state"] in ("building", "ready")
    assert created.json()["memory_bytes"] > 0 and created.json()["seconds"] > 0
    done = _until(lambda: (b := _build(service, "s"))["state"] != "building" and b, "ready")
    assert done["state"] == "ready" and done["reason"] is None
    assert done["session"]["name"] == "s"
    ledger = service.client.get("/v1/sessions/s/ledger", headers=service.auth()).json()
    assert [e["label"] for e in ledger["entries"]] == ["prior: noisy 2-way marginals"]
    answer = service.ask(service.analyst())
    assert answer.status_code == 200, answer.text


def test_a_query_right_after_creation_waits_for_the_build(service: Service) -> None:
    body = {
        "name": "s", "data_path": str(service.data), "schema_path": str(service.schema),
        "epsilon": 1.0, "delta": 1e-6, "parameters": {"prior": "uniform", "max_updates": 5},
    }  # fmt: skip
    created = service.client.post("/v1/sessions", json=body, headers=service.auth())
    assert created.status_code == 202, created.text
    # No polling: the token and the query wait for the build (up to the request deadline).
    assert service.ask(service.analyst()).status_code == 200


@pytest.fixture
def wide_service(tmp_path: Path) -> Iterator[Service]:
    store = SQLiteStore(tmp_path / "state")
    curator = bootstrap_curator(store)
    assert curator is not None
    with TestClient(create_app(store, data_dirs=[WIDE])) as client:
        yield Service(client, curator, WIDE_DATA, WIDE_SCHEMA, tmp_path / "state")


def test_a_cancelled_build_stops_its_process_and_creates_nothing(
    wide_service: Service,
) -> None:
    service = wide_service
    body = _wide_body("big", support_size=SLOW_SUPPORT)
    created = service.client.post("/v1/sessions", json=body, headers=service.auth())
    assert created.status_code == 202, created.text
    assert created.json()["state"] == "building"  # returned before the build ended
    builds = service.client.app.state.builds  # type: ignore[attr-defined]
    pid = builds.process_id("big")
    assert pid is not None
    started = process_resident_bytes(pid)
    assert started is not None
    # The build is really under way: its process holds the support's records and weights.
    _until(lambda: (process_resident_bytes(pid) or 0) > started + 64 * 2**20, "memory grows")
    cancelled = service.client.delete("/v1/sessions/big/build", headers=service.auth())
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "cancelled"
    # The cancel returned once the process was gone: its memory is the system's again.
    assert process_resident_bytes(pid) is None
    assert _build(service, "big")["state"] == "cancelled"
    assert service.client.get("/v1/sessions", headers=service.auth()).json() == []
    gone = service.client.get("/v1/sessions/big", headers=service.auth())
    assert gone.status_code == 404, gone.text
    # The name is free again: a smaller build of it is accepted.
    again = service.client.post(
        "/v1/sessions", json=_wide_body("big", prior="uniform"), headers=service.auth()
    )
    assert again.status_code == 202, again.text
    assert service.client.delete("/v1/sessions/big/build", headers=service.auth()).status_code in (
        200,
        409,
    )


@pytest.mark.parametrize(
    ("limits", "needles"),
    [
        (BuildLimits(max_seconds=300.0), ["support_size", "time limit of 300 s"]),
        (BuildLimits(max_memory=100 * 2**20), ["support_size", "memory limit of 100 MiB"]),
    ],
)
def test_a_build_over_the_limits_is_refused_before_it_starts(
    tmp_path: Path, limits: BuildLimits, needles: list[str]
) -> None:
    store = SQLiteStore(tmp_path / "state")
    curator = bootstrap_curator(store)
    assert curator is not None
    auth = {"Authorization": f"Bearer {curator}"}
    with TestClient(create_app(store, data_dirs=[WIDE], build_limits=limits)) as client:
        body = _wide_body("big", support_size=SLOW_SUPPORT)
        refused = client.post("/v1/sessions", json=body, headers=auth)
        assert refused.status_code == 422, refused.text
        message = refused.json()["detail"][0]["msg"]
        assert "\n" not in message
        for needle in needles:
            assert needle in message
        assert client.app.state.builds.process_id("big") is None  # type: ignore[attr-defined]
        assert client.get("/v1/sessions/big/build", headers=auth).status_code == 404
        assert client.get("/v1/sessions", headers=auth).json() == []
        assert store.debits("big") == []  # nothing charged


def test_an_epsilon_that_underflows_is_a_one_line_422_naming_it(service: Service) -> None:
    response = service.create(epsilon=5e-324, prior="marginals")
    assert response.status_code == 422, response.text
    message = response.json()["detail"][0]["msg"]
    assert "epsilon" in message and "\n" not in message
    assert "math domain error" not in response.text
    assert service.client.get("/v1/sessions", headers=service.auth()).json() == []


_PEAK_SCRIPT = """
import gc, json
import numpy as np
from pmwcm.engine.practical import PMWConfig, build_engine
from pmwcm.kernels.backend import support_bytes
from pmwcm.kernels.domain import Domain
from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.mechanisms.priors.support import support_marginal_prior
from pmwcm.mechanisms.private_data import PrivateData
from pmwcm.service.build_child import resident_bytes
from pmwcm.service.durable import encode_snapshot

domain = Domain.from_sizes({f"a{i}": 60 for i in range(8)})
rng = np.random.default_rng(0)
data = PrivateData.from_records(domain, rng.integers(0, 60, (5000, 8)))
size = SIZE
config = PMWConfig(epsilon=1.0, delta=1e-6, support_size=size, prior="marginals")

def build(m, iterations):
    release = support_marginal_prior(
        data, noise_multiplier=1.0, noise=NumpyNoise(seed=0), size=m, iterations=iterations
    )
    engine = build_engine(
        data, PMWConfig(epsilon=1.0, delta=1e-6, support_size=m, prior="marginals"),
        noise=NumpyNoise(seed=1), prior=release.hypothesis,
    )
    del release  # as in the service's build: the engine holds its own copy of the prior
    return encode_snapshot(engine)

build(2000, 1)  # loads the compiled kernels
gc.collect()
before = resident_bytes()
snapshot = build(size, 3)
# VmHWM, this process's own peak: ru_maxrss keeps the forking pytest worker's peak
# across exec (Linux folds the old memory map's high-water mark into the process's).
peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status")
            if line.startswith("VmHWM:"))
declared = config.backend_choice(domain, data.n).memory_bytes
print(json.dumps({"before": before, "peak": peak, "declared": declared,
                  "support": support_bytes(domain, size)}))
"""


def test_a_large_support_build_peaks_within_its_declared_memory() -> None:
    """In a fresh process: the support prior (proposal and fit, three iterations: the fit
    streams, so its memory does not grow with them), the engine around it and its
    snapshot, at M = 2^22 records on 8 attributes (224 MiB declared), peak within 1.5x
    of the declared hypothesis memory above the process's memory before the build."""
    script = _PEAK_SCRIPT.replace("SIZE", str(2**22))
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=PATIENCE
    )
    assert out.returncode == 0, out.stderr[-2000:]
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    used = facts["peak"] - facts["before"]
    assert facts["declared"] == facts["support"]
    assert used <= 1.5 * facts["declared"], facts
