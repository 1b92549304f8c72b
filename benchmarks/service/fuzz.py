"""Schemathesis over every operation of a live ``pmwcm serve`` process, for a time budget.

The server is a real process over SQLite with one session (``s``) and an analyst
token; ``POST /v1/sessions`` is fuzzed with the curator's token, the analyst routes
with the analyst's. Rounds of ``--examples`` cases per operation and generation mode
(positive and negative) run until ``--minutes`` have passed; every response is
checked (no 5xx, documented status codes and content types, response schemas).
At the end the server must still be alive; its peak resident memory (``VmHWM``) is
reported (issue 16, Found 2: a valid curator request once OOM-killed the server).

Usage: ``python benchmarks/service/fuzz.py [--minutes 10] [--examples 25]``; prints a
JSON summary and exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import hypothesis
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode, checks

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crash import write_data
from throughput import ServeProcess

ANALYST_OPERATIONS = {("POST", "/v1/sessions/{name}/queries"), ("GET", "/v1/sessions/{name}")}
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


def _setup(workdir: Path) -> tuple[Path, str, str]:
    from pmwcm.service import SQLiteStore, bootstrap_curator, new_token
    from pmwcm.service.build import session_config
    from pmwcm.service.sessions import SessionManager

    data, schema = write_data(workdir)
    state = workdir / "state"
    store = SQLiteStore(state)
    try:
        curator = bootstrap_curator(store) or ""
        config = session_config(
            data_path=str(data),
            schema_path=str(schema),
            epsilon=1.0,
            delta=1e-6,
            parameters={"prior": "uniform", "max_updates": 4, "threshold": 0.0},
        )
        SessionManager(store).create("s", config)
        analyst, record = new_token(role="analyst", session="s")
        store.add_token(record)
    finally:
        store.close()
    return state, curator, analyst


def _fuzzer(
    operation: Any,
    mode: GenerationMode,
    fixed: dict[str, str] | None,
    token: str,
    url: str,
    tally: Counter[int],
    args: argparse.Namespace,
) -> Any:
    """A Hypothesis test sending ``operation``'s cases in ``mode`` and checking each."""
    headers = {"Authorization": f"Bearer {token}"}

    @settings(
        max_examples=args.examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode, path_parameters=fixed))
    def run(case: Any) -> None:
        response = case.call(base_url=url, headers=headers)
        tally[response.status_code] += 1
        case.validate_response(response, checks=CHECKS)

    return run


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--examples", type=int, default=25)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pmwcm-fuzz-"))
    statuses: Counter[int] = Counter()
    tally = statuses
    failures: list[str] = []
    rounds = 0
    started = time.monotonic()
    try:
        state, curator, analyst = _setup(workdir)
        server = ServeProcess(state, workdir / "server.log")
        try:
            schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
            operations = [result.ok() for result in schema.get_all_operations()]
            end = started + args.minutes * 60
            while time.monotonic() < end and server.proc.poll() is None:
                rounds += 1
                for operation in operations:
                    analyst_op = (operation.method.upper(), operation.path) in ANALYST_OPERATIONS
                    token = analyst if analyst_op else curator
                    fixed = {"name": "s"} if "{name}" in operation.path else None
                    for mode in GenerationMode:
                        if time.monotonic() >= end:
                            break

                        run = _fuzzer(operation, mode, fixed, token, server.url, tally, args)
                        try:
                            hypothesis.seed(rounds * 1000 + len(failures))(run)()
                        except hypothesis.errors.Unsatisfiable:
                            pass  # nothing to negate (e.g. GET /health)
                        except Exception as err:  # a failed check: keep going, report it
                            failures.append(f"{operation.method} {operation.path}: {err}"[:400])
            alive = server.proc.poll() is None
            peak = _peak_rss_mb(server.proc.pid) if alive else float("nan")
        finally:
            server.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    summary = {
        "minutes": round((time.monotonic() - started) / 60, 1),
        "operations": len(operations),
        "rounds": rounds,
        "cases": sum(statuses.values()),
        "statuses": dict(sorted(statuses.items())),
        "server_errors_5xx": sum(n for s, n in statuses.items() if s >= 500),
        "server_alive_at_end": alive,
        "server_peak_rss_mb": round(peak, 1),
        "failures": failures[:20],
        "failure_count": len(failures),
    }
    print(json.dumps(summary, indent=2))
    sys.exit(1 if failures or not alive or summary["server_errors_5xx"] else 0)


if __name__ == "__main__":
    main()
