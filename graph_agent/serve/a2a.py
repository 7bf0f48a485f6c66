"""The Agent2Agent protocol's tasks as the API's runs: what ``/a2a/{assistant_id}`` answers.

A task is a run on a thread, as on LangGraph Server: its ``contextId`` is the thread's id and
its id ``{thread_id}:{run_id}`` (so ``tasks/get`` finds the thread from the id alone). A
message's text is the question: an agent's (or a team's) input, or for a graph whose state has
a ``messages`` key a human message appended to it; any other graph answers a JSON-RPC error
saying so. A message on a thread paused for a human resumes it with the text as the answer.
The runs start through :func:`graph_agent.serve.routes.runs.start_from_body`, as the runs routes'
do, so they are recorded, owned by the caller and seen by ``langgraph-sdk`` like any other.

:class:`RunsRequestHandler` is the SDK's ``RequestHandler``: its JSON-RPC dispatcher parses
both protocol versions (``SendMessage``, ``GetTask``, … and 0.3's ``message/send``,
``message/stream``, ``tasks/get``, ``tasks/cancel``) and writes the answers. A run's states
map as LangGraph's do: pending → submitted, running → working, success → completed (or
input-required when the thread paused), error and timeout → failed, interrupted (cancelled) →
canceled.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    Artifact,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    A2AError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from graph_agent.graph.concurrency import to_thread
from graph_agent.runnable_traits import takes_question
from graph_agent.serve.api import Api, ApiError
from graph_agent.serve.records import RunRecord, ThreadRecord
from graph_agent.serve.routes.runs import start_from_body
from graph_agent.serve.runs import ActiveRun, thread_values
from graph_agent.serve.wire import to_json

__all__ = ["RunsRequestHandler", "takes_messages"]

_STATES: dict[str, TaskState] = {
    "pending": TaskState.TASK_STATE_SUBMITTED,
    "running": TaskState.TASK_STATE_WORKING,
    "success": TaskState.TASK_STATE_COMPLETED,
    "interrupted": TaskState.TASK_STATE_CANCELED,  # a cancelled run (a pause ends success)
    "error": TaskState.TASK_STATE_FAILED,
    "timeout": TaskState.TASK_STATE_FAILED,
}
ANSWER_ARTIFACT = "answer"
"""The id of the artifact holding the assistant's final answer."""


def takes_messages(api: Api, assistant_id: str) -> bool:
    """Whether the assistant takes a message: an agent, or a graph with a ``messages`` key."""
    if takes_question(api.assistants[assistant_id]):
        return True
    schema = api.schemas.get(assistant_id, {}).get("input_schema", {})
    return "messages" in schema.get("properties", {})


