"""Everything that reads the private data or draws noise, and the accounting.

Private-data access, noise sources, sparse vectors, single-query oracles,
priors and the privacy ledger. Each mechanism states its guarantee and the
theorem it implements. Imports only :mod:`pmwcm.kernels` and itself.
"""
