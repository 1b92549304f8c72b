"""Building a session's engine: once at creation (genesis), then identically after each restart.

**Genesis.** :func:`genesis` builds the engine with
:func:`pmwcm.engine.practical.build_engine`. With ``prior="marginals"`` (the library's
default) that *measures* the noisy 2-way marginals and charges them to the
ledger. The service commits the session row, that debit and the snapshot of
the fresh engine (its hypothesis is the prior) in one transaction: before it
commits the session does not exist and the measurement, never stored nor
released, is gone; after it the debit and the prior are durable together.

**Rebuild.** :func:`rebuild` makes the same engine again without drawing
anything: it pre-spends the genesis debits into the build-time ledger (so the
oracle's noise level is calibrated around exactly the same events), passes a
placeholder prior (so nothing is measured again; the stored hypothesis
replaces it), checks that the calibrated noise level equals the stored one,
and hands back the engine as the ingredients from which
:func:`pmwcm.service.durable.recover` builds the live engine, with a fresh
:class:`DurableLedger` holding every committed debit.

Both start from a session's stored configuration, made and checked from public inputs
by :func:`pmwcm.service.session_config.session_config` (re-exported here, with
:data:`PARAMETERS`, for the callers that build from it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pmwcm.engine.build_cost import BuildCost
from pmwcm.engine.online import OnlinePMW
from pmwcm.engine.plan import BudgetPlan, plan_budget
from pmwcm.engine.practical import PMWConfig, build_engine, make_accountant
from pmwcm.kernels.histogram import DenseHistogram, Histogram
from pmwcm.mechanisms.accounting.codec import event_from_dict, event_to_dict
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.mechanisms.private_data import PrivateData
from pmwcm.service.connections import Connections
from pmwcm.service.durable import DurableLedger, encode_snapshot
from pmwcm.service.limits import BuildLimits
from pmwcm.service.locations import SessionUnavailable, digest, open_private
from pmwcm.service.session_config import (
    PARAMETERS,
    check_build_size,
    read_or_refuse,
    session_config,
)
from pmwcm.service.store import DebitRecord, StoredSnapshot

__all__ = [
    "PARAMETERS",
    "Parts",
    "SessionUnavailable",
    "genesis",
    "genesis_from",
    "open_parts",
    "preflight",
    "rebuild",
    "session_config",
]

_log = logging.getLogger("pmwcm.service")


#: A session's private data, its parameters and its public-prior file (if any).
Parts = tuple[PrivateData, PMWConfig, Path | None]


def _parts(config: Mapping[str, Any], connections: Connections | None, *, creating: bool) -> Parts:
    """The private data, the parameters and the public-prior file (all checked unchanged)."""
    from pmwcm.data.schema import Schema

    for key in ("schema_path", "public_data_path"):
        if key not in config:
            continue
        path = Path(config[key])
        if not path.is_file() or digest(path) != config[key.replace("_path", "_sha256")]:
            _log.warning("session file %s ('%s') is missing or changed", key, path)
            raise SessionUnavailable(
                f"The session's {key} is missing or changed since the session was created; "
                "the session cannot continue on other data."
            )
    schema = read_or_refuse("schema_path", lambda: Schema.from_json(Path(config["schema_path"])))
    private = open_private(config, schema, connections=connections, creating=creating)
    # A session stored before the budget rule (the sweep window, the refit) existed keeps
    # the fixed split (the sweeps over every past update, no refit) it ran with.
    parameters = {
        "budget_rule": "fixed",
        "sweep_window": None,
        "refit_iterations": 0,
        "update": "oracle",  # stored before issue 35's measured update was the default
        "prior_cliques": "pairs",  # stored before the prior could measure triples
        **config["parameters"],
    }
    pmw = PMWConfig(epsilon=config["epsilon"], delta=config["delta"], **parameters)
    public = config.get("public_data_path")
    return private, pmw, None if public is None else Path(public)


def _public_start(
    private: PrivateData, pmw: PMWConfig, config: Mapping[str, Any], public: Path
) -> Histogram:
    """The free start from the public records, on the session's backend."""
    from pmwcm.data.schema import Schema
    from pmwcm.data.table import Dataset
    from pmwcm.mechanisms.priors.support import public_start

    schema = read_or_refuse("schema_path", lambda: Schema.from_json(Path(config["schema_path"])))
    records = read_or_refuse("public_data_path", lambda: Dataset.from_csv(public, schema).records)
    return public_start(private.domain, records, pmw.backend_choice(private.domain, private.n))


def _placeholder(private: PrivateData, pmw: PMWConfig) -> Histogram:
    """A start that :func:`rebuild` passes instead of a measured or public prior (the
    stored hypothesis replaces it): uniform, on the session's backend (never a dense
    tensor over a universe that gets a support)."""
    import numpy as np

    from pmwcm.kernels.backend import MIN_SUPPORT_SIZE
    from pmwcm.kernels.support import SupportHistogram

    if pmw.backend_choice(private.domain, private.n).kind == "support":
        rng = np.random.default_rng(0)
        return SupportHistogram.uniform(private.domain, MIN_SUPPORT_SIZE, rng=rng)
    return DenseHistogram.uniform(private.domain)


