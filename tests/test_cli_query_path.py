"""One path for a query in the CLI: ``CMQuery.from_dict`` decides, one table reports.

A query line is accepted or rejected, with the same message, exactly as
:meth:`CMQuery.from_dict` decides; refusals at answer time become error lines
through :data:`pmwcm.cli.answers.REFUSALS`; any other exception is a bug that
stops the run without its message.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmwcm.cli import app
from pmwcm.cli.answers import REFUSALS, refusal_message
from pmwcm.cli.query_file import QueryFile, QueryLine
from pmwcm.data.schema import Schema
from pmwcm.errors import BudgetExhausted, Halted, InvalidQuery, PmwcmError, Refused
from pmwcm.kernels.queries import CMQuery, QueryError
from test_cli_run import (
    ERROR_KEYS,
    QUERIES,
    SCHEMA,
    args,
    one_error_line,
    runner,
    write_data,
    write_queries,
)

GOOD: dict[str, Any] = {"loss": "logistic", "target": "income", "features": ["sex"]}
FIELDS = [
    "loss", "target", "features", "radius", "l2", "intercept", "loss_param", "encodings",
    "interactions", "weights",
]  # fmt: skip
VALUES = st.sampled_from(
    [
        "x", "squared", "huber", "sex", "income", 0, 1, 2.5, -1.0, True, False, None, [],
        ["sex"], ["sex", "smoker"], ["sex", 1], {}, {"sex": "onehot"}, {"sex": "magic"},
        [["sex", "smoker"]], [["sex"]], "a*b",
    ]
)  # fmt: skip
#: Specs near a good one: some fields set to any JSON value, some required ones dropped.
SPECS = st.builds(
    lambda changes, dropped: {k: v for k, v in ({**GOOD, **changes}).items() if k not in dropped},
    st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=3),
    st.sets(st.sampled_from(["loss", "target", "features"]), max_size=1),
)
#: A table of good and bad specs (the bad ones each break one rule).
TABLE: list[dict[str, Any]] = [
    GOOD,
    {**GOOD, "features": ["sex", "smoker"], "interactions": [["sex", "smoker"]]},
    {"loss": "squared", "target": "age", "features": ["sex"], "radius": 2, "l2": 0.5},
    {**GOOD, "radius": 0},
    {**GOOD, "radius": "1"},
    {**GOOD, "l2": -1},
    {**GOOD, "intercept": "no"},
    {**GOOD, "loss": "magic"},
    {**GOOD, "weights": [1]},
    {**GOOD, "features": "sex"},
    {**GOOD, "encodings": {"smoker": "onehot"}},
    {**GOOD, "interactions": [["sex", "sex"]]},
    {"loss": "logistic", "features": ["sex"]},
    {**GOOD, "loss": "huber", "loss_param": -1.0},
]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    data, schema = write_data(tmp_path)
    return {
        "data": data,
        "schema": schema,
        "queries": write_queries(tmp_path, QUERIES),
        "output": tmp_path / "answers.jsonl",
    }


def _decision(spec: dict[str, Any]) -> str | None:
    """``from_dict``'s decision: None to accept, else its message."""
    try:
        CMQuery.from_dict(spec)
    except InvalidQuery as exc:
        return str(exc)
    return None


