"""A2A on ``graph-agent serve``: agent cards and the JSON-RPC methods, through the official
``a2a-sdk`` client against a real server on 127.0.0.1 (SQLite; one send on PostgreSQL too)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError
from langgraph_sdk import get_client

from tests.serve.a2a_graphs import asking, broken, chat, slow_chat
from tests.serve.graphs import ANSWERS, agent, chain
from tests.serve.servers import Served, serving

KEY = "a2a-test-key"


TARGETS = [agent(), chat(), asking(), slow_chat(), broken(), chain()]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving("sqlite", tmp_path_factory.mktemp("a2a"), targets=TARGETS) as running:
        yield running


def _request(text: str, *, context_id: str = "", now: bool = False) -> SendMessageRequest:
    message = Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text=text)])
    if context_id:
        message.context_id = context_id
    return SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(return_immediately=now)
    )


async def _send(
    url: str,
    assistant: str,
    text: str,
    *,
    streaming: bool = False,
    context_id: str = "",
    headers: dict[str, str] | None = None,
) -> list[StreamResponse]:
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        config = ClientConfig(streaming=streaming, httpx_client=http)
        client = await create_client(f"{url}/a2a/{assistant}", client_config=config)
        return [event async for event in client.send_message(_request(text, context_id=context_id))]


def _text(task: Task) -> str:
    return "".join(part.text for artifact in task.artifacts for part in artifact.parts)


async def test_each_assistant_has_a_card_naming_its_endpoint(server: Served) -> None:
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, f"{server.url}/a2a/assistant").get_agent_card()
    assert card.name == "assistant"
    assert card.capabilities.streaming
    assert {(i.url, i.protocol_binding) for i in card.supported_interfaces} == {
        (f"{server.url}/a2a/assistant", "JSONRPC")
    }
    assert {i.protocol_version for i in card.supported_interfaces} == {"1.0", "0.3"}
    assert not card.security_schemes  # a keyless server asks for none


def test_the_root_card_is_the_named_assistants_and_with_several_names_each(
    server: Served,
) -> None:
    named = httpx.get(f"{server.url}/.well-known/agent-card.json", params={"assistant_id": "chat"})
    assert named.status_code == 200 and named.json()["name"] == "chat"
    assert named.json()["url"] == f"{server.url}/a2a/chat"  # 0.3 clients read this one
    several = httpx.get(f"{server.url}/.well-known/agent-card.json")
    assert several.status_code == 400
    assert f"{server.url}/a2a/chat/.well-known/agent-card.json" in several.json()["detail"]
    missing = httpx.get(f"{server.url}/a2a/nobody/.well-known/agent-card.json")
    assert missing.status_code == 404 and "assistant" in missing.json()["detail"]


async def test_an_agent_answers_a_message_as_a_completed_task_on_a_thread(server: Served) -> None:
    [event] = await _send(server.url, "assistant", "hello?")
    task = event.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _text(task) in ANSWERS
    assert task.status.message.parts[0].text == _text(task)
    thread_id, run_id = task.id.split(":")
    assert task.context_id == thread_id
    sdk = get_client(url=server.url)
    runs = await sdk.runs.list(thread_id)
    assert [run["run_id"] for run in runs] == [run_id]  # the task is a run on that thread
    state = await sdk.threads.get_state(thread_id)
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai"]


async def test_a_second_message_in_the_context_goes_on_the_same_thread(server: Served) -> None:
    [first] = await _send(server.url, "chat", "one")
    [second] = await _send(server.url, "chat", "two", context_id=first.task.context_id)
    assert second.task.context_id == first.task.context_id
    assert _text(second.task) == "echo: two"
    assert [m.parts[0].text for m in second.task.history] == [
        "one",
        "echo: one",
        "two",
        "echo: two",
    ]


async def test_a_streamed_message_sends_the_task_its_progress_and_the_answer(
    server: Served,
) -> None:
    events = await _send(server.url, "chat", "streamed", streaming=True)
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds[0] == "task" and events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert "status_update" in kinds[1:-2]  # a node finished: working
    assert kinds[-2:] == ["artifact_update", "status_update"]
    assert events[-2].artifact_update.artifact.parts[0].text == "echo: streamed"
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_tasks_get_tells_a_finished_task_and_an_unknown_one_is_not_found(
    server: Served,
) -> None:
    [sent] = await _send(server.url, "chat", "kept")
    async with httpx.AsyncClient() as http:
        config = ClientConfig(streaming=False, httpx_client=http)
        client = await create_client(f"{server.url}/a2a/chat", client_config=config)
        task = await client.get_task(GetTaskRequest(id=sent.task.id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert _text(task) == "echo: kept"
        short = await client.get_task(GetTaskRequest(id=sent.task.id, history_length=1))
        assert [m.parts[0].text for m in short.history] == ["echo: kept"]
        for unknown in (f"{sent.task.context_id}:no-such-run", "no-colon"):
            with pytest.raises(A2AError, match="not found"):
                await client.get_task(GetTaskRequest(id=unknown))


async def test_a_running_task_is_cancelled_and_then_cannot_be(server: Served) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        config = ClientConfig(streaming=False, httpx_client=http)
        client = await create_client(f"{server.url}/a2a/slow_chat", client_config=config)
        [started] = [e async for e in client.send_message(_request("go", now=True))]
        assert started.task.status.state in (
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
        )
        cancelled = await client.cancel_task(CancelTaskRequest(id=started.task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        again = await client.get_task(GetTaskRequest(id=started.task.id))
        assert again.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(A2AError, match="ended"):
            await client.cancel_task(CancelTaskRequest(id=started.task.id))


async def test_a_paused_run_asks_for_input_and_the_next_message_resumes_it(
    server: Served,
) -> None:
    [paused] = await _send(server.url, "asking", "please answer")
    assert paused.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "May I?" in paused.task.status.message.parts[0].text
    [resumed] = await _send(server.url, "asking", "yes", context_id=paused.task.context_id)
    assert resumed.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _text(resumed.task) == "you said yes"


async def test_a_failed_run_is_a_failed_task_saying_what_failed(server: Served) -> None:
    [sent] = await _send(server.url, "broken", "try")
    assert sent.task.status.state == TaskState.TASK_STATE_FAILED
    assert "the broken graph always fails" in sent.task.status.message.parts[0].text
    assert not sent.task.artifacts
    streamed = await _send(server.url, "broken", "try", streaming=True)
    assert streamed[-1].status_update.status.state == TaskState.TASK_STATE_FAILED


async def test_a_graph_without_messages_is_a_clear_json_rpc_error(server: Served) -> None:
    with pytest.raises(A2AError, match="without a 'messages' key"):
        await _send(server.url, "chain", "hello")


def test_the_0_3_method_names_are_served_too(server: Served) -> None:
    """``message/send``, ``tasks/get`` and ``tasks/cancel`` as a 0.3 client sends them."""
    endpoint = f"{server.url}/a2a/chat"
    message = {"role": "user", "parts": [{"kind": "text", "text": "old"}], "messageId": "m-03"}
    sent = httpx.post(
        endpoint,
        json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}},
    ).json()["result"]
    assert sent["kind"] == "task" and sent["status"]["state"] == "completed"
    assert sent["artifacts"][0]["parts"][0] == {"kind": "text", "text": "echo: old"}
    got = httpx.post(
        endpoint,
        json={"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": sent["id"]}},
    ).json()["result"]
    assert got["id"] == sent["id"] and got["contextId"] == sent["contextId"]
    refused = httpx.post(
        endpoint,
        json={"jsonrpc": "2.0", "id": 3, "method": "tasks/cancel", "params": {"id": sent["id"]}},
    ).json()
    assert "ended" in refused["error"]["message"]
    with httpx.stream(
        "POST",
        endpoint,
        json={
            "jsonrpc": "2.0",
            "id": 4,
            "method": "message/stream",
            "params": {"message": message},
        },
    ) as streamed:
        lines = [line for line in streamed.iter_lines() if line.startswith("data:")]
    assert '"final":true' in lines[-1].replace(" ", "") and '"completed"' in lines[-1]


def test_a_body_that_is_not_json_or_an_unknown_assistant_is_refused(server: Served) -> None:
    text = httpx.post(
        f"{server.url}/a2a/chat", content=b"{}", headers={"content-type": "text/plain"}
    )
    assert text.status_code == 415
    missing = httpx.post(f"{server.url}/a2a/nobody", json={"jsonrpc": "2.0", "id": 1})
    assert missing.status_code == 404 and "chat" in missing.json()["detail"]


async def test_with_api_keys_a2a_needs_the_key_and_the_card_says_so(tmp_path: Path) -> None:
    with serving("sqlite", tmp_path, targets=[chat()], api_keys=[KEY]) as keyed:
        assert httpx.get(f"{keyed.url}/.well-known/agent-card.json").status_code == 401
        card = httpx.get(
            f"{keyed.url}/.well-known/agent-card.json", headers={"x-api-key": KEY}
        ).json()
        assert card["name"] == "chat"  # the only assistant's card
        assert card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"] == "x-api-key"
        with pytest.raises(Exception, match="401"):
            await _send(keyed.url, "chat", "no key")
        [event] = await _send(keyed.url, "chat", "keyed", headers={"x-api-key": KEY})
        assert _text(event.task) == "echo: keyed"


async def test_a_key_never_sees_another_keys_tasks(tmp_path: Path) -> None:
    other = "another-key"
    with serving("sqlite", tmp_path, targets=[chat()], api_keys=[KEY, other]) as keyed:
        [mine] = await _send(keyed.url, "chat", "mine", headers={"x-api-key": KEY})
        async with httpx.AsyncClient(headers={"x-api-key": other}) as http:
            config = ClientConfig(streaming=False, httpx_client=http)
            client = await create_client(f"{keyed.url}/a2a/chat", client_config=config)
            with pytest.raises(A2AError, match="not found"):
                await client.get_task(GetTaskRequest(id=mine.task.id))
            with pytest.raises(A2AError, match="not found"):
                await client.cancel_task(CancelTaskRequest(id=mine.task.id))
        with pytest.raises(A2AError, match="not found"):  # nor writes into the other's thread
            await _send(
                keyed.url,
                "chat",
                "theirs?",
                context_id=mine.task.context_id,
                headers={"x-api-key": other},
            )


@pytest.mark.parametrize("kind", ["postgres"])
async def test_a_message_is_answered_and_streamed_on_postgresql(kind: str, tmp_path: Path) -> None:
    with serving(kind, tmp_path, targets=[chat()]) as running:
        [event] = await _send(running.url, "chat", "on postgres")
        assert event.task.status.state == TaskState.TASK_STATE_COMPLETED
        assert _text(event.task) == "echo: on postgres"
        runs = await get_client(url=running.url).runs.list(event.task.context_id)
        assert [f"{event.task.context_id}:{run['run_id']}" for run in runs] == [event.task.id]
        streamed = await _send(running.url, "chat", "streamed", streaming=True)
        assert streamed[-2].artifact_update.artifact.parts[0].text == "echo: streamed"
        assert streamed[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
