"""A query refused for its solve's cost names what gets it answered (issue 36: 79 of 143
hinge queries on ``adult-full`` were refused with advice that left out ``smoothed_hinge``
and ordinal encodings); each alternative it names is then planned within the limit."""

from __future__ import annotations

import pytest

from pmwcm.data.bundled import adult_schema
from pmwcm.kernels.fixed_budget import SolveRefused, plan_solve
from pmwcm.kernels.queries import CMQuery

GAP, LIMIT = 8.19e-6, 100_000  # adult-full's accuracy at epsilon 1 (pmwcm run, default rule)


def _plan(**spec: object) -> None:
    domain = adult_schema("full").domain()
    query = CMQuery(target="income>50K", features=("capital-gain",), **spec)  # type: ignore[arg-type]
    plan_solve(query.compile(domain), gap=GAP, max_iterations=LIMIT)


def test_a_refused_hinge_query_names_its_smooth_form_and_ordinal_encodings() -> None:
    with pytest.raises(SolveRefused) as caught:
        _plan(loss="hinge")
    message = str(caught.value)
    assert "smoothed_hinge for hinge" in message and "ordinal encoding" in message
    _plan(loss="smoothed_hinge")  # each named alternative is answered
    _plan(loss="hinge", encodings={"capital-gain": "ordinal"})


def test_a_smooth_loss_is_not_told_to_become_smooth() -> None:
    with pytest.raises(SolveRefused) as caught:
        plan_solve(
            CMQuery(loss="logistic", target="income>50K", features=("capital-gain",),
                    radius=1e3).compile(adult_schema("full").domain()),
            gap=GAP, max_iterations=LIMIT,
        )  # fmt: skip
    assert "ordinal encoding" in str(caught.value) and "smoothed_hinge" not in str(caught.value)
