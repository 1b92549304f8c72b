"""BLAS threads are set by the library (``pmwcm.kernels.threads``), not the user's environment."""

from __future__ import annotations

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from pmwcm.kernels.threads import blas_threads, limit_blas_threads


def _blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_blas_threads_limits_inside_the_block_and_restores_after() -> None:
    with threadpool_limits(limits=2, user_api="blas"):
        assert _blas_threads() == {2}
        with blas_threads(1):
            assert _blas_threads() == {1}
        assert _blas_threads() == {2}


def test_limit_blas_threads_lasts_until_changed() -> None:
    with threadpool_limits(limits=2, user_api="blas"):  # restores the test process afterwards
        limit_blas_threads(1)
        assert _blas_threads() == {1}


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2"])
def test_a_bad_thread_count_is_refused_by_value(bad: object) -> None:
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        limit_blas_threads(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=repr(bad).replace("'", ".")), blas_threads(bad):  # type: ignore[arg-type]
        pass
