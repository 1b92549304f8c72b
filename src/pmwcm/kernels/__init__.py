"""Pure mathematics: no noise, no I/O, no private data.

The universe, histograms, losses and their compiled problems, CM and counting
queries, and the solvers (certified ones for public data, fixed-budget ones for
the private side). Imports nothing above it (``tests/test_layers.py``).
"""
