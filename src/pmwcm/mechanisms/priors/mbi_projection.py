"""Out-of-model marginals of an mbi model by variable elimination in NumPy.

AIM (McKenna, Mullins, Sheldon, Miklau 2022) scores every candidate marginal
of its workload in every round by projecting the current graphical model onto
it: ``MarkovRandomField.project``, which for a clique the model does not hold
runs ``mbi.marginal_oracles.variable_elimination``. mbi 1.1 runs that
elimination as eager JAX operations, and JAX compiles each operation for each
new combination of shapes and axis orders it meets. On a table with many
attributes of different sizes almost every elimination step meets a new one: a
profile of OpenDP's AIM on TV16 (17 attributes) spent 81% of its time in this
scoring, most of it lowering and compiling XLA programs (0 hits in 4,779
compilations), which made one release take 2.7 hours of a core.

:func:`variable_elimination` computes the same marginal with NumPy on the same
log-space potentials: the same elimination order (mbi's own
``junction_tree.greedy_order``), the same factors combined on the same axes,
each attribute summed out of their product in log space (as a sum-product of
shifted exponentials, :func:`_sum_out`), the same normalisation to ``total``.
The result agrees with mbi's to rounding (sums are reduced in another order;
``tests/test_mbi_projection.py`` holds the two to 1e-12). It is
post-processing of the model, which is itself a function of the released noisy
measurements, so the speed-up changes no privacy guarantee of AIM or MST.

:func:`numpy_projection` installs it on ``MarkovRandomField.project`` for the
length of a ``with`` block (OpenDP's AIM and MST reach the model only through
``project``) and restores mbi's own method afterwards. Only the no-evidence
path is replaced; ``project`` never passes evidence.
"""

from __future__ import annotations

import contextlib
import math
import string
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

# A factor here is its attributes (the axis order of its values) and its values.
_Factor = tuple[tuple[str, ...], NDArray[np.float64]]

#: einsum's subscripts: one letter per attribute of an elimination step's union.
_LETTERS = string.ascii_letters
#: Unions above this many cells let einsum plan its contraction order (the plan
#: costs more than it saves on small ones).
EINSUM_PLAN_CELLS = 2**16

_install_lock = threading.Lock()
_installs = 0
_original_project: Any = None


def _expanded(factor: _Factor, attrs: tuple[str, ...], shape: tuple[int, ...]) -> np.ndarray:
    """``factor``'s values broadcast to the axes ``attrs`` (mbi's ``Factor.expand``)."""
    own, values = factor
    order = [own.index(a) for a in attrs if a in own]
    values = np.transpose(values, order)
    kept = iter(values.shape)
    view = values.reshape([next(kept) if a in own else 1 for a in attrs])
    return np.broadcast_to(view, shape)


