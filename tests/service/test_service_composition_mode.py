"""A service session in composition mode (issue 15): every announced query is an oracle
call, the ledger holds those calls alone, and a restart resumes the exact state."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pmwcm.engine.composition_mode import EveryQueryToOracle
from pmwcm.errors import Halted
from service.test_service_durable import composed, engine_state, make_node, q

__all__ = ["make_node"]  # the fixture, shared with test_service_durable


def test_a_composition_session_answers_by_the_oracle_and_restarts_exactly(
    make_node: Any,
) -> None:
    stream = [q("a"), q("b"), q("a", "c")]
    node = make_node(announced_queries=len(stream), mode="composition", after_halt="refuse")
    live = node.session()
    answers = [live.ask(query, token_id=None) for query in stream]
    assert [a.source for a in answers] == ["oracle"] * 3
    assert isinstance(live._engine.sparse_vector, EveryQueryToOracle)
    before = engine_state(node.session())
    assert [label for label, *_ in before["ledger"]] == [f"oracle call {i}" for i in (1, 2, 3)]
    assert before["sv"] == {"positives": 3} and before["updates"] == 3
    node = make_node()  # restart: a fresh engine over the same store
    after = engine_state(node.session())
    # restore() re-normalises the histogram: last-ulp changes
    np.testing.assert_allclose(after.pop("hypothesis"), before.pop("hypothesis"), rtol=1e-13)
    assert after == before
    assert node.session().status().epsilon_spent == composed(node.store).spent_epsilon()
    again = node.session().ask(q("b"), token_id=None)
    assert again.repeated
    with pytest.raises(Halted):
        node.session().ask(q("c"), token_id=None)
