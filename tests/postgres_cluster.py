"""A real, throw-away PostgreSQL server for the tests and benchmarks.

The Debian ``postgresql`` packages on these machines put ``initdb``, ``pg_ctl``
and ``postgres`` under ``/usr/lib/postgresql/<major>/bin``. ``PostgresCluster``
initialises a cluster in a temporary directory, starts it on a free loopback
port with password authentication, and stops and deletes it afterwards. Nothing
is mocked: if the binaries are missing or the server does not start, ``start``
raises and the test that needed it fails (it is never skipped).

``initdb`` refuses to run as root, so when the tests run as root the server
runs as the unprivileged ``postgres`` system user (created by the Debian
package) and the directory is handed to that user.

Benchmarks import this module too (``sys.path`` gets ``tests/``).
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SERVER_USER = "postgres"
START_TIMEOUT_SECONDS = 60.0


def postgres_bin_dir() -> Path:
    """The newest ``/usr/lib/postgresql/<major>/bin`` that has ``initdb``."""
    override = os.environ.get("PMWCM_PG_BIN")
    if override:
        return Path(override)
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parent.parent.name),
    )
    if not candidates:
        raise RuntimeError(
            "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin "
            "(install Debian's 'postgresql' package, or set PMWCM_PG_BIN)"
        )
    return Path(candidates[-1]).parent


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresCluster:
    """One running PostgreSQL server on 127.0.0.1 (``url`` connects to it).

    Use as a context manager, or call ``start`` / ``stop``. ``url`` names the
    superuser ``pmwcm`` with a random password and the database ``pmwcm``.
    """

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="pmwcm-pg-")))
    port: int = field(default_factory=_free_port)
    password: str = field(default_factory=lambda: secrets.token_hex(16))
    user: str = "pmwcm"
    database: str = "pmwcm"
    _started: bool = False

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{self.database}"

    def _as_server_user(self, argv: list[str]) -> list[str]:
        if os.geteuid() != 0:
            return argv
        return ["runuser", "-u", SERVER_USER, "--", *argv]

    def _run(self, argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # type: ignore[call-overload]
            self._as_server_user(argv), check=True, capture_output=True, text=True, **kwargs
        )

    def start(self) -> PostgresCluster:
        bindir = postgres_bin_dir()
        self.root.mkdir(parents=True, exist_ok=True)
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SERVER_USER)
            for path in (self.root, pwfile):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self.root.chmod(0o700)
        self._run(
            [
                str(bindir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                self.user,
                "--pwfile",
                str(pwfile),
                "--auth",
                "scram-sha-256",
                "-E",
                "UTF8",
                "--no-instructions",
            ]
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self.root} -c fsync=on "
            "-c max_connections=200"
        )
        self._run(
            [
                str(bindir / "pg_ctl"),
                "-D",
                str(self.data_dir),
                "-o",
                options,
                "-l",
                str(self.root / "server.log"),
                "-w",
                "-t",
                str(int(START_TIMEOUT_SECONDS)),
                "start",
            ]
        )
        self._started = True
        self._wait_ready(bindir)
        self._run(
            [
                str(bindir / "createdb"),
                "-h",
                str(self.root),
                "-p",
                str(self.port),
                "-U",
                self.user,
                self.database,
            ],
            env={**os.environ, "PGPASSWORD": self.password},
        )
        return self

    def _wait_ready(self, bindir: Path) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            ready = subprocess.run(
                [str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                capture_output=True,
            )
            if ready.returncode == 0:
                return
            if time.monotonic() > deadline:
                log = (self.root / "server.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"PostgreSQL did not become ready:\n{log}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self._started:
            self._started = False
            subprocess.run(
                self._as_server_user(
                    [
                        str(postgres_bin_dir() / "pg_ctl"),
                        "-D",
                        str(self.data_dir),
                        "-m",
                        "immediate",
                        "-w",
                        "stop",
                    ]
                ),
                capture_output=True,
            )
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
