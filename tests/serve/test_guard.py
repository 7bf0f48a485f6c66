"""Web pages are kept off the server: a keyless one answers only to its own host names, every
server refuses pages of other origins but the listed ones (which get CORS), and a JSON body
must say it is JSON. Raw httpx requests set the headers a browser or an attacker would."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import httpx
import pytest
from langgraph_sdk import get_sync_client
from starlette.applications import Starlette
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from graph_agent.serve import create_app
from tests.serve.conftest import Server
from tests.serve.graphs import chain, slow

KEY = "guard-key"
LISTED = "http://localhost:3000"
EVIL = "https://evil.example"
JSON = {"content-type": "application/json"}
RUN = b'{"assistant_id": "chain", "input": {"x": 1}}'


@pytest.fixture(scope="module")
def keyless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("keyless") / "serve.db"
    with Server(db, [chain(), slow()], cors_origins=[LISTED]) as running:
        yield running


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("keyed") / "serve.db"
    with Server(db, [chain()], api_keys=[KEY], cors_origins=[LISTED]) as running:
        yield running


def _new_thread(server: Server, headers: dict[str, str] | None = None) -> str:
    answer = httpx.post(f"{server.url}/threads", json={}, headers=headers)
    return str(answer.json()["thread_id"])


def _runs_of(server: Server, thread_id: str, headers: dict[str, str] | None = None) -> list[object]:
    runs = httpx.get(f"{server.url}/threads/{thread_id}/runs", headers=headers).json()
    assert isinstance(runs, list)
    return runs


def _app(**options: object) -> Starlette:
    return create_app([chain()], **options)  # type: ignore[arg-type]


def _through(app: Starlette, headers: dict[str, str]) -> httpx.Response:
    """``GET /assistants/chain`` sent to ``app`` itself (no server in between)."""
    transport = httpx.ASGITransport(app=app)

    async def call() -> httpx.Response:
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.get("/assistants/chain", headers=headers)

    return asyncio.run(call())


def _status_through(app: Starlette, host: str) -> int:
    return _through(app, {"host": host}).status_code


# --- Content-Type ---------------------------------------------------------------------------


def test_a_cross_site_text_plain_run_on_a_keyless_server_is_refused_and_never_runs(
    keyless: Server,
) -> None:
    thread_id = _new_thread(keyless)
    answer = httpx.post(
        f"{keyless.url}/threads/{thread_id}/runs/wait",
        content=RUN,
        headers={"content-type": "text/plain", "origin": EVIL},
    )
    assert answer.status_code == 403
    assert answer.json()["code"] == "origin_not_allowed"
    assert f"--cors-origin {EVIL}" in answer.json()["detail"]
    assert "access-control-allow-origin" not in answer.headers
    assert _runs_of(keyless, thread_id) == []


def test_a_text_plain_body_is_a_415_saying_to_send_json_and_runs_nothing(keyless: Server) -> None:
    thread_id = _new_thread(keyless)
    answer = httpx.post(
        f"{keyless.url}/threads/{thread_id}/runs/wait",
        content=RUN,
        headers={"content-type": "text/plain"},
    )
    assert answer.status_code == 415
    assert answer.json()["code"] == "unsupported_media_type"
    assert "Content-Type: application/json" in answer.json()["detail"]
    assert "'text/plain'" in answer.json()["detail"]
    assert _runs_of(keyless, thread_id) == []


def test_a_json_body_without_any_content_type_is_a_415_too(keyless: Server) -> None:
    answer = httpx.post(f"{keyless.url}/runs/wait", content=RUN)
    assert answer.status_code == 415
    assert "no Content-Type" in answer.json()["detail"]


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/vnd.run+json",
    ],
)
def test_json_and_its_variants_are_taken(keyless: Server, content_type: str) -> None:
    answer = httpx.post(
        f"{keyless.url}/runs/wait", content=RUN, headers={"content-type": content_type}
    )
    assert answer.status_code == 200
    assert answer.json() == {"x": 12}


def test_an_empty_post_without_a_content_type_still_works(keyless: Server) -> None:
    answer = httpx.post(f"{keyless.url}/threads")
    assert answer.status_code == 200
    assert answer.json()["thread_id"]


def test_the_sdks_body_less_posts_copy_and_cancel_still_work(keyless: Server) -> None:
    client = get_sync_client(url=keyless.url)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "chain", input={"x": 1})
    copied = client.threads.copy(thread_id)  # a POST without a body or a Content-Type
    assert copied["thread_id"] != thread_id
    run = client.runs.create(thread_id, "slow", input={})
    client.runs.cancel(thread_id, run["run_id"], wait=True)  # the same
    assert client.runs.get(thread_id, run["run_id"])["status"] in ("interrupted", "success")


# --- Host -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "localhost", "LocalHost:1"]
)
def test_a_keyless_server_answers_to_its_loopback_names_on_any_port(
    keyless: Server, host: str
) -> None:
    answer = httpx.get(
        f"{keyless.url}/assistants/chain", headers={"host": host.format(port=keyless.port)}
    )
    assert answer.status_code == 200


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "127.0.0.2:{port}", "localhost.evil.example"]
)
def test_a_keyless_server_refuses_any_other_host_naming_it_and_the_option(
    keyless: Server, host: str
) -> None:
    sent = host.format(port=keyless.port)
    answer = httpx.get(f"{keyless.url}/assistants/chain", headers={"host": sent})
    assert answer.status_code == 403
    assert answer.json()["code"] == "host_not_allowed"
    name = sent.rpartition(":")[0] if ":" in sent else sent
    assert repr(name) in answer.json()["detail"]
    assert f"--allow-host {name}" in answer.json()["detail"]


def test_a_rebound_host_cannot_read_threads_either(keyless: Server) -> None:
    answer = httpx.post(
        f"{keyless.url}/threads/search", json={}, headers={"host": f"evil.example:{keyless.port}"}
    )
    assert answer.status_code == 403


def test_a_request_without_any_host_header_is_no_browsers_and_is_answered(keyless: Server) -> None:
    with socket.create_connection(("127.0.0.1", keyless.port), timeout=10) as sock:
        sock.sendall(b"GET /ok HTTP/1.0\r\n\r\n")
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200")


def test_with_keys_any_host_is_answered_and_the_key_still_checked(keyed: Server) -> None:
    rebound = {"host": f"evil.example:{keyed.port}"}
    assert httpx.get(f"{keyed.url}/assistants/chain", headers=rebound).status_code == 401
    with_key = {**rebound, "x-api-key": KEY}
    assert httpx.get(f"{keyed.url}/assistants/chain", headers=with_key).status_code == 200


def test_the_bound_address_and_the_allowed_hosts_are_answered_through_the_app() -> None:
    app = _app(bound_host="0.0.0.0", allow_hosts=["agents.example", "Box.Local:8123"])
    assert _status_through(app, "0.0.0.0:8123") == 200
    assert _status_through(app, "agents.example") == 200
    assert _status_through(app, "agents.example:443") == 200
    assert _status_through(app, "box.local:9") == 200
    assert _status_through(app, "other.example") == 403
    assert _status_through(app, "10.0.0.5:8123") == 403


def test_an_app_made_without_a_bound_host_answers_only_to_loopback_names() -> None:
    app = _app()
    assert _status_through(app, "localhost:8123") == 200
    assert _status_through(app, "testserver") == 403


def test_allow_host_star_answers_any_host_when_told_the_server_is_insecure() -> None:
    app = _app(allow_hosts=["*"], insecure_no_auth=True)
    assert _status_through(app, "anything.example") == 200


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"allow_hosts": ["*"]}, "--allow-host *"),
        ({"cors_origins": ["*"]}, "--cors-origin *"),
        ({"allow_hosts": ["a.example", " * "], "cors_origins": [LISTED]}, "--allow-host *"),
    ],
)
def test_star_without_keys_is_refused_saying_why_and_what_to_do(
    options: dict[str, list[str]], named: str
) -> None:
    """A rebinding page's Origin is its own Host, and a page anywhere may call a server of
    this machine: ``*`` would let both in."""
    with pytest.raises(ValueError, match="on a server without API keys") as refused:
        _app(**options)
    message = str(refused.value)
    assert named in message
    assert "--api-key" in message and "--insecure-no-auth" in message
    assert "insecure_no_auth=True" in message


def test_star_with_keys_needs_no_insecure_flag() -> None:
    app = _app(api_keys=[KEY], cors_origins=["*"], allow_hosts=["*"])
    answer = _through(app, {"origin": EVIL, "x-api-key": KEY})
    assert answer.status_code == 200


def test_a_host_with_more_than_a_port_after_its_brackets_names_no_host() -> None:
    app = _app()
    assert _status_through(app, "[::1]:8123") == 200
    assert _status_through(app, "[::1]") == 200
    assert _status_through(app, "[::1]evil.example") == 403
    assert _status_through(app, "[::1]:80evil") == 403
    assert _status_through(app, "localhost:evil") == 403


def test_an_allowed_host_with_more_than_a_port_after_its_brackets_is_refused() -> None:
    with pytest.raises(ValueError, match="is not a host name"):
        _app(allow_hosts=["[::1]evil"])


def test_two_host_headers_are_a_400_whichever_comes_first() -> None:
    app = _app(bound_host="0.0.0.0")
    transport = httpx.ASGITransport(app=app)

    async def call(hosts: list[str]) -> httpx.Response:
        headers = [("host", host) for host in hosts]
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            request = client.build_request("GET", "/assistants/chain")
            request.headers = httpx.Headers(headers)
            return await client.send(request)

    for hosts in (["localhost", "evil.example"], ["evil.example", "localhost"]):
        answer = asyncio.run(call(hosts))
        assert answer.status_code == 400
        assert "more than one Host header" in answer.json()["detail"]
    assert asyncio.run(call(["localhost"])).status_code == 200


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({"host": "evil.example"}, "host_not_allowed"),
        ({"host": "localhost", "origin": EVIL}, "origin_not_allowed"),
    ],
)
def test_a_websocket_handshake_is_guarded_too(headers: dict[str, str], code: str) -> None:
    client = TestClient(_app(), base_url="http://localhost")
    with (
        pytest.raises(WebSocketDisconnect) as refused,
        client.websocket_connect("/ws", headers=headers),
    ):
        pass  # pragma: no cover - refused before it is accepted
    assert (refused.value.code, refused.value.reason) == (1008, code)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"allow_hosts": ["http://agents.example/"]}, "--allow-host 'http://agents.example/'"),
        ({"allow_hosts": [" "]}, "--allow-host ' '"),
        (
            {"cors_origins": ["https://app.example/page"]},
            "--cors-origin 'https://app.example/page'",
        ),
        ({"cors_origins": ["app.example"]}, "--cors-origin 'app.example'"),
    ],
)
def test_a_host_or_origin_that_is_not_one_is_refused_saying_what_to_give(
    options: dict[str, list[str]], named: str
) -> None:
    with pytest.raises(ValueError, match="give") as refused:
        _app(**options)
    assert named in str(refused.value)


# --- Origin and CORS ------------------------------------------------------------------------


def test_the_servers_own_origin_is_answered(keyless: Server) -> None:
    own = {**JSON, "origin": keyless.url}
    assert httpx.post(f"{keyless.url}/runs/wait", content=RUN, headers=own).json() == {"x": 12}
    by_name = {
        **JSON,
        "host": f"localhost:{keyless.port}",
        "origin": f"http://localhost:{keyless.port}",
    }
    assert httpx.post(f"{keyless.url}/runs/wait", content=RUN, headers=by_name).status_code == 200


@pytest.mark.parametrize("origin", [EVIL, "http://127.0.0.1:1", "null", "http://localhost:3001"])
def test_a_page_of_another_origin_is_refused_even_with_json(keyless: Server, origin: str) -> None:
    answer = httpx.post(f"{keyless.url}/runs/wait", content=RUN, headers={**JSON, "origin": origin})
    assert answer.status_code == 403
    assert answer.json()["code"] == "origin_not_allowed"
    assert repr(origin) in answer.json()["detail"]


def test_a_listed_origin_is_answered_with_cors_headers(keyless: Server) -> None:
    answer = httpx.post(
        f"{keyless.url}/runs/stream",
        json={"assistant_id": "chain", "input": {"x": 1}, "on_completion": "keep"},
        headers={"origin": LISTED},
    )
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == LISTED
    exposed = answer.headers["access-control-expose-headers"].lower()
    assert "content-location" in exposed


def test_a_listed_origins_preflight_is_answered(keyless: Server) -> None:
    answer = httpx.options(
        f"{keyless.url}/runs/wait",
        headers={
            "origin": LISTED,
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type, x-api-key",
        },
    )
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == LISTED
    assert "POST" in answer.headers["access-control-allow-methods"]
    assert "x-api-key" in answer.headers["access-control-allow-headers"]


def test_another_origins_preflight_is_refused(keyless: Server) -> None:
    answer = httpx.options(
        f"{keyless.url}/runs/wait",
        headers={"origin": EVIL, "access-control-request-method": "POST"},
    )
    assert answer.status_code == 403
    assert "access-control-allow-origin" not in answer.headers


def test_with_keys_another_origin_is_refused_even_with_a_valid_key(keyed: Server) -> None:
    headers = {**JSON, "origin": EVIL, "x-api-key": KEY}
    answer = httpx.post(f"{keyed.url}/runs/wait", content=RUN, headers=headers)
    assert answer.status_code == 403
    assert answer.json()["code"] == "origin_not_allowed"


def test_with_keys_a_listed_origin_gets_cors_on_its_answers_and_its_401s(keyed: Server) -> None:
    headers = {**JSON, "origin": LISTED}
    refused = httpx.post(f"{keyed.url}/runs/wait", content=RUN, headers=headers)
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == LISTED  # the page reads why
    answered = httpx.post(
        f"{keyed.url}/runs/wait", content=RUN, headers={**headers, "x-api-key": KEY}
    )
    assert answered.json() == {"x": 12}
    assert answered.headers["access-control-allow-origin"] == LISTED


def test_with_keys_a_listed_origins_preflight_needs_no_key(keyed: Server) -> None:
    answer = httpx.options(
        f"{keyed.url}/threads",
        headers={
            "origin": LISTED,
            "access-control-request-method": "POST",
            "access-control-request-headers": "x-api-key",
        },
    )
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == LISTED


def test_cors_origin_star_lets_every_page_in_when_told_the_server_is_insecure() -> None:
    answer = _through(_app(cors_origins=["*"], insecure_no_auth=True), {"origin": EVIL})
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == "*"


@pytest.mark.parametrize("options", [{}, {"api_keys": [KEY]}])
def test_a_same_origin_fetch_is_the_servers_own_behind_a_proxy_that_rewrites_host(
    options: dict[str, list[str]],
) -> None:
    """nginx's default ``Host $proxy_host``: the app sees its upstream's name, the browser's
    Origin is the public one; the browser's Sec-Fetch-Site says it is the page's own."""
    app = _app(allow_hosts=["upstream"], **options)
    proxied = {"host": "upstream:8123", "origin": "https://agents.example", "x-api-key": KEY}
    assert _through(app, {**proxied, "sec-fetch-site": "same-origin"}).status_code == 200
    for other in ("cross-site", "same-site", "none"):
        refused = _through(app, {**proxied, "sec-fetch-site": other})
        assert refused.status_code == 403
        assert refused.json()["code"] == "origin_not_allowed"
    assert _through(app, proxied).status_code == 403


def test_a_same_origin_fetch_still_needs_a_host_of_the_keyless_servers() -> None:
    """A DNS-rebinding page is same-origin to itself: its Host stops it."""
    rebound = {
        "host": "evil.example",
        "origin": "http://evil.example",
        "sec-fetch-site": "same-origin",
    }
    answer = _through(_app(), rebound)
    assert answer.status_code == 403
    assert answer.json()["code"] == "host_not_allowed"


def test_requests_without_an_origin_are_not_affected(keyed: Server, keyless: Server) -> None:
    assert httpx.post(f"{keyless.url}/runs/wait", content=RUN, headers=JSON).status_code == 200
    with_key = {**JSON, "x-api-key": KEY}
    assert httpx.post(f"{keyed.url}/runs/wait", content=RUN, headers=with_key).status_code == 200
