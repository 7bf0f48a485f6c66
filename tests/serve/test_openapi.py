"""The OpenAPI document describes the server as it is, and the server, fuzzed from it with
schemathesis over real HTTP, answers every generated request without a 5xx, with the status
codes, content types and bodies the document promises."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from graph_agent.serve import create_app
from graph_agent.serve.openapi import openapi_document
from graph_agent.serve.protocols import is_protocol_path
from tests.serve.conftest import Server
from tests.serve.graphs import approval, chain

KEY = "fuzz-key"
ASSISTANTS = ["approval", "chain"]
# a thread's stream never ends on its own (the client leaves): tests/serve/test_join_stream.py
schema = schemathesis.openapi.from_dict(openapi_document(ASSISTANTS)).exclude(
    path="/threads/{thread_id}/stream", method="GET"
)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("fuzz") / "serve.db"
    with Server(db, [chain(), approval()], api_keys=[KEY], max_body_bytes=64 * 1024) as running:
        yield running


def test_the_document_describes_every_route_and_no_other() -> None:
    app = create_app([chain(), approval()])
    served = {
        (method.lower(), route.path)  # type: ignore[attr-defined]
        for route in app.routes
        for method in route.methods or ()  # type: ignore[attr-defined]
        if method != "HEAD"
        and not route.path.startswith("/studio")  # type: ignore[attr-defined]
        and not is_protocol_path(route.path)  # type: ignore[attr-defined]
    }  # the Studio's page and files, /mcp and A2A are not API routes
    described = {
        (method, path)
        for path, operations in openapi_document(ASSISTANTS)["paths"].items()
        for method in operations
    }
    assert served == described


def test_the_server_hands_out_its_document_and_a_page_of_it(fuzzed: Server) -> None:
    document = httpx.get(f"{fuzzed.url}/openapi.json").json()
    assert document["openapi"] == "3.1.0"
    assert (
        document["components"]["schemas"]["RunCreate"]["properties"]["assistant_id"]["enum"]
        == ASSISTANTS
    )
    page = httpx.get(f"{fuzzed.url}/docs")
    assert page.headers["content-type"].startswith("text/html")
    assert "/threads/{thread_id}/runs/wait" in page.text and "<script" not in page.text


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_generated_request_gets_a_5xx(case: schemathesis.Case, fuzzed: Server) -> None:
    case.call_and_validate(
        base_url=fuzzed.url,
        headers={"x-api-key": KEY},
        timeout=10,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
