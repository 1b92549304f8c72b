"""MST and AIM synthetic data through OpenDP's ``extras.mbi`` (optional dependency).

Needs ``pip install "opendp[mbi]==0.16.0"`` (JAX and polars; about 1.7 GB), which
``make bench-venv`` installs into ``.venv-bench``. Facts from docs/design.md section 6
that this module encodes: ``synthesize(method="round")`` is broken in mbi 1.1.0,
so records are drawn with ``method="sample"``; MST can fail with "insufficient
budget" from float rounding one step over the total, so rho is lowered by a
relative 1e-7, 2e-7, ... until it passes (the failure depends on the exact float). On
TV16 (17 attributes) no such rho passes: OpenDP 0.16's MST selection composes
its 16 noisy-max steps with upward rounding and asks one or two ulps more than
the share it was given, whatever the total. :func:`_mst_shares_rounded_down`
therefore lowers each of MST's internal shares by a relative 1e-12 (it spends
less than its budget, never more: a change far below anything measured). AIM runs
``rounds=16`` by default, or OpenDP's own default (16 per attribute) with
``rounds=None``. Both run with :func:`pmwcm.mechanisms.priors.mbi_projection.numpy_projection`:
the model's out-of-model marginals (AIM's candidate scores) by NumPy variable
elimination instead of eager JAX, the same numbers to 1e-12 without JAX
compiling every new shape (releases made before round 2 session 11 ran without
it, so their ``seconds`` are longer).
OpenDP draws its noise from its own CSPRNG: these runs cannot be seeded, so
repeated "seeds" are independent runs.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # only names and sizes are read: device_synthesis.py runs without pmwcm
    from pmwcm.kernels.domain import Domain


def synthesize(
    method: str, domain: Domain, records: np.ndarray, *, rho: float, rounds: int | None = 16
) -> np.ndarray:
    """As many synthetic records (integer codes) from MST or AIM at ``rho``-zCDP (add/remove).

    ``rounds`` is AIM's (``None``: OpenDP's own default, 16 per attribute).
    """
    release = _release(method, domain, records, rho=rho, rounds=rounds)
    return _sample(release, domain, len(records), method)


def model_table(
    method: str,
    domain: Domain,
    records: np.ndarray,
    *,
    rho: float,
    rounds: int | None = 16,
    unit: str = "addremove",
) -> np.ndarray:
    """The fitted model's full table (normalised, shape ``domain.shape``): no sampling.

    Every query is then answered on the model's own marginals, the strongest
    honest use of the release (mbi 1.1.0's sampler is biased when the selected
    cliques are not chordal). Only for universes small enough to hold densely.
    ``rounds=None`` is AIM's own default (``16 d``). ``unit``: ``"addremove"``
    (OpenDP's ``unit_of(contributions=1)``, AIM's own) or ``"replace"`` (OpenDP's
    ``unit_of(changes=1)``: rho-zCDP for replace-one neighbours, the unit pmwcm's
    guarantee is stated in; OpenDP then calibrates AIM's noise to it itself).
    """
    from pmwcm.mechanisms.priors.mbi_projection import numpy_projection

    release = _release(method, domain, records, rho=rho, rounds=rounds, unit=unit)
    with numpy_projection():
        full = np.asarray(release.project(list(domain.names)), dtype=np.float64)
    # The model's axes hold the keys in the release's order, plus a null slot (mbi
    # attributes unknown values to it): pick each attribute's codes 0..size-1.
    picks = []
    for name, size in zip(domain.names, domain.sizes, strict=True):
        keys = list(release.keys[name].to_list())
        picks.append([keys.index(code) for code in range(size)])
    table = np.clip(full[np.ix_(*picks)], 0.0, None)
    return table / table.sum()


def _release(
    method: str,
    domain: Domain,
    records: np.ndarray,
    *,
    rho: float,
    rounds: int | None = 16,
    unit: str = "addremove",
):
    """OpenDP's contingency-table release by MST or AIM at ``rho`` under ``unit``
    (``"addremove"``: ``unit_of(contributions=1)``; ``"replace"``: ``unit_of(changes=1)``)."""
    if unit not in ("addremove", "replace"):
        raise ValueError(f"unit must be 'addremove' or 'replace', got unit={unit!r}.")
    import opendp.prelude as dp
    import polars as pl

    from pmwcm.mechanisms.priors.mbi_projection import numpy_projection

    dp.enable_features("contrib")
    if method == "mst":
        _mst_shares_rounded_down()
    frame = pl.LazyFrame({name: records[:, i] for i, name in enumerate(domain.names)})
    keys = {name: list(range(size)) for name, size in zip(domain.names, domain.sizes, strict=True)}
    release = None
    # Float rounding inside mbi's adaptive composition can ask one ulp more than
    # the total ("insufficient budget"); a slightly smaller rho is always safe.
    for slack in [j * 1e-7 for j in range(1, 40)]:
        context = dp.Context.compositor(
            data=frame,
            privacy_unit=(
                dp.unit_of(contributions=1) if unit == "addremove" else dp.unit_of(changes=1)
            ),
            privacy_loss=dp.loss_of(rho=rho * (1 - slack)),
            split_evenly_over=1,
        )
        algorithm = dp.mbi.AIM(rounds=rounds) if method == "aim" else dp.mbi.MST()
        try:
            with numpy_projection():
                query = context.query().contingency_table(keys=keys, algorithm=algorithm)
                release = query.release()
            break
        except dp.OpenDPException as err:
            if "insufficient budget" not in str(err):
                raise
    if release is None:
        raise RuntimeError(f"{method} kept failing with 'insufficient budget' at rho={rho}.")
    return release


def _mst_shares_rounded_down() -> None:
    """Makes OpenDP's MST take each internal share a relative 1e-12 below its own.

    ``opendp.extras.mbi._mst`` steps every share down one ulp (``prior``) before
    composing, which on some tables (TV16) is not enough: its selection's
    composed cost comes out one or two ulps over the share (``"insufficient
    budget for query: 0.000873445151111648 > 0.0008734451511116478"``).
    Idempotent.
    """
    import opendp.extras.mbi._mst as mst

    if getattr(mst.prior, "rounded_down", False):
        return
    one_ulp_down = mst.prior

    def rounded_down(value: float) -> float:
        return one_ulp_down(value) * (1.0 - 1e-12)

    rounded_down.rounded_down = True  # type: ignore[attr-defined]
    mst.prior = rounded_down


def _sample(release, domain: Domain, rows: int, method: str) -> np.ndarray:
    """``rows`` records sampled from a release (mbi's sampler), invalid ones dropped."""
    from pmwcm.mechanisms.priors.synthetic import sample_records

    records, dropped = sample_records(release, domain, rows)
    if dropped:
        # mbi 1.1.0's sampler emits NaN codes for a few records at small rho (0.7% of
        # them for MST at eps = 1 here); they are dropped, a post-processing step.
        print(f"{method}: dropped {dropped} invalid synthetic records", file=sys.stderr)
    return records
