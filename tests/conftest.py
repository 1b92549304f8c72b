"""Shared test configuration.

Randomised tests take their seed from the ``seed`` fixture: 42 by default,
overridden by ``pytest --seed N`` or the environment variable
``PMWCM_TEST_SEED``. Every test that uses it must pass for any seed in 0..99
(``for s in $(seq 0 99); do pytest --seed $s; done``).
"""

from __future__ import annotations

import os

import pytest

DEFAULT_SEED = 42


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--seed",
        type=int,
        default=None,
        help=f"seed for randomised tests (default: $PMWCM_TEST_SEED or {DEFAULT_SEED})",
    )


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """The seed for randomised tests (``--seed``, else ``$PMWCM_TEST_SEED``, else 42)."""
    option = request.config.getoption("--seed")
    if option is not None:
        return int(option)
    return int(os.environ.get("PMWCM_TEST_SEED", DEFAULT_SEED))
