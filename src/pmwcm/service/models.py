"""Request bodies of the HTTP API (pydantic, strict); the responses are in
:mod:`pmwcm.service.response_models`.

Every request model (but :class:`QuerySpec`, which only documents the shape
of a query, validated by :meth:`pmwcm.kernels.queries.CMQuery.from_dict`)
forbids unknown fields, accepts no type coercion (strict
mode: ``"1"`` is not a number, ``1`` is not a boolean) and rejects NaN and
infinities; FastAPI answers a violation with 422 and the offending field's
location. A query is a declarative spec from the loss catalogue (docs/design.md
section 2): no code is ever taken from a request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pmwcm.engine.practical import PMWConfig
from pmwcm.kernels.backend import MIN_SUPPORT_SIZE
from pmwcm.kernels.queries import CMQuery
from pmwcm.service.limits import (
    MAX_FEATURES,
    MAX_INTERACTIONS,
    MAX_NAME_CHARS,
    MAX_RADIUS,
    QUERY_LIMITS,
)

_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(PMWConfig) if f.default is not dataclasses.MISSING
}

#: The most memory (bytes) a session's hypothesis may be given: 4 GiB (a service limit,
#: so that one session cannot take the server's memory; the library has none).
MAX_HYPOTHESIS_MEMORY = 4 * 2**30
#: The largest support a session may ask for (2^26 records; the memory cap binds first
#: on all but the narrowest schemas).
MAX_SUPPORT_SIZE = 2**26

LossName = Literal[
    "absolute", "hinge", "huber", "logistic", "quantile", "smoothed_hinge", "squared"
]
Name = str
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
Attribute = Annotated[str, Field(max_length=MAX_NAME_CHARS)]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class QuerySpec(BaseModel):
    """A CM query (:class:`pmwcm.kernels.queries.CMQuery`): a catalogue loss on named attributes.

    This model documents the request body's shape (for OpenAPI) and nothing
    more: the service never validates a query with it. Whether a spec is
    accepted, and the message when it is not, come from
    :meth:`CMQuery.from_dict` alone (:meth:`to_query`), the same check
    ``pmwcm run`` applies to a query line; the answering engine then compiles
    the query on the session's domain, refusing before anything is spent. An
    ``id`` is accepted and ignored, as in a query file (undocumented here, so
    the fields mirror :class:`CMQuery`'s). The service's public limits
    (:mod:`pmwcm.service.limits`) are checked first.
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra={"description": QUERY_LIMITS})

    loss: LossName
    target: Attribute = Field(description=f"At most {MAX_NAME_CHARS} characters.")
    features: list[Attribute] = Field(
        max_length=MAX_FEATURES,
        description=f"At most {MAX_FEATURES} features, each name at most {MAX_NAME_CHARS} "
        "characters.",
    )
    radius: float = Field(
        default=1.0, gt=0, le=MAX_RADIUS, description=f"At most {MAX_RADIUS:g} on this service."
    )
    l2: float = Field(default=0.0, ge=0)
    intercept: bool = True
    loss_param: float | None = None
    encodings: dict[Attribute, Literal["auto", "onehot", "ordinal"]] = Field(
        default_factory=dict,
        description=f"Keys are features (names at most {MAX_NAME_CHARS} characters).",
    )
    interactions: list[list[Attribute]] = Field(
        default_factory=list,
        max_length=MAX_INTERACTIONS,
        description=f"At most {MAX_INTERACTIONS} interactions, each of listed features.",
    )

    @staticmethod
    def to_query(spec: Mapping[str, Any]) -> CMQuery:
        """The query a request body poses (:meth:`CMQuery.from_dict`: one validation).

        Raises:
            QueryError: the spec is invalid (an :class:`~pmwcm.errors.InvalidQuery`).
        """
        return CMQuery.from_dict(spec)


