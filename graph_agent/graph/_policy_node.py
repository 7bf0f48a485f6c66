"""A node with policies (``add_node(..., retry=, timeout=, cache=, error_handler=)``) as the
engine runs it: the user's callable wrapped, at compile time, in a callable that looks its
result up in the cache (``cache.py``), attempts it, cuts each attempt at the timeout, retries,
stores a success in the cache, and hands the last failure to the error handler.

Only nodes with policies are wrapped, so the others pay nothing. The wrapper keeps the node's
kind: a sync node stays sync (it runs inline or on the pool, as before), an async node becomes
an async function, and a :class:`~graph_agent.graph._engine.DualNode` keeps both faces. It
always takes ``(state, config)``: ``config.task`` is where it counts the attempts
(``TaskContext.attempts``), which the flow puts in ``NodeOutput.attempts`` and in the
checkpoint's metadata (``"attempts": {node: n}`` for the nodes that needed more than one).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from graph_agent.graph import cache as cache_clock
from graph_agent.graph._concurrency import TimedOut, at_most, call_with_timeout, run_on_loop
from graph_agent.graph.cache import InMemoryCache, NodeCache, input_key
from graph_agent.graph.errors import GraphSetupError, NodeTimeoutError
from graph_agent.graph.policies import CachePolicy, RetryPolicy, check_timeout
from graph_agent.graph.types import NodeOutput


@dataclass(frozen=True, slots=True, kw_only=True)
class NodePolicy:
    """A node's policies as ``add_node`` took them (each ``None`` when not given)."""

    retry: RetryPolicy | None = None
    timeout: float | None = None
    cache: CachePolicy | None = None
    error_handler: Callable[..., Any] | None = None


def node_policy(
    node: str, retry: Any, timeout: Any, cache: Any, error_handler: Any
) -> NodePolicy | None:
    """``add_node``'s policy arguments, checked (a :class:`GraphSetupError` naming the fix), or
    ``None`` when none was given."""
    if retry is None and timeout is None and cache is None and error_handler is None:
        return None
    where = f"add_node({node!r}, ...)"
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise GraphSetupError(
            f"{where}: retry={retry!r} is no RetryPolicy; pass e.g. "
            "retry=RetryPolicy(max_attempts=3) (from graph_agent import RetryPolicy)"
        )
    if cache is not None and not isinstance(cache, CachePolicy):
        raise GraphSetupError(
            f"{where}: cache={cache!r} is no CachePolicy; pass e.g. cache=CachePolicy(ttl=600)"
        )
    if error_handler is not None and not callable(error_handler):
        raise GraphSetupError(
            f"{where}: error_handler={error_handler!r} is not callable; pass a function "
            "fn(state, error) returning an update dict or a Command"
        )
    return NodePolicy(
        retry=retry, timeout=check_timeout(node, timeout), cache=cache, error_handler=error_handler
    )


class PolicyRunner:
    """Runs one node's attempts under its policy; :meth:`run` for a sync node (or a sync face),
    :meth:`arun` for an async one."""

    __slots__ = ("fn", "name", "namespace", "pass_config", "policy", "store")

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        pass_config: bool,
        policy: NodePolicy,
        store: NodeCache | None = None,
        graph: str = "",
    ) -> None:
        self.name = name
        self.fn = fn
        self.pass_config = pass_config
        self.policy = policy
        self.store = store
        self.namespace = f"{graph}:{name}"
        """The node's entries in the cache: a graph's node names are unique."""

    def _cache_key(self, state: Any) -> str:
        cache = self.policy.cache
        assert cache is not None
        if cache.key is None:
            return input_key(state)
        key = cache.key(state)
        if not isinstance(key, str):
            raise TypeError(
                f"node {self.name!r}: CachePolicy(key=...) returned {type(key).__name__} "
                f"{key!r:.60}; the key function must return a str"
            )
        return key

    def _keeps(self, result: Any) -> bool:
        """Whether a result can be cached: a dict update or None (not a Command)."""
        return result is None or type(result) is dict

    def _expires_at(self) -> float | None:
        cache = self.policy.cache
        assert cache is not None
        return None if cache.ttl is None else cache_clock.now() + cache.ttl

    def run(self, state: Any, config: Any) -> Any:
        """A sync node: its cached result, or its attempts' (then cached)."""
        if self.policy.cache is None:
            return self._attempts(state, config, None)
        assert self.store is not None
        key = self._cache_key(state)
        hit = self.store.cache_get(self.namespace, key, cache_clock.now())
        if hit is not None:
            return hit.value
        return self._attempts(state, config, key)

    async def arun(self, state: Any, config: Any) -> Any:
        """An async node: its cached result, or its attempts' (then cached)."""
        if self.policy.cache is None:
            return await self._aattempts(state, config, None)
        assert self.store is not None
        key = self._cache_key(state)
        hit = await self.store.acache_get(self.namespace, key, cache_clock.now())
        if hit is not None:
            return hit.value
        return await self._aattempts(state, config, key)

    def _call(self, state: Any, config: Any) -> Any:
        return self.fn(state, config) if self.pass_config else self.fn(state)

    def _timed_out(self, config: Any, what: str) -> NodeTimeoutError:
        timeout = self.policy.timeout
        assert timeout is not None
        step = config.task.step if config.task is not None else -1
        return NodeTimeoutError(
            f"node {self.name!r} did not finish within {timeout:g} s (step {step}); {what}. "
            "Give it more time with add_node(..., timeout=...), or retry it with "
            "add_node(..., retry=RetryPolicy())",
            node=self.name,
            step=step,
            timeout=timeout,
        )

    def _retry_delay(self, error: Exception, attempt: int, config: Any) -> float | None:
        """The wait before the next attempt, or ``None``: ``error`` ends the node."""
        retry = self.policy.retry
        if retry is None or attempt >= retry.max_attempts or not retry.retries(error):
            return None
        task = config.task
        if task is not None:
            task.attempts = attempt + 1
            task._interrupt_count = 0  # the next attempt asks its interrupts under the same ids
        return retry.delay(attempt)

    def _attempts(self, state: Any, config: Any, key: str | None) -> Any:
        """A sync node's attempts: the first success (stored under ``key`` when given), or the
        handler's answer."""
        timeout, retry = self.policy.timeout, self.policy.retry
        attempt = 1
        while True:
            try:
                if timeout is None:
                    result = self._call(state, config)
                else:
                    try:
                        result = call_with_timeout(
                            lambda: self._call(state, config),
                            timeout,
                            thread_name=f"graph-agent-node-{self.name}",
                        )
                    except TimedOut:
                        what = "it was abandoned on its thread, and its result will be discarded"
                        raise self._timed_out(config, what) from None
                if type(result) is not dict and inspect.isawaitable(result):
                    result = run_on_loop(_awaited(result))
                if key is not None and self._keeps(result):
                    assert self.store is not None
                    self.store.cache_put(self.namespace, key, result, self._expires_at())
                return result
            except Exception as error:
                delay = self._retry_delay(error, attempt, config)
                if delay is None:
                    return self._handle(state, error)
            assert retry is not None
            retry.sleep(delay)
            attempt += 1

    async def _aattempts(self, state: Any, config: Any, key: str | None) -> Any:
        """An async node's attempts (each cancelled at the timeout)."""
        timeout, retry = self.policy.timeout, self.policy.retry
        attempt = 1
        while True:
            try:
                result = self._call(state, config)
                if inspect.isawaitable(result):
                    if timeout is None:
                        result = await result
                    else:
                        try:
                            result = await at_most(result, timeout)
                        except TimedOut:
                            raise self._timed_out(config, "it was cancelled") from None
                if key is not None and self._keeps(result):
                    assert self.store is not None
                    await self.store.acache_put(self.namespace, key, result, self._expires_at())
                return result
            except Exception as error:
                delay = self._retry_delay(error, attempt, config)
                if delay is None:
                    answer = self._handle(state, error)
                    return await answer if inspect.isawaitable(answer) else answer
            assert retry is not None
            await retry.async_sleep(delay)
            attempt += 1

    def _handle(self, state: Any, error: Exception) -> Any:
        """The error handler's answer to the last failure, or the failure raised again."""
        handler = self.policy.error_handler
        if handler is None:
            raise error
        return handler(state, error)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


