"""The errors pmwcm raises on purpose, in one hierarchy.

Every deliberate refusal is a :class:`PmwcmError`, decided from public inputs
(the query spec, the schema, ``n``, the budget) before any private data is read
or any budget is spent, and its message names the bad value. The CLI and the
HTTP service map these classes to their outputs in one table each; anything
else that escapes is a bug, reported as such and never as a refusal.

* :class:`InvalidQuery`: the spec cannot be served on this domain (unknown
  attribute, wrong type, a classification loss on a non-binary target).
* :class:`Refused`: a valid query the engine will not answer, from public
  constants (a real-data solve too costly for its privacy argument).
* :class:`BudgetExhausted`: the ledger would exceed ``(epsilon, delta)``.
* :class:`Halted`: the sparse vector has made its ``T`` updates.

Each concrete error also derives from the built-in it always was
(``ValueError``, ``RuntimeError``, ...), so code written against those keeps
working.

>>> from pmwcm.kernels.queries import QueryError
>>> issubclass(QueryError, InvalidQuery) and issubclass(QueryError, ValueError)
True
"""

from __future__ import annotations

__all__ = ["BudgetExhausted", "Halted", "InvalidQuery", "PmwcmError", "Refused"]


class PmwcmError(Exception):
    """Base of every deliberate pmwcm refusal (nothing spent, nothing read)."""


class InvalidQuery(PmwcmError):
    """The query spec cannot be served on this domain; the message names the field."""


class Refused(PmwcmError):
    """A valid query refused from its public constants, with the reason."""


class BudgetExhausted(PmwcmError):
    """Answering would exceed the privacy budget; nothing was drawn."""


class Halted(PmwcmError):
    """The sparse vector has made its ``T`` updates; no further checked answers."""
