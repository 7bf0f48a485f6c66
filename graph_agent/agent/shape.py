"""The shape of an agent's graph: hook nodes, the model and tool nodes, and their edges.

::

    START → [beforeAgent hooks] → [beforeModel hooks] → __model__ → [afterModel hooks]
                                                                            │
                                                       tool calls? ── yes ──┴── no
                                                          │                     │
                                                      __tool__         [afterAgent hooks] → END
                                                          │
                                                          └──→ [beforeModel hooks] (loop entry)

Before-hooks run in registration order, after-hooks (afterModel, afterAgent) last-registered
first; the agent hands the hooks over ordered by ``priority`` (lower first, registration order
among equals: see :mod:`graph_agent.agent.contributions`), so "registered" means that order.
Entry: the first beforeAgent hook, else the first beforeModel hook, else ``__model__``.
Loop entry: the first beforeModel hook, else ``__model__``. The tool/exit decision leaves the
last node of the afterModel chain (the first-registered afterModel hook), else ``__model__``.
Exit: the first afterAgent hook to run (the last registered), else END. A hook's jumps get
edges only for the targets in its ``can_jump_to``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graph_agent.agent.builtin_hooks import ToolCallLimitHook
from graph_agent.agent.hooks import (
    NODE_SUFFIX,
    Hook,
    HookPosition,
    JumpTo,
    accepted_keywords,
    running_for,
)
from graph_agent.agent.keys import (
    JUMP_KEY,
    REJECTED_KEY,
    RUN_INPUT_KEY,
    RUN_KEY,
    STEERED_KEY,
    THREAD_KEY,
)
from graph_agent.agent.nodes import ModelNode, ToolNode, pending_tool_calls
from graph_agent.agent.spec import AgentSpec, NodeSettings
from graph_agent.agent.steering import (
    SteeringQueue,
    steered_update,
    take_steering,
    with_steered,
)
from graph_agent.graph.builder import StateGraph
from graph_agent.graph.errors import GraphSetupError, InvalidUpdateError
from graph_agent.graph.state import AppendStrategy, OverAllState
from graph_agent.graph.types import END, START, RunnableConfig
from graph_agent.messages import ToolResponseMessage
from graph_agent.tools import Toolkit

MODEL_NODE = "__model__"
TOOL_NODE = "__tool__"


@dataclass(frozen=True)
class AgentShape:
    """The four places the wiring hangs on, and the hook nodes in run order."""

    entry: str
    loop_entry: str
    loop_exit: str
    exit: str
    before_agent: tuple[str, ...]
    before_model: tuple[str, ...]
    after_model: tuple[str, ...]
    after_agent: tuple[str, ...]


def hook_node_name(hook: Hook, position: HookPosition) -> str:
    return f"{hook.full_name}.{NODE_SUFFIX[position]}"


def check_unique(hooks: Sequence[Hook]) -> None:
    seen: set[str] = set()
    for hook in hooks:
        if hook.full_name in seen:
            raise GraphSetupError(
                f"two hooks are named {hook.full_name!r}: give one a distinct name "
                f"(e.g. {type(hook).__name__}(..., name='other') or a `name` class attribute)"
            )
        seen.add(hook.full_name)


def _check_no_jump_past_approval(
    after_model: Sequence[Hook], jumps: Mapping[str, tuple[JumpTo, ...]]
) -> None:
    """A jump to TOOL from an afterModel hook that runs before an approval hook (one registered
    after it: the chain runs last-registered first) would run gated calls unapproved."""
    for position, hook in enumerate(after_model):
        if not getattr(hook, "gates_tools", False):
            continue
        for earlier in after_model[:position]:
            if JumpTo.TOOL in jumps[earlier.full_name]:
                raise GraphSetupError(
                    f"hook {earlier.full_name!r} may jump to TOOL from afterModel, and it runs "
                    f"before {hook.full_name!r} there (afterModel hooks run last-registered "
                    "first), so its jump would run tool calls that need approval without "
                    f"asking; register {earlier.full_name!r} before {hook.full_name!r} in "
                    "hooks=[...]"
                )


def _check_limited_tools(agent: Any, toolkit: Toolkit, hooks: Sequence[Hook]) -> None:
    """A per-tool limit on a tool the agent lacks would never limit anything, and an approval
    of one would never be asked: a misspelled name would let the real tool run unapproved."""
    tools = tuple(toolkit.names)
    have = ", ".join(map(repr, tools)) or "none"
    for hook in hooks:
        limited = hook.tool_name if isinstance(hook, ToolCallLimitHook) else None
        if limited is not None and limited not in tools:
            raise GraphSetupError(
                f"hook {hook.full_name!r} limits the tool {limited!r}, but agent "
                f"{agent.name!r} has no tool of that name (its tools: {have}); give one of "
                "its tool names, or tool_name=None to limit all tools"
            )
        gated = getattr(hook, "approve", None) if getattr(hook, "gates_tools", False) else None
        # one policy may serve a team whose agents have different tools; one that names none
        # of this agent's tools is a mistake (a misspelled name would leave the tool ungated)
        if gated and not any(name in tools for name in gated):
            raise GraphSetupError(
                f"hook {hook.full_name!r} asks approval for {', '.join(map(repr, gated))}, "
                f"but agent {agent.name!r} has none of those tools (its tools: {have}); "
                "name the tools as the agent has them"
            )


def build_graph(agent: NodeSettings, hooks: Sequence[Hook]) -> StateGraph:
    """The agent's StateGraph: nodes and edges exactly as the module docstring draws them.

    ``agent`` is what the agent was when it built the graph: its ``spec`` is what the hooks are
    told (see :func:`hook_node`), the rest what the model and tool nodes read, its ``toolkit``
    what the model node offers and the tool node runs for every run of this graph. So a run
    keeps its model and tools while the agent's change, and hooks and nodes never disagree.

    Raises:
        GraphSetupError: two hooks share a name, a hook's ``positions`` or ``can_jump_to`` is
            not valid, a jump cannot be wired (TOOL without tools, TOOL past an approval), or
            a ToolCallLimitHook limits a tool the agent does not have, or a HumanInTheLoopHook
            gates none of its tools.
    """
    spec, toolkit = agent.spec, agent.toolkit
    check_unique(hooks)
    _check_limited_tools(agent, toolkit, hooks)
    has_tools = bool(toolkit)
    jumps = {hook.full_name: hook.jump_targets() for hook in hooks}
    by_position: dict[HookPosition, list[Hook]] = {p: [] for p in NODE_SUFFIX}
    for hook in hooks:
        for position in hook.active_positions():
            by_position[position].append(hook)
        if JumpTo.TOOL in jumps[hook.full_name] and not has_tools:
            raise GraphSetupError(
                f"hook {hook.full_name!r} may jump to TOOL, but agent {agent.name!r} has no tools"
            )
    run_order: dict[HookPosition, list[Hook]] = {
        "before_agent": by_position["before_agent"],
        "before_model": by_position["before_model"],
        "after_model": list(reversed(by_position["after_model"])),
        "after_agent": list(reversed(by_position["after_agent"])),
    }
    _check_no_jump_past_approval(run_order["after_model"], jumps)
    names = {p: tuple(hook_node_name(h, p) for h in hs) for p, hs in run_order.items()}
    shape = AgentShape(
        entry=(names["before_agent"] + names["before_model"] + (MODEL_NODE,))[0],
        loop_entry=(names["before_model"] + (MODEL_NODE,))[0],
        loop_exit=(names["after_model"][-1:] or (MODEL_NODE,))[0],
        exit=(names["after_agent"] + (END,))[0],
        before_agent=names["before_agent"],
        before_model=names["before_model"],
        after_model=names["after_model"],
        after_agent=names["after_agent"],
    )
    strategies: dict[str, Any] = {"messages": AppendStrategy()}
    for hook in hooks:
        strategies.update(hook.state_keys)
    graph = StateGraph(
        agent.name,
        key_strategies=strategies,
        private_keys=[RUN_KEY, THREAD_KEY, REJECTED_KEY, RUN_INPUT_KEY, STEERED_KEY],
        ephemeral_keys=[JUMP_KEY],
    )
    graph._reserved_ok = True
    for position in ("before_agent", "before_model"):
        for hook in run_order[position]:
            name = hook_node_name(hook, position)
            # the loop entry delivers steering messages, so the hooks after it see them
            steering = agent.steering if name == shape.loop_entry else None
            graph.add_node(name, hook_node(hook, position, spec, steering=steering))
    model_node = ModelNode(agent, takes_steering=shape.loop_entry == MODEL_NODE)
    graph.add_node(MODEL_NODE, model_node, retry=agent.model_retry, timeout=agent.model_timeout)
    for hook in run_order["after_model"]:
        graph.add_node(hook_node_name(hook, "after_model"), hook_node(hook, "after_model", spec))
    if has_tools:
        private = frozenset(key for key in strategies if key.startswith("_"))
        graph.add_node(TOOL_NODE, ToolNode(agent, private), retry=agent.tool_retry)
    for hook in run_order["after_agent"]:
        graph.add_node(hook_node_name(hook, "after_agent"), hook_node(hook, "after_agent", spec))
    _wire(graph, shape, run_order, has_tools, jumps)
    return graph


def _wire(
    graph: StateGraph,
    shape: AgentShape,
    run_order: dict[HookPosition, list[Hook]],
    has_tools: bool,
    jumps: Mapping[str, tuple[JumpTo, ...]],
) -> None:
    graph.add_edge(START, shape.entry)
    chains: list[tuple[HookPosition, str]] = [
        ("before_agent", shape.loop_entry),
        ("before_model", MODEL_NODE),
        ("after_agent", END),
    ]
    for position, after_chain in chains:
        nodes = [hook_node_name(h, position) for h in run_order[position]]
        successors = [*nodes[1:], after_chain][: len(nodes)]
        for hook, node, successor in zip(run_order[position], nodes, successors, strict=True):
            _hook_edges(graph, shape, jumps[hook.full_name], node, successor, position)
    after_model = [hook_node_name(h, "after_model") for h in run_order["after_model"]]
    if after_model:
        graph.add_edge(MODEL_NODE, after_model[0])
    for hook, node, successor in zip(
        run_order["after_model"][:-1], after_model[:-1], after_model[1:], strict=True
    ):
        _hook_edges(graph, shape, jumps[hook.full_name], node, successor, "after_model")
    loop_exit_hook = run_order["after_model"][-1] if after_model else None
    loop_exit_jumps = jumps[loop_exit_hook.full_name] if loop_exit_hook is not None else ()
    _loop_exit_edges(graph, shape, loop_exit_jumps, has_tools)
    if has_tools:
        # on to the model, unless a tool's Command(goto=END) ended the run
        graph.add_conditional_edges(
            TOOL_NODE,
            lambda state: "end" if state.value(JUMP_KEY) == "end" else "model",
            {"model": shape.loop_entry, "end": shape.exit},
        )


def _hook_edges(
    graph: StateGraph,
    shape: AgentShape,
    allowed: tuple[JumpTo, ...],
    node: str,
    successor: str,
    position: HookPosition,
) -> None:
    if not allowed:
        graph.add_edge(node, successor)
        return
    end_target = END if position == "after_agent" else shape.exit
    path_map = {"next": successor}
    path_map.update(_jump_paths(allowed, shape, end_target))
    graph.add_conditional_edges(node, _hook_router(allowed, node), path_map)


def _jump_paths(allowed: tuple[JumpTo, ...], shape: AgentShape, end_target: str) -> dict[str, str]:
    """Edges for the declared jumps only. A jump to TOOL with nothing pending passes through
    the tool node, which runs only pending calls, on to the loop entry."""
    paths: dict[str, str] = {}
    if JumpTo.MODEL in allowed:
        paths["model"] = shape.loop_entry
    if JumpTo.TOOL in allowed:
        paths["tool"] = TOOL_NODE
    if JumpTo.END in allowed:
        paths["end"] = end_target
    return paths


def _hook_router(allowed: tuple[JumpTo, ...], node: str) -> Callable[[OverAllState], str]:
    def route(state: OverAllState) -> str:
        jump = state.value(JUMP_KEY)
        return "next" if jump is None else _jump_key(jump, allowed, node)

    return route


def _jump_key(jump: Any, allowed: tuple[JumpTo, ...], node: str) -> str:
    """The path key for ``jump``, one of the hook's ``allowed`` targets (normalised to
    :class:`JumpTo` by :meth:`Hook.jump_targets`)."""
    try:
        target = JumpTo(jump)
    except (ValueError, TypeError):
        target = None
    if target is None or target not in allowed:
        declared = ", ".join(f"JumpTo.{t.name}" for t in allowed) or "none"
        raise InvalidUpdateError(
            f"{node!r} returned jump_to={jump!r}, which its hook does not declare (can_jump_to: "
            f"{declared}); add it to the hook's can_jump_to",
            node=node,
            step=-1,
        )
    return target.value


def _loop_exit_edges(
    graph: StateGraph, shape: AgentShape, allowed: tuple[JumpTo, ...], has_tools: bool
) -> None:
    node = shape.loop_exit
    paths: dict[str, str] = {}
    if has_tools:
        paths = {"tools": TOOL_NODE, "end": shape.exit}
    if allowed:
        jumps = _jump_paths(allowed, shape, shape.exit)
        paths.update({("tools" if k == "tool" else k): v for k, v in jumps.items()})
        paths.setdefault("end", shape.exit)
    if not paths:
        graph.add_edge(node, shape.exit)
        return

    def route(state: OverAllState) -> str:
        jump = state.value(JUMP_KEY)
        if jump is not None:
            key = _jump_key(jump, allowed, node)
            return "tools" if key == "tool" else key
        if not has_tools:
            return "end"
        messages = state.value("messages", ())
        if pending_tool_calls(messages):
            # also when a hook added a message after the calls (a note, a system message)
            return "tools"
        if messages and isinstance(messages[-1], ToolResponseMessage):
            # a hook answered the calls (a human rejected them): on through the tool node,
            # back to the model
            return "tools"
        return "end"

    graph.add_conditional_edges(node, route, paths)


def hook_node(
    hook: Hook,
    position: HookPosition,
    agent: AgentSpec,
    *,
    steering: SteeringQueue | None = None,
) -> Callable[[OverAllState, RunnableConfig], Any]:
    """The node function that runs ``hook`` at ``position`` for the agent ``agent`` describes,
    and checks what it returns.

    The method gets the state (or the messages) and the config, and, as keyword arguments,
    those it declares of what the agent offers (``agent``: see
    :func:`~graph_agent.agent.hooks.accepted_keywords`); ``hook.agent`` reads the same spec
    while the method runs. The hook object itself is never changed.

    With ``steering`` (the agent's queue, at its loop entry), the messages ``agent.steer``
    queued are delivered here: the hook sees them after the history, and the node adds them to
    the thread (see :mod:`graph_agent.agent.steering`).
    """
    method = getattr(hook, position)
    offered = {"agent": agent}
    keywords = {name: offered[name] for name in accepted_keywords(method, offered)}

    def node(state: OverAllState, config: RunnableConfig) -> Any:
        steered = take_steering(steering, state, config) if steering is not None else ()
        if steered:
            state = with_steered(state, steered)
        first = list(state.value("messages", ())) if hook.takes_messages else state
        with running_for(hook, agent):
            # without ** when the method takes no keyword: a hook's usual call stays as cheap
            result = method(first, config, **keywords) if keywords else method(first, config)
        if hasattr(result, "as_update"):
            result = result.as_update()
        return steered_update(result, steered) if steered else result

    node.__name__ = f"{hook.full_name}.{position}"
    return node