class _SyncPolicyNode:
    """A sync node under its policy."""

    __slots__ = ("__wrapped__", "runner")

    def __init__(self, runner: PolicyRunner) -> None:
        self.runner = runner
        self.__wrapped__ = runner.fn

    def __call__(self, state: Any, config: Any) -> Any:
        return self.runner.run(state, config)

    def __getattr__(self, name: str) -> Any:
        """What the engine reads of the wrapped node (a subgraph node's ``child``)."""
        if name == "runner":  # not set yet: no node to ask
            raise AttributeError(name)
        return getattr(self.runner.fn, name)


def wrap(
    name: str,
    fn: Callable[..., Any],
    *,
    pass_config: bool,
    is_async: bool,
    afn: Callable[..., Any] | None,
    policy: NodePolicy,
    store: NodeCache | None = None,
    graph: str = "",
) -> tuple[Callable[..., Any], Callable[..., Any] | None]:
    """The node's callable (and, for a DualNode, its async face) under ``policy``; both take
    ``(state, config)``. ``store``: where its cache lives (when it has a ``CachePolicy``)."""
    if is_async:
        return PolicyRunner(name, fn, pass_config, policy, store, graph).arun, None
    sync = _SyncPolicyNode(PolicyRunner(name, fn, pass_config, policy, store, graph))
    if afn is None:
        return sync, None
    return sync, PolicyRunner(name, afn, True, policy, store, graph).arun


def attempts_of(tasks: Any) -> dict[str, int]:
    """The step's tasks that needed more than one attempt: ``{node: attempts}`` (a Send's task
    as ``"node (Send k)"``), for the checkpoint's metadata."""
    found: dict[str, int] = {}
    for task in tasks:
        attempts = getattr(task.context, "attempts", 1)
        if attempts > 1:
            context = task.context
            label = f"{context.node} (Send {context.index - 1})" if context.index else context.node
            found[label] = attempts
    return found


def with_attempts(outputs: Any, tasks: Any) -> Any:
    """A step's outputs (one NodeOutput, or an Emit of several, in task order) with each
    task's ``attempts``."""
    if isinstance(outputs, NodeOutput):
        attempts = getattr(tasks[0].context, "attempts", 1)
        return outputs if attempts == 1 else dataclasses.replace(outputs, attempts=attempts)
    outputs.items = [
        output
        if (n := getattr(task.context, "attempts", 1)) == 1
        else dataclasses.replace(output, attempts=n)
        for output, task in zip(outputs.items, tasks, strict=True)
    ]
    return outputs


def node_cache(config: Any, nodes: Iterable[Any]) -> NodeCache | None:
    """Where the graph's cached nodes keep their results (``None``: no node caches)."""
    if not any(node.policy is not None and node.policy.cache is not None for node in nodes):
        return None
    if config.cache is not None:
        if not isinstance(config.cache, NodeCache):
            raise GraphSetupError(
                f"CompileConfig(cache={config.cache!r}): not a node cache; pass an "
                "InMemoryCache() (graph_agent.graph.cache), a saver, or leave it out"
            )
        return config.cache
    return config.saver if isinstance(config.saver, NodeCache) else InMemoryCache()