def _product_axes(
    factors: Sequence[_Factor], sizes: dict[str, int]
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The union of the factors' attributes in mbi's merge order, and its shape."""
    attrs: tuple[str, ...] = ()
    for own, _ in factors:
        attrs += tuple(a for a in own if a not in attrs)
    return attrs, tuple(sizes[a] for a in attrs)


def _product(factors: Sequence[_Factor], sizes: dict[str, int]) -> _Factor:
    """The log-space product (sum) of ``factors`` on the union of their axes.

    The axes are merged left to right as mbi's ``Domain.merge`` does (each
    factor's new attributes appended in its own order), and the values are
    added in the order of ``factors``, as Python's ``sum`` over mbi factors does.
    """
    attrs, shape = _product_axes(factors, sizes)
    total = np.zeros(shape)
    for factor in factors:
        total = total + _expanded(factor, attrs, shape)
    return attrs, total


def _sum_out(factors: Sequence[_Factor], attr: str, sizes: dict[str, int]) -> _Factor:
    """``log sum_attr exp(f_1 + ... + f_k)`` on the other attributes of the factors' union.

    mbi forms the product on the whole union and takes ``logsumexp`` over
    ``attr``: an ``exp`` per cell of the union, which dominated AIM's scoring at
    OpenDP's default rounds (91% of a TV16 release's time). The same number is
    ``sum m_i + log sum_attr prod_i exp(f_i - m_i)`` with ``m_i = max f_i``:
    one ``exp`` per cell of each factor, then a sum-product (``einsum``) with
    every term at most 1. Where that underflows to 0 (log-potentials spread
    over more than about 700), the step is taken in log space as mbi does.
    Either way the result agrees with mbi's to rounding.
    """
    attrs, shape = _product_axes(factors, sizes)
    kept = tuple(a for a in attrs if a != attr)
    peaks = [float(values.max()) for _, values in factors]
    if all(math.isfinite(p) for p in peaks):
        letter = {a: _LETTERS[i] for i, a in enumerate(attrs)}
        spec = ",".join("".join(letter[a] for a in own) for own, _ in factors)
        spec += "->" + "".join(letter[a] for a in kept)
        scaled = [np.exp(values - peak) for (_, values), peak in zip(factors, peaks, strict=True)]
        plan = "greedy" if math.prod(shape) > EINSUM_PLAN_CELLS else False
        summed = np.einsum(spec, *scaled, optimize=plan)
        if np.all(summed > 0):
            return kept, np.log(summed) + sum(peaks)
    attrs, values = _product(factors, sizes)
    return kept, logsumexp(values, axis=attrs.index(attr))


def variable_elimination(potentials: Any, clique: Sequence[str], total: float = 1.0) -> Any:
    """The marginal of the model with log-potentials ``potentials`` on ``clique``.

    ``potentials`` is an mbi ``CliqueVector``. The model is
    ``p(x) ~ exp(sum_C psi_C(x_C))``; every attribute outside ``clique`` is
    summed out, one at a time in mbi's greedy order, by multiplying the factors
    that hold it and taking ``logsumexp`` over it. The remaining factors'
    product is expanded to ``clique`` (attributes no factor holds are uniform),
    normalised to ``total`` and exponentiated. Returns an mbi ``Factor`` over
    ``potentials.domain.project(clique)`` with NumPy values.
    """
    from mbi import Factor, junction_tree

    clique = tuple(clique)
    sizes = dict(zip(potentials.domain.attributes, potentials.domain.shape, strict=True))
    factors: list[_Factor] = [
        (tuple(f.domain.attributes), np.asarray(f.values, dtype=np.float64))
        for f in potentials.arrays.values()
    ]
    domain = potentials.active_domain
    cliques = [attrs for attrs, _ in factors] + [clique]
    order, _ = junction_tree.greedy_order(domain, cliques, elim=domain.invert(clique))
    for attr in order:
        touching = [f for f in factors if attr in f[0]]
        factors = [f for f in factors if attr not in f[0]]
        factors.append(_sum_out(touching, attr, sizes))
    target = potentials.domain.project(clique)
    attrs, values = _product([((), np.zeros(())), *factors], sizes)
    log_joint = _expanded((attrs, values), clique, tuple(target.shape))
    normalised = (log_joint + np.log(total)) - logsumexp(log_joint)
    return Factor(target, np.exp(normalised))


def _project(model: Any, attrs: str | Sequence[str]) -> Any:
    """``MarkovRandomField.project`` with :func:`variable_elimination` for unheld cliques."""
    attrs = (attrs,) if isinstance(attrs, str) else tuple(attrs)
    if model.marginals.supports(attrs):
        return model.marginals.project(attrs)
    return variable_elimination(model.potentials, attrs, model.total)


@contextlib.contextmanager
def numpy_projection() -> Iterator[None]:
    """Within the block, mbi models project unheld cliques with NumPy (re-entrant).

    Nested and concurrent blocks share one installation; mbi's own method is
    restored when the last one exits.
    """
    from mbi import MarkovRandomField

    global _installs, _original_project
    with _install_lock:
        if _installs == 0:
            _original_project = MarkovRandomField.project
            MarkovRandomField.project = _project
        _installs += 1
    try:
        yield
    finally:
        with _install_lock:
            _installs -= 1
            if _installs == 0:
                MarkovRandomField.project = _original_project
                _original_project = None
