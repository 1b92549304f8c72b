"""The online PMW loop and how it is configured.

The engine (:mod:`pmwcm.engine.online.online`), its rounds, state snapshots,
practical and theory configurations, and the baselines it is measured
against. Imports kernels and mechanisms, never the data, CLI or service layers.
"""
