"""The agent's state keys of its own: bookkeeping the graph keeps, hidden from ``data()``.

``_agent_run`` holds the counters of the current run (model calls, iterations, tool calls per
tool; reset by new input, kept across resumes), ``_agent_thread`` the same for the thread.
"""

from __future__ import annotations

JUMP_KEY = "jump_to"
"""Where a hook (or a tool's ``Command.goto``) asks the router after it to jump: ephemeral."""
RUN_KEY = "_agent_run"
THREAD_KEY = "_agent_thread"
REJECTED_KEY = "_agent_rejected"
"""Tool calls a human rejected, with the reasons, for the assistant message that made them:
``{message id: {call id: reason}}``. The tool node answers them with the rejection (in call
order, with the other results) instead of running them, then drops them; new input drops
them too. Keyed by the message, a rejection never reaches a later call that reuses the id."""
RUN_INPUT_KEY = "_agent_input"
"""The id of the last message of the current run's input (or, when the input added none, of
the last message before it): the messages the run added follow it. ``None`` on an empty
thread."""
STEERED_KEY = "_agent_steered"
"""The ids of the steering messages the last step that delivered any carried (see
:mod:`graph_agent.agent.steering`): a message there is never delivered again, even once a
hook removed it from the history."""
AGENT_KEYS = frozenset({RUN_KEY, THREAD_KEY, REJECTED_KEY, RUN_INPUT_KEY, STEERED_KEY, JUMP_KEY})
"""The agent's own bookkeeping keys: no tool or output may write them."""
