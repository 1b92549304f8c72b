"""A private starting hypothesis from AIM or MST (OpenDP's ``extras.mbi``; optional).

:mod:`pmwcm.mechanisms.priors.marginals` measures *every* 2-way marginal with one Gaussian
mechanism. MST (McKenna, Miklau, Sheldon 2021, "Winning the NIST Contest: A
scalable and general approach to differentially private synthetic data") and
AIM (McKenna, Mullins, Sheldon, Miklau 2022, "AIM: An Adaptive and Iterative
Mechanism for Differentially Private Synthetic Data") instead spend part of
their budget *selecting* which marginals to measure (MST: the maximum spanning
tree of the most informative pairs; AIM: the worst-approximated marginals of a
workload, round by round, with a growing per-round budget), and fit a graphical
model (Private-PGM) to the measurements. This module runs either through
OpenDP's ``extras.mbi`` and hands the engine the fitted model's **full
contingency table** -- its probability on every cell of the domain -- as the
prior: no records are sampled from it, so the prior carries no sampling noise.

**Dependency.** ``pip install "pmwcm[mbi]"`` (``opendp[mbi]==0.16.0``: JAX,
polars and Private-PGM, about 1.7 GB). Without it :func:`paid_synthetic_prior`
raises :class:`MbiUnavailableError` (an :class:`ImportError`) before anything
is charged. The mechanisms are much slower than the default marginal prior
(seconds on a toy domain, minutes for AIM on Adult) and draw their noise from
OpenDP's own CSPRNG: a NumPy seed does not make them reproducible.

**Privacy units.** mbi's mechanisms are ``rho``-zCDP for *add/remove one*
record (OpenDP's ``unit_of(contributions=1)``). Replacing one record is one
removal and one addition, and zCDP under group privacy degrades with the
square of the group size (Bun, Steinke 2016, Prop. 1.9), so a run at ``rho``
is ``4 rho``-zCDP under pmwcm's *replace-one* unit. We therefore give the
prior a replace-one zCDP budget ``rho_r`` and run mbi at ``rho = rho_r / 4``.

**Budget and charge.** The prior gets ``(eps_p, delta_p)`` (in practical mode
``prior_fraction`` of the total). ``rho_r`` is the largest value whose
zCDP -> (eps, delta) conversion fits it: ``ZCDPAccountant``'s conversion
(Canonne, Kamath, Steinke 2020, Prop. 12 / Cor. 13, never worse than Bun,
Steinke 2016, Prop. 1.3: ``eps = rho + 2 sqrt(rho log(1/delta))``), i.e.
``ZCDPAccountant().epsilon(ZCDpEvent(rho_r), delta=delta_p) <= eps_p``. The
ledger is charged

* under the zCDP accountant: ``ZCDpEvent(rho_r)`` (``= 4 rho``), which then
  composes additively with the rest of the interaction;
* under any other accountant (PLD, DRV, which cannot represent zCDP):
  ``EpsilonDeltaDpEvent(eps_p, delta_p)``, the guarantee the conversion proves,
  composed as the worst case.

Either way the event is spent *before* the mechanism touches the data (the
ledger refuses it if it does not fit), and the import check comes first.

**Null categories (post-processing).** OpenDP appends a ``null`` key to every
column (a latent cell for missing or undiscovered values). Our records have
none, but the fitted model spreads a little mass onto those cells; we drop
every cell with a null coordinate and renormalise the rest -- conditioning the
model on "no nulls", a post-processing of the release.

**On a universe too large for a table** (the support backend,
:mod:`pmwcm.kernels.support`) the prior is ``M`` records sampled from the
fitted model with equal weights (:func:`support_from_release`), a
post-processing of the same release at the same charge. AIM's candidate
scores project the model in NumPy (:mod:`pmwcm.mechanisms.priors.mbi_projection`),
which is what makes AIM run at full resolution in minutes.

**Data held only as a histogram.** mbi counts rows: the data's records are
handed over as held, or rebuilt from ``n * D`` (:mod:`pmwcm.mechanisms.priors.rebuilt_records`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from dp_accounting import dp_event
from numpy.typing import NDArray

from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.accounting import (
    Accountant,
    EpsilonDeltaDpEvent,
    PrivacyLedger,
    ZCDPAccountant,
    calibrate_parameter,
)
from pmwcm.mechanisms.accounting.budget_rules import zcdp_for
from pmwcm.mechanisms.accounting.events import check_budget
from pmwcm.mechanisms.priors.mbi_projection import numpy_projection
from pmwcm.mechanisms.priors.rebuilt_records import (
    REBUILD_CELLS,
    REBUILD_RECORDS,
    largest_remainder_counts,
    records_of,
)
from pmwcm.mechanisms.private_data import PrivateData

__all__ = [
    "AIM_ROUNDS",
    "LABELS",
    "METHODS",
    "REBUILD_CELLS",
    "REBUILD_RECORDS",
    "MbiUnavailableError",
    "contingency_histogram",
    "largest_remainder_counts",
    "paid_synthetic_prior",
    "prior_event",
    "records_of",
    "replace_one_rho",
    "require_mbi",
    "sample_records",
    "support_from_release",
    "synthetic_prior",
]

METHODS = ("aim", "mst")
#: AIM's number of rounds. OpenDP's default is 16 per attribute (224 on Adult);
#: since the NumPy projection both finish in minutes on full-resolution Adult, and
#: at the prior's replace-one share the default bought nothing there (matched-unit
#: AIM at eps = 1: 5.9e-4 and 1.1e-3 mean excess risk against 5.4e-4 and 1.05e-3
#: with 16 rounds, seeds 0 and 1; docs/results.md "Full resolution").
AIM_ROUNDS = 16
LABELS = {"aim": "prior: AIM synthetic data (mbi)", "mst": "prior: MST synthetic data (mbi)"}
_INSTALL = 'pip install "pmwcm[mbi]"'


class MbiUnavailableError(ImportError, ValueError):
    """OpenDP's ``extras.mbi`` (JAX, polars, Private-PGM) is not installed.

    Also a :class:`ValueError`, so that callers that refuse invalid parameters
    (the HTTP service's session creation, the CLI) report it as a bad prior
    rather than crash.
    """


def require_mbi() -> None:
    """Raises :class:`MbiUnavailableError` unless ``opendp[mbi]`` can be imported."""
    try:
        import mbi  # noqa: F401
        import opendp.extras.mbi  # noqa: F401
        import polars  # noqa: F401
    except ImportError as err:
        raise MbiUnavailableError(
            f"The AIM and MST priors need OpenDP's mbi extra (JAX, polars, Private-PGM), "
            f"which is not installed ({err}). Install it with: {_INSTALL}"
        ) from err


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got method={method!r}.")
    return method


def replace_one_rho(epsilon: float, delta: float) -> float:
    """The largest ``rho`` with ``rho``-zCDP converting to ``(epsilon, delta)``-DP.

    Uses :class:`~pmwcm.mechanisms.accounting.ZCDPAccountant`'s conversion (module
    docstring), bracketed from Bun-Steinke's closed form ``(sqrt(L + eps) -
    sqrt(L))^2``, ``L = log(1/delta)`` (which always fits), and refined by
    :func:`~pmwcm.mechanisms.accounting.calibrate_parameter` to a relative 1e-9;
    the returned value was verified to fit.
    """
    epsilon, delta = check_budget(epsilon, delta)
    accountant = ZCDPAccountant()

    def fits(rho: float) -> bool:
        return accountant.epsilon(dp_event.ZCDpEvent(rho), delta=delta) <= epsilon

    lo = zcdp_for(epsilon, delta)
    while not fits(lo):  # float round-off only: shave ulps off the closed form
        lo *= 1 - 1e-12
    hi = lo * 2
    while fits(hi):
        lo, hi = hi, hi * 2
    return calibrate_parameter(
        dp_event.ZCDpEvent,
        epsilon=epsilon,
        delta=delta,
        accountant=accountant,
        bracket=(lo, hi),
        rtol=1e-9,
    )


def prior_event(
    *, epsilon: float, delta: float, accountant: Accountant
) -> tuple[dp_event.DpEvent, float]:
    """The event to charge for a prior at ``(epsilon, delta)``, and mbi's add/remove ``rho``.

    ``rho_r = replace_one_rho(epsilon, delta)``; the event is ``ZCDpEvent(rho_r)``
    under a :class:`~pmwcm.mechanisms.accounting.ZCDPAccountant`, else
    ``EpsilonDeltaDpEvent(epsilon, delta)``; mbi runs at ``rho_r / 4``
    (module docstring: group privacy, replace-one = remove + add).
    """
    rho_r = replace_one_rho(epsilon, delta)
    event: dp_event.DpEvent
    if isinstance(accountant, ZCDPAccountant):
        event = dp_event.ZCDpEvent(rho_r)
    else:
        event = EpsilonDeltaDpEvent(epsilon=float(epsilon), delta=float(delta))
    return event, rho_r / 4.0


def _release(
    method: str, domain: Domain, records: NDArray[np.int64], *, rho: float, rounds: int
) -> Any:
    """Runs mbi's MST or AIM at add/remove ``rho``-zCDP; returns its ``ContingencyTable``.

    OpenDP's adaptive composition can refuse a step that is one float ulp over
    the total ("insufficient budget"). For MST every step's budget is a fixed
    function of ``rho`` (not of the data), so whether a run hits it is
    data-independent and retrying at ``rho (1 - j 1e-7)`` (a smaller budget)
    reveals nothing. AIM's steps grow with the data, so a refused step there is
    data-dependent: it is not retried (the charge stands; an error is raised).
    """
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    frame = pl.LazyFrame({name: records[:, i] for i, name in enumerate(domain.names)})
    keys = {name: list(range(size)) for name, size in zip(domain.names, domain.sizes, strict=True)}
    attempts = 40 if method == "mst" else 1
    for j in range(attempts):
        context = dp.Context.compositor(
            data=frame,
            privacy_unit=dp.unit_of(contributions=1),
            # (measure, rho) directly: dp.loss_of logs a warning for rho > 0.5.
            privacy_loss=(dp.zero_concentrated_divergence(), rho * (1 - j * 1e-7)),
            split_evenly_over=1,
        )
        algorithm = dp.mbi.AIM(rounds=rounds) if method == "aim" else dp.mbi.MST()
        try:
            with numpy_projection():  # same marginals, without JAX compiling each shape
                return context.query().contingency_table(keys=keys, algorithm=algorithm).release()
        except dp.OpenDPException as err:
            if "insufficient budget" not in str(err) or method == "aim":
                raise
    raise RuntimeError(f"{method} kept failing with 'insufficient budget' at rho={rho}.")


def contingency_histogram(release: Any, domain: Domain) -> tuple[DenseHistogram, float]:
    """The release's full contingency table on ``domain``, null cells dropped, normalised.

    Returns the histogram and the fraction of the model's mass that lay on
    cells with a null coordinate (dropped: module docstring).
    """
    with numpy_projection():  # the full table: every factor combined, nothing summed out
        table = np.asarray(release.project(list(domain.names)), dtype=np.float64)
    index: list[list[int]] = []
    for name, size in zip(domain.names, domain.sizes, strict=True):
        keys = release.keys[name].to_list()
        if len(keys) != table.shape[len(index)]:
            raise RuntimeError(f"mbi's table has {table.shape} cells, keys {keys} for {name!r}.")
        index.append([keys.index(code) for code in range(size)])  # codes 0..s-1, null dropped
    kept = table[np.ix_(*index)]
    total = float(table.sum())
    kept = np.clip(kept, 0.0, None)
    if not (math.isfinite(total) and total > 0 and kept.sum() > 0):
        raise RuntimeError("mbi's fitted model has no mass off the null cells.")
    return DenseHistogram(domain, kept), max(0.0, 1.0 - float(kept.sum()) / total)


def sample_records(
    release: Any, domain: Domain, rows: int, *, rng: np.random.Generator | None = None
) -> tuple[NDArray[np.int64], int]:
    """``rows`` records drawn from the release's fitted model, and how many were dropped.

    mbi's own sampler (``method="sample"``). Records carrying OpenDP's null
    category (or, from mbi 1.1.0's sampler at small ``rho``, a NaN code) are
    dropped: the same conditioning on "no nulls" as :func:`contingency_histogram`.
    mbi's sampler draws from NumPy's legacy global generator; with ``rng`` that
    generator is seeded from it for the call and restored after it, so a run with
    seeded noise is reproducible and nothing else sees the change. Post-processing
    of the release.
    """
    import polars as pl

    if rng is None:
        frame = release.synthesize(rows=rows, method="sample")
    else:  # mbi's sampler reads NumPy's legacy global generator and takes no other
        saved = np.random.get_state()  # noqa: NPY002
        np.random.seed(int(rng.integers(2**32)))  # noqa: NPY002
        try:
            frame = release.synthesize(rows=rows, method="sample")
        finally:
            np.random.set_state(saved)  # noqa: NPY002
    if isinstance(frame, pl.LazyFrame):
        frame = frame.collect()
    columns = [np.asarray(frame[name].to_numpy(), dtype=np.float64) for name in domain.names]
    codes = np.stack(columns, axis=1)
    valid = np.all(np.isfinite(codes) & (codes >= 0) & (codes < np.asarray(domain.sizes)), axis=1)
    return codes[valid].astype(np.int64), int(rows - valid.sum())


def support_from_release(
    release: Any, domain: Domain, size: int, *, rng: np.random.Generator
) -> SupportHistogram:
    """``size`` records sampled from the release's fitted model, with equal weights.

    The support backend's form of the prior: the model's distribution as ``size``
    draws (:func:`sample_records`), so no table over ``X`` is built. Attribute
    values the sample misses get no record, and multiplicative weights only
    rescale records: at ``size = 2^16`` that leaves out values of model
    probability below about ``1e-4``.

    Raises:
        RuntimeError: every sampled record held a null code (a degenerate release).
    """
    records, _ = sample_records(release, domain, size, rng=rng)
    if not len(records):
        raise RuntimeError("Every record sampled from mbi's model held a null code.")
    return SupportHistogram(domain, records)


def synthetic_prior(
    data: PrivateData, method: str, *, rho: float, rounds: int = AIM_ROUNDS
) -> DenseHistogram:
    """Runs ``method`` at add/remove ``rho``-zCDP and returns its contingency table.

    The caller must have charged :func:`prior_event` first (``rho`` is its
    second value); :func:`paid_synthetic_prior` does both.
    """
    _check_method(method)
    if not (math.isfinite(rho) and rho > 0):
        raise ValueError(f"rho must be positive and finite, got rho={rho}.")
    require_mbi()
    release = _release(method, data.domain, records_of(data), rho=rho, rounds=rounds)
    return contingency_histogram(release, data.domain)[0]


def paid_synthetic_prior(
    data: PrivateData,
    method: str,
    *,
    epsilon: float,
    delta: float,
    ledger: PrivacyLedger,
    label: str | None = None,
    rounds: int = AIM_ROUNDS,
    support_size: int | None = None,
    rng: np.random.Generator | None = None,
) -> DenseHistogram | SupportHistogram:
    """Charges ``ledger`` for an AIM/MST prior at replace-one ``(epsilon, delta)``, then runs it.

    Order: the method, the import (:class:`MbiUnavailableError`) and the
    records (:func:`records_of`) are checked, then :func:`prior_event` is spent
    (:class:`~pmwcm.mechanisms.accounting.BudgetExceededError` if it does not fit), and
    only then does the mechanism read the data. Nothing is charged if a check fails.

    Args:
        data: the private data (records, or a histogram of integer counts).
        method: ``"aim"`` or ``"mst"``.
        epsilon, delta: the prior's share of the budget (replace-one).
        ledger: the interaction's ledger.
        label: the ledger entry's label (default ``LABELS[method]``).
        rounds: AIM's maximum number of rounds (ignored by MST).
        support_size: ``None`` for the model's full table (dense backend), else
            that many records sampled from the model (:func:`support_from_release`).
        rng: the post-processing generator for the sample (needed with ``support_size``).
    """
    _check_method(method)
    if not (isinstance(rounds, int) and rounds >= 1):
        raise ValueError(f"rounds must be a positive integer, got rounds={rounds!r}.")
    if support_size is not None and (support_size < 1 or rng is None):
        raise ValueError(
            f"support_size must be positive and come with an rng, got {support_size!r}."
        )
    require_mbi()
    records = records_of(data)
    event, rho = prior_event(epsilon=epsilon, delta=delta, accountant=ledger.accountant)
    ledger.spend(event, label=label or LABELS[method])
    release = _release(method, data.domain, records, rho=rho, rounds=rounds)
    if support_size is not None and rng is not None:
        return support_from_release(release, data.domain, support_size, rng=rng)
    return contingency_histogram(release, data.domain)[0]
