"""A new session's stored configuration, checked from public inputs before anything is read.

:func:`session_config` turns a creation request (``POST /v1/sessions``, ``pmwcm serve
--data``) into the configuration a session is built from, and rebuilt from after every
restart (:mod:`pmwcm.service.build`): where its data lives
(:func:`pmwcm.service.locations.data_config`), its schema and public records confined to
the operator's data directories with their SHA-256, the budget under the library's one
rule (:func:`pmwcm.mechanisms.accounting.budget_rules.check_total_budget`) and every
parameter resolved, so that a later change of a library default never changes a
session. A refusal names the field, never a path or a line of a file; a build whose
declared size is over the operator's limits is refused here too (:func:`check_build_size`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pmwcm.engine.build_cost import BuildCost, build_cost, check_build_cost
from pmwcm.engine.practical import PMWConfig
from pmwcm.kernels.domain import Domain
from pmwcm.mechanisms.accounting.budget_rules import check_total_budget
from pmwcm.service.connections import Connections
from pmwcm.service.limits import BuildLimits
from pmwcm.service.locations import data_config, digest

__all__ = [
    "PARAMETERS",
    "FileRefused",
    "check_build_size",
    "confine",
    "read_or_refuse",
    "session_config",
]

#: The :class:`~pmwcm.engine.practical.PMWConfig` fields a session stores (resolved at
#: creation, so a later change of a library default never changes a session).
PARAMETERS = tuple(
    f.name for f in dataclasses.fields(PMWConfig) if f.name not in ("epsilon", "delta", "oracle")
)

_log = logging.getLogger("pmwcm.service")
_T = TypeVar("_T")
_WHAT = {
    "schema_path": "a schema (JSON)",
    "public_data_path": "CSV records under the schema",
}


class FileRefused(ValueError):
    """A session's file is outside the data directories, missing, or unreadable as what it
    should be. The message names the field only: never the path nor a line of the file
    (the cause, chained, is for the operator's log)."""


def read_or_refuse(label: str, read: Callable[[], _T]) -> _T:
    """``read()``; any failure is a :class:`FileRefused` naming ``label`` alone."""
    try:
        return read()
    except Exception as err:
        _log.warning("%s could not be read: %s", label, err)
        raise FileRefused(
            f"{label}: the file could not be read as {_WHAT.get(label, 'expected')}; the "
            "server's log has the details."
        ) from err


def confine(label: str, path: str, data_dirs: Sequence[Path] | None) -> Path:
    """``path`` resolved (symbolic links followed), if it is a file under ``data_dirs``
    (``None``: anywhere, for the operator's own command line).

    Raises:
        FileRefused: outside the directories, or not a file (the message names ``label``).
    """
    resolved = Path(path).resolve()
    if data_dirs is not None and not any(resolved.is_relative_to(d) for d in data_dirs):
        raise FileRefused(
            f"{label} is not under the data directories this server allows (the operator "
            "sets them with pmwcm serve --data-dir)."
        )
    if not resolved.is_file():
        raise FileRefused(f"{label}: no such file on the server.")
    return resolved


def session_config(
    *,
    data_path: str | None,
    schema_path: str,
    epsilon: float,
    delta: float,
    parameters: Mapping[str, Any],
    public_data_path: str | None = None,
    accept_drafted_schema: bool = False,
    accept_hint: str = '"accept_drafted_schema": true',
    data_dirs: Sequence[Path] | None = None,
    connection: str | None = None,
    table: str | None = None,
    engine: str | None = None,
    connections: Connections | None = None,
    build_limits: BuildLimits | None = None,
) -> dict[str, Any]:
    """The stored configuration: where the data lives (an absolute path and its digest,
    or a connection's name and a table: :func:`~pmwcm.service.locations.data_config`),
    the schema's path and digest, budget and parameters.

    Parameters left out take :class:`~pmwcm.engine.practical.PMWConfig`'s defaults,
    which are written into the configuration. ``public_data_path`` (public
    records under the same schema) sets ``prior="public"``: the session
    starts from :func:`pmwcm.mechanisms.priors.marginals.public_prior` of that file, at no cost.
    A schema drafted from the data (:func:`pmwcm.data.schema_draft.drafted_marks`)
    is refused unless ``accept_drafted_schema``; an accepted one is recorded
    as ``drafted_schema_accepted``.

    Args:
        data_path, schema_path, epsilon, delta, parameters, public_data_path:
            the session's files, budget and parameters.
        accept_drafted_schema: accept a schema still marked as drafted.
        accept_hint: how the refusal tells the caller to accept it.
        data_dirs: the resolved directories the files must lie under (:func:`confine`);
            ``None`` allows any (the operator's own ``pmwcm serve --data``).
        connection, table, engine: a PostgreSQL table through the operator's
            connection ``connection``, or a Spark table or Parquet path
            (:mod:`pmwcm.service.locations`).
        connections: the operator's named connections (``pmwcm serve --connections``).
        build_limits: the operator's limits on a build: one whose declared cost, with
            the largest ``n`` (:func:`check_build_size`), is over them is refused.

    Raises:
        ValueError: a file is outside ``data_dirs`` or missing, the schema is invalid or
            drafted, the parameters are invalid, or the build is over ``build_limits``.
            A file's refusal (:class:`FileRefused`) names the field alone, never its path
            or content.
    """
    parameters = _with_public_prior(parameters, public_data_path)
    files = {"schema_path": schema_path}
    if public_data_path is not None:
        files["public_data_path"] = public_data_path
    located = data_config(
        data_path=data_path,
        connection=connection,
        table=table,
        engine=engine,
        data_dirs=data_dirs,
        connections=connections,
    )
    resolved = {label: confine(label, path, data_dirs) for label, path in files.items()}
    pmw = _checked_parameters(epsilon, delta, parameters)
    drafted = _drafted_schema(resolved["schema_path"], accept_drafted_schema, accept_hint)
    domain = _check_backend(pmw, resolved["schema_path"])
    if build_limits is not None:
        check_build_size(domain, pmw, n=None, limits=build_limits)
    config: dict[str, Any] = located | _with_digests(resolved)
    if drafted:
        config["drafted_schema_accepted"] = True
    stored = {f: getattr(pmw, f) for f in PARAMETERS}
    # "auto" is stored resolved: a later change of what auto means must not change
    # the update of a session already created (its restart replays what it ran).
    stored["update"] = pmw.update_kind
    return config | {"epsilon": float(epsilon), "delta": float(delta), "parameters": stored}


def _with_digests(files: Mapping[str, Path]) -> dict[str, str]:
    """Each file's path and the SHA-256 of its bytes (``schema_path``, ``schema_sha256``...):
    a session refuses to continue on a file that changed."""
    out: dict[str, str] = {}
    for label, path in files.items():
        out[label] = str(path)
        out[label.replace("_path", "_sha256")] = digest(path)
    return out


def _with_public_prior(
    parameters: Mapping[str, Any], public_data_path: str | None
) -> Mapping[str, Any]:
    """``parameters`` with ``prior="public"`` when public records are given (they set the
    start, at no cost).

    Raises:
        ValueError: another prior with public records, or prior 'public' without them.
    """
    if public_data_path is None:
        if parameters.get("prior") == "public":
            raise ValueError("prior 'public' needs public_data_path (the public records).")
        return parameters
    if parameters.get("prior", "public") != "public":
        raise ValueError(
            f"public_data_path sets the start, so prior={parameters['prior']!r} "
            "cannot also be given."
        )
    return {**parameters, "prior": "public"}


def _checked_parameters(epsilon: float, delta: float, parameters: Mapping[str, Any]) -> PMWConfig:
    """The session's :class:`~pmwcm.engine.practical.PMWConfig`, its budget under the
    library's rules (the ones ``pmwcm run`` applies; ``n`` is checked at genesis).

    Raises:
        ValueError: an unknown parameter, a budget out of range, or an invalid value.
    """
    unknown = sorted(set(parameters) - set(PARAMETERS))
    if unknown:
        raise ValueError(f"Unknown parameter(s) {unknown}; allowed: {list(PARAMETERS)}.")
    check_total_budget(epsilon, delta)
    return PMWConfig(epsilon=epsilon, delta=delta, **parameters)  # validates them


def check_build_size(
    domain: Domain, pmw: PMWConfig, *, n: int | None, limits: BuildLimits
) -> BuildCost:
    """The one check of a build's size: its declared cost
    (:func:`pmwcm.engine.build_cost.build_cost`, from public inputs only: the schema's
    domain, the parameters and ``n`` when known) against the operator's limits.

    Returns:
        The declared cost (the limits the running build is held to).

    Raises:
        BuildRefused: over a limit; the message names the limit and the parameter.
    """
    cost = build_cost(domain, pmw, n=n)
    check_build_cost(cost, max_memory=limits.max_memory, max_seconds=limits.max_seconds)
    return cost


def _check_backend(pmw: PMWConfig, schema_path: Path) -> Domain:
    """Refuses parameters whose hypothesis backend does not fit the schema's universe
    (a forced dense backend over ``hypothesis_memory``, a budget too small for a
    support), from the schema and parameters alone.

    Raises:
        ValueError: naming the parameter and its value.
    """
    from pmwcm.data.schema import Schema

    schema = read_or_refuse("schema_path", lambda: Schema.from_json(schema_path))
    domain = read_or_refuse("schema_path", schema.domain)
    pmw.backend_choice(domain)
    return domain


def _drafted_schema(path: Path, accept: bool, hint: str) -> bool:
    """Whether the schema is a draft (accepted); refuses one that is not accepted.

    Raises:
        ValueError: the schema is invalid (:class:`~pmwcm.data.schema.SchemaError`),
            or drafted from the data and not accepted.
    """
    from pmwcm.data.schema import Schema
    from pmwcm.data.schema_draft import drafted_schema_error

    schema = read_or_refuse("schema_path", lambda: Schema.from_json(path))
    problem = drafted_schema_error(schema, "schema_path", hint)
    if problem is not None and not accept:
        raise ValueError(problem)
    return problem is not None
