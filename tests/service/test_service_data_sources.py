"""Sessions on data where it lives: a PostgreSQL table through a named connection, Spark.

Each session is created over HTTP by the curator, answered, the server restarted
(the session reopened from the store: its data is opened again by the connection's
*name*) and answered again; the answers equal a CSV session's on the same rows,
with the same seeded noise. The connection's password never reaches a response,
the log or the state directory's bytes; a bad location is a one-line 422 that
names the bad value and creates nothing.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pmwcm.mechanisms.noise import NumpyNoise
from pmwcm.service import SQLiteStore, bootstrap_curator, create_app
from pmwcm.service.client import Client, ServiceError
from pmwcm.service.connections import Connections
from service.svc_support import BUILD_WAIT, TestClient, curator_token, pmwcm_serve, write_tiny

QUERIES = [
    {"loss": "logistic", "target": "y", "features": ["a"]},
    {"loss": "squared", "target": "y", "features": ["a", "c"]},
    {"loss": "logistic", "target": "y", "features": ["b", "c"]},
]
AFTER_RESTART = {"loss": "logistic", "target": "y", "features": ["a", "b"], "radius": 2.0}


@pytest.fixture
def tiny_table(pg_database: str, tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """The tiny CSV loaded as table ``tiny`` (text columns) of a fresh database: its URL
    (with the test server's password), the CSV and its schema."""
    import psycopg

    data, schema = write_tiny(tmp_path)
    with psycopg.connect(pg_database, autocommit=True) as connection:
        connection.execute("CREATE TABLE tiny (a text, b text, c text, y text)")
        connection.execute("CREATE TABLE no_y (a text, b text, c text)")
        with connection.cursor().copy("COPY tiny FROM STDIN WITH (FORMAT csv, HEADER)") as copy:
            copy.write(data.read_bytes())
    yield pg_database, data, schema


class Server:
    """An in-process app over one state directory, restartable, with seeded noise."""

    def __init__(self, state: Path, data_dir: Path, connections: Connections) -> None:
        self.state, self.data_dir, self.connections = state, data_dir, connections
        store = SQLiteStore(state)
        token = bootstrap_curator(store)
        assert token is not None
        self.curator = token
        store.close()
        self.texts: list[str] = []  # every response body, for the leak checks

    def app(self) -> Any:
        return create_app(
            SQLiteStore(self.state),
            noise_factory=functools.partial(NumpyNoise, seed=7),
            data_dirs=[self.data_dir],
            connections=self.connections,
        )

    def call(self, client: TestClient, method: str, path: str, token: str, **kw: Any) -> Any:
        if (method, path) == ("POST", "/v1/sessions"):  # a creation waits for its build
            kw.setdefault("params", {"wait": BUILD_WAIT})
        response = client.request(method, path, headers={"Authorization": f"Bearer {token}"}, **kw)
        self.texts.append(response.text)
        return response


def create_body(name: str, schema: Path, **location: Any) -> dict[str, Any]:
    return {
        "name": name,
        "schema_path": str(schema),
        "epsilon": 1.0,
        "delta": 1e-6,
        "parameters": {"prior": "uniform", "max_updates": 5},
        **location,
    }


def answer_run(server: Server, schema: Path, **location: Any) -> dict[str, Any]:
    """Creates a session, answers QUERIES, restarts, answers them again and one more."""
    with TestClient(server.app()) as client:
        body = create_body("s", schema, **location)
        created = server.call(client, "POST", "/v1/sessions", server.curator, json=body)
        assert created.status_code == 201, created.text
        issued = server.call(
            client, "POST", "/v1/sessions/s/tokens", server.curator, json={"label": "t"}
        )
        analyst = issued.json()["token"]
        first = []
        for query in QUERIES:
            response = server.call(client, "POST", "/v1/sessions/s/queries", analyst, json=query)
            assert response.status_code == 200, response.text
            first.append(response.json())
    with TestClient(server.app()) as client:  # a restart: the session is rebuilt from the store
        again = [
            server.call(client, "POST", "/v1/sessions/s/queries", analyst, json=q).json()
            for q in QUERIES
        ]
        fresh = server.call(client, "POST", "/v1/sessions/s/queries", analyst, json=AFTER_RESTART)
        assert fresh.status_code == 200, fresh.text
        status = server.call(client, "GET", "/v1/sessions/s", server.curator).json()
        listed = server.call(client, "GET", "/v1/sessions", server.curator).json()
    assert [a["theta"] for a in again] == [a["theta"] for a in first]
    assert all(a["repeated"] for a in again)
    return {
        "created": created.json(),
        "listed": listed,
        "thetas": [a["theta"] for a in first] + [fresh.json()["theta"]],
        "status": status,
    }


def test_a_postgres_session_answers_as_the_csv_does_and_leaks_no_password(
    tiny_table: tuple[str, Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url, data, schema = tiny_table
    password = urlsplit(url).password
    assert password and len(password) >= 16
    caplog.set_level(logging.DEBUG)
    connections = Connections({"warehouse": url})
    server = Server(tmp_path / "state", tmp_path, connections)
    on_postgres = answer_run(server, schema, connection="warehouse", table="tiny")
    in_memory = answer_run(Server(tmp_path / "csv-state", tmp_path, Connections()), schema,
                           data_path=str(data))  # fmt: skip
    assert on_postgres["thetas"] == in_memory["thetas"]
    assert on_postgres["status"]["epsilon_spent"] == in_memory["status"]["epsilon_spent"]
    assert on_postgres["created"]["connection"] == "warehouse"
    assert on_postgres["created"]["table"] == "tiny"
    assert on_postgres["created"]["data_path"] is None
    # The Python client names a connection too; bad locations are answered on the same
    # server (their messages are checked below as well).
    with TestClient(server.app()) as client:
        curator = Client("http://testserver", server.curator, http=client)
        made = curator.create_session("by-client", connection="warehouse", table="tiny",
                                      schema_path=str(schema), epsilon=1.0, delta=1e-6)  # fmt: skip
        server.texts.append(json.dumps(made))
        assert made["connection"] == "warehouse" and made["data_path"] is None
        for location in (
            {"connection": "nope", "table": "tiny"},
            {"connection": "warehouse", "table": "missing"},
            {"data_path": url},
        ):
            body = create_body("bad", schema, **location)
            server.call(client, "POST", "/v1/sessions", server.curator, json=body)
    stored = b"".join(p.read_bytes() for p in sorted(server.state.rglob("*")) if p.is_file())
    assert b"warehouse" in stored  # the session names its connection ...
    for secret in (password, url):  # ... and nothing holds the password
        assert secret.encode() not in stored
        assert not [t for t in server.texts if secret in t]
        assert not [r for r in caplog.records if secret in r.getMessage()]
    assert repr(connections) == "Connections(['warehouse'])" and password not in str(connections)


def test_spark_sessions_on_a_parquet_path_and_a_table_answer_as_the_csv_does(
    spark: Any, tmp_path: Path
) -> None:
    import duckdb

    data, schema = write_tiny(tmp_path)
    parquet = tmp_path / "tiny.parquet"
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{data}', all_varchar = true)) TO '{parquet}'")
    spark.read.parquet(str(parquet)).createOrReplaceTempView("tiny_spark")
    allowed = Connections(spark=True)  # pmwcm serve --spark
    runs = {
        "csv": answer_run(Server(tmp_path / "s0", tmp_path, allowed), schema,
                          data_path=str(data)),
        "path": answer_run(Server(tmp_path / "s1", tmp_path, allowed), schema,
                           engine="spark", data_path=str(parquet)),
        "table": answer_run(Server(tmp_path / "s2", tmp_path, allowed), schema,
                            engine="spark", table="tiny_spark"),
    }  # fmt: skip
    assert runs["path"]["thetas"] == runs["csv"]["thetas"] == runs["table"]["thetas"]
    assert runs["path"]["created"]["data_path"] == "tiny.parquet"  # relative, never absolute
    assert runs["table"]["listed"][0]["engine"] == "spark"
    assert str(tmp_path) not in json.dumps(runs["path"]["listed"])


def one_line_422(response: Any) -> str:
    assert response.status_code == 422, response.text
    message = str(response.json()["detail"][0]["msg"])
    assert "\n" not in message
    return message


def test_bad_locations_are_one_line_422s_that_create_nothing(
    tiny_table: tuple[str, Path, Path], tmp_path: Path, spark: Any
) -> None:
    url, data, schema = tiny_table
    password = urlsplit(url).password
    assert password
    wrong = url.replace(password, "not-the-password")
    connections = Connections({"warehouse": url, "locked": wrong}, spark=True)
    server = Server(tmp_path / "state", tmp_path, connections)
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({"connection": "nope", "table": "tiny"}, ["'nope'", "'locked'", "'warehouse'"]),
        ({"connection": "warehouse", "table": "missing"}, ["'missing'", "'warehouse'"]),
        ({"connection": "warehouse", "table": "no_y"}, ["'y'", "no_y"]),
        ({"connection": "warehouse"}, ["needs table"]),
        ({"connection": "warehouse", "table": "tiny", "data_path": str(data)}, ["data_path"]),
        ({"connection": "locked", "table": "tiny"}, ["'locked'", "OperationalError"]),
        ({"data_path": url}, ["postgresql://", "connection"]),
        ({"data_path": "mysql://root:hunter2@db/x"}, ["mysql://"]),
        ({"table": "tiny"}, ["'tiny'", "connection"]),
        ({"engine": "spark"}, ["spark", "data_path", "table"]),
        ({"engine": "spark", "table": "no_such_view"}, ["no_such_view"]),
        ({}, ["data_path", "connection"]),
    ]
    off = Server(tmp_path / "off", tmp_path, Connections({"warehouse": url}))
    with TestClient(off.app()) as client:  # Spark is the operator's choice (pmwcm serve --spark)
        body = create_body("s", schema, engine="spark", table="tiny")
        message = one_line_422(off.call(client, "POST", "/v1/sessions", off.curator, json=body))
        assert "engine 'spark' is not enabled" in message and "--spark" in message
    with TestClient(server.app()) as client:
        for location, named in cases:
            body = create_body("s", schema, **location)
            message = one_line_422(
                server.call(client, "POST", "/v1/sessions", server.curator, json=body)
            )
            for word in named:
                assert word in message, (location, message)
            for secret in (password, "hunter2", str(tmp_path), "127.0.0.1"):
                assert secret not in message, (location, message)
        assert server.call(client, "GET", "/v1/sessions", server.curator).json() == []
        body = create_body("s", schema, connection="warehouse", table="tiny")  # nothing was spent
        created = server.call(client, "POST", "/v1/sessions", server.curator, json=body)
        assert created.status_code == 201, created.text
        status = server.call(client, "GET", "/v1/sessions/s", server.curator).json()
        assert status["epsilon_spent"] == 0.0 and status["answered"] == 0


def test_a_session_whose_connection_is_gone_after_a_restart_is_a_503_without_detail(
    tiny_table: tuple[str, Path, Path], tmp_path: Path
) -> None:
    url, _, schema = tiny_table
    server = Server(tmp_path / "state", tmp_path, Connections({"warehouse": url}))
    with TestClient(server.app()) as client:
        body = create_body("s", schema, connection="warehouse", table="tiny")
        created = server.call(client, "POST", "/v1/sessions", server.curator, json=body)
        assert created.status_code == 201, created.text
        token = server.call(
            client, "POST", "/v1/sessions/s/tokens", server.curator, json={}
        ).json()["token"]
    server.connections = Connections()  # restarted without --connections
    with TestClient(server.app()) as client:
        response = server.call(client, "POST", "/v1/sessions/s/queries", token, json=QUERIES[0])
        assert response.status_code == 503
        assert "cannot be opened" in response.json()["detail"]
        assert "warehouse" not in response.text and "tiny" not in response.text


def test_a_table_holding_other_records_after_a_restart_is_a_503_and_charges_nothing(
    tiny_table: tuple[str, Path, Path], tmp_path: Path
) -> None:
    """Rows swapped for others (n unchanged) while the server was down: the reopened
    session refuses every query, names no data, and spends nothing more."""
    import psycopg

    url, _, schema = tiny_table
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CREATE TABLE tiny_copy AS SELECT * FROM tiny")
    server = Server(tmp_path / "state", tmp_path, Connections({"warehouse": url}))
    with TestClient(server.app()) as client:
        body = create_body("s", schema, connection="warehouse", table="tiny_copy")
        created = server.call(client, "POST", "/v1/sessions", server.curator, json=body)
        assert created.status_code == 201, created.text
        token = server.call(
            client, "POST", "/v1/sessions/s/tokens", server.curator, json={}
        ).json()["token"]
        answered = server.call(client, "POST", "/v1/sessions/s/queries", token, json=QUERIES[0])
        assert answered.status_code == 200, answered.text
        spent = server.call(client, "GET", "/v1/sessions/s", server.curator).json()
    with psycopg.connect(url, autocommit=True) as connection:  # as many rows, other records
        connection.execute("UPDATE tiny_copy SET y = CASE WHEN y = 'yes' THEN 'no' ELSE 'yes' END")
    with TestClient(server.app()) as client:
        for query in QUERIES:
            response = server.call(client, "POST", "/v1/sessions/s/queries", token, json=query)
            assert response.status_code == 503, response.text
            assert "cannot continue on other data" in response.json()["detail"]
            assert "tiny" not in response.text
    with psycopg.connect(url, autocommit=True) as connection:  # the data as it was
        connection.execute("UPDATE tiny_copy SET y = CASE WHEN y = 'yes' THEN 'no' ELSE 'yes' END")
    with TestClient(server.app()) as client:
        status = server.call(client, "GET", "/v1/sessions/s", server.curator).json()
        assert status["epsilon_spent"] == spent["epsilon_spent"]
        again = server.call(client, "POST", "/v1/sessions/s/queries", token, json=QUERIES[0])
        assert again.status_code == 200 and again.json()["repeated"]


def test_connections_name_their_errors_without_the_url(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="connection 'x' must be a postgresql:// URL") as err:
        Connections({"x": "mysql://root:hunter2@db/x"})
    assert "hunter2" not in str(err.value)
    with pytest.raises(ValueError, match="connection name"):
        Connections({"bad name": "postgresql://db/x"})
    path = tmp_path / "connections.json"
    path.write_text('{"w": "postgresql://u:hunter2@db/x", ', encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON") as err:
        Connections.from_file(path)
    assert "hunter2" not in str(err.value)
    path.write_text(json.dumps({"w": "postgresql://u:hunter2@db/x"}), encoding="utf-8")
    assert Connections.from_file(path).names == ("w",)
    with pytest.raises(ValueError, match="'v' is not configured on this server; it has 'w'"):
        Connections.from_file(path).url("v")


def _spark_refusal(admin: Client, schema: Path) -> str:
    """What the server says to a Spark session on a path outside its data directories:
    that the path is not allowed (Spark enabled) or that Spark is not (disabled). Neither
    starts Spark."""
    with pytest.raises(ServiceError) as refused:
        admin.create_session("on-spark", engine="spark", data_path="/nowhere.parquet",
                             schema_path=str(schema), epsilon=1.0, delta=1e-6)  # fmt: skip
    assert refused.value.status == 422
    return refused.value.detail


def test_serve_takes_named_connections_from_a_file_or_the_environment(
    tiny_table: tuple[str, Path, Path], tmp_path: Path
) -> None:
    """``pmwcm serve --connections FILE`` (or ``PMWCM_CONNECTIONS``) reaches the sessions of
    the real server; a bad file fails at start in one line that shows no URL."""
    from typer.testing import CliRunner

    from pmwcm.cli import app as cli

    url, _, schema = tiny_table
    password = urlsplit(url).password
    assert password
    good = tmp_path / "connections.json"
    good.write_text(json.dumps({"warehouse": url}), encoding="utf-8")
    good.chmod(0o600)
    log = tmp_path / "serve.log"
    here = ["--data-dir", str(tmp_path)]  # the schema files
    started = [
        (["--state", str(tmp_path / "state"), *here, "--connections", str(good), "--spark"], None),
        (["--state", str(tmp_path / "state2"), *here], {"PMWCM_CONNECTIONS": str(good)}),
    ]
    for args, env in started:
        if env:
            good.chmod(0o644)
        with pmwcm_serve(args, log, env=env) as (base, lines):
            token = curator_token(lines)
            assert token is not None
            with Client(base, token) as admin:
                made = admin.create_session("on-pg", connection="warehouse", table="tiny",
                                            schema_path=str(schema), epsilon=1.0,
                                            delta=1e-6)  # fmt: skip
                assert made["connection"] == "warehouse"
                refusal = _spark_refusal(admin, schema)
        assert ("data directories" in refusal) is (env is None)  # --spark enabled it
        assert ("not enabled" in refusal) is (env is not None)
    text = log.read_text()
    assert password not in text and url not in text
    assert text.count("readable by other users") == 1  # the second start only
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"warehouse": "mysql://u:hunter2@db/x"}), encoding="utf-8")
    state = ["serve", "--state", str(tmp_path / "state3")]
    result = CliRunner().invoke(cli, [*state, "--connections", str(bad)])  # fails before serving
    assert result.exit_code == 1
    assert result.stderr == (
        "error: --connections: connection 'warehouse' must be a postgresql:// URL "
        "(its value is not shown).\n"
    )


