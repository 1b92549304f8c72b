"""Pulling an updated hypothesis back onto the prior's released marginals (post-processing).

The paid prior is a fit to noisy marginals ``y_k`` (:func:`~pmwcm.mechanisms.priors.
marginals.measure_marginals`), released once and public from then on. An update
then tilts the hypothesis along one query's clique: it fixes that query, but
a one-dimensional tilt also moves lower-order marginals the prior had right,
and the post-processing sweeps replay only past *updates*. MWEM (Hardt, Ligett,
McSherry 2012, section 3) replays every measurement it has made; this is the
same idea for the measurements the prior made: after each update,
``iterations`` steps of the prior's own entropic mirror descent
(:func:`~pmwcm.mechanisms.priors.marginals.entropic_descent`) from the
updated hypothesis, on ``sum_k ||Dhat_{C_k} - y_k||^2 / 2``.

**Privacy.** It reads the released ``y_k``, their ``sigma`` and the
hypothesis, all public: post-processing (Dwork, Roth 2014, Proposition 2.1),
with no charge and no access to the data.

**How far.** ``iterations`` steps, then, like the prior's own fit, on only
while the hypothesis is visibly short of the measurements (above the
discrepancy bound ``DISCREPANCY * sum_k |C_k| sigma_k^2 / 2``), up to
``CONTINUATION`` times as many. With noisy measurements (small ``n``) the
bound is reached at once and the refit is ``iterations`` small steps; with
precise ones (``n`` of 10^6 and more) an update leaves the pairs far outside a
tight bound, and the refit goes on until they are back within it. Its cost is
bounded by public values alone, whatever the number of updates before it.

**Measured** (``benchmarks/accuracy/updates.py``, 13 random-stream regimes, 5
seeds each, k = 10,000; docs/results.md, "Do updates help?"): on the parity
label at n = 10^6 and 10^7, where single updates had raised a 300-query panel
up to 1.87x and 3.34x, no update raises it by more than 0.4%; the stream's max
falls 1.7x and 4%, its mean falls 3.2x at 10^6 (one seed of five; the others
rise) and rises 1.5x at 10^7: pulling the pairs back also pulls back part of
what the updates learned about the parity. Every other regime moves by less
than 1%.
"""

from __future__ import annotations

from collections.abc import Sequence

from pmwcm.kernels.histogram import DenseHistogram, Histogram
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.priors.marginals import Measurement, default_iterations, fit_histogram
from pmwcm.mechanisms.priors.support import fit_support, support_fit_budget

__all__ = ["refit_to_measurements", "whole_fit"]


def refit_to_measurements(
    hypothesis: Histogram,
    measurements: Sequence[Measurement],
    *,
    iterations: int,
    continuation: int | None = None,
    lead: int | None = None,
) -> Histogram:
    """``iterations`` entropic mirror-descent steps from ``hypothesis`` onto ``measurements``
    (``continuation`` and ``lead``: as
    :func:`~pmwcm.mechanisms.priors.marginals.entropic_descent`'s).

    A new histogram of the same backend; ``hypothesis`` is not changed. With no
    measurements or no iterations it is returned as it is.

    Raises:
        ValueError: ``iterations`` is negative, or the backend has no fit.
    """
    if iterations < 0:
        raise ValueError(f"iterations must be non-negative, got iterations={iterations}.")
    if iterations == 0 or not measurements:
        return hypothesis
    if isinstance(hypothesis, DenseHistogram):
        return fit_histogram(
            hypothesis.domain, measurements, iterations=iterations, start=hypothesis,
            continuation=continuation, lead=lead,
        )  # fmt: skip
    if isinstance(hypothesis, SupportHistogram):
        return fit_support(
            hypothesis, measurements, iterations=iterations, continuation=continuation,
            lead=lead,
        )  # fmt: skip
    raise ValueError(
        f"No fit onto measurements for a {type(hypothesis).__name__} hypothesis "
        "(dense and support histograms have one)."
    )


def whole_fit(hypothesis: Histogram, measurements: Sequence[Measurement]) -> Histogram:
    """The prior's whole fit from ``hypothesis`` onto ``measurements``, at its backend's
    public work budget: :func:`~pmwcm.mechanisms.priors.marginals.default_iterations` on a
    dense histogram, :func:`~pmwcm.mechanisms.priors.support.support_fit_budget` (with its
    continuation) on a support, read at the most precise measurement's ``sigma`` (public:
    the prior's own, which the other measurements only add to)."""
    if isinstance(hypothesis, SupportHistogram):
        sigma = min(m.sigma for m in measurements) if measurements else None
        iterations, continuation = support_fit_budget(
            hypothesis.size, len(measurements), sigma=sigma
        )
        return refit_to_measurements(
            hypothesis, measurements, iterations=iterations, continuation=continuation
        )
    iterations = default_iterations(hypothesis.domain, len(measurements))
    return refit_to_measurements(hypothesis, measurements, iterations=iterations)
