"""Custom auth's pieces without a server: which resource and action a request is, how filters
meet metadata, how handlers are registered and picked, and what the server refuses to load."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk import Auth as SdkAuth

from graph_agent.serve import Auth, create_app
from graph_agent.serve.auth_custom import AuthRules
from graph_agent.serve.auth_events import (
    FilterError,
    check_filter,
    event_of,
    filter_matches,
    namespace_of,
    with_namespace,
)
from tests.serve.graphs import chain


@pytest.mark.parametrize(
    ("method", "path", "resource", "action", "ids"),
    [
        ("POST", "/threads", "threads", "create", {}),
        ("POST", "/threads/search", "threads", "search", {}),
        ("GET", "/threads/t1", "threads", "read", {"thread_id": "t1"}),
        ("PATCH", "/threads/t1", "threads", "update", {"thread_id": "t1"}),
        ("DELETE", "/threads/t1", "threads", "delete", {"thread_id": "t1"}),
        ("GET", "/threads/t1/state", "threads", "read", {"thread_id": "t1"}),
        ("POST", "/threads/t1/state", "threads", "update", {"thread_id": "t1"}),
        ("POST", "/threads/t1/history", "threads", "read", {"thread_id": "t1"}),
        ("POST", "/threads/t1/copy", "threads", "read", {"thread_id": "t1"}),
        ("POST", "/threads/t1/runs", "threads", "create_run", {"thread_id": "t1"}),
        ("POST", "/threads/t1/runs/stream", "threads", "create_run", {"thread_id": "t1"}),
        ("POST", "/threads/t1/runs/wait", "threads", "create_run", {"thread_id": "t1"}),
        ("GET", "/threads/t1/runs", "threads", "read", {"thread_id": "t1"}),
        ("GET", "/threads/t1/runs/r1", "threads", "read", {"thread_id": "t1", "run_id": "r1"}),
        (
            "GET",
            "/threads/t1/runs/r1/join",
            "threads",
            "read",
            {"thread_id": "t1", "run_id": "r1"},
        ),
        (
            "DELETE",
            "/threads/t1/runs/r1",
            "threads",
            "delete",
            {"thread_id": "t1", "run_id": "r1"},
        ),
        (
            "POST",
            "/threads/t1/runs/r1/cancel",
            "threads",
            "update",
            {"thread_id": "t1", "run_id": "r1", "action": "interrupt"},
        ),
        ("POST", "/runs/wait", "threads", "create_run", {}),
        ("POST", "/runs/batch", "threads", "create_run", {}),
        ("POST", "/runs/crons", "crons", "create", {}),
        ("POST", "/runs/crons/search", "crons", "search", {}),
        ("PATCH", "/runs/crons/c1", "crons", "update", {"cron_id": "c1"}),
        ("DELETE", "/runs/crons/c1", "crons", "delete", {"cron_id": "c1"}),
        ("POST", "/threads/t1/runs/crons", "crons", "create", {"thread_id": "t1"}),
        ("POST", "/assistants", "assistants", "create", {}),
        ("POST", "/assistants/count", "assistants", "search", {}),
        ("GET", "/assistants/a1/graph", "assistants", "read", {"assistant_id": "a1"}),
        ("PATCH", "/assistants/a1", "assistants", "update", {"assistant_id": "a1"}),
        ("POST", "/assistants/a1/latest", "assistants", "update", {"assistant_id": "a1"}),
        ("PUT", "/store/items", "store", "put", {}),
        ("GET", "/store/items", "store", "get", {}),
        ("POST", "/store/items/search", "store", "search", {}),
        ("POST", "/store/namespaces", "store", "list_namespaces", {}),
        ("POST", "/a2a/chain", "threads", "create_run", {}),
    ],
)
def test_each_route_is_the_resource_and_action_langgraph_names(
    method: str, path: str, resource: str, action: str, ids: dict[str, str]
) -> None:
    event = event_of(method, path)
    assert event is not None
    assert (event.resource, event.action, dict(event.ids)) == (resource, action, ids)


@pytest.mark.parametrize("path", ["/ok", "/info", "/docs", "/studio/", "/", "/store/other"])
def test_paths_of_no_resource_have_no_event(path: str) -> None:
    assert event_of("GET", path) is None


def test_filters_match_by_equality_and_list_membership() -> None:
    metadata = {"owner": "ann", "team": ["ann", "bob"], "n": 1}
    assert filter_matches(metadata, {})
    assert filter_matches(metadata, {"owner": "ann", "n": 1})
    assert filter_matches(metadata, {"owner": {"$eq": "ann"}})
    assert filter_matches(metadata, {"team": {"$contains": "bob"}})
    assert filter_matches(metadata, {"team": {"$contains": ["bob", "ann"]}})
    assert not filter_matches(metadata, {"owner": "bob"})
    assert not filter_matches(metadata, {"missing": None})
    assert not filter_matches(metadata, {"team": {"$contains": "cy"}})
    assert not filter_matches(metadata, {"team": {"$contains": ["ann", "cy"]}})
    assert not filter_matches(metadata, {"owner": {"$contains": "a"}})  # a string is no list


@pytest.mark.parametrize(
    ("found", "message"),
    [
        ("ann", "returned str"),
        ({"owner": {"$ne": "x"}}, "operator(s) ['$ne']"),
        ({"owner": {}}, "operator(s) {}"),
        ({1: "x"}, "not a string"),
    ],
)
def test_a_filter_the_server_cannot_apply_says_why(found: Any, message: str) -> None:
    with pytest.raises(FilterError) as error:
        check_filter(found)
    assert message in str(error.value)


def test_store_namespaces_are_read_and_rewritten_where_each_request_holds_them() -> None:
    assert namespace_of("put", {"namespace": ["a", "b"], "key": "k"}) == ("a", "b")
    assert namespace_of("search", {}) == ()
    assert namespace_of("list_namespaces", {"prefix": ["a"]}) == ("a",)
    assert namespace_of("get", {"namespace": "a.b", "key": "k"}) == ("a", "b")
    assert namespace_of("put", {"namespace": "a"}) is None
    assert with_namespace("search", {"limit": 3}, ("u", "a")) == {
        "limit": 3,
        "namespace_prefix": ["u", "a"],
    }
    assert with_namespace("get", {"namespace": "a", "key": "k"}, ("u", "a")) == {
        "namespace": "u.a",
        "key": "k",
    }
    with pytest.raises(FilterError):
        with_namespace("put", {}, ("u", 1))


async def _allow(ctx: Any, value: Any) -> None:
    return None


def test_the_most_specific_handler_is_picked_as_langgraph_does() -> None:
    auth = Auth()
    auth.authenticate(lambda: "ann")

    async def everything(ctx: Any, value: Any) -> bool:
        return False

    async def threads(ctx: Any, value: Any) -> None:
        return None

    async def creating(ctx: Any, value: Any) -> None:
        return None

    async def reads(ctx: Any, value: Any) -> None:
        return None

    auth.on(everything)
    auth.on.threads(threads)
    auth.on.threads.create(creating)
    auth.on(actions="read")(reads)
    rules = AuthRules(auth)
    assert rules.handler_for("threads", "create") is creating
    assert rules.handler_for("threads", "search") is threads
    assert rules.handler_for("assistants", "read") is reads
    assert rules.handler_for("crons", "delete") is everything


def test_a_handler_is_registered_once_and_takes_ctx_and_value() -> None:
    auth = Auth()
    auth.on.threads.read(_allow)
    with pytest.raises(ValueError, match=r"threads\.read is set already"):
        auth.on.threads.read(_allow)
    with pytest.raises(ValueError, match="must take the parameters ctx and value"):
        auth.on.store(lambda value: None)
    auth.authenticate(lambda: "x")
    with pytest.raises(ValueError, match="authenticate handler is set already"):
        auth.authenticate(lambda: "y")


def test_the_server_refuses_an_auth_it_cannot_use() -> None:
    with pytest.raises(ValueError, match="no authenticate handler"):
        create_app([chain()], auth=Auth())
    with pytest.raises(ValueError, match="expected an Auth object"):
        create_app([chain()], auth=object())
    odd = Auth()

    @odd.authenticate
    async def who(token: str) -> str:
        return token

    with pytest.raises(ValueError, match="takes token, which the server does not give"):
        create_app([chain()], auth=odd)
    fine = SdkAuth()
    fine.authenticate(_sdk_who)
    with pytest.raises(ValueError, match="custom auth and API keys were both given"):
        create_app([chain()], auth=fine, api_keys=["k"])
    with pytest.raises(ValueError, match="must be a Starlette"):
        create_app([chain()], custom_app=lambda scope, receive, send: None)


async def _sdk_who(authorization: str | None) -> str:
    return "ann"
