"""The full-resolution pieces of ``benchmarks/accuracy/online_updates.py`` (issue 35).

* AIM's and MST's model read per clique (``aim_release.py``): a release's keys mapped to
  the codes (null slot dropped), clipped and normalised; a saved model that
  projects as the release itself does; the heaviest-cells table of a large
  clique against the exact marginal. On a real, tiny OpenDP AIM release.
* The sparse evaluator (``full_tables.SparseEvaluator``): excess risk on a
  full-resolution table's occupied clique cells against a dense computation,
  and its minima cached on disk.
* The stepwise workload's length as announced.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

ACCURACY = Path(__file__).resolve().parent.parent / "benchmarks" / "accuracy"
sys.path.insert(0, str(ACCURACY))

import aim_release  # noqa: E402
from full_tables import SparseEvaluator, answer_workload, stepwise_k  # noqa: E402

from pmwcm.engine.baselines import exact_minimum  # noqa: E402
from pmwcm.kernels.domain import Domain  # noqa: E402
from pmwcm.kernels.queries import CMQuery  # noqa: E402
from pmwcm.mechanisms.priors.mbi_projection import numpy_projection  # noqa: E402
from pmwcm.mechanisms.private_data import PrivateData  # noqa: E402


def test_code_picks_find_each_code_around_the_null_slot() -> None:
    domain = Domain.from_sizes({"a": 3, "b": 2})
    keys = {"a": [2, None, 0, 1], "b": [None, 1, 0]}
    assert aim_release.code_picks(keys, domain) == [[2, 3, 0], [2, 1]]


def test_read_at_codes_drops_the_null_slot_clips_and_normalises() -> None:
    # model axes: a = [2, None, 0, 1], b = [None, 1, 0]; cell value 10 * axis_a + axis_b
    model = np.array([[10.0 * i + j for j in range(3)] for i in range(4)])
    model[0, 2] = -5.0  # a = 2, b = 0: a negative model count is clipped to 0
    table = aim_release.read_at_codes(model, [[2, 3, 0], [2, 1]])
    expected = np.array([[22.0, 21.0], [32.0, 31.0], [0.0, 1.0]])  # rows a = 0, 1, 2
    np.testing.assert_allclose(table, expected / expected.sum())


@pytest.fixture(scope="module", params=["aim", "mst"])
def tiny_release(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[object, Domain, Path]:
    """A real OpenDP AIM release (default rounds), or MST's (its defaults), on 4 small
    attributes, saved."""
    from synthetic import _release

    domain = Domain.from_sizes({"a": 3, "b": 2, "c": 4, "y": 2})
    rng = np.random.default_rng(7)
    a = rng.integers(0, 3, 400)
    c = (a + rng.integers(0, 2, 400)) % 4
    y = (a + c + rng.integers(0, 2, 400)) % 2
    records = np.stack([a, rng.integers(0, 2, 400), c, y], axis=1).astype(np.int64)
    release = _release(request.param, domain, records, rho=1.0, rounds=None)
    path = tmp_path_factory.mktemp(request.param) / "release.npz"
    aim_release.save_release(release, domain, path, seconds=1.0, peak_rss_mb=2.0)
    return release, domain, path


def test_release_paths_name_the_mechanism_and_unit() -> None:
    paths = {
        aim_release.release_path("t", "d", rho=0.5, unit=unit, seed=1, method=method).name
        for method in ("aim", "mst")
        for unit in ("addremove", "replace")
    }
    assert paths == {
        "aim-t-d-rho0.5-roundsdefault-seed1.npz",
        "aim-changes1-t-d-rho0.5-roundsdefault-seed1.npz",
        "mst-t-d-rho0.5-roundsdefault-seed1.npz",
        "mst-changes1-t-d-rho0.5-roundsdefault-seed1.npz",
    }


def test_saved_model_projects_as_the_release(tiny_release: tuple[object, Domain, Path]) -> None:
    release, domain, path = tiny_release
    aim = aim_release.load_model(path)
    assert (aim.seconds, aim.peak_rss_mb) == (1.0, 2.0)
    picks = aim_release.code_picks(
        {n: release.keys[n].to_list() for n in domain.names},  # type: ignore[attr-defined]
        domain,
    )
    for clique in (("c", "a", "y"), ("b", "y"), ("a", "b", "c", "y")):
        with numpy_projection():
            direct = np.asarray(release.project(list(clique)))  # type: ignore[attr-defined]
        expected = aim_release.read_at_codes(direct, [picks[domain.index(a)] for a in clique])
        table, dropped = aim.clique_table(clique)
        assert dropped == 0.0
        np.testing.assert_allclose(table.table(), expected, rtol=1e-9, atol=1e-12)
        assert table.table().sum() == pytest.approx(1.0)


def test_heaviest_cells_match_the_exact_marginal(
    tiny_release: tuple[object, Domain, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, path = tiny_release
    aim = aim_release.load_model(path)
    clique = ("c", "y", "a")
    exact, _ = aim.clique_table(clique)
    dense = exact.table().reshape(-1)
    picks = [aim.picks[a] for a in clique]
    monkeypatch.setattr(aim_release, "SLICE_CELLS", 5)  # several slices along c and y
    every, dropped = aim_release.heaviest_cells(aim.model.potentials, clique, picks, 24)
    np.testing.assert_allclose(every.table().reshape(-1), dense, rtol=1e-9, atol=1e-14)
    assert dropped == pytest.approx(0.0, abs=1e-12)
    top, dropped = aim_release.heaviest_cells(aim.model.potentials, clique, picks, 7)
    heaviest = np.argsort(dense)[-7:]
    assert top.codes is not None
    assert set(top.codes.tolist()) == set(heaviest.tolist())
    assert dropped == pytest.approx(1.0 - dense[heaviest].sum(), rel=1e-9)
    np.testing.assert_allclose(top.mass, dense[np.sort(heaviest)] / dense[heaviest].sum())


def test_heaviest_cells_keep_the_same_cells_however_the_stream_is_sliced() -> None:
    """The kept set is the marginal's ``top`` heaviest, ties at the cut to the smaller
    codes, whether the cells come in one slice or many (candidates are cut back in
    batches, :data:`aim_release.BUFFER_FACTOR` times ``top``)."""
    rng = np.random.default_rng(3)
    logs = np.round(rng.normal(size=5_000), 1)  # many ties, at the cut too
    top = 300
    order = np.lexsort((np.arange(logs.size), -logs))  # heaviest first, then smaller code
    expected = np.sort(order[:top])
    for width in (5_000, 977, 64, 7):
        best = aim_release.HeaviestCells(top)
        for first in range(0, logs.size, width):
            best.add(first, logs[first : first + width])
        codes, mass, dropped = best.masses()
        np.testing.assert_array_equal(codes, expected)
        total = np.exp(logs).sum()
        np.testing.assert_allclose(mass, np.exp(logs[expected]) / np.exp(logs[expected]).sum())
        assert dropped == pytest.approx(1.0 - np.exp(logs[expected]).sum() / total, rel=1e-9)


def test_heaviest_cells_refuse_cells_out_of_code_order() -> None:
    best = aim_release.HeaviestCells(2)
    best.add(10, np.zeros(3))
    with pytest.raises(ValueError, match="increasing code order"):
        best.add(12, np.zeros(3))


def test_log_rounds_prints_a_line_as_each_aim_round_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real OpenDP AIM release with the round log on: one JSON line a round, numbered
    from 1, with the model-size cap it selects under; OpenDP's step is restored after."""
    import io

    import opendp.extras.mbi._aim as aim
    from synthetic import _release

    monkeypatch.setattr(aim, "_make_aim_marginal", aim._make_aim_marginal)
    stream = io.StringIO()
    aim_release.log_rounds(stream)
    domain = Domain.from_sizes({"a": 3, "b": 2, "y": 2})
    records = np.random.default_rng(5).integers(0, 2, size=(300, 3)).astype(np.int64)
    _release("aim", domain, records, rho=1.0, rounds=None)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["round"] for line in lines] == list(range(1, len(lines) + 1))
    assert lines and all(line["max_size_mb"] > 0 for line in lines)
    assert all(a["seconds"] <= b["seconds"] for a, b in itertools.pairwise(lines))