def _ledger(pmw: PMWConfig) -> DurableLedger:
    return DurableLedger(
        epsilon=pmw.epsilon, delta=pmw.delta, accountant=make_accountant(pmw.accountant)
    )


def genesis(
    config: dict[str, Any], *, noise: NoiseSource, connections: Connections | None = None
) -> tuple[dict[str, Any], list[DebitRecord], StoredSnapshot]:
    """Builds a new session's engine (measuring its prior, if any).

    Returns:
        The configuration completed with the build facts, the build-time debits
        and the fresh engine's snapshot: commit all three in one transaction.

    Raises:
        SessionUnavailable, ValueError: the files or parameters cannot be used.
    """
    return genesis_from(open_parts(config, connections), config, noise=noise)


def open_parts(config: Mapping[str, Any], connections: Connections | None) -> Parts:
    """A new session's private data, parameters and public-prior file, opened for its
    build (:func:`genesis_from`); nothing is read but the data's public ``n``.

    Raises:
        SessionUnavailable, ValueError: the files or parameters cannot be used.
    """
    return _parts(config, connections, creating=True)


def _plan_of(parts: Parts) -> BudgetPlan:
    """The budget plan of a new session (every rule, with ``n``), from public inputs
    before the prior reads the data: the function `pmwcm run` and build_engine call."""
    private, pmw, public = parts
    return plan_budget(pmw, n=private.n, domain=private.domain, prior_supplied=public is not None)


def preflight(parts: Parts, limits: BuildLimits) -> tuple[BudgetPlan, BuildCost]:
    """The build's budget plan (:func:`~pmwcm.engine.plan.plan_budget`: every budget
    rule, the split, every noise level), which the build then uses
    (:func:`genesis_from`), and its declared cost with the data's public ``n``
    (:func:`check_build_size`), from public inputs.

    Raises:
        ValueError: a parameter that cannot be built, a budget rule that fails, or a
            build over ``limits``, naming the parameter.
    """
    private, pmw, _ = parts
    plan = _plan_of(parts)
    resolved = pmw.resolved_for(private.n, len(private.domain))
    return plan, check_build_size(private.domain, resolved, n=private.n, limits=limits)


def genesis_from(
    parts: Parts,
    config: dict[str, Any],
    *,
    noise: NoiseSource,
    plan: BudgetPlan | None = None,
) -> tuple[dict[str, Any], list[DebitRecord], StoredSnapshot]:
    """:func:`genesis` on data already opened (:func:`open_parts`), on the ``plan``
    :func:`preflight` made for them (made here if not given)."""
    private, pmw, public = parts
    plan = _plan_of(parts) if plan is None else plan
    start = None if public is None else _public_start(private, pmw, config, public)
    engine = build_engine(private, pmw, noise=noise, ledger=_ledger(pmw), prior=start, plan=plan)
    sv_state = engine.sparse_vector.export_state()
    debits = [
        DebitRecord(seq=i, label=e.label, event=event_to_dict(e.event), sv_state=sv_state)
        for i, e in enumerate(engine.ledger.entries)
    ]
    built = config | {
        "build_debits": len(debits),
        "noise_level": engine.oracle_noise_level,
        "data_n": private.n,  # public; a reopened table of another size is refused
        # The data's own digest (never released): a reopened file or table that holds
        # other records, even as many, is refused (locations.open_private).
        "data_fingerprint": private.fingerprint(),
        "plan": plan.to_dict(),
    }
    return built, debits, encode_snapshot(engine)


def rebuild(
    config: Mapping[str, Any],
    debits: list[DebitRecord],
    *,
    noise: NoiseSource,
    connections: Connections | None = None,
) -> OnlinePMW:
    """The session's engine as :func:`genesis` built it (draws nothing).

    Its ledger holds the build-time debits only: pass it to
    :func:`pmwcm.service.durable.recover`, which builds the engine that serves.

    Raises:
        SessionUnavailable: a file changed, or the calibration differs from the stored one.
    """
    private, pmw, public = _parts(config, connections, creating=False)
    count = int(config["build_debits"])
    if len(debits) < count:
        raise SessionUnavailable("The session's build-time debits are missing.")
    ledger = _ledger(pmw)
    for debit in debits[:count]:
        ledger.spend(event_from_dict(debit.event), label=debit.label)
    # A measured or public prior is not rebuilt: the stored hypothesis replaces it.
    informed = count or public is not None
    placeholder = _placeholder(private, pmw) if informed else None
    engine = build_engine(private, pmw, noise=noise, ledger=ledger, prior=placeholder)
    if engine.oracle_noise_level != config["noise_level"]:
        raise SessionUnavailable(
            f"The engine calibrates to noise level {engine.oracle_noise_level!r}, not the "
            f"stored {config['noise_level']!r}; the library changed under the session."
        )
    return engine
