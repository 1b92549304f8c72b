"""The support hypothesis's array-API path (``--device``) against its NumPy path.

The path a CUDA device runs (:mod:`pmwcm.kernels.support_array`) runs here on two
CPU namespaces: NumPy's (through ``array_api_compat``, as CuPy and PyTorch are
reached) and ``array_api_strict``, which has nothing outside the standard: a
call outside it fails there. Every number must agree with the host path
(:class:`~pmwcm.kernels.support.SupportHistogram` without a device, the numba
fit of :mod:`pmwcm.kernels.support_passes`) to ``1e-12`` relative.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import array_api_compat.numpy
import array_api_strict
import numpy as np
import pytest

from pmwcm.kernels import cuda_kernels
from pmwcm.kernels.array_device import (
    ArrayDevice,
    DeviceUnavailable,
    _cuda_device,
    array_device,
    resolve_device,
)
from pmwcm.kernels.domain import Domain
from pmwcm.kernels.support import SupportHistogram
from pmwcm.mechanisms.priors.marginals import Measurement, pairwise_cliques
from pmwcm.mechanisms.priors.support import fit_support

NAMESPACES: dict[str, Any] = {"numpy": array_api_compat.numpy, "strict": array_api_strict}
#: Under numba's CUDA simulator (``tests/test_cuda_kernels.py`` runs this file so) every test
#: also runs on a device with the fused kernels: the code a GPU runs, thread by thread.
SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
DOMAIN = Domain.from_sizes({"a": 3, "b": 5, "c": 2, "d": 7})
RTOL = 1e-12


@pytest.fixture(params=sorted(NAMESPACES) + (["fused"] if SIMULATED else []))
def device(request: pytest.FixtureRequest) -> ArrayDevice:
    if request.param == "fused":
        kernels = cuda_kernels.load()
        assert kernels is not None, "the simulator is a CUDA target: the kernels must load"
        return ArrayDevice(array_api_compat.numpy, name="simulator", fused=kernels)
    return array_device(NAMESPACES[request.param])


def _support(seed: int, size: int = 600) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    records = np.stack([rng.integers(0, s, size) for s in DOMAIN.sizes], axis=1)
    return records, rng.normal(scale=2.0, size=size)


def _pair(seed: int, device: ArrayDevice) -> tuple[SupportHistogram, SupportHistogram]:
    records, weights = _support(seed)
    host = SupportHistogram(DOMAIN, records, weights)
    return host, SupportHistogram(DOMAIN, records, weights, device=device)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_marginals_and_probabilities_agree(device: ArrayDevice, seed: int) -> None:
    host, moved = _pair(seed, device)
    np.testing.assert_allclose(moved.log_weights, host.log_weights, rtol=RTOL)
    np.testing.assert_allclose(moved.probabilities, host.probabilities, rtol=RTOL)
    for clique in [("a",), ("b", "d"), ("d", "a", "c"), DOMAIN.names]:
        np.testing.assert_allclose(moved.marginal(clique), host.marginal(clique), rtol=RTOL)
    np.testing.assert_allclose(moved.to_array(), host.to_array(), rtol=RTOL)


@pytest.mark.parametrize("seed", [0, 1])
def test_reweights_agree(device: ArrayDevice, seed: int) -> None:
    host, moved = _pair(seed, device)
    rng = np.random.default_rng(100 + seed)
    for clique in [("b",), ("a", "d"), ("c", "b")]:
        factor = rng.normal(size=tuple(DOMAIN.shape[a] for a in DOMAIN.axes(clique)))
        host.reweight(clique, factor)
        moved.reweight(clique, factor)
        table = host.clique_table(clique)
        log_factor = rng.normal(size=table.shape)
        host.reweight_table(clique, table, log_factor)
        moved.reweight_table(clique, moved.clique_table(clique), log_factor)
    np.testing.assert_allclose(moved.log_weights, host.log_weights, rtol=RTOL)
    np.testing.assert_allclose(moved.marginal(("a", "b")), host.marginal(("a", "b")), rtol=RTOL)


def test_bad_factor_is_refused_before_the_weights_move(device: ArrayDevice) -> None:
    _, moved = _pair(0, device)
    before = moved.log_weights
    with pytest.raises(ValueError, match="log_factor"):
        moved.reweight(("a",), np.array([0.0, np.inf, 0.0]))
    np.testing.assert_array_equal(moved.log_weights, before)


def test_samples_are_the_host_paths_draws(device: ArrayDevice) -> None:
    host, moved = _pair(3, device)
    drawn = moved.sample(2000, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(drawn, host.sample(2000, rng=np.random.default_rng(7)))
    assert drawn.dtype == np.int64 and drawn.shape == (2000, len(DOMAIN))


def test_copies_are_independent(device: ArrayDevice) -> None:
    _, moved = _pair(4, device)
    twin = moved.copy()
    twin.reweight(("a",), np.array([0.0, 1.0, -1.0]))
    assert twin.device is moved.device
    assert not np.allclose(twin.marginal(("a",)), moved.marginal(("a",)))
    restored = SupportHistogram.from_normalized(
        DOMAIN, moved.records, moved.log_weights, device=device
    )
    np.testing.assert_allclose(restored.marginal(("b", "c")), moved.marginal(("b", "c")))


def _measurements(seed: int) -> list[Measurement]:
    """Noisy 2-way marginals of a random distribution (the fit's input)."""
    rng = np.random.default_rng(seed)
    truth = rng.dirichlet(np.ones(DOMAIN.size)).reshape(DOMAIN.shape)
    out = []
    for clique in pairwise_cliques(DOMAIN):
        axes = DOMAIN.axes(clique)
        others = tuple(i for i in range(len(DOMAIN)) if i not in axes)
        values = truth.sum(axis=others) + rng.normal(scale=1e-3, size=truth.sum(axis=others).shape)
        out.append(Measurement(clique=clique, values=values, sigma=1e-3))
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_prior_fit_agrees(device: ArrayDevice, seed: int) -> None:
    """Twenty steps (eight under the simulator) agree to 1e-12. Each step agrees to
    rounding, but the descent grows its step by 10% while the loss falls, so once the step
    nears the edge of stability a rounding difference doubles every step or two (either
    path against itself summed in another order does the same): after 40 steps the two
    fits agree to ~1e-8, which the second comparison states."""
    # The simulator runs one Python thread per CUDA thread: a smaller, shorter fit (each
    # step launches the same kernels, so eight check them as twenty do)
    simulated = device.fused is not None
    records, _ = _support(seed, size=400 if simulated else 2000)
    measured = _measurements(seed)
    fits = {}
    for iterations, rtol in [(8, RTOL)] if simulated else [(20, RTOL), (40, 1e-6)]:
        for where in (None, device):
            start = SupportHistogram(DOMAIN, records, device=where)
            fits[where] = fit_support(start, measured, iterations=iterations, continuation=1)
        assert fits[device].device is device
        np.testing.assert_allclose(fits[device].log_weights, fits[None].log_weights, rtol=rtol)
        for m in measured[:3]:
            np.testing.assert_allclose(
                fits[device].marginal(m.clique), fits[None].marginal(m.clique), rtol=rtol
            )


def test_device_names_are_checked_before_anything_runs() -> None:
    assert resolve_device("cpu") is None
    with pytest.raises(ValueError, match="device must be one of"):
        resolve_device("gpu")
    found = _cuda_device()
    if found is None:  # this machine has no GPU: cuda is refused in one line, auto is the host
        with pytest.raises(DeviceUnavailable, match=r"device='cuda' \(--device cuda\)"):
            resolve_device("cuda")
        assert resolve_device("auto") is None
    else:
        assert resolve_device("cuda") == found


def test_run_refuses_a_device_it_cannot_use_before_reading_anything(tmp_path: Path) -> None:
    """``pmwcm run --device``: an unknown name, or cuda without a GPU, is one ``error:`` line
    naming the option, decided before the data is opened (the data path here does not exist)."""
    from typer.testing import CliRunner

    from pmwcm.cli import app

    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q", "loss": "logistic", "target": "c", "features": ["a"]}\n')
    base = ["run", "--data", str(tmp_path / "absent.csv"), "--schema", "adult-full",
            "--queries", str(queries), "--epsilon", "1", "--delta", "1e-6",
            "--output", str(tmp_path / "out.jsonl")]  # fmt: skip
    cases = [("gpu", "--device must be one of auto, cpu, cuda, got 'gpu'.")]
    if _cuda_device() is None:
        cases.append(("cuda", "(--device cuda): no CUDA array library sees a GPU"))
    for device, message in cases:
        result = CliRunner().invoke(app, [*base, "--device", device])
        assert result.exit_code == 1
        assert result.output.strip().splitlines() == [result.output.strip()]
        assert message in result.output
        assert not (tmp_path / "out.jsonl").exists()


def test_an_engine_on_a_device_support_gives_the_host_transcript(device: ArrayDevice) -> None:
    """Updates, sweeps and answers through the engine, small cliques and one past the dense
    limit (70 x 70 x 2 cells: the support's occupied cells, reweighted through its table)."""
    from pmwcm.engine.practical import PMWConfig, build_engine
    from pmwcm.kernels.queries import CMQuery
    from pmwcm.mechanisms.noise import NumpyNoise
    from pmwcm.mechanisms.private_data import PrivateData

    domain = Domain.from_sizes({"a": 70, "b": 70, "c": 3, "y": 2})
    rng = np.random.default_rng(5)
    records = np.stack([rng.integers(0, s, 400) for s in domain.sizes], axis=1)
    records[:, 3] = (records[:, 0] + records[:, 2] > 40).astype(int)
    data = PrivateData.from_records(domain, records)
    config = PMWConfig(
        epsilon=2.0, delta=1e-6, prior="uniform", max_updates=3, threshold=-1.0,
        after_halt="synthetic", backend="support", support_size=3000,
    )  # fmt: skip
    queries = [
        CMQuery(loss="logistic", target="y", features=("a", "b")),
        CMQuery(loss="logistic", target="y", features=("c",)),
        CMQuery(loss="squared", target="c", features=("a",)),
        CMQuery(loss="logistic", target="y", features=("b", "c")),
        CMQuery(loss="squared", target="c", features=("a", "b")),
    ]
    transcripts = []
    for where in (None, device):
        prior = SupportHistogram.uniform(domain, 3000, rng=np.random.default_rng(1), device=where)
        engine = build_engine(data, config, noise=NumpyNoise(seed=3), prior=prior)
        transcripts.append([engine.answer(q) for q in queries])
        assert getattr(engine.hypothesis, "device", None) is where
    assert [a.source for a in transcripts[0]] == ["oracle"] * 3 + ["synthetic"] * 2
    for host, moved in zip(*transcripts, strict=True):
        assert (host.source, host.updates) == (moved.source, moved.updates)
        np.testing.assert_allclose(moved.value, host.value, rtol=1e-9, atol=1e-12)


def test_a_service_session_refuses_a_device_it_cannot_use_at_creation() -> None:
    """The session's ``device`` is checked with its parameters, before any data is read."""
    from importlib import resources

    from pmwcm.service.build import session_config

    files = Path(str(resources.files("pmwcm.data.bundled").joinpath("files")))
    where = {"data_path": str(files / "adult.csv"), "epsilon": 1.0, "delta": 1e-6}
    where["schema_path"] = str(files / "adult-binary.schema.json")
    with pytest.raises(ValueError, match="device must be one of"):
        session_config(**where, parameters={"device": "tpu"})  # type: ignore[arg-type]
    if _cuda_device() is None:
        with pytest.raises(DeviceUnavailable, match=r"device='cuda' \(--device cuda\)"):
            session_config(**where, parameters={"device": "cuda"})  # type: ignore[arg-type]
    stored = session_config(**where, parameters={"device": "auto"})  # type: ignore[arg-type]
    assert stored["parameters"]["device"] == "auto"
