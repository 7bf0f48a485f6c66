"""Instruction templates: ``{key}`` placeholders filled from the agent's state at model time.

``instruction="Help {user_name} in {lang}."`` reads the state keys ``user_name`` and ``lang``
each time the model is called, so a value an earlier agent of a team stored (its
``output_key``) or the caller passed in the input is what the model sees. Only a Python
identifier in braces is a placeholder; other braces (a JSON example) stay as written, and
``{{`` / ``}}`` are literal braces.

Example:
    >>> placeholders("Help {user_name}; answer like {\\"ok\\": true} in {lang}.")
    ('user_name', 'lang')
    >>> fill("Dear {name} {{literal}}", {"name": "Ada"}, agent="mailer")
    'Dear Ada {literal}'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from graph_agent.graph.errors import GraphRuntimeError

_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


class InstructionKeyError(GraphRuntimeError):
    """An instruction names a ``{key}`` that the agent's state does not hold."""


def placeholders(template: str) -> tuple[str, ...]:
    """The state keys ``template`` reads, in order of first use."""
    names = (match.group(1) for match in _TOKEN.finditer(template))
    return tuple(dict.fromkeys(name for name in names if name is not None))


def is_template(text: str) -> bool:
    """Whether ``text`` has placeholders or escaped braces (and so must be filled)."""
    return _TOKEN.search(text) is not None


def fill(template: str, state: Mapping[str, Any], *, agent: str) -> str:
    """``template`` with each ``{key}`` replaced by the state's value (text as is, a pydantic
    model as its JSON, anything else as ``str()``).

    Raises:
        InstructionKeyError: a placeholder names a key the state does not hold.
    """

    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key is None:
            return match.group(0)[0]  # {{ or }}
        if key not in state:
            raise InstructionKeyError(
                f"agent {agent!r}: its instruction reads {{{key}}}, but the state holds no "
                f"{key!r} (its keys: {', '.join(map(repr, sorted(state))) or 'none'}); pass it "
                f"in the input ({{'messages': ..., {key!r}: ...}}), or let an earlier agent of "
                f"the team store it with output_key={key!r}; write {{{{{key}}}}} for literal "
                "braces"
            )
        return _text(state[key])

    return _TOKEN.sub(replace, template)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return str(value)
