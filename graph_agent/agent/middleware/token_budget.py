"""Model call budget by tokens: the run stops once its model calls have used a token budget.

The model node adds up the tokens each answer reports in its ``usage`` (prompt plus
completion: ``total_tokens``), for the run and for the thread, in the agent's private
counters. :class:`TokenBudgetHook` checks them before each model call, as
:class:`~graph_agent.agent.builtin_hooks.ModelCallLimitHook` checks the number of calls:
once ``run_limit`` (this run) or ``thread_limit`` (the thread) is reached, no further call is
made, and the run ends with a message (``exit_behavior="end"``, the answer's
``finish_reason`` is ``"token_budget"``) or raises
:class:`~graph_agent.agent.builtin_hooks.AgentLimitError` (``"error"``).

It stops rather than summarises: a summary would be one more call past a budget that is
already spent (an agent that should wrap up instead can use ``max_iterations``, which
summarises). The call that crosses the budget completes, so a run may end somewhat above it;
a call is never cut off halfway. Only the agent's own model calls count, those that report
usage (a model that reports none uses no budget): a tool selector's or a summariser's calls
do not.

Example:
    >>> budget = TokenBudgetHook(run_limit=20_000, thread_limit=200_000)
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from graph_agent.agent.builtin_hooks import AgentLimitError, _exit_behavior, _limit, _limit_reached
from graph_agent.agent.hooks import JumpTo, ModelHook
from graph_agent.agent.keys import RUN_KEY, THREAD_KEY
from graph_agent.agent.nodes import counters
from graph_agent.graph.state import OverAllState
from graph_agent.graph.types import RunnableConfig
from graph_agent.messages import AssistantMessage


class TokenBudgetHook(ModelHook):
    """Stops the run before a model call once ``run_limit`` tokens were used in this run or
    ``thread_limit`` on the thread (see the module docstring).

    Raises:
        TypeError: a limit is not an int.
        ValueError: no limit is given, a limit is negative, or ``exit_behavior`` is neither
            ``"end"`` nor ``"error"``.
    """

    name = "token_budget"
    can_jump_to: ClassVar[tuple[JumpTo, ...]] = (JumpTo.END,)

    def __init__(
        self,
        thread_limit: int | None = None,
        run_limit: int | None = None,
        exit_behavior: Literal["end", "error"] = "end",
    ) -> None:
        if thread_limit is None and run_limit is None:
            raise ValueError("TokenBudgetHook needs thread_limit and/or run_limit (in tokens)")
        self.thread_limit = _limit("TokenBudgetHook", "thread_limit", thread_limit)
        self.run_limit = _limit("TokenBudgetHook", "run_limit", run_limit)
        self.exit_behavior = _exit_behavior("TokenBudgetHook", exit_behavior)

    def before_model(self, state: OverAllState, config: RunnableConfig) -> Any:
        run_tokens = counters(state, RUN_KEY)["tokens"]
        thread_tokens = counters(state, THREAD_KEY)["tokens"]
        reached = _limit_reached(run_tokens, thread_tokens, self.run_limit, self.thread_limit)
        if reached is None:
            return None
        scope = "run" if reached == self.run_limit and run_tokens >= reached else "thread"
        used = run_tokens if scope == "run" else thread_tokens
        text = f"Stopped: the {scope}'s token budget ({reached}) was used up ({used} tokens)."
        if self.exit_behavior == "error":
            raise AgentLimitError(text)
        return {
            "messages": AssistantMessage(text, finish_reason="token_budget"),
            "jump_to": JumpTo.END,
        }

    def __repr__(self) -> str:
        return f"TokenBudgetHook(run_limit={self.run_limit}, thread_limit={self.thread_limit})"