def test_serve_starts_a_session_on_a_named_connection(
    tiny_table: tuple[str, Path, Path], tmp_path: Path
) -> None:
    """``pmwcm serve --connection NAME --table T`` makes the start session on the table (and
    checks it at the next start); an unknown name fails in one line."""
    from typer.testing import CliRunner

    from pmwcm.cli import app as cli

    url, _, schema = tiny_table
    password = urlsplit(url).password
    assert password
    conns = tmp_path / "connections.json"
    conns.write_text(json.dumps({"warehouse": url}), encoding="utf-8")
    conns.chmod(0o600)
    budget = ["--schema", str(schema), "--epsilon", "1", "--delta", "1e-6"]
    args = ["--state", str(tmp_path / "state"), "--connections", str(conns),
            "--connection", "warehouse", "--table", "tiny", *budget]  # fmt: skip
    log = tmp_path / "serve.log"
    token = None
    for attempt in range(2):  # created, then checked unchanged
        with pmwcm_serve(args, log) as (base, lines):
            token = token or curator_token(lines)
            assert token is not None
            with Client(base, token) as admin:
                (session,) = [s for s in admin.sessions() if s["name"] == "default"]
                analyst = admin.issue_token("default", label=f"start {attempt}")
            with Client(base, analyst) as client:
                answer = client.ask("default", QUERIES[0])
        assert (session["connection"], session["table"]) == ("warehouse", "tiny")
        assert answer.repeated is bool(attempt)  # the same session, reopened
    text = log.read_text()
    assert text.count("created session") == 1  # the second start only checked it
    assert password not in text and url not in text
    args = ["serve", "--state", str(tmp_path / "other"), "--connections", str(conns),
            "--connection", "nope", "--table", "tiny", *budget]  # fmt: skip
    result = CliRunner().invoke(cli, args)  # fails before serving
    assert result.exit_code == 1
    assert result.stderr == (
        "error: connection 'nope' is not configured on this server; it has 'warehouse'.\n"
    )
