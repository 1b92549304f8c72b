"""``pmwcm demo``: a short run writes a real PNG with both curves and a JSON summary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image
from typer.testing import CliRunner

from pmwcm.cli import app

runner = CliRunner()
K = 24


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One short demo run shared by the tests below (seed 0: the run is the fixture)."""
    out = tmp_path_factory.mktemp("demo") / "out"
    result = runner.invoke(app, ["demo", "--queries", str(K), "--seed", "0", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "noise: numpy(seed=0)" in result.stderr  # the noise source goes to stderr
    assert "noise:" not in result.stdout
    return out, result.stdout


def test_table_names_every_method(demo: tuple[Path, str]) -> None:
    out, stdout = demo
    for needle in ("PMW-CM", "composition", "non-private", "mean risk", "oracle calls"):
        assert needle in stdout
    assert f"{out / 'excess_risk.png'}" in stdout


def test_png_opens_and_has_content(demo: tuple[Path, str]) -> None:
    pixels = image.imread(demo[0] / "excess_risk.png")
    assert pixels.ndim == 3 and pixels.shape[0] > 300 and pixels.shape[1] > 600
    rgb = pixels[..., :3].reshape(-1, 3)
    assert rgb.std() > 0.05  # not a blank canvas
    blue = np.array([0x1F, 0x77, 0xB4]) / 255  # matplotlib tab:blue (PMW-CM)
    orange = np.array([0xFF, 0x7F, 0x0E]) / 255  # tab:orange (composition)
    for color in (blue, orange):  # both curves are drawn
        assert (np.abs(rgb - color).max(axis=1) < 0.02).sum() > 200


def test_summary_json(demo: tuple[Path, str]) -> None:
    summary = json.loads((demo[0] / "summary.json").read_text())
    assert summary["queries"] == K and summary["epsilon"] == 1.0 and summary["delta"] == 1e-6
    assert summary["noise"] == "numpy(seed=0)" and summary["n"] == 48842
    methods = summary["methods"]
    assert set(methods) == {"pmw", "pmw_uniform", "composition", "nonprivate"}
    assert 0 < methods["pmw"]["epsilon_spent"] <= 1.0
    assert 0 < methods["pmw_uniform"]["epsilon_spent"] <= 1.0
    assert 0.99 < methods["composition"]["epsilon_spent"] <= 1.0
    assert methods["composition"]["oracle_calls"] == K
    assert methods["nonprivate"]["epsilon_spent"] is None
    assert methods["nonprivate"]["max_excess_risk"] < 1e-6
    for m in methods.values():
        assert 0 <= m["mean_excess_risk"] <= m["max_excess_risk"]
    assert len(summary["per_query"]) == K
    kinds = {q["kind"] for q in summary["per_query"]}
    assert kinds <= {"random", "stepwise"} and "stepwise" in kinds
    assert sum(summary["pmw"]["sources"].values()) + summary["pmw"]["repeats"] == K


@pytest.mark.parametrize(
    ("extra", "needle"),
    [(["--queries", "0"], "--queries"), (["--epsilon", "-1"], "--epsilon")],
)
def test_bad_options(extra: list[str], needle: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["demo", *extra, "--output", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert result.stderr.strip().startswith("error: ") and needle in result.stderr
    assert not (tmp_path / "o").exists()


def test_output_that_is_a_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    result = runner.invoke(app, ["demo", "-k", "1", "--output", str(target)])
    assert result.exit_code == 1 and "not a directory" in result.stderr
    assert target.read_text() == "x"


def test_plot_labels_speak_to_a_reader_who_is_not_a_dp_researcher() -> None:
    from pmwcm.cli.demo_plot import REFERENCE_LABEL, excess_risk_figure

    risks = {"pmw": np.array([1e-3, 1e-4]), "composition": np.array([1e-2, 1e-2])}
    summary = {"epsilon": 1.0, "delta": 1e-6, "pmw": {"first_synthetic_answer": None}}
    ax = excess_risk_figure(risks, ["hypothesis", "oracle"], summary).axes[0]
    assert "lower is better" in ax.get_ylabel()
    assert "how much worse each answer fits than the exact fit" in ax.get_ylabel()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert REFERENCE_LABEL in legend and "non-private" in REFERENCE_LABEL
    assert any(line.get_label() == REFERENCE_LABEL for line in ax.get_lines())
