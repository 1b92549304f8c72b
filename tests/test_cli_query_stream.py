"""Query files streamed (issue 36 item 4): two passes in bounded memory, repeats served
from the released answers, the same records as the engine's door gives every line,
a byte-order mark accepted, duplicate ids found exactly."""

from __future__ import annotations

import json
import random
import tracemalloc
from array import array
from pathlib import Path
from typing import Any

import pytest

from pmwcm.cli import app
from pmwcm.cli.answers import answer_with_engine, labelled, refusal_message
from pmwcm.cli.planning import build_run_engine, plan_run
from pmwcm.cli.query_file import QueryFile, _Ids, _shared
from pmwcm.data.schema import Schema
from pmwcm.data.table import Dataset
from pmwcm.errors import PmwcmError
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.noise import NumpyNoise
from test_cli_run import QUERIES, SCHEMA, args, one_error_line, runner, write_data, write_queries

SEED = 5

#: Two problems in two spellings each (feature order, 1 against 1.0, a default written
#: out), a third problem, a query that cannot be keyed on the domain and one that is keyed
#: but refused when compiled (asked again at each repeat): every path of a repeat.
SPELLINGS: list[dict[str, Any]] = [
    {"loss": "logistic", "target": "income", "features": ["age", "sex"], "radius": 1},
    {"loss": "logistic", "target": "income", "features": ["sex", "age"], "radius": 1.0},
    {"loss": "huber", "target": "income", "features": ["smoker"]},
    {"loss": "huber", "target": "income", "features": ["smoker"], "loss_param": 1.0},
    {"loss": "logistic", "target": "nowhere", "features": ["sex"]},
    {"loss": "squared", "target": "age", "features": ["smoker", "sex"], "l2": 0.1},
    {"loss": "hinge", "target": "age", "features": ["sex"]},  # keyed, refused when compiled
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


def _repeating_lines(count: int) -> list[dict[str, Any]]:
    """``count`` lines: each of :data:`SPELLINGS` once, then a seeded random mix of them."""
    draw = random.Random(11)
    picks = list(range(len(SPELLINGS))) + [
        draw.randrange(len(SPELLINGS)) for _ in range(count - len(SPELLINGS))
    ]
    return [{"id": f"r{i}", **SPELLINGS[pick]} for i, pick in enumerate(picks)]


def _engine(files: dict[str, Path], after_halt: str = "synthetic") -> Any:
    dataset = Dataset.from_csv(files["data"], Schema.from_json(files["schema"]))
    plan = plan_run(
        dataset, epsilon=200.0, delta=1e-6, after_halt=after_halt, max_updates=1,
        prior="uniform", announced_queries=4, mode="hybrid",
        update="oracle",  # the paper's update: one flagged query spends T = 1, then the halt
    )  # fmt: skip
    return build_run_engine(dataset, plan, noise=NumpyNoise(seed=SEED))


def _records_through_the_door(engine: Any, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the CLI wrote before streaming: every line through ``ask_each``, repeats too."""
    queries = [CMQuery.from_dict(line) for line in lines]
    records = []
    for line, query, outcome in zip(lines, queries, engine.ask_each(queries), strict=True):
        if isinstance(outcome, PmwcmError):
            records.append({"id": line["id"], "error": refusal_message(outcome)})
            continue
        theta = [float(v) for v in outcome.value]
        records.append(
            {"id": line["id"], "theta": theta, "source": outcome.source,
             "updates": outcome.updates, "epsilon_spent": outcome.epsilon_spent,
             "delta": outcome.delta} | labelled(query, engine.domain, theta)
        )  # fmt: skip
    return records


@pytest.mark.parametrize("after_halt", ["synthetic", "refuse"])
def test_repeats_get_the_records_the_engines_door_gives_every_line(
    files: dict[str, Path], tmp_path: Path, after_halt: str
) -> None:
    lines = _repeating_lines(60)
    path = write_queries(tmp_path, lines, "repeats.jsonl")
    streamed_engine = _engine(files, after_halt)
    with QueryFile(path) as queries:
        survey = queries.survey(streamed_engine.domain)
        streamed = list(answer_with_engine(streamed_engine, queries))
    expected = _records_through_the_door(_engine(files, after_halt), lines)
    # the one update is spent on the first problem (uniform start, a large epsilon), so
    # the others meet the halt, and a refused key is asked again at each repeat
    halted = [
        r for r in expected if r.get("source") == "synthetic" or "spent" in r.get("error", "")
    ]
    assert halted
    assert [{k: v for k, v in r.items() if k not in ("noise", "warning")} for r in streamed] == (
        expected
    )
    # three problems the domain accepts; the engine saw each key once, not each line
    assert survey.lines == 60
    assert survey.answerable == 3
    assert len(survey.firsts) == 4  # the hinge on a 4-bin target is keyed, then refused
    assert len(streamed_engine.answers) == len(streamed_engine.released) <= 3


def test_every_spelling_of_a_problem_gets_one_answer_in_its_own_order(
    files: dict[str, Path], tmp_path: Path
) -> None:
    lines = _repeating_lines(40)
    files["queries"] = write_queries(tmp_path, lines, "repeats.jsonl")
    domain = Schema.from_json(files["schema"]).domain()
    for method in ("pmw", "composition", "nonprivate"):
        result = runner.invoke(app, args(files, "--method", method, "--insecure-seeded-noise", "3"))
        assert result.exit_code in (0, 3), result.output
        records = [json.loads(line) for line in files["output"].read_text().splitlines()]
        assert [r["id"] for r in records] == [line["id"] for line in lines]
        named: dict[str, dict[str, float]] = {}  # a problem's coefficients by name
        for line, record in zip(lines, records, strict=True):
            if "error" in record:
                assert line["target"] in ("nowhere", "age") and line["loss"] != "squared"
                continue
            coefficients = dict(zip(record["coefficients"], record["theta"], strict=True))
            key = CMQuery.from_dict(line).canonical_json(domain)
            assert named.setdefault(key, coefficients) == coefficients, method
        assert len(named) == 3


def test_a_byte_order_mark_is_accepted(files: dict[str, Path], tmp_path: Path) -> None:
    plain = runner.invoke(app, args(files, "--method", "nonprivate"))
    assert plain.exit_code == 0, plain.output
    expected = files["output"].read_text()
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + files["queries"].read_bytes())
    files["queries"] = bom
    result = runner.invoke(app, args(files, "--method", "nonprivate"))
    assert result.exit_code == 0, result.output
    assert files["output"].read_text() == expected


def test_a_line_that_is_not_utf8_is_named(files: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    text = (
        json.dumps(QUERIES[0])
        + "\n\n"
        + json.dumps({**QUERIES[1], "id": "caf\u00e9"}, ensure_ascii=False)
    )
    path.write_bytes(text.encode("latin-1") + b"\n")
    files["queries"] = path
    result = runner.invoke(app, args(files))
    assert result.exit_code == 1
    one_error_line(result.stderr, "line 3 is not UTF-8")
    assert not files["output"].exists()


def test_line_numbers_count_blank_lines_and_every_line_break(
    files: dict[str, Path], tmp_path: Path
) -> None:
    path = tmp_path / "breaks.jsonl"
    good = json.dumps(QUERIES[0])
    path.write_bytes(f"{good}\r\n\r\n{json.dumps(QUERIES[1])}\r[1]\n".encode())
    files["queries"] = path
    result = runner.invoke(app, args(files))
    assert result.exit_code == 1
    one_error_line(result.stderr, "line 4 must be a JSON object, got list")


def test_duplicate_ids_are_refused_and_their_queries_not_counted(tmp_path: Path) -> None:
    lines = [
        {"id": "a", **SPELLINGS[0]},
        {"id": 1, **SPELLINGS[2]},
        {"id": "1", **SPELLINGS[5]},  # a string is not the int 1
        {"id": "a", "loss": "squared", "target": "age", "features": ["sex"]},  # unique spec
        {"id": 1, **SPELLINGS[2]},
    ]
    path = write_queries(tmp_path, lines, "ids.jsonl")
    with QueryFile(path) as queries:
        survey = queries.survey(Schema.from_json(SCHEMA).domain())
        read = list(queries.lines())
    assert survey.answerable == 3  # the duplicate-id line's own problem is not announced
    assert [line.error for line in read] == [
        None, None, None,
        "duplicate id 'a' (first on line 1).",
        "duplicate id 1 (first on line 2).",
    ]  # fmt: skip


def test_a_shared_hash_is_only_a_suspicion() -> None:
    # lines 1 and 3 share a hash (as two different ids might), line 2 has no id
    assert _shared(array("q", [5, 0, 5, 7])) == {1, 3}
    assert _shared(array("q", [0, 0, 4])) == set()
    ids = _Ids({1, 3, 4})
    assert ids.first_line_of(1, "x") is None
    assert ids.first_line_of(2, "x") is None  # not a suspect: its hash is its own
    assert ids.first_line_of(3, "y") is None  # same hash, another id: not a duplicate
    assert ids.first_line_of(4, "x") == 1


def test_reading_keeps_no_line_after_its_turn(tmp_path: Path) -> None:
    """Python's peak allocation while a 50,000-line file is surveyed and read stays a
    few bytes a line (the id hashes): holding the lines, as the old reader did, takes
    several hundred bytes each (the text, the parsed spec, the query: ~250 MB here)."""
    count = 50_000
    path = tmp_path / "long.jsonl"
    with path.open("w") as out:
        for i in range(count):
            out.write(json.dumps({"id": f"q{i:07d}", **SPELLINGS[i % len(SPELLINGS)]}) + "\n")
    domain = Schema.from_json(SCHEMA).domain()
    tracemalloc.start()
    try:
        with QueryFile(path) as queries:
            queries.survey(domain)
            seen = sum(1 for _ in queries.lines())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seen == count
    assert peak < 40 * count, f"peak {peak:,} bytes for {count:,} lines"


def test_the_second_pass_parses_no_spelling_again(tmp_path: Path) -> None:
    """More distinct spellings than the old 4,096-entry cache held: the second pass, which
    meets them in the survey's order, finds every one cached (it missed on all of them)."""
    count = 5_000
    path = tmp_path / "distinct.jsonl"
    with path.open("w") as out:
        for i in range(count):  # each its own radius: a distinct spelling and problem
            spec = {"loss": "logistic", "target": "income", "features": ["age", "sex"]}
            out.write(json.dumps({"id": i, **spec, "radius": 1.0 + i / count}) + "\n")
    domain = Schema.from_json(SCHEMA).domain()
    with QueryFile(path) as queries:
        assert queries.survey(domain).answerable == count
        assert queries._parse.cache_info().misses == count
        assert sum(1 for line in queries.lines() if line.query is not None) == count
        assert queries._parse.cache_info().misses == count
