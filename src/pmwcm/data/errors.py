"""The data layer's refusal: input data that cannot be read under a schema."""

from __future__ import annotations

__all__ = ["DataError"]


class DataError(ValueError):
    """Input data that cannot be read under a schema; the message names the bad value."""
