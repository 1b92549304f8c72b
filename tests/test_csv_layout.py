"""One set of CSV rules for every command (issue 36, item 3).

Round 2's ``run`` read CSV through DuckDB's sniffer, ``schema --check`` through
pandas and a header check: ``;``- and tab-separated files and a repeated header
were refused by one and answered by the other, ragged rows and Latin-1 files got
different messages. Now :func:`~pmwcm.data.csv_layout.check_csv_layout` decides
for both, so each fault gets the same one line from ``schema --check``,
``schema --data``, ``run`` and ``synth``, naming the line and never a value.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pmwcm.cli import app
from pmwcm.data.csv_layout import check_csv_layout
from pmwcm.data.sources.open import open_source
from pmwcm.data.table import DataError, Dataset

runner = CliRunner()
HEADER = "age,sex,income"
ROWS = ["34,female,low", "51,male,high", "29,male,low", "62,female,high"]
SCHEMA = {
    "attributes": [
        {"name": "age", "bins": [0, 45, 120]},
        {"name": "sex", "values": ["female", "male"]},
        {"name": "income", "values": ["low", "high"]},
    ]
}
QUERY = {"loss": "logistic", "target": "income", "features": ["sex"]}

#: Each faulty file (as bytes) and the words its one-line refusal must hold.
FAULTS = {
    "semicolons": ((HEADER + "\n" + "\n".join(ROWS)).replace(",", ";").encode(), "semicolon"),
    "tabs": ((HEADER + "\n" + "\n".join(ROWS)).replace(",", "\t").encode(), "tab-separated"),
    "repeated header": (("age,sex,age\n" + "\n".join(ROWS)).encode(), "names column 'age' twice"),
    "ragged row": ("\n".join([HEADER, ROWS[0], "51,male", *ROWS[2:]]).encode(), "line 3: 2 fields"),
    "latin-1": ("\n".join([HEADER, "34,f\xe9male,low", *ROWS[1:]]).encode("latin-1"), "line 2"),
    "no rows": ((HEADER + "\n").encode(), "no data rows"),
    "broken quote": ("\n".join([HEADER, '34,"female,low', *ROWS[1:]]).encode(), "quoting"),
}
#: Cells of the faulty files that no message may quote.
VALUES = ("female", "male", "low", "high", "34", "f\xe9male")


def write(folder: Path, content: bytes) -> tuple[Path, Path]:
    data, schema = folder / "data.csv", folder / "schema.json"
    data.write_bytes(content)
    schema.write_text(json.dumps(SCHEMA))
    return data, schema


def commands(data: Path, schema: Path, folder: Path) -> dict[str, list[str]]:
    queries = folder / "queries.jsonl"
    queries.write_text(json.dumps(QUERY) + "\n")
    budget = ["--epsilon", "1", "--delta", "1e-6"]
    return {
        "schema --check": ["schema", "--check", str(schema), "--data", str(data)],
        "schema --data": ["schema", "--data", str(data)],
        "run": ["run", "--data", str(data), "--schema", str(schema), "--queries", str(queries),
                *budget, "--output", str(folder / "answers.jsonl")],
        "synth": ["synth", "--data", str(data), "--schema", str(schema), "--queries",
                  str(queries), *budget,
                  "--output", str(folder / "synthetic.csv")],
    }  # fmt: skip


def only_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.parametrize("fault", list(FAULTS))
def test_every_command_refuses_a_fault_with_the_same_line(fault: str, tmp_path: Path) -> None:
    content, words = FAULTS[fault]
    data, schema = write(tmp_path, content)
    lines = {}
    for name, argv in commands(data, schema, tmp_path).items():
        result = runner.invoke(app, argv)
        assert result.exit_code != 0, (name, result.output)
        lines[name] = only_line(result.stderr)
        assert words in lines[name], (name, lines[name])
        said = lines[name].replace(str(tmp_path), "")
        assert not any(v in said.split("'") for v in VALUES), (name, said)
    assert len(set(lines.values())) == 1, lines  # one reader, one message
    assert not (tmp_path / "answers.jsonl").exists()


def test_a_byte_order_mark_is_read_by_every_reader(tmp_path: Path) -> None:
    data, schema = write(tmp_path, b"\xef\xbb\xbf" + (HEADER + "\n" + "\n".join(ROWS)).encode())
    assert check_csv_layout(data) == ["age", "sex", "income"]
    from pmwcm.data.schema import Schema

    parsed = Schema.from_json(schema)
    memory = Dataset.from_csv(data, parsed)
    source = open_source(data, parsed)
    assert source.n == memory.records.shape[0] == 4
    result = runner.invoke(app, commands(data, schema, tmp_path)["run"])
    assert result.exit_code == 0, result.output


def test_quoted_fields_may_hold_commas_and_line_breaks(tmp_path: Path) -> None:
    content = HEADER + ',note\n34,female,low,"a, b"\n51,male,high,"two\nlines"\n'
    path = tmp_path / "quoted.csv"
    path.write_text(content)
    assert check_csv_layout(path) == ["age", "sex", "income", "note"]


def test_the_rules_refuse_before_any_parser_reads(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        check_csv_layout(tmp_path / "nope.csv")
    with pytest.raises(DataError, match="not a file"):
        check_csv_layout(tmp_path)
    (tmp_path / "empty.csv").write_bytes(b"")
    with pytest.raises(DataError, match="empty"):
        check_csv_layout(tmp_path / "empty.csv")
    (tmp_path / "blank.csv").write_text("a,,c\n1,2,3\n")
    with pytest.raises(DataError, match="empty header"):
        check_csv_layout(tmp_path / "blank.csv")
