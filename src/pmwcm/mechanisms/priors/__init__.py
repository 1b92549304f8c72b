"""Starting hypotheses: paid noisy marginals, AIM/MST releases, public data."""