def _read_one_line(spec: dict[str, Any]) -> QueryLine:
    """``spec`` as the one line of a query file, read back by the CLI's reader."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "one.jsonl"
        path.write_text(json.dumps(spec) + "\n")
        with QueryFile(path) as queries:
            queries.survey(Schema.from_json(SCHEMA).domain())
            (line,) = queries.lines()
    return line


@settings(max_examples=300, deadline=None)
@given(spec=SPECS)
def test_a_query_line_is_decided_by_from_dict_alone(spec: dict[str, Any]) -> None:
    line = _read_one_line({"id": "q", **spec})
    expected = _decision({"id": "q", **spec})
    assert line.error == expected
    assert (line.query is None) == (expected is not None)


def test_the_run_reports_from_dicts_decisions_on_a_table(
    files: dict[str, Path], tmp_path: Path
) -> None:
    files["queries"] = write_queries(
        tmp_path, [{"id": i, **spec} for i, spec in enumerate(TABLE)], "table.jsonl"
    )
    result = runner.invoke(app, args(files, "--method", "nonprivate"))
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in files["output"].read_text().splitlines()]
    assert [r["id"] for r in records] == list(range(len(TABLE)))
    for spec, record in zip(TABLE, records, strict=True):
        expected = _decision(spec)
        if expected is None:
            assert "theta" in record, (spec, record)
        else:
            assert record == {"id": record["id"], "error": expected, "noise": "none"}


def test_a_spec_that_does_not_fit_the_domain_is_refused_by_the_engine(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """Compiled once, by the engine: an unknown attribute is an error line, nothing spent."""
    lines = [{"id": "far", **GOOD, "features": ["height"]}]
    files["queries"] = write_queries(tmp_path, lines, "unknown.jsonl")
    result = runner.invoke(app, args(files, "--insecure-seeded-noise", "3"))
    assert result.exit_code == 0, result.output
    (record,) = [json.loads(line) for line in files["output"].read_text().splitlines()]
    assert set(record) == ERROR_KEYS and "'height'" in record["error"]


def test_the_refusal_table_covers_the_hierarchy() -> None:
    assert set(REFUSALS) == {InvalidQuery, Refused, BudgetExhausted, Halted}
    assert refusal_message(QueryError("bad radius")) == "bad radius"
    assert refusal_message(Refused("too costly")) == "refused: too costly"
    assert refusal_message(BudgetExhausted("spent")) == "refused: spent"
    assert "all private updates are spent" in refusal_message(Halted("T"))


@pytest.mark.parametrize("error", [TypeError, KeyError, RuntimeError, ZeroDivisionError])
def test_a_programming_error_is_never_a_refusal(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, error: type[Exception]
) -> None:
    from pmwcm.engine.online import OnlinePMW

    def bug(self: OnlinePMW, *round_: Any) -> None:  # the round of a new query
        raise error("the data's loss at theta is 0.3141592")

    monkeypatch.setattr(OnlinePMW, "_run", bug)
    result = runner.invoke(app, args(files))
    assert result.exit_code == 1
    one_error_line(result.stderr, f"internal error ({error.__name__})", "nothing was written")
    assert "0.314" not in result.output and "refused" not in result.output
    assert not files["output"].exists()


@pytest.mark.parametrize("error", [Refused, BudgetExhausted, QueryError])
def test_a_pmwcm_error_at_answer_time_is_an_error_line(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, error: type[PmwcmError]
) -> None:
    from pmwcm.engine.online import OnlinePMW

    def refuse(self: OnlinePMW, *round_: Any) -> None:  # the round of a new query
        raise error("public reason")

    monkeypatch.setattr(OnlinePMW, "_run", refuse)
    result = runner.invoke(app, args(files))
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in files["output"].read_text().splitlines()]
    assert all(r["error"] == refusal_message(error("public reason")) for r in records)


def test_synth_keeps_the_histograms_permissions(files: dict[str, Path], tmp_path: Path) -> None:
    histogram = tmp_path / "hyp.npy"
    histogram.write_bytes(b"old")
    histogram.chmod(0o600)
    out = tmp_path / "synthetic.csv"
    argv = [
        "synth", "--data", str(files["data"]), "--schema", str(files["schema"]),
        "--queries", str(files["queries"]), "--epsilon", "1", "--delta", "1e-6",
        "--output", str(out), "--histogram", str(histogram), "--insecure-seeded-noise", "1",
    ]  # fmt: skip
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert histogram.stat().st_mode & 0o777 == 0o600
    assert histogram.read_bytes().startswith(b"\x93NUMPY")
