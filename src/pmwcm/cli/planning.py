"""A run's budget plan and engine: :func:`plan_run` (the one planning function the
service and ``build_engine`` call, from public inputs only), :func:`describe_plan`
(``--dry-run``), :func:`build_run_engine` (online PMW on that plan)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from pmwcm.cli.common import fail, option_message

if TYPE_CHECKING:
    import numpy as np

    from pmwcm.data.table import Dataset
    from pmwcm.engine.config import UpdateChoice
    from pmwcm.engine.online import OnlinePMW
    from pmwcm.engine.plan import BudgetPlan
    from pmwcm.engine.practical import ModeName, PriorName
    from pmwcm.engine.settings import AfterHalt
    from pmwcm.mechanisms.noise import NoiseSource
    from pmwcm.mechanisms.private_data import PrivateData


def plan_run(
    dataset: Dataset | PrivateData,
    *,
    epsilon: float,
    delta: float,
    after_halt: str,
    max_updates: int | None,
    prior: str,
    public_start: bool = False,
    backend: dict[str, Any] | None = None,
    announced_queries: int | None = None,
    mode: str = "auto",
    update: str = "auto",
    workload: Sequence[tuple[str, ...]] = (),
) -> BudgetPlan:
    """The budget plan of a run (:func:`~pmwcm.engine.plan.plan_budget`, the function the
    service and ``build_engine`` call), from public inputs only: ``n``, the schema,
    the options and the file's number of distinct queries. A budget it refuses is
    one error line naming the option; nothing has read the data yet.

    Every parameter is a documented constant (``T``, ``eta``, the threshold rule
    and its ``k``); ``backend`` holds :func:`backend_settings`' keyword arguments,
    ``announced_queries`` (the file's distinct queries) and ``mode`` let the budget
    rule answer the file in composition mode; ``update`` is what a flagged query buys
    and ``workload`` the distinct queries' cliques (the workload-aware start's
    candidates).
    """
    from pmwcm.engine.config import PMWConfig
    from pmwcm.engine.plan import plan_budget
    from pmwcm.mechanisms.accounting.budget_rules import BudgetRefused

    config = PMWConfig(  # max_updates=0 picks the library default
        epsilon=epsilon,
        delta=delta,
        # typer hands over plain strings; PMWConfig checks them against the Literals
        after_halt=cast("AfterHalt", after_halt),
        max_updates=max_updates or 0,
        prior=cast("PriorName", prior),
        announced_queries=announced_queries,
        mode=cast("ModeName", mode),
        update=cast("UpdateChoice", update),
        **(backend or {}),
    )
    try:
        return plan_budget(
            config, n=dataset.n, domain=dataset.domain, prior_supplied=public_start,
            workload=workload,
        )  # fmt: skip
    except BudgetRefused as exc:
        raise fail(option_message(exc)) from None


def describe_plan(plan: BudgetPlan) -> str:
    """The plan as ``pmwcm run --dry-run`` prints it: one ``name value`` line each."""
    lines = []
    for name, value in plan.to_dict().items():
        shown = json.dumps(value, allow_nan=False) if isinstance(value, dict | list) else value
        lines.append(f"{name} {shown}")
    return "\n".join(lines)


def build_run_engine(
    dataset: Dataset | PrivateData,
    plan: BudgetPlan,
    *,
    noise: NoiseSource,
    public: np.ndarray | None = None,
) -> OnlinePMW:
    """Online PMW on the run's plan (:func:`plan_run`): the data is read only through
    what the ledger pays for (the prior's noisy marginals, the sparse vector, the
    oracle calls). ``public`` records (the start for ``prior="public"``, free) are
    public; the engine's :attr:`~pmwcm.engine.online.OnlinePMW.backend` says which
    hypothesis backend was chosen.
    """
    from pmwcm.engine.practical import build_engine
    from pmwcm.mechanisms.private_data import PrivateData

    private = (
        dataset
        if isinstance(dataset, PrivateData)
        else PrivateData.from_records(dataset.domain, dataset.records)
    )
    start = None
    if public is not None:
        from pmwcm.mechanisms.priors.support import public_start

        start = public_start(dataset.domain, public, plan.backend)
    return build_engine(
        private, plan.requested, noise=noise, prior=start, plan=plan,
        workload=plan.announced_cliques,
    )  # fmt: skip
