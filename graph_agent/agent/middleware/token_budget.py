"""Model call budget by tokens: the run stops once its model calls have used a token budget.

The model node adds up the tokens each answer reports in its ``usage`` (``total_tokens``, or
prompt plus completion when the total is missing), for the run and for the thread, in the
agent's private counters. :class:`TokenBudgetHook` checks them before each model call, as
:class:`~graph_agent.agent.builtin_hooks.ModelCallLimitHook` checks the number of calls (it
is that hook, counting tokens): once ``run_limit`` (this run) or ``thread_limit`` (the
thread) is reached, no further call is made, and the run ends with a message
(``exit_behavior="end"``; the answer's ``finish_reason`` is ``"token_budget"``) or raises
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

from typing import ClassVar

from graph_agent.agent.builtin_hooks import ModelCallLimitHook


class TokenBudgetHook(ModelCallLimitHook):
    """Stops the run before a model call once ``run_limit`` tokens were used in this run or
    ``thread_limit`` on the thread (see the module docstring).

    Raises:
        TypeError: a limit is not an int.
        ValueError: no limit is given, a limit is negative, or ``exit_behavior`` is neither
            ``"end"`` nor ``"error"``.
    """

    name = "token_budget"
    counted: ClassVar[str] = "tokens"
    finish_reason: ClassVar[str] = "token_budget"

    def stop_text(self, reached: int, run_count: int, thread_count: int) -> str:
        by_run = reached == self.run_limit and run_count >= reached
        scope, used = ("run", run_count) if by_run else ("thread", thread_count)
        return f"Stopped: the {scope}'s token budget ({reached}) was used up ({used} tokens)."

    def __repr__(self) -> str:
        return f"TokenBudgetHook(run_limit={self.run_limit}, thread_limit={self.thread_limit})"
