"""Input: attributes, schemas, schema drafting, tables and the bundled data.

Turns a CSV or frame into integer-coded records under a public schema.
Imports only :mod:`pmwcm.kernels` and itself.
"""
