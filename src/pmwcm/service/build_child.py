"""The body of one session build, run in its own process (:mod:`pmwcm.service.build_jobs`).

The build talks to the server over one pipe, in this order:

1. ``("refused", message)``: the data or the parameters cannot be built, decided
   before anything is measured (:func:`~pmwcm.service.build.open_parts` reads the
   data's public ``n`` only; :func:`~pmwcm.service.build.preflight` checks the
   declared cost against the operator's limits). Nothing was drawn; the
   session is not created and nothing is charged. The build ends.
2. ``("started", memory_bytes, seconds, rss_bytes)``: the declared cost and this
   process's resident memory now (the baseline the memory limit is counted from).
3. ``("built", config, debits, snapshot)``: the configuration with its build
   facts, the build-time debits and the fresh engine's snapshot, which the
   server commits in one transaction (:func:`~pmwcm.service.build.genesis`):
   until then the measured prior is neither stored nor released, so a build
   that is cancelled or dies before this message spends nothing anyone can see.
   Or ``("failed", reason)``: the reason is public (a deliberate refusal's
   message, or a generic one with the cause in the server's log).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from pmwcm.errors import PmwcmError
from pmwcm.mechanisms.noise import NoiseSource
from pmwcm.service.build import genesis_from, open_parts, preflight
from pmwcm.service.connections import Connections
from pmwcm.service.limits import BuildLimits
from pmwcm.service.locations import SessionUnavailable

_log = logging.getLogger("pmwcm.service")

#: The reason a build that failed for an unexpected cause shows (the log has the cause).
FAILED = "The build failed after it started; the server's log has the cause."


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux ``/proc``), ``None`` where unknown."""
    return process_resident_bytes("self")


def process_resident_bytes(pid: int | str) -> int | None:
    """Process ``pid``'s resident memory (``VmRSS``), ``None`` if it is gone or unknown."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def run_build(
    pipe: Connection,
    config: dict[str, Any],
    noise_factory: Callable[[], NoiseSource],
    connections: Connections | None,
    limits: BuildLimits,
) -> None:
    """Builds the session of ``config`` and reports over ``pipe`` (module docstring)."""
    try:
        try:
            parts = open_parts(config, connections)
            plan, cost = preflight(parts, limits)
        except (ValueError, SessionUnavailable) as err:  # for the curator, naming the field
            pipe.send(("refused", str(err)))
            return
        except Exception:
            _log.exception("session build could not start")
            pipe.send(("refused", "The build could not start; the server's log has the cause."))
            return
        pipe.send(("started", cost.memory_bytes, cost.seconds, resident_bytes()))
        try:
            built, debits, snapshot = genesis_from(parts, config, noise=noise_factory(), plan=plan)
        except PmwcmError as err:  # a deliberate refusal: public by construction
            pipe.send(("failed", str(err)))
            return
        except Exception:
            _log.exception("session build failed")
            pipe.send(("failed", FAILED))
            return
        pipe.send(("built", built, debits, snapshot))
    except (BrokenPipeError, EOFError, OSError):
        pass  # the server gave the build up (cancelled): nobody is listening
    finally:
        pipe.close()
