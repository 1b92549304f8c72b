"""``pmwcm run``: the fixed output contract, per-line refusals, fatal input errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from pmwcm.cli import app
from pmwcm.data.schema import Schema
from pmwcm.data.table import Dataset
from pmwcm.engine.baselines import NonPrivateBaseline
from pmwcm.kernels.queries import CMQuery
from pmwcm.mechanisms.private_data import PrivateData

runner = CliRunner()
OUTPUT_KEYS = {"id", "theta", "source", "updates", "epsilon_spent", "delta", "noise",
               "coefficients", "on_boundary"}  # fmt: skip
ERROR_KEYS = {"id", "error", "noise"}
SCHEMA = {
    "attributes": [
        {"name": "age", "bins": [0, 30, 45, 60, 120]},
        {"name": "sex", "values": ["female", "male"]},
        {"name": "smoker", "values": ["no", "yes"]},
        {"name": "income", "values": ["low", "high"]},
    ]
}
QUERIES: list[dict[str, Any]] = [
    {"id": "q1", "loss": "logistic", "target": "income", "features": ["age", "sex"],
     "radius": 1.0, "l2": 0.0, "intercept": True},
    {"id": "q2", "loss": "squared", "target": "age", "features": ["sex", "smoker"]},
    {"id": "q3", "loss": "smoothed_hinge", "target": "smoker", "features": ["sex"],
     "intercept": False},
    {"id": 4, "loss": "huber", "target": "income", "features": ["smoker"], "loss_param": 0.5},
]  # fmt: skip


def write_data(folder: Path, rows: int = 400) -> tuple[Path, Path]:
    """A small CSV where income depends strongly on sex and age, and its schema."""
    rng = np.random.default_rng(7)
    age = rng.integers(18, 80, rows)
    male = rng.random(rows) < 0.5
    high = (male.astype(float) + (age > 45) + rng.random(rows)) > 1.6
    lines = ["age,sex,smoker,income"] + [
        f"{a},{'male' if m else 'female'},{'yes' if s else 'no'},{'high' if h else 'low'}"
        for a, m, s, h in zip(age, male, rng.random(rows) < 0.3, high, strict=True)
    ]
    data, schema = folder / "data.csv", folder / "schema.json"
    data.write_text("\n".join(lines) + "\n")
    schema.write_text(json.dumps(SCHEMA))
    return data, schema


def write_queries(folder: Path, queries: list, name: str = "queries.jsonl") -> Path:
    path = folder / name
    path.write_text("".join((q if isinstance(q, str) else json.dumps(q)) + "\n" for q in queries))
    return path


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    data, schema = write_data(tmp_path)
    return {
        "data": data,
        "schema": schema,
        "queries": write_queries(tmp_path, QUERIES),
        "output": tmp_path / "answers.jsonl",
    }


def args(files: dict[str, Path], *extra: str, epsilon: str = "1", delta: str = "1e-6") -> list:
    return [
        "run", "--data", str(files["data"]), "--schema", str(files["schema"]),
        "--queries", str(files["queries"]), "--epsilon", epsilon, "--delta", delta,
        "--output", str(files["output"]), *extra,
    ]  # fmt: skip


def run_ok(files: dict[str, Path], *extra: str, status: int = 0, **kw: str) -> list[dict]:
    result = runner.invoke(app, args(files, *extra, **kw))
    assert result.exit_code == status, result.output
    return [json.loads(line) for line in files["output"].read_text().splitlines()]


def one_error_line(stderr: str, *needles: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]


def check_answer(record: dict, query: dict, sources: set[str]) -> None:
    assert set(record) - {"warning"} == OUTPUT_KEYS
    assert ("warning" in record) == (record["source"] == "synthetic")
    assert record["id"] == query["id"]
    width = {"age": 4, "sex": 1, "smoker": 1}  # age has 4 bins: one-hot
    expected = sum(width[f] for f in query["features"]) + query.get("intercept", True)
    assert len(record["theta"]) == expected
    assert all(isinstance(v, float) for v in record["theta"])
    assert record["source"] in sources


def test_pmw_output_contract(files: dict[str, Path], seed: int) -> None:
    result = runner.invoke(app, args(files, "--insecure-seeded-noise", str(seed)))
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in files["output"].read_text().splitlines()]
    assert len(records) == len(QUERIES)
    for record, query in zip(records, QUERIES, strict=True):
        check_answer(record, query, {"hypothesis", "oracle", "synthetic"})
        assert 0 < record["epsilon_spent"] <= 1.0 and record["delta"] == 1e-6
        assert record["updates"] >= 0
    spent = [r["epsilon_spent"] for r in records]
    assert spent == sorted(spent)  # running total
    assert f"numpy(seed={seed})" in result.stderr and "4 queries" in result.stderr
    assert all(r["noise"] == f"numpy(seed={seed})" for r in records)
    assert "warning: --insecure-seeded-noise" in result.stderr
    assert "NOT differentially private" in result.stderr


def test_seed_makes_runs_identical(files: dict[str, Path], seed: int) -> None:
    first = run_ok(files, "--insecure-seeded-noise", str(seed))
    assert run_ok(files, "--insecure-seeded-noise", str(seed)) == first


def test_default_noise_is_opendp(files: dict[str, Path]) -> None:
    lines = [*QUERIES, {**QUERIES[0], "id": "bad", "radius": 0}]
    files["queries"] = write_queries(files["data"].parent, lines, "with-error.jsonl")
    result = runner.invoke(app, args(files))
    assert result.exit_code == 0, result.output
    assert "noise opendp" in result.stderr and "warning" not in result.stderr
    records = [json.loads(line) for line in files["output"].read_text().splitlines()]
    assert [r["noise"] for r in records] == ["opendp"] * 5  # the error line too
    assert set(records[4]) == ERROR_KEYS


def test_plain_seed_is_refused_with_the_new_flag(files: dict[str, Path]) -> None:
    """--seed used to seed the privacy noise; it is refused before anything is read."""
    result = runner.invoke(app, args(files, "--seed", "3"))
    assert result.exit_code == 1
    one_error_line(result.stderr, "--seed 3", "subtract", "--insecure-seeded-noise 3")
    assert not files["output"].exists()
    assert "--seed" not in runner.invoke(app, ["run", "--help"]).output


def test_every_record_names_the_noise_of_its_method(files: dict[str, Path], seed: int) -> None:
    lines = [QUERIES[0], {**QUERIES[0], "id": "bad", "radius": 0}]
    files["queries"] = write_queries(files["data"].parent, lines, "two.jsonl")
    noise = "--insecure-seeded-noise", str(seed)
    comp = run_ok(files, "--method", "composition", *noise)
    assert [r["noise"] for r in comp] == [f"numpy(seed={seed})"] * 2
    exact = run_ok(files, "--method", "nonprivate", *noise)
    assert [r["noise"] for r in exact] == ["none"] * 2  # exact answers draw no noise


def test_refused_lines_get_an_error_and_the_run_goes_on(tmp_path: Path, seed: int) -> None:
    data, schema = write_data(tmp_path)
    good = QUERIES[0]
    lines = [
        {**good, "id": "unknown", "features": ["age", "height"]},
        {**good, "id": "radius", "radius": 0},
        {**good, "id": "negative", "radius": -1.0},
        {**good, "id": "typed", "intercept": "no"},
        {**good, "id": "loss", "loss": "magic"},
        {**good, "id": "extra", "weights": [1]},
        {k: v for k, v in good.items() if k != "id"},
        "",  # blank lines are skipped
        good,
        {**good, "id": "q1", "features": ["sex"]},  # duplicate id
    ]
    queries = write_queries(tmp_path, lines)
    out = tmp_path / "out.jsonl"
    files = {"data": data, "schema": schema, "queries": queries, "output": out}
    records = run_ok(files, "--insecure-seeded-noise", str(seed))
    assert len(records) == 9
    errors = {r["id"]: r["error"] for r in records if "error" in r}
    assert "'height'" in errors["unknown"]
    assert "radius" in errors["radius"] and "radius" in errors["negative"]
    assert "intercept" in errors["typed"] and "magic" in errors["loss"]
    assert "weights" in errors["extra"] and "id" in errors[None]
    assert all(set(r) == ERROR_KEYS for r in records if "error" in r)
    check_answer(records[7], good, {"hypothesis", "oracle"})
    assert records[8] == {"id": "q1", "error": records[8]["error"], "noise": f"numpy(seed={seed})"}
    assert "duplicate" in records[8]["error"]


@pytest.mark.parametrize(
    ("change", "needles"),
    [
        ({"data": "missing.csv"}, ["data file not found"]),
        ({"schema": "missing.json"}, ["schema file not found"]),
        ({"queries": "missing.jsonl"}, ["queries file not found"]),
        ({"output": "nodir/out.jsonl"}, ["does not exist"]),
    ],
)
def test_missing_files_are_fatal(files: dict[str, Path], change: dict, needles: list) -> None:
    for key, name in change.items():
        files[key] = files["data"].parent / name
    result = runner.invoke(app, args(files))
    assert result.exit_code == 1
    one_error_line(result.stderr, *needles)
    assert not (files["data"].parent / "answers.jsonl").exists()


@pytest.mark.parametrize(
    ("epsilon", "delta", "needle"),
    [("0", "1e-6", "--epsilon"), ("-1", "1e-6", "--epsilon"), ("inf", "1e-6", "--epsilon"),
     ("1", "0", "--delta"), ("1", "1", "--delta"), ("1", "1.5", "--delta")],
)  # fmt: skip
def test_bad_budget_is_fatal(files: dict[str, Path], epsilon: str, delta: str, needle: str) -> None:
    result = runner.invoke(app, args(files, epsilon=epsilon, delta=delta))
    assert result.exit_code == 1
    one_error_line(result.stderr, needle)
    assert not files["output"].exists()


@pytest.mark.parametrize(
    ("line", "needle"),
    [("{not json", "line 2 is not valid JSON"), ("[1, 2]", "line 2 must be a JSON object")],
)
def test_a_line_that_is_not_a_json_object_is_fatal(
    files: dict[str, Path], line: str, needle: str
) -> None:
    files["queries"] = write_queries(files["data"].parent, [QUERIES[0], line], "bad.jsonl")
    files["output"].write_text("previous\n")
    result = runner.invoke(app, args(files))
    assert result.exit_code == 1
    one_error_line(result.stderr, needle)
    assert files["output"].read_text() == "previous\n"  # untouched


def test_csv_not_matching_the_schema_is_fatal(files: dict[str, Path]) -> None:
    text = files["data"].read_text().replace("female", "f", 1)
    files["data"].write_text(text)
    result = runner.invoke(app, args(files))
    assert result.exit_code == 1
    one_error_line(result.stderr, "column 'sex'", "1 row")  # counted, never quoted
    files["data"].write_text("age,sex\n30,male\n")
    result = runner.invoke(app, args(files))
    one_error_line(result.stderr, "column 'smoker'")
    assert not files["output"].exists()


@pytest.mark.parametrize(
    ("option", "value"),
    [("--method", "magic"), ("--after-halt", "maybe"), ("--max-updates", "0"), ("--prior", "x")],
)
def test_bad_choices_are_fatal(files: dict[str, Path], option: str, value: str) -> None:
    result = runner.invoke(app, args(files, option, value))
    assert result.exit_code == 1
    one_error_line(result.stderr, option)


def test_empty_query_file_writes_an_empty_answer_file(files: dict[str, Path]) -> None:
    files["queries"].write_text("\n")
    assert run_ok(files) == []


def test_composition_splits_the_budget_over_distinct_valid_queries(
    files: dict[str, Path], seed: int
) -> None:
    lines = [*QUERIES, {**QUERIES[0], "id": "again"}, {**QUERIES[0], "id": "bad", "radius": 0}]
    files["queries"] = write_queries(files["data"].parent, lines, "comp.jsonl")
    records = run_ok(
        files, "--method", "composition", "--insecure-seeded-noise", str(seed), epsilon="2"
    )
    for record, query in zip(records[:5], lines, strict=False):
        check_answer(record, query, {"composition"})
        assert record["updates"] == 0
    assert records[4]["theta"] == records[0]["theta"]  # a repeat: no new noise, no cost
    assert 1.99 < records[3]["epsilon_spent"] <= 2.0  # all spent on the 4 distinct queries
    assert records[4]["epsilon_spent"] == records[3]["epsilon_spent"]
    assert set(records[5]) == ERROR_KEYS


def test_nonprivate_gives_exact_answers_and_no_privacy_claim(files: dict[str, Path]) -> None:
    result = runner.invoke(app, args(files, "--method", "nonprivate"))
    assert result.exit_code == 0, result.output
    assert "NOT differentially private" in result.stderr
    records = [json.loads(line) for line in files["output"].read_text().splitlines()]
    ds = Dataset.from_csv(files["data"], Schema.from_json(files["schema"]))
    exact = NonPrivateBaseline(PrivateData.from_records(ds.domain, ds.records))
    for record, query in zip(records, QUERIES, strict=True):
        check_answer(record, query, {"nonprivate"})
        assert record["epsilon_spent"] is None and record["delta"] is None
        theta = exact.answer(CMQuery.from_dict(query))
        np.testing.assert_allclose(record["theta"], theta, atol=1e-8)


def test_second_listed_value_encodes_plus_one(files: dict[str, Path], tmp_path: Path) -> None:
    """income ~ sex: 'male' (listed second) raises 'high' (second): positive coefficient."""
    query = {"id": "s", "loss": "logistic", "target": "income", "features": ["sex"]}
    files["queries"] = write_queries(tmp_path, [query], "sex.jsonl")
    coef = run_ok(files, "--method", "nonprivate")[0]["theta"][0]
    flipped = json.loads(files["schema"].read_text())
    flipped["attributes"][1]["values"] = ["male", "female"]
    files["schema"].write_text(json.dumps(flipped))
    assert coef > 0.1
    assert run_ok(files, "--method", "nonprivate")[0]["theta"][0] == pytest.approx(-coef)


def test_interactions_add_product_features(files: dict[str, Path], tmp_path: Path) -> None:
    """sex x age (4 bins, one-hot) adds 4 coefficients; a group naming a non-feature is refused."""
    queries = [
        {
            "id": "x",
            "loss": "logistic",
            "target": "income",
            "features": ["sex", "age"],
            "interactions": [["sex", "age"]],
        },
        {
            "id": "bad",
            "loss": "logistic",
            "target": "income",
            "features": ["sex"],
            "interactions": [["sex", "age"]],
        },
    ]
    files["queries"] = write_queries(tmp_path, queries, "interactions.jsonl")
    plain = {**queries[0], "interactions": []}
    answers = run_ok(files, "--method", "nonprivate")
    assert "error" in answers[1] and "['age']" in answers[1]["error"]
    files["queries"] = write_queries(tmp_path, [plain], "plain.jsonl")
    assert len(answers[0]["theta"]) == len(run_ok(files, "--method", "nonprivate")[0]["theta"]) + 4


def _halting_queries(tmp_path: Path) -> Path:
    return write_queries(
        tmp_path,
        [
            QUERIES[0],
            {"id": "other", "loss": "logistic", "target": "income", "features": ["sex"]},
            {**QUERIES[0], "id": "repeat"},
        ],
        "halt.jsonl",
    )


def test_after_halt_refuse_and_synthetic(tmp_path: Path, seed: int) -> None:
    """From the uniform start with T = 1 the first query updates, then the engine halts.

    On 2,000 rows the first query's error under the uniform hypothesis is 0.136,
    i.e. 68 sensitivity units (2 S / n = 0.002); at epsilon = 10 the sparse
    vector's threshold is 1.2 units and its noise scales are about 1 unit, so
    the first query crosses for every seed (failure probability < 1e-20).
    """
    data, schema = write_data(tmp_path, rows=2000)
    files = {"data": data, "schema": schema, "output": tmp_path / "out.jsonl"}
    files["queries"] = _halting_queries(tmp_path)
    # --mode hybrid: at eps = 10, two announced queries on 2,000 rows go to composition mode.
    common = ("--prior", "uniform", "--max-updates", "1", "--insecure-seeded-noise", str(seed),
              "--mode", "hybrid", "--update", "oracle")  # fmt: skip
    refused = run_ok(files, *common, "--after-halt", "refuse", epsilon="10")
    assert refused[0]["source"] == "oracle" and refused[0]["updates"] == 1
    assert set(refused[1]) == ERROR_KEYS and "--after-halt synthetic" in refused[1]["error"]
    assert refused[2]["theta"] == refused[0]["theta"]  # a released answer is still served
    default = run_ok(files, *common, epsilon="10", status=3)  # 3: some answers are synthetic
    assert [r["source"] for r in default] == ["oracle", "synthetic", "oracle"]
    assert "NO accuracy check" in default[1]["warning"] and "warning" not in default[0]
    assert default[1]["epsilon_spent"] == default[0]["epsilon_spent"]  # synthetic is free


def test_mode_announces_the_files_queries_and_says_which_engine_answered(
    tmp_path: Path, seed: int
) -> None:
    """The file's distinct queries are announced (public): with --mode auto the budget
    rule answers 2 queries on 2,000 rows at eps = 10 (c = 2,326 >= 1,450) by composition,
    every answer a private fit, as --mode composition does; at eps = 1 (c = 264) and with
    --mode hybrid online PMW answers. stderr and --metadata say which and why; a bad
    --mode is one error line that writes nothing."""
    data, schema = write_data(tmp_path, rows=2000)
    meta = tmp_path / "meta.json"
    files = {"data": data, "schema": schema, "output": tmp_path / "out.jsonl"}
    files["queries"] = _halting_queries(tmp_path)  # two distinct queries and a repeat
    noise = ("--insecure-seeded-noise", str(seed), "--metadata", str(meta))
    runs = {}
    for mode, epsilon in [("auto", "10"), ("composition", "10"), ("auto", "1"), ("hybrid", "10")]:
        result = runner.invoke(app, args(files, *noise, "--mode", mode, epsilon=epsilon))
        assert result.exit_code == 0, result.output
        answers = [json.loads(line) for line in files["output"].read_text().splitlines()]
        runs[mode, epsilon] = (answers, json.loads(meta.read_text())["mode"], result.stderr)
    for key in [("auto", "10"), ("composition", "10")]:
        answers, how, stderr = runs[key]
        assert how.startswith("composition (") and f"mode {how}" in stderr
        assert [a["source"] for a in answers] == ["oracle", "oracle", "oracle"]
        assert answers[2]["theta"] == answers[0]["theta"]  # the repeat is served, not refitted
        assert answers[1]["epsilon_spent"] <= 10.0
    assert runs["auto", "10"][0] == runs["composition", "10"][0]
    assert "c = n sqrt(2 rho* / k) = 2326 >= 1450, k = 2 announced" in runs["auto", "10"][1]
    assert runs["auto", "1"][1].startswith("hybrid (auto: c = n sqrt(2 rho* / k) = 264 < 1450")
    assert runs["hybrid", "10"][1] == "hybrid (asked for)"
    for key in [("auto", "1"), ("hybrid", "10")]:
        # online PMW's measured update (the default on an announced file) paces T = k = 2
        # updates over the 2 distinct queries: each is measured, the repeat is served
        assert [a["source"] for a in runs[key][0]] == ["oracle", "oracle", "oracle"]
        assert runs[key][0][2]["theta"] == runs[key][0][0]["theta"]
    files["output"] = tmp_path / "never.jsonl"
    result = runner.invoke(app, args(files, "--mode", "composed"))
    assert result.exit_code == 1 and not files["output"].exists()
    one_error_line(result.stderr, "--mode", "'composed'", "auto, hybrid, composition")


def test_installed_console_script_runs(files: dict[str, Path], seed: int) -> None:
    """One real process: ``pmwcm run`` as scripts call it."""
    script = Path(sys.executable).with_name("pmwcm")
    assert script.exists(), f"{script} is missing: run `pip install -e .` (make test does)"
    proc = subprocess.run(
        [str(script), *args(files, "--insecure-seeded-noise", str(seed))],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    records = [json.loads(line) for line in files["output"].read_text().splitlines()]
    for record, query in zip(records, QUERIES, strict=True):
        check_answer(record, query, {"hypothesis", "oracle"})
    files["data"] = files["data"].with_name("nope.csv")
    proc = subprocess.run(
        [str(script), *args(files)], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 1 and proc.stdout == ""
    one_error_line(proc.stderr, "data file not found")


def test_public_prior_is_free_and_spends_the_rest_on_the_stream(
    files: dict[str, Path], tmp_path: Path, seed: int
) -> None:
    """--public-prior: no prior line in the spend, so the first answer has spent less."""
    public_dir = tmp_path / "public"
    public_dir.mkdir()
    files_public = dict(files, output=tmp_path / "public.jsonl")
    public_csv, _ = write_data(public_dir, rows=300)  # another sample, same schema
    paid = run_ok(files, "--insecure-seeded-noise", str(seed))
    free = run_ok(
        files_public, "--insecure-seeded-noise", str(seed), "--public-prior", str(public_csv)
    )
    assert len(free) == len(paid) == len(QUERIES)
    # The paid prior's 40% of epsilon is spent before the first answer; the public one costs 0.
    assert free[0]["epsilon_spent"] < paid[0]["epsilon_spent"]
    assert max(r["epsilon_spent"] for r in free) <= 1.0 + 1e-9


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--prior", "public"], "--public-prior"),
        (["--prior", "uniform", "--public-prior", "PUBLIC"], "--prior uniform"),
        (["--public-prior", "MISSING"], "MISSING"),
    ],
)
def test_public_prior_misuse_is_one_error_line(
    files: dict[str, Path], extra: list[str], needle: str
) -> None:
    extra = [str(files["data"]) if e == "PUBLIC" else e for e in extra]
    result = runner.invoke(app, args(files, *extra))
    assert result.exit_code == 1
    one_error_line(result.stderr, needle)
    assert not files["output"].exists()


def _drafted_schema(files: dict[str, Path]) -> Path:
    """The schema ``pmwcm schema --data`` drafts from the private CSV."""
    drafted = files["data"].with_name("draft.json")
    result = runner.invoke(app, ["schema", "--data", str(files["data"]), "-o", str(drafted)])
    assert result.exit_code == 0, result.output
    return drafted


def test_a_drafted_schema_is_refused_unless_accepted(files: dict[str, Path], seed: int) -> None:
    files["schema"] = _drafted_schema(files)
    result = runner.invoke(app, args(files))
    assert result.exit_code == 1
    one_error_line(result.stderr, "drafted from the data", "leak", "--accept-drafted-schema")
    assert not files["output"].exists()
    noise = ("--insecure-seeded-noise", str(seed))
    result = runner.invoke(app, args(files, *noise, "--accept-drafted-schema"))
    assert result.exit_code == 0, result.output
    assert "warning: --schema" in result.stderr and "accepted by --accept-drafted-schema" in (
        result.stderr
    )
    # Reviewed: the marks removed, the schema loads without the flag.
    reviewed = json.loads(files["schema"].read_text())
    reviewed["name"], reviewed["description"] = "reviewed", "value sets from the code book"
    files["schema"].write_text(json.dumps(reviewed))
    assert len(run_ok(files, *noise)) == len(QUERIES)


def test_a_drafted_schema_mark_alone_is_refused(files: dict[str, Path]) -> None:
    schema = {**SCHEMA, "name": "draft"}
    files["schema"].write_text(json.dumps(schema))
    result = runner.invoke(app, args(files))
    assert result.exit_code == 1
    one_error_line(result.stderr, 'its name is "draft"')


def test_a_query_too_costly_to_solve_is_refused_before_anything_is_spent(
    files: dict[str, Path], tmp_path: Path, seed: int
) -> None:
    """A radius whose objective range float64 cannot resolve is refused from its spec.

    The refusal is decided before the data, the budget or the noise is touched:
    the same run without the refused line gives the very same answers.
    """
    costly = {"id": "far", "loss": "logistic", "target": "income", "features": ["sex"],
              "l2": 1.0, "radius": 1e10}  # fmt: skip
    # --update oracle: the measured update paces T = k over the announced distinct queries,
    # and the costly line counts among them (it fits the schema), so k differs by one
    common = ("--prior", "uniform", "--insecure-seeded-noise", str(seed), "--update", "oracle")
    files["queries"] = write_queries(tmp_path, [costly, *QUERIES], "costly.jsonl")
    with_costly = run_ok(files, *common)
    assert set(with_costly[0]) == ERROR_KEYS
    assert with_costly[0]["error"].startswith("refused: ") and "radius" in with_costly[0]["error"]
    files["queries"] = write_queries(tmp_path, QUERIES, "plain.jsonl")
    assert with_costly[1:] == run_ok(files, *common)


def test_an_unexpected_error_on_the_data_side_never_prints_its_message(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pmwcm.engine.online import OnlinePMW

    def leak(self: OnlinePMW, *round_: Any) -> None:  # the round of a new query
        raise ValueError("the data's loss at theta is 0.3141592")

    monkeypatch.setattr(OnlinePMW, "_run", leak)
    result = runner.invoke(app, args(files))
    assert result.exit_code == 1
    one_error_line(result.stderr, "internal error (ValueError)", "'q1'", "nothing was written")
    assert "0.314" not in result.output
    assert not files["output"].exists()