def hub_model() -> aim_release.SavedModel:
    """A Markov random field whose cliques all share a hub ``h`` outside the query clique
    ``(a, b, c)``: eliminating ``h`` multiplies every factor, a product over the whole
    clique and ``h``. Each attribute's model axis holds a null slot (position 0), which
    the codes skip, as in a release."""
    from mbi import CliqueVector, Factor, MarkovRandomField
    from mbi import Domain as MbiDomain
    from mbi.marginal_oracles import brute_force_marginals

    sizes = {"a": 4, "b": 3, "c": 5, "h": 3}
    domain = MbiDomain(list(sizes), [s + 1 for s in sizes.values()])
    rng = np.random.default_rng(11)
    cliques = [("a", "h"), ("b", "h"), ("c", "h"), ("a", "b")]
    arrays = {
        c: Factor(domain.project(c), 2.0 * rng.normal(size=domain.project(c).shape))
        for c in cliques
    }
    potentials = CliqueVector(domain, cliques, arrays)
    marginals = brute_force_marginals(potentials, 1.0)
    model = MarkovRandomField(potentials=potentials, marginals=marginals, total=1.0)
    picks = {name: list(range(1, size + 1)) for name, size in sizes.items()}
    return aim_release.SavedModel(model, picks, seconds=0.0, peak_rss_mb=0.0, digest="hub")


