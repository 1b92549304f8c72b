"""How many updates ``T`` an informed engine makes, from ``(epsilon, n)`` (issue 15 item 2).

**Opt-in** (:meth:`pmwcm.engine.practical.PMWConfig.with_updates_for`); the
default stays ``T = 10``. Below ``epsilon n ~ 40,000`` it lowers ``T``, and no
benchmark has yet measured that change, so it is not the default; above, it
keeps 10 for the reason below.

The sparse vector's threshold, in excess-risk units, is ``b ln(k / T) Delta``
with ``b = 2 T / eps_sv_queries`` (Lyu-Su-Li) and ``Delta ~ 2 S / n``: it grows
like ``T / (epsilon n)``. Every update beyond those a stream needs therefore
only raises the error the engine certifies, and every update it does make
costs each oracle call budget. The rule::

    T(epsilon, n) = clip(round(epsilon n / EPS_N_PER_UPDATE), MIN_UPDATES, MAX_UPDATES)

with ``EPS_N_PER_UPDATE = 4,000``, ``MIN_UPDATES = 3``, ``MAX_UPDATES = 10``:
the old fixed ``T = 10`` where ``epsilon n >= 40,000`` (it was chosen on the
public, bundled Adult file at ``epsilon = 1``, ``n = 48,842``, on the seed-0
stream no benchmark reuses; docs/design.md section 6), and fewer, less noisy
updates under a lower threshold below (``T = 3`` at ``epsilon n <= 14,000``).

**Why not more at large ``epsilon n``.** The first version let ``T`` grow to 50
with ``epsilon n`` (the same certified error *relative* to ``1 / (epsilon n)``).
On the parity regime at ``n = 10^6`` the streams triggered only 2-3 updates
either way, so the larger ``T`` only raised the threshold five-fold: seed 0's
mean excess risk went from 3.7e-5 (``T = 10``) to 1.9e-3
(``benchmarks/accuracy/results/rerun_regimes_T50.jsonl``). ``MAX_UPDATES``
is therefore the old default. Every input is public (``n`` as in the paper).

The split itself (prior 40%, sparse vector 30%, oracle calls 30%) stays the
fixed rule of :mod:`pmwcm.engine.practical`; the oracle's configuration
follows its per-call budget (:mod:`pmwcm.mechanisms.oracles.tuning`).
"""

from __future__ import annotations

import math

#: ``epsilon n`` per update, and the bounds on ``T`` (module docstring).
EPS_N_PER_UPDATE = 4_000.0
MIN_UPDATES = 3
MAX_UPDATES = 10


def updates_for_budget(epsilon: float, n: int) -> int:
    """``T(epsilon, n)`` for an engine with an informed (paid or public) start.

    >>> [updates_for_budget(1.0, n) for n in (5_000, 20_000, 39_073, 10**6)]
    [3, 5, 10, 10]
    >>> updates_for_budget(0.5, 39_073), updates_for_budget(0.1, 39_073)
    (5, 3)
    """
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be positive and finite, got epsilon={epsilon}.")
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"n must be a positive integer, got n={n!r}.")
    return int(min(MAX_UPDATES, max(MIN_UPDATES, round(epsilon * n / EPS_N_PER_UPDATE))))
