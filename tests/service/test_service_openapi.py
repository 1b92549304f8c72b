"""The OpenAPI document stays what clients were built against.

The table below was taken from main's app before its routes were split into one
router per resource (issue 34 item 6): every operation's method, path, operation id,
tags and documented status codes, in the order the document lists them, and every
schema it names. A route renamed, moved, dropped or added, or a status code lost,
fails here (the operation id is FastAPI's, from the function's name and path).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pmwcm.service import SQLiteStore, create_app

_COMMON = ("400", "401", "403")
_SESSION = (*_COMMON, "404", "422", "503")

#: (method, path, operation id, tags, documented status codes), in the document's order.
OPERATIONS: list[tuple[str, str, str, tuple[str, ...], tuple[str, ...]]] = [
    ("get", "/health", "health_health_get", ("meta",), ("200",)),
    ("get", "/v1/me", "me_v1_me_get", ("meta",), ("200", *_COMMON)),
    ("get", "/v1/sessions/{name}", "session_status_v1_sessions__name__get", ("analyst",),
     ("200", *_SESSION)),
    ("post", "/v1/sessions/{name}/queries", "ask_v1_sessions__name__queries_post", ("analyst",),
     ("200", *_SESSION, "409", "413")),
    ("post", "/v1/sessions", "create_session_v1_sessions_post", ("curator",),
     ("201", "202", *_COMMON, "409", "413", "422")),
    ("get", "/v1/sessions", "list_sessions_v1_sessions_get", ("curator",), ("200", *_COMMON)),
    ("get", "/v1/sessions/{name}/build", "build_status_v1_sessions__name__build_get",
     ("curator",), ("200", *_COMMON, "404", "422")),
    ("delete", "/v1/sessions/{name}/build", "cancel_build_v1_sessions__name__build_delete",
     ("curator",), ("200", *_COMMON, "404", "409", "422")),
    ("get", "/v1/sessions/{name}/ledger", "ledger_v1_sessions__name__ledger_get", ("curator",),
     ("200", *_SESSION)),
    ("get", "/v1/sessions/{name}/answers", "answers_v1_sessions__name__answers_get",
     ("curator",), ("200", *_SESSION)),
    ("post", "/v1/sessions/{name}/tokens", "issue_token_v1_sessions__name__tokens_post",
     ("curator",), ("201", *_SESSION, "413")),
    ("get", "/v1/sessions/{name}/tokens", "list_tokens_v1_sessions__name__tokens_get",
     ("curator",), ("200", *_SESSION)),
    ("delete", "/v1/tokens/{token_id}", "revoke_token_v1_tokens__token_id__delete", ("curator",),
     ("204", *_COMMON, "404", "422")),
    ("get", "/v1/sessions/{name}/schema", "session_schema_v1_sessions__name__schema_get",
     ("analyst",), ("200", *_SESSION)),
    ("get", "/v1/sessions/{name}/my-answers", "my_answers_v1_sessions__name__my_answers_get",
     ("analyst",), ("200", *_SESSION)),
    ("post", "/v1/console/plan", "plan_v1_console_plan_post", ("curator",),
     ("200", *_COMMON, "422")),
    ("get", "/v1/console/refusals", "refusals_v1_console_refusals_get", ("curator",),
     ("200", *_COMMON, "422")),
    ("get", "/v1/console/audit", "audit_v1_console_audit_get", ("curator",),
     ("200", *_COMMON)),
]  # fmt: skip

SCHEMAS = {
    "AnswerOut", "AttributeOut", "AuditOut", "AuditTableOut", "BuildOut", "ErrorOut",
    "HTTPValidationError", "IssuedToken", "LedgerEntryOut", "LedgerOut", "MeOut",
    "MyAnswerOut", "PlanOut", "RefusalOut", "ReleaseOut", "SchemaOut", "SessionCreate",
    "SessionOut", "SessionParameters", "StatusOut", "TokenCreate", "TokenOut",
    "ValidationError",
}  # fmt: skip


def _document(tmp_path: Path) -> dict[str, Any]:
    app = create_app(SQLiteStore(tmp_path / "state"))
    return app.openapi()


def test_the_operations_are_main_s_in_order(tmp_path: Path) -> None:
    paths = _document(tmp_path)["paths"]
    operations = [
        (method, path, op["operationId"], tuple(op["tags"]), tuple(sorted(op["responses"])))
        for path, ops in paths.items()
        for method, op in ops.items()
    ]
    expected = [(m, p, o, t, tuple(sorted(c))) for m, p, o, t, c in OPERATIONS]
    assert operations == expected


def test_the_schemas_and_the_security_scheme_are_main_s(tmp_path: Path) -> None:
    components = _document(tmp_path)["components"]
    assert set(components["schemas"]) == SCHEMAS
    assert components["securitySchemes"] == {
        "HTTPBearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "A curator or analyst token.",
        }
    }


def test_every_v1_operation_needs_the_bearer_token(tmp_path: Path) -> None:
    paths = _document(tmp_path)["paths"]
    for path, ops in paths.items():
        for op in ops.values():
            secured = op.get("security") == [{"HTTPBearer": []}]
            assert secured == path.startswith("/v1"), path
