"""``pmwcm ask``: send one CM query to a running ``pmwcm serve`` (:mod:`pmwcm.service.client`).

It needs the ``service`` extra (httpx); without it the command says so in one line.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

_SPEC_HELP = (
    'Query spec as JSON (\'{"loss": "logistic", "target": "y", "features": ["a"]}\') or @FILE.'
)
_TOKEN_HELP = "Analyst token (prefer the PMWCM_TOKEN environment variable: argv is visible)."


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def ask_command(
    spec: Annotated[str, typer.Argument(metavar="SPEC", help=_SPEC_HELP)],
    session: Annotated[
        str, typer.Option("--session", metavar="NAME", help="Session name.")
    ] = "default",
    url: Annotated[
        str, typer.Option("--url", metavar="URL", envvar="PMWCM_URL", help="Service URL.")
    ] = "http://127.0.0.1:8000",
    token: Annotated[
        str | None, typer.Option("--token", metavar="TOKEN", envvar="PMWCM_TOKEN", help=_TOKEN_HELP)
    ] = None,
) -> None:
    """Ask one query; print the released answer (theta, source, remaining budget) as JSON."""
    from pmwcm.cli.serve import missing_service_extra

    try:
        import httpx

        from pmwcm.service.client import Client, ServiceError
    except ModuleNotFoundError as err:
        raise missing_service_extra(err, "ask") from None

    if not token:
        raise _fail("no token: set PMWCM_TOKEN or pass --token.")
    try:
        text = Path(spec[1:]).read_text(encoding="utf-8") if spec.startswith("@") else spec
        query = json.loads(text)
    except (OSError, json.JSONDecodeError) as err:
        raise _fail(f"cannot read the query spec: {err}") from None
    if not isinstance(query, dict):
        raise _fail(f"the query spec must be a JSON object, got {type(query).__name__}.")
    try:
        with Client(url, token) as client:
            answer = client.ask(session, query)
    except ServiceError as err:
        raise _fail(err.detail) from None
    except httpx.HTTPError as err:
        raise _fail(f"cannot reach {url}: {err}") from None
    typer.echo(json.dumps(asdict(answer) | {"theta": list(answer.theta)}, indent=2))