class RunsRequestHandler(RequestHandler):
    """The A2A methods on the API's runs, for the assistant the route names (the context's
    ``assistant_id``)."""

    def __init__(self, api: Api) -> None:
        self.api = api

    # messages
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        run, question = await self._start(params, context, stream_mode=["values"])
        if params.configuration.return_immediately:
            return _task(run.record, None, question)
        result = await run.wait()
        return await self._task_of(run.record.thread_id, run.record.run_id, result, question)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        run, question = await self._start(params, context, stream_mode=["updates"])
        record = run.record
        task_id = _task_id(record)
        yield _task(record, None, question)
        async for _, event, text in run.follow():
            if event == "updates":  # a node finished: the task is working
                update = json.loads(text)
                nodes = sorted(update) if isinstance(update, dict) else []
                yield TaskStatusUpdateEvent(
                    task_id=task_id,
                    context_id=record.thread_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
                    metadata={"nodes": nodes},
                )
        final = await self._task_of(record.thread_id, record.run_id, await run.wait(), question)
        for artifact in final.artifacts:
            yield TaskArtifactUpdateEvent(
                task_id=task_id, context_id=record.thread_id, artifact=artifact, last_chunk=True
            )
        yield TaskStatusUpdateEvent(
            task_id=task_id, context_id=record.thread_id, status=final.status
        )

    async def _start(
        self, params: SendMessageRequest, context: ServerCallContext, *, stream_mode: list[str]
    ) -> tuple[ActiveRun, Message]:
        assistant_id = str(context.state["assistant_id"])
        if not takes_messages(self.api, assistant_id):
            raise InvalidParamsError(
                message=f"assistant {assistant_id!r} is a graph without a 'messages' key: an A2A "
                "message has nowhere to go in its state (serve an agent, or a graph with a "
                "messages key, to talk to it over A2A; run it with the runs API instead)"
            )
        message = params.message
        text = message_text(message)
        if not text:
            raise InvalidParamsError(
                message="the message has no text part: send the question as a text part"
            )
        thread_id = message.context_id or (
            _split_task_id(message.task_id)[0] if message.task_id else str(uuid.uuid4())
        )
        body: dict[str, Any] = {
            "assistant_id": assistant_id,
            "if_not_exists": "create",
            "stream_mode": stream_mode,
            "metadata": {"a2a_message_id": message.message_id} if message.message_id else {},
        }
        if await self._paused(thread_id):  # the text answers the pause, as on LangGraph
            body["command"] = {"resume": text}
        else:
            body["input"] = {"messages": [{"type": "human", "content": text}]}
        try:
            run = await start_from_body(self.api, body, thread_id)
        except ApiError as exc:
            raise _a2a_error(exc) from exc
        question = Message(
            message_id=message.message_id or str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            context_id=run.record.thread_id,
            task_id=_task_id(run.record),
        )
        return run, question

    async def _paused(self, thread_id: str) -> bool:
        found = await to_thread(self.api.records_of(thread_id).thread, thread_id)
        return found is not None and found.status == "interrupted"

    # tasks
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        thread_id, run_id = _split_task_id(params.id)
        task = await self._task_of(thread_id, run_id)
        if params.HasField("history_length"):
            keep = max(params.history_length, 0)
            kept = list(task.history)[-keep:] if keep else []
            del task.history[:]
            task.history.extend(kept)
        return task

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        thread_id, run_id = _split_task_id(params.id)
        self._thread(thread_id, params.id)
        runner = self.api.runner_of(thread_id)
        run = runner.find(run_id)
        if run is None or run.finished or run.record.thread_id != thread_id:
            await self._task_of(thread_id, run_id)  # a task not found says so
            raise TaskNotCancelableError(message=f"task {params.id} has ended: nothing to cancel")
        await runner.cancel(run, wait=True)
        return await self._task_of(thread_id, run_id, await run.wait())

    async def _task_of(
        self,
        thread_id: str,
        run_id: str,
        result: Any = None,
        question: Message | None = None,
    ) -> Task:
        """The task of the run, as its records, result and thread say now."""
        thread = self._thread(thread_id, f"{thread_id}:{run_id}")
        records = self.api.records_of(thread_id)
        record = await to_thread(records.run, thread_id, run_id)
        if record is None:
            raise TaskNotFoundError(message=f"task {thread_id}:{run_id} not found")
        if result is None:
            active = self.api.runner_of(thread_id).find(run_id)
            result = active.result if active is not None and active.finished else None
        newest = await to_thread(lambda: records.runs(thread_id, limit=1, offset=0))
        latest = bool(newest) and newest[0].run_id == run_id
        if result is None and latest and record.status not in ("pending", "running"):
            # an older run's result is not kept once it left memory: the newest's is the thread's
            runnable = self.api.thread_runnable(thread)
            values, _ = await to_thread(thread_values, runnable, thread_id)
            result = to_json(values)
        paused = latest and thread.status == "interrupted"
        return _task(record, result, question, paused=paused)

    def _thread(self, thread_id: str, task_id: str) -> ThreadRecord:
        try:
            return self.api.thread(thread_id)
        except ApiError:
            raise TaskNotFoundError(message=f"task {task_id} not found") from None

    # not served
    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        raise UnsupportedOperationError(
            message="tasks are not listed here: list a thread's runs with the runs API "
            "(GET /threads/{contextId}/runs)"
        )

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        raise UnsupportedOperationError(
            message="resubscribing is not served: poll tasks/get, or join the run's stream "
            "with the runs API (GET /threads/{contextId}/runs/{run_id}/stream)"
        )
        yield  # an async generator, as the interface's

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError()

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise UnsupportedOperationError(
            message="no extended card: the card at .well-known/agent-card.json is the whole"
        )


