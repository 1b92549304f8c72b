"""Tests of the HTTP query service (:mod:`pmwcm.service`)."""
