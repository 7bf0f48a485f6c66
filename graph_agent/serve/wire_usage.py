"""Token usage on LangGraph Server's wire: our :class:`Usage` as LangChain's ``usage_metadata``,
and back.

LangChain's ``UsageMetadata`` (what ``AIMessage(**message)`` validates and LangGraph's front ends
read) is ``{"input_tokens", "output_tokens", "total_tokens"}``, with ``input_token_details``
(``audio``, ``cache_creation``, ``cache_read``) and ``output_token_details`` (``audio``,
``reasoning``) where the provider gave a breakdown: a detail is sent when it is not 0, a
details object only when it holds one. Coming in, that shape is read, and so are OpenAI's names
(``prompt_tokens``, ``completion_tokens``), which servers before this one sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graph_agent.messages import Usage

__all__ = ["UsageError", "usage_from_json", "usage_json"]

_INPUT_DETAILS = {
    "audio": "prompt_audio_tokens",
    "cache_creation": "cache_creation_tokens",
    "cache_read": "cache_read_tokens",
}
_OUTPUT_DETAILS = {"audio": "completion_audio_tokens", "reasoning": "reasoning_tokens"}
_DETAILS = (("input_token_details", _INPUT_DETAILS), ("output_token_details", _OUTPUT_DETAILS))
"""Each details object of ``usage_metadata``: its key, and which field of Usage each detail is."""


class UsageError(ValueError):
    """A ``usage_metadata`` that is not LangChain's shape (or OpenAI's)."""


def usage_json(usage: Usage) -> dict[str, Any]:
    """``usage`` as LangChain's ``usage_metadata``.

    Example:
        >>> usage_json(Usage(prompt_tokens=100, completion_tokens=5, total_tokens=105))
        {'input_tokens': 100, 'output_tokens': 5, 'total_tokens': 105}
        >>> usage_json(Usage(prompt_tokens=100, cache_read_tokens=90))["input_token_details"]
        {'cache_read': 90}
    """
    body: dict[str, Any] = {
        "input_tokens": usage.prompt_tokens,
        "output_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    counts = usage.__dict__
    for key, details in _DETAILS:
        known = {detail: counts[field] for detail, field in details.items() if counts[field]}
        if known:
            body[key] = known
    return body


def usage_from_json(data: Any) -> Usage | None:
    """A message's ``usage_metadata`` as :class:`Usage` (``None`` stays ``None``).

    Raises:
        UsageError: ``data`` is not an object, or a count in it is not a whole number.

    Example:
        >>> usage_from_json({"input_tokens": 9, "output_tokens": 4, "total_tokens": 13,
        ...                  "output_token_details": {"reasoning": 3}})
        Usage(prompt_tokens=9, completion_tokens=4, total_tokens=13, reasoning_tokens=3)
    """
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise UsageError(
            f"usage_metadata is an object of token counts (input_tokens, output_tokens, "
            f"total_tokens), got {data!r:.60}"
        )
    openai_names = "input_tokens" not in data and "prompt_tokens" in data
    prompt = _count(data, "prompt_tokens" if openai_names else "input_tokens", "usage_metadata")
    completion = _count(
        data, "completion_tokens" if openai_names else "output_tokens", "usage_metadata"
    )
    fields = {"prompt_tokens": prompt, "completion_tokens": completion}
    total = data.get("total_tokens")
    fields["total_tokens"] = (
        prompt + completion if total is None else _count(data, "total_tokens", "usage_metadata")
    )
    for key, details in _DETAILS:
        given = data.get(key)
        if given is None:
            continue
        if not isinstance(given, Mapping):
            raise UsageError(
                f"usage_metadata.{key} is an object of token counts, got {given!r:.60}"
            )
        for detail, field in details.items():  # provider-specific extra keys are not kept
            fields[field] = _count(given, detail, f"usage_metadata.{key}")
    return Usage(**fields)


def _count(data: Mapping[str, Any], key: str, where: str) -> int:
    value = data.get(key, 0)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool):
        raise UsageError(f"{where}.{key} must be a whole number of tokens, got {value!r:.40}")
    return value
