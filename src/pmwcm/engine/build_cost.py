"""What building an engine may cost, known before it starts: memory and time from public inputs.

:func:`build_cost` reads only the schema's domain, the configuration
(backend, ``M``, prior kind) and, when known, the data's public ``n``; never
a data value. It declares

* **memory**: the hypothesis's declared peak (:class:`~pmwcm.kernels.backend.BackendChoice`
  ``memory_bytes``: ``M (m b + 48)`` bytes for a support of ``M`` records,
  ``4 * 8 |X|`` for a dense tensor) plus the released tables. The support
  prior's proposal and fit stream over the column-major codes
  (:mod:`pmwcm.kernels.support_passes`), so the build holds little beyond the
  hypothesis itself: ``benchmarks/support_build.py`` prints the measured peak
  against this number.
* **time**: an upper bound from the work the build may do, every term capped by
  construction: the fit's record-clique visits (the support fit's
  ``iterations * continuation`` from
  :func:`~pmwcm.mechanisms.priors.support.support_fit_budget`, at the longest fit
  any prior noise allows; the dense fit's
  300 iterations times its continuation), the proposal's draws and the data
  side's one pass per measured clique, each at a per-visit cost that holds on a
  loaded 2-core machine (measured: 10-17 ns per visit of the support passes at a
  load average of 12), plus :data:`BASE_SECONDS`. AIM and MST are priced at
  :data:`SYNTHETIC_PRIOR_SECONDS` and :data:`SYNTHETIC_PRIOR_BYTES` (allowances:
  about 6 minutes each were measured on a wide table; their memory was not).

:func:`check_build_cost` is the one place that refuses a build over a limit,
naming the limit and the parameter to change; a budget plan calls it with the
same public inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pmwcm.engine.practical import PMWConfig
from pmwcm.kernels.domain import Domain
from pmwcm.mechanisms.priors.marginals import CONTINUATION
from pmwcm.mechanisms.priors.support import support_fit_budget

__all__ = [
    "BASE_SECONDS",
    "BuildCost",
    "BuildRefused",
    "build_cost",
    "check_build_cost",
]

#: Opening the data, loading the compiled kernels and encoding the snapshot.
BASE_SECONDS = 60.0
#: One record-clique visit of a support pass (:mod:`pmwcm.kernels.support_passes`).
SUPPORT_SECONDS_PER_VISIT = 2e-8
#: One cell of one pass of the dense fit.
DENSE_SECONDS_PER_CELL = 2e-9
#: One record of the data read for one measured clique.
DATA_SECONDS_PER_VISIT = 2e-8
#: One draw of one attribute of the support proposal.
DRAW_SECONDS = 2e-8
#: AIM or MST as the prior (a fixed allowance; their work is the mbi package's).
SYNTHETIC_PRIOR_SECONDS = 1800.0
#: ... and their memory besides the hypothesis (an allowance, not measured here).
SYNTHETIC_PRIOR_BYTES = 2 * 2**30
#: The dense fit's iterations before its continuation.
DENSE_FIT_ITERATIONS = 300
#: Bytes per cell of a released table (the release, its residual, the fitted marginal).
TABLE_BYTES_PER_CELL = 3 * 8


class BuildRefused(ValueError):
    """A build over a limit, refused before it starts (the message names the limit and
    the parameter to change)."""


@dataclass(frozen=True, kw_only=True)
class BuildCost:
    """A build's declared peak memory (bytes, above the process before it) and its time
    bound (seconds), and the parameter that sets most of each."""

    memory_bytes: int
    seconds: float
    field: str

    def to_dict(self) -> dict[str, object]:
        """A JSON description (for a build's status)."""
        return {"memory_bytes": self.memory_bytes, "seconds": round(self.seconds, 1)}


def _pairs(domain: Domain) -> tuple[int, int]:
    """The default prior's clique count ``K`` and its cells in all (public)."""
    sizes = domain.sizes
    cliques = max(1, len(sizes) * (len(sizes) - 1) // 2)
    cells = sum(a * b for i, a in enumerate(sizes) for b in sizes[i + 1 :]) or sizes[0]
    return cliques, cells


def build_cost(domain: Domain, config: PMWConfig, *, n: int | None = None) -> BuildCost:
    """The declared memory and time of :func:`~pmwcm.engine.practical.build_engine` on
    ``domain`` with ``config`` (module docstring); ``n`` unknown takes the largest
    support the configuration allows, and no data term.

    Raises:
        ValueError: the configuration does not fit the domain (from the backend choice).
    """
    backend = config.backend_choice(domain, n)
    cliques, cells = _pairs(domain)
    seconds = BASE_SECONDS
    memory = backend.memory_bytes
    field = "support_size" if backend.kind == "support" else "hypothesis_memory"
    if config.prior == "marginals":
        memory += TABLE_BYTES_PER_CELL * cells
        seconds += DATA_SECONDS_PER_VISIT * cliques * (n or 0)
        if backend.kind == "support":
            size = backend.support_size
            # The fit's length follows the prior's sigma (the plan's multiplier): the
            # bound takes the longest any sigma allows, a precise prior's (sigma -> 0).
            iterations, continuation = max(
                (support_fit_budget(size, cliques, sigma=s) for s in (None, 0.0)),
                key=lambda budget: budget[0] * budget[1],
            )
            visits = 2 * iterations * continuation * cliques * size
            seconds += SUPPORT_SECONDS_PER_VISIT * visits
        else:
            passes = 2 * DENSE_FIT_ITERATIONS * CONTINUATION
            seconds += DENSE_SECONDS_PER_CELL * passes * domain.size
    elif config.prior in ("aim", "mst"):
        seconds += SYNTHETIC_PRIOR_SECONDS
        memory += SYNTHETIC_PRIOR_BYTES
        field = "prior"
    if backend.kind == "support":
        seconds += DRAW_SECONDS * backend.support_size * len(domain)
    return BuildCost(memory_bytes=int(memory), seconds=float(seconds), field=field)


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def check_build_cost(cost: BuildCost, *, max_memory: int, max_seconds: float) -> None:
    """Refuses a build whose declared memory or time is over the limits.

    Raises:
        BuildRefused: naming the limit, the declared amount and the parameter to lower.
    """
    if cost.memory_bytes > max_memory:
        raise BuildRefused(
            f"{cost.field}: the build would need {_mib(cost.memory_bytes)}, over this "
            f"server's build memory limit of {_mib(max_memory)}; lower {cost.field}."
        )
    if not math.isfinite(cost.seconds) or cost.seconds > max_seconds:
        raise BuildRefused(
            f"{cost.field}: the build may take up to {cost.seconds:,.0f} s, over this "
            f"server's build time limit of {max_seconds:,.0f} s; lower {cost.field}."
        )
