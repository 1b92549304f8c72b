"""The test PostgreSQL server really starts and answers queries over TCP."""

from __future__ import annotations

import subprocess

from postgres_cluster import postgres_bin_dir


def test_server_answers_over_loopback(postgres_url: str) -> None:
    psql = postgres_bin_dir() / "psql"
    out = subprocess.run(
        [str(psql), postgres_url, "-tAc", "select 6 * 7"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == "42"