def message_text(message: Message) -> str:
    """The text of a message's text parts, one paragraph each."""
    return "\n\n".join(part.text for part in message.parts if part.text)


def _task_id(record: RunRecord) -> str:
    return f"{record.thread_id}:{record.run_id}"


def _split_task_id(task_id: str) -> tuple[str, str]:
    thread_id, colon, run_id = task_id.partition(":")
    if not colon or not thread_id or not run_id:
        raise TaskNotFoundError(
            message=f"task {task_id!r} not found: a task id here is 'contextId:run_id'"
        )
    return thread_id, run_id


def _a2a_error(exc: ApiError) -> A2AError:
    if exc.status == 409:  # the thread is busy with another run
        return InvalidRequestError(message=exc.detail)
    return InvalidParamsError(message=exc.detail)


def _task(
    record: RunRecord, result: Any, question: Message | None, *, paused: bool = False
) -> Task:
    """The task of the run ``record``, ended with ``result`` (its values; None while it runs
    or once forgotten); ``paused``: its thread waits for a human since it ended."""
    state: TaskState = _STATES.get(record.status, TaskState.TASK_STATE_SUBMITTED)
    values = result if isinstance(result, Mapping) else {}
    status = TaskStatus(state=state)
    history = _history(values, record) if values else ([question] if question else [])
    answer = _answer(values, record)
    if state == TaskState.TASK_STATE_COMPLETED and (paused or "__interrupt__" in values):
        state = TaskState.TASK_STATE_INPUT_REQUIRED
        status = TaskStatus(state=state, message=_pause_message(values, record))
    elif "__error__" in values:
        error = values["__error__"]
        text = f"{error.get('error', 'Error')}: {error.get('message', '')}"
        status = TaskStatus(state=state, message=_agent_message(text, record))
    elif answer is not None:
        status = TaskStatus(state=state, message=answer)
    task = Task(id=_task_id(record), context_id=record.thread_id, status=status, history=history)
    if answer is not None and state == TaskState.TASK_STATE_COMPLETED:
        task.artifacts.append(
            Artifact(artifact_id=ANSWER_ARTIFACT, name="answer", parts=list(answer.parts))
        )
    return task


def _history(values: Mapping[str, Any], record: RunRecord) -> list[Message]:
    """The thread's conversation (its ``messages``) as A2A messages."""
    history = []
    for item in values.get("messages") or ():
        if not isinstance(item, Mapping) or item.get("type") not in ("human", "ai"):
            continue
        text = content_text(item.get("content"))
        if not text:
            continue  # an assistant turn that only called tools
        role = Role.ROLE_USER if item["type"] == "human" else Role.ROLE_AGENT
        history.append(
            Message(
                message_id=str(item.get("id") or uuid.uuid4()),
                role=role,
                parts=[Part(text=text)],
                context_id=record.thread_id,
                task_id=_task_id(record),
            )
        )
    return history


def _answer(values: Mapping[str, Any], record: RunRecord) -> Message | None:
    """The last message of the thread, when it is the assistant's."""
    messages = values.get("messages") or ()
    last = messages[-1] if messages else None
    if not isinstance(last, Mapping) or last.get("type") != "ai":
        return None
    text = content_text(last.get("content"))
    return _agent_message(text, record) if text else None


def _pause_message(values: Mapping[str, Any], record: RunRecord) -> Message:
    interrupts = values.get("__interrupt__") or []
    asked = [item.get("value") for item in interrupts if isinstance(item, Mapping)]
    shown = asked[0] if len(asked) == 1 else asked
    text = shown if isinstance(shown, str) else json.dumps(shown, default=str)
    return _agent_message(f"the run paused for a human: {text}; answer to resume it", record)


def _agent_message(text: str, record: RunRecord) -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
        context_id=record.thread_id,
        task_id=_task_id(record),
    )


def content_text(content: Any) -> str:
    """A wire message's content as text: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(block.get("text", "")) if isinstance(block, Mapping) else str(block)
            for block in content
            if not isinstance(block, Mapping) or block.get("type") == "text"
        )
    return ""