def exact_clique_marginal(aim: aim_release.SavedModel, clique: tuple[str, ...]) -> np.ndarray:
    """The clique marginal by brute force: the whole joint, summed, read at the codes."""
    potentials = aim.model.potentials
    names = list(potentials.domain.attributes)
    log_joint = np.zeros(potentials.domain.shape)
    for factor in potentials.arrays.values():
        own = list(factor.domain.attributes)
        order = sorted(range(len(own)), key=lambda i: names.index(own[i]))
        view = np.transpose(np.asarray(factor.values), order)
        log_joint = log_joint + view.reshape(
            [potentials.domain.size(a) if a in own else 1 for a in names]
        )
    joint = np.exp(log_joint)
    summed = joint.sum(axis=tuple(i for i, a in enumerate(names) if a not in clique))
    kept = [a for a in names if a in clique]
    table = np.transpose(summed, [kept.index(a) for a in clique])
    return aim_release.read_at_codes(table, [aim.picks[a] for a in clique])


def test_held_attributes_bound_the_elimination_and_keep_the_marginal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a budget below the widest product, attributes of the clique are held at each
    code in turn: the products fall within budget, and the marginal (every cell, the
    heaviest few, and ``clique_table``'s dense path) is the exact one, codes mapped back
    to the clique's order."""
    aim = hub_model()
    potentials = aim.model.potentials
    budget = 5 * 4 * 4  # one clique attribute held brings a product within this
    (first,) = aim_release.conditioning_set(potentials, ("a", "b", "c"), budget=budget)
    clique = (*sorted({"a", "b", "c"} - {first}, reverse=True), first)  # held attribute last
    held = aim_release.conditioning_set(potentials, clique, budget=budget)
    assert held == (first,)
    widest, union = aim_release.elimination_peak(potentials, clique)
    assert union == {"a", "b", "c", "h"} and widest == 5 * 4 * 6 * 4
    assert aim_release.conditioning_set(potentials, clique, budget=widest) == ()
    expected = exact_clique_marginal(aim, clique)
    assert aim_release.elimination_peak(potentials, clique, held)[0] <= budget
    monkeypatch.setattr(aim_release, "UNION_CELLS", budget)
    monkeypatch.setattr(aim_release, "SLICE_CELLS", 7)  # several slices under each code
    picks = [aim.picks[a] for a in clique]
    every, dropped = aim_release.heaviest_cells(potentials, clique, picks, expected.size)
    np.testing.assert_allclose(every.table(), expected, rtol=1e-9, atol=1e-14)
    assert dropped == pytest.approx(0.0, abs=1e-12)
    top, dropped = aim_release.heaviest_cells(potentials, clique, picks, 9)
    heaviest = np.argsort(expected.reshape(-1))[-9:]
    assert top.codes is not None
    assert set(top.codes.tolist()) == set(heaviest.tolist())
    assert dropped == pytest.approx(1.0 - expected.reshape(-1)[heaviest].sum(), rel=1e-9)
    table, dropped = aim.clique_table(clique)  # over budget: the held path, made dense
    assert dropped == 0.0 and table.is_dense
    np.testing.assert_allclose(table.table(), expected, rtol=1e-9, atol=1e-14)


def test_sparse_evaluator_matches_a_dense_computation(tmp_path: Path) -> None:
    domain = Domain.from_sizes({"u": 40, "v": 40, "w": 40, "x": 40, "z": 40, "y": 2})
    assert domain.log_size > math.log(2**24)  # the full-resolution path of sparse_problem
    rng = np.random.default_rng(3)
    records = rng.integers(0, 40, size=(300, 6))
    records[:, 5] = (records[:, 0] + records[:, 1] > 40).astype(np.int64)
    data = PrivateData.from_records(domain, records)
    query = CMQuery(loss="logistic", target="y", features=("u", "v", "w"))
    ev = SparseEvaluator("tiny", data, minima=tmp_path)
    dense_problem = query.compile(domain)
    theta = np.linspace(-1.0, 1.0, dense_problem.dim)
    theta *= 0.5 / np.linalg.norm(theta)  # inside the query's ball (radius 1)
    risk = ev.excess_risk(query, theta)
    counts = np.zeros((40, 40, 40, 2))
    np.add.at(counts, tuple(records[:, [0, 1, 2, 5]].T), 1.0)
    weights = counts.reshape(-1) / len(records)
    expected = dense_problem.objective(theta, weights) - exact_minimum(dense_problem, weights)
    assert risk == pytest.approx(expected, rel=1e-6, abs=1e-9)
    assert risk > 1e-3  # a real excess, not a clipped zero
    ev.flush()
    again = SparseEvaluator("tiny", data, minima=tmp_path)
    assert again.excess_risk(query, theta) == pytest.approx(risk, rel=1e-12)
    assert again.new == 0  # the minimum came from the file


def test_stepwise_workload_asks_what_it_announces() -> None:
    domain = Domain.from_sizes({"a": 2, "b": 3, "c": 2, "d": 2, "e": 4, "f": 2})
    asked = answer_workload(domain, None, lambda q: np.arange(len(q.features) + 1.0))
    assert len(asked) == stepwise_k(domain) == (5 + 4 + 3 + 2) * 4
    assert len({(q.target, q.features) for q in asked}) == len(asked)
