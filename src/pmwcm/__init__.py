"""pmwcm: online Private Multiplicative Weights for convex-minimization queries.

Implements the algorithm of "Private Multiplicative Weights Beyond Linear
Queries" (J. Ullman, PODS 2015): an analyst streams adaptively chosen convex
minimisation (CM) queries -- logistic, linear, robust regression, SVM -- and the
engine answers all of them under one differential-privacy budget that grows
like log k rather than sqrt(k).
"""

from pmwcm.domain import Domain

__all__ = ["Domain"]
