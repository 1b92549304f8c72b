"""NumPy variable elimination on mbi models equals mbi's own (priors.mbi_projection).

The reference is mbi's ``marginal_oracles.variable_elimination`` on the same
random log-potentials, run for real (eager JAX; a few seconds of compiling).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import mbi  # the dev extra installs it (opendp[mbi])
import numpy as np
import pytest

from pmwcm.mechanisms.priors.mbi_projection import (
    _sum_out,
    numpy_projection,
    variable_elimination,
)

NAMES = ("a", "b", "c", "d", "e", "f", "g")
SIZES = (2, 3, 5, 4, 2, 3, 6)  # "g" is in no clique of the model
MODEL_CLIQUES = [("a", "b"), ("b", "c", "d"), ("d", "e"), ("f", "c"), ("e", "a", "f")]
QUERIES = [
    ("c",),  # one attribute
    ("d", "b"),  # inside a model clique, reversed
    ("a", "c"),  # across cliques: needs elimination
    ("e", "b", "f"),  # three-way, no clique holds it
    ("g",),  # no factor holds it: uniform
    ("g", "a", "d"),  # mixed
]


@pytest.fixture(scope="module")
def potentials() -> Any:
    """Random log-potentials (scale 3: far from uniform) as mbi's ``CliqueVector``."""
    domain = mbi.Domain(list(NAMES), list(SIZES))
    rng = np.random.default_rng(7)
    arrays = {}
    for clique in MODEL_CLIQUES:
        sub = domain.project(clique)
        arrays[clique] = mbi.Factor(sub, jnp.asarray(3.0 * rng.normal(size=sub.shape)))
    return mbi.CliqueVector(domain, MODEL_CLIQUES, arrays)


@pytest.mark.parametrize("clique", QUERIES, ids="-".join)
def test_numpy_elimination_equals_mbi(potentials: Any, clique: tuple[str, ...]) -> None:
    total = 1234.5
    reference = mbi.marginal_oracles.variable_elimination(potentials, clique, total)
    ours = variable_elimination(potentials, clique, total)
    assert ours.domain == reference.domain
    expected = np.asarray(reference.values)
    np.testing.assert_allclose(ours.values, expected, rtol=1e-12, atol=0)
    assert ours.values.sum() == pytest.approx(total, rel=1e-12)


def test_summing_out_falls_back_to_log_space_where_the_shifted_product_underflows() -> None:
    """Each factor's maximum sits where the other is at -1000: every shifted product
    underflows to 0, and the step must still give the log-space answer."""
    low = -1000.0
    first = (("a", "b"), np.array([[0.0, low], [low, low]]))
    second = (("b", "a"), np.array([[low, low], [low, 0.0]]))  # its peak at a=1, b=1
    attrs, values = _sum_out([first, second], "b", {"a": 2, "b": 2})
    assert attrs == ("a",)
    # log sum_b exp(f1(a, b) + f2(b, a)) for a = 0, 1, written out.
    expected = [
        np.logaddexp(0.0 + low, low + low),
        np.logaddexp(low + low, low + 0.0),
    ]
    np.testing.assert_allclose(values, expected, rtol=1e-15)
    assert np.all(np.isfinite(values))


def test_a_model_projects_through_numpy_inside_the_block_only(potentials: Any) -> None:
    original = mbi.MarkovRandomField.project
    held = mbi.marginal_oracles.message_passing_stable(potentials, total=10.0)
    model = mbi.MarkovRandomField(potentials=potentials, marginals=held, total=10.0)
    with numpy_projection(), numpy_projection():  # re-entrant
        assert mbi.MarkovRandomField.project is not original
        unheld = model.project(("a", "c"))
        held_one = model.project(("b", "c", "d"))
    assert mbi.MarkovRandomField.project is original
    assert isinstance(unheld.values, np.ndarray)  # computed by NumPy, not JAX
    np.testing.assert_allclose(
        unheld.values, np.asarray(model.project(("a", "c")).values), rtol=1e-12
    )
    # A clique the model holds is read from its marginals, as mbi does.
    np.testing.assert_array_equal(
        np.asarray(held_one.values), np.asarray(model.project(("b", "c", "d")).values)
    )


def test_the_block_restores_mbi_after_an_error() -> None:
    original = mbi.MarkovRandomField.project
    with pytest.raises(RuntimeError), numpy_projection():
        raise RuntimeError("inside")
    assert mbi.MarkovRandomField.project is original
