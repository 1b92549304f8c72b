"""A hypothesis as bytes: the dense tensor, or a support's records and log-weights.

Snapshots (:mod:`pmwcm.engine.snapshot`) and the service's durable store keep
the hypothesis beside the engine's JSON state. A dense histogram is stored as
before, one ``.npy`` array of ``|X|`` floats (snapshots written before the
support backend read back unchanged). A
:class:`~pmwcm.kernels.support.SupportHistogram` is stored compactly as an
``.npz`` archive of its records in their smallest integer type and its
normalised log-weights: ``M (m b + 8)`` bytes for ``m`` attributes of ``b``
bytes, whatever ``|X|``; log-weights are stored exactly, so a restored engine
answers bit for bit as the saved one.
"""

from __future__ import annotations

import io

import numpy as np

from pmwcm.kernels.domain import Domain
from pmwcm.kernels.histogram import DenseHistogram, Histogram
from pmwcm.kernels.support import SupportHistogram

__all__ = ["decode_histogram", "encode_histogram"]

_ZIP_MAGIC = b"PK"


def encode_histogram(hypothesis: Histogram) -> bytes:
    """``hypothesis`` as bytes (``.npy`` for dense, ``.npz`` for a support)."""
    buffer = io.BytesIO()
    if isinstance(hypothesis, SupportHistogram):
        # Records in their own layout (column-major from the support prior's proposal):
        # .npy stores either order, and writing a copy would cost the build M m bytes more.
        np.savez(buffer, records=hypothesis.records, log_weights=hypothesis.log_weights)
    else:
        values = np.ascontiguousarray(hypothesis.to_array(), dtype=np.float64)
        np.save(buffer, values, allow_pickle=False)
    return buffer.getvalue()


def decode_histogram(blob: bytes, domain: Domain) -> Histogram:
    """The inverse of :func:`encode_histogram`, over ``domain``.

    Raises:
        ValueError: the bytes do not hold a histogram over ``domain``.
    """
    if blob[:2] == _ZIP_MAGIC:
        with np.load(io.BytesIO(blob), allow_pickle=False) as archive:
            records, log_weights = archive["records"], archive["log_weights"]
        return SupportHistogram.from_normalized(domain, records, log_weights)
    values = np.asarray(np.load(io.BytesIO(blob), allow_pickle=False), dtype=np.float64)
    return DenseHistogram.from_normalized(domain, values)