class SessionParameters(_Request):
    """Practical-mode parameters (:class:`pmwcm.engine.practical.PMWConfig`); omitted: default.

    ``max_updates`` and ``expected_queries`` 0 pick the prior-dependent
    defaults; ``learning_rate`` and ``threshold`` ``null`` pick the rules.
    ``prior`` ``"aim"`` / ``"mst"`` need ``pmwcm[mbi]`` on the server and take
    minutes at session creation.

    ``backend``, ``hypothesis_memory`` and ``support_size`` choose how the
    hypothesis is held (:func:`pmwcm.kernels.backend.choose_backend`): a dense
    tensor over the universe while it fits ``hypothesis_memory`` bytes (at most
    :data:`MAX_HYPOTHESIS_MEMORY`, 4 GiB, on this service), a weighted support of
    ``support_size`` records beyond. A session's status reports the choice and why.
    """

    max_updates: int = Field(default=_DEFAULTS["max_updates"], ge=0, le=10_000)
    sparse_vector: Literal["lyu_su_li", "dwork_roth"] = _DEFAULTS["sparse_vector"]
    sv_fraction: float = Field(default=_DEFAULTS["sv_fraction"], gt=0, lt=1)
    learning_rate: float | None = Field(default=_DEFAULTS["learning_rate"], gt=0)
    threshold: float | None = _DEFAULTS["threshold"]
    expected_queries: int = Field(default=_DEFAULTS["expected_queries"], ge=0, le=10**9)
    prior: Literal["marginals", "uniform", "aim", "mst", "public"] = _DEFAULTS["prior"]
    prior_fraction: float = Field(default=_DEFAULTS["prior_fraction"], gt=0, lt=1)
    budget_rule: Literal["signal", "fixed"] = Field(
        default=_DEFAULTS["budget_rule"],
        description="'signal' (the default: the marginal prior's share, the sparse "
        "vector's and T follow epsilon n / sqrt(d (d - 1)); pmwcm.engine.budget_rule) "
        "or 'fixed' (prior_fraction, sv_fraction and max_updates as given).",
    )
    sensitivity_factor: float = Field(default=_DEFAULTS["sensitivity_factor"], ge=2, le=100)
    solver_tol: float = Field(default=_DEFAULTS["solver_tol"], gt=0, le=1)
    after_halt: Literal["refuse", "synthetic"] = _DEFAULTS["after_halt"]
    sweeps: int = Field(default=_DEFAULTS["sweeps"], ge=0, le=100)
    sweep_window: int | None = Field(
        default=_DEFAULTS["sweep_window"],
        ge=1,
        description="Each sweep replays this many of the most recent updates (default 10, "
        "every update of an informed start's T); null replays them all.",
    )
    step_rule: Literal["fixed", "calibrated"] = Field(
        default=_DEFAULTS["step_rule"],
        description="How far an update moves: 'calibrated' (the released answer's "
        "excess risk on the updated hypothesis decides) or 'fixed' (the paper's eta).",
    )
    refit_iterations: int = Field(
        default=_DEFAULTS["refit_iterations"],
        ge=0,
        le=100,
        description="After each update, this many steps of the marginal prior's fit back "
        "onto its released marginals (then on while above their noise; free "
        "post-processing); 0: none.",
    )
    accountant: Literal["pld", "zcdp"] = _DEFAULTS["accountant"]
    backend: Literal["auto", "dense", "support"] = Field(
        default=_DEFAULTS["backend"],
        description="The hypothesis backend: 'auto' (dense while it fits hypothesis_memory, "
        "a weighted support beyond), 'dense' or 'support'.",
    )
    hypothesis_memory: int = Field(
        default=_DEFAULTS["hypothesis_memory"],
        ge=1,
        le=MAX_HYPOTHESIS_MEMORY,
        description="Bytes the hypothesis may take (default 512 MiB); this service allows "
        f"at most {MAX_HYPOTHESIS_MEMORY} (4 GiB).",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default=_DEFAULTS["device"],
        description="Where a support hypothesis computes: 'cpu', 'cuda' (refused on a "
        "server without a GPU) or 'auto' (CUDA when one is visible).",
    )
    support_size: int = Field(
        default=_DEFAULTS["support_size"],
        ge=0,
        le=MAX_SUPPORT_SIZE,
        description="M, the records of the support backend: 0 for the default (the smallest "
        "power of two >= n and >= 32 records a cell of the schema's mean pair marginal, "
        "between 2^14 and 2^18, capped by hypothesis_memory), else at "
        f"least {MIN_SUPPORT_SIZE} and at most {MAX_SUPPORT_SIZE}.",
    )

    announced_queries: int | None = Field(
        default=_DEFAULTS["announced_queries"],
        ge=1,
        le=10**9,
        description="k, the most queries the session will be asked (public); null: not "
        "announced. With mode 'auto' the budget rule may then answer every query by the "
        "oracle (composition mode; pmwcm.engine.budget_rule.prefers_composition).",
    )
    mode: Literal["auto", "hybrid", "composition"] = Field(
        default=_DEFAULTS["mode"],
        description="'auto' (the default: composition mode where the rule prefers it for "
        "the announced k), 'hybrid' (never) or 'composition' (always; needs "
        "announced_queries).",
    )
    update: Literal["auto", "measure", "oracle", "both"] = Field(
        default=_DEFAULTS["update"],
        description="What a flagged query buys: 'measure' (its clique's marginal measured and "
        "the hypothesis refitted, updates paced over announced_queries), 'oracle' (the "
        "paper's private fit and tilt), 'both', or 'auto' (the default: 'measure' when "
        "announced_queries is set, else 'oracle').",
    )
    prior_cliques: Literal["auto", "pairs", "triples"] = Field(
        default=_DEFAULTS["prior_cliques"],
        description="What the paid marginal prior measures: 'auto' (the default: on a dense "
        "hypothesis every 3-way marginal where the data is large enough that their noise is "
        "small, pmwcm.mechanisms.priors.marginals.prior_order; otherwise every 2-way one "
        "but those its noise would swamp, with the 1-ways of the attributes they leave out, "
        "noise_limited_pairs), 'pairs' (every 2-way marginal) or 'triples' (refused on the "
        "support backend). The same privacy cost.",
    )

    @field_validator("support_size")
    @classmethod
    def _support_size(cls, value: int) -> int:
        if value != 0 and value < MIN_SUPPORT_SIZE:
            raise ValueError(
                f"support_size must be 0 (the default size) or at least {MIN_SUPPORT_SIZE}, "
                f"got support_size={value}"
            )
        return value


