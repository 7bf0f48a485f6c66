"""Agents inside other graphs: as a node (:func:`agent_node`) and as a tool (:func:`agent_tool`).

Either way the agent runs as a subgraph (see :mod:`graph_agent.node`): in the
caller's thread under its own namespace, with the caller's saver, so its interrupts pause the
caller once and resume inside the agent, and a crash inside it resumes inside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from graph_agent.agent.keys import RUN_KEY
from graph_agent.agent.nodes import last_assistant
from graph_agent.graph.compiled import CompiledGraph
from graph_agent.graph.state import OverAllState
from graph_agent.graph.task import derive_id
from graph_agent.graph.types import RunnableConfig
from graph_agent.messages import AssistantMessage, BaseMessage, SystemMessage, UserMessage
from graph_agent.node import AnySignal, SubgraphNode, run_nested
from graph_agent.tools import Tool, ToolContext


class AgentLike(Protocol):
    """What runs as an agent inside another graph: a ReactAgent or a flow agent."""

    name: str
    description: str | None

    @property
    def graph(self) -> CompiledGraph: ...

    @property
    def instruction_keys(self) -> tuple[str, ...]: ...

    @property
    def output_keys(self) -> tuple[str, ...]: ...

    def _max_steps(self) -> int: ...


def agent_node(
    agent: AgentLike,
    *,
    include_contents: bool = True,
    return_reasoning_contents: bool = False,
    output_key: str | None = None,
    collect_key: str | None = None,
    share_output: bool | Callable[[OverAllState], bool] = True,
    query_key: str | None = None,
) -> SubgraphNode:
    """``agent`` as a node of another graph that keeps its conversation in ``messages``.

    The keys the agent's instruction reads (``{key}``) are passed to it from the caller's
    state, and its output (what it stores at its ``output_key``; a team's, what its agents
    store) comes back under that key, so a team's later agents read an earlier one's result.

    Args:
        agent: The agent to run.
        include_contents: The agent sees the caller's messages; otherwise only the latest one
            (as a user message).
        return_reasoning_contents: Every message the agent added comes back (tool calls and
            results included); by default only its final answer (for a team whose agents
            answer side by side, like a ParallelAgent, each of their answers).
        output_key: Also store the final answer's text under this key.
        collect_key: Also add ``{agent name: answer text}`` to this (merged) dict key.
        share_output: Bring the agent's own output back under its ``output_key`` (a team
            whose agents run side by side turns this off for a key several of them share);
            a callable decides from the caller's state when the agent runs.
        query_key: A state key mapping agent names to a request of their own (a routing
            model's ``query``): when it holds one for this agent, the agent gets it as a user
            message after the messages it sees.
    """
    own_keys = agent.output_keys
    reads = [key for key in agent.instruction_keys if key not in ("messages", RUN_KEY)]

    def make_input(state: OverAllState) -> dict[str, Any]:
        passed = {key: state[key] for key in reads if key in state}
        messages = _input_messages(state, include_contents)
        query = _query_for(agent.name, state, query_key)
        if query is not None:
            anchor = messages[-1].id if messages else "start"
            messages = [*messages, UserMessage(query, id=f"{anchor}-query-{agent.name}")]
        return {"messages": messages, RUN_KEY: None, **passed}

    def make_output(state: OverAllState, values: Mapping[str, Any]) -> dict[str, Any]:
        seen = {m.id for m in _input_messages(state, include_contents)}
        added = [
            m
            for m in values.get("messages", ())
            if m.id not in seen and not isinstance(m, SystemMessage)
        ]
        answers = _final_answers(agent, added)
        messages = added if return_reasoning_contents else answers
        update: dict[str, Any] = {"messages": messages}
        if output_key is not None and answers:
            update[output_key] = _text(answers)
        if collect_key is not None and answers:
            update[collect_key] = {agent.name: _text(answers)}
        share = share_output(state) if callable(share_output) else share_output
        if share:
            update.update((key, values[key]) for key in own_keys if key in values)
        return update

    return SubgraphNode(
        agent.graph, input=make_input, output=make_output, max_steps=agent._max_steps()
    )


def agent_tool(agent: AgentLike, name: str | None = None, description: str | None = None) -> Tool:
    """``agent`` as a tool another agent's model can call with a request in plain words.

    The agent runs in the caller's thread, under a namespace of its own per tool call (see
    :func:`agent_tool_namespace`); its final answer is the tool's result. When the call times
    out (``tool_timeout``) or the caller's run is cancelled, the agent stops instead of running
    on unseen: a node it awaits is cancelled at once; a sync one (its model's sync call, say)
    ends first, and the agent stops before its next step.
    """
    tool_name = name or agent.name
    text = description or agent.description or f"Ask the {agent.name} agent to do a task."

    def run(request: str, ctx: ToolContext) -> str:
        config = ctx.config if isinstance(ctx.config, RunnableConfig) else RunnableConfig()
        final = run_nested(
            agent.graph,
            lambda: {"messages": [UserMessage(request)], RUN_KEY: None},
            config,
            agent_tool_namespace(tool_name, ctx),
            max_steps=agent._max_steps(),
            cancel=AnySignal(config.cancel, ctx.cancelled),
        )
        messages = list(final.value("messages", ()))
        request_at = next((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), -1)
        return _text(_final_answers(agent, messages[request_at + 1 :]))

    run.__doc__ = f"{text}\n\nArgs:\n    request: What to do, in plain words."
    return Tool.from_function(run, name=tool_name, description=text)


def agent_tool_namespace(tool_name: str, context: ToolContext) -> str:
    """Where an agent called as a tool keeps its checkpoints in the caller's thread.

    ``"<tool name>:<call id>:<hash>"``, the hash taken of ``context.idempotency_key`` (thread,
    assistant message and call id): the same when that call runs again after a crash or a
    pause, so the agent resumes inside it, but new for a later call that reuses the id (models
    number their calls per answer; a fork from an earlier checkpoint gets a new answer), which
    therefore never finds an earlier call's finished run. A retry (``context.attempt`` > 0)
    gets ``":retry<n>"`` added: an abandoned attempt may still hold its namespace until its
    next step.

    Example:
        >>> agent_tool_namespace("research", ToolContext(call_id="c7", idempotency_key="t:m:c7"))
        'research:c7:04768f66'
    """
    digest = derive_id("agent_tool", context.idempotency_key)[:8]
    namespace = f"{tool_name}:{context.call_id}:{digest}"
    return f"{namespace}:retry{context.attempt}" if context.attempt else namespace


def _query_for(name: str, state: OverAllState, query_key: str | None) -> str | None:
    """The request of its own that ``state[query_key]`` holds for agent ``name``, if any."""
    if query_key is None:
        return None
    queries = state.value(query_key)
    query = queries.get(name) if isinstance(queries, Mapping) else None
    return query if isinstance(query, str) and query.strip() else None


def _final_answers(agent: AgentLike, added: Sequence[BaseMessage]) -> list[AssistantMessage]:
    """What answers the request among the messages a run added: the last answer, or each
    agent's answer for a team whose agents answer side by side (``ANSWERS_SIDE_BY_SIDE``)."""
    if getattr(agent, "ANSWERS_SIDE_BY_SIDE", False):
        return [m for m in added if isinstance(m, AssistantMessage) and not m.tool_calls]
    _, answer = last_assistant(added)
    return [answer] if answer is not None else []


def _text(answers: Sequence[AssistantMessage]) -> str:
    return "\n\n".join(answer.text for answer in answers)


def _input_messages(state: OverAllState, include_contents: bool) -> list[BaseMessage]:
    messages = list(state.value("messages", ()))
    if include_contents or not messages:
        return messages
    latest = messages[-1]
    if isinstance(latest, UserMessage):
        return [latest]
    text = latest.text if isinstance(latest, AssistantMessage | BaseMessage) else str(latest)
    return [UserMessage(text, id=f"{latest.id}-as-request")]