class SessionCreate(_Request):
    """A new release session: where its private data lives, its schema on the server, the
    total budget and the parameters.

    The data is one of (the locations ``pmwcm run --data`` takes):

    * ``data_path``: a CSV or Parquet file (or a directory of Parquet files), read by
      DuckDB, under a data directory the operator allows (``pmwcm serve --data-dir``);
    * ``connection`` and ``table``: a PostgreSQL table, through a connection the
      operator configured by name (``pmwcm serve --connections``); its URL and
      password never pass through the API nor reach the state store;
    * ``engine: "spark"`` with ``data_path`` (Parquet under a data directory) or
      ``table`` (a table of the server's Spark catalog).
    """

    name: Name = Field(pattern=_NAME)
    data_path: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="The private CSV or Parquet file (or directory of Parquet files) on the "
        "server, under a data directory the operator allows (pmwcm serve --data-dir); so are "
        "schema_path and public_data_path.",
    )
    connection: str | None = Field(
        default=None,
        pattern=_NAME,
        description="A PostgreSQL connection the operator configured by name (pmwcm serve "
        "--connections); with table. Its credentials never pass through the API.",
    )
    table: str | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="The table to read: 'table' or 'schema.table' of the connection, or a "
        "table of the server's Spark catalog with engine 'spark'.",
    )
    engine: Literal["duckdb", "spark"] | None = Field(
        default=None,
        description="'spark' reads data_path or table with Spark SQL; default DuckDB for files.",
    )
    schema_path: str = Field(min_length=1, max_length=4096)
    public_data_path: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="PUBLIC records under the same schema to start from, at no privacy "
        "cost (sets prior 'public'); never a file derived from the private data.",
    )
    # Checked by the library's budget rules (pmwcm.mechanisms.accounting.budget_rules),
    # which the command line applies too: epsilon in [1e-3, 1e3], delta in [1e-15, 1/n).
    epsilon: float
    delta: float
    parameters: SessionParameters = Field(default_factory=SessionParameters)
    accept_drafted_schema: bool = Field(
        default=False,
        description="Accept a schema drafted from the data by 'pmwcm schema' (still marked "
        "as such): its value sets and bin edges leak the data outside the privacy budget. "
        "Without it such a schema is refused.",
    )


class TokenCreate(_Request):
    """An analyst token to issue; the label is a free note for the curator."""

    label: str = Field(default="", max_length=200)
