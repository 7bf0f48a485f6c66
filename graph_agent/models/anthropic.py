"""``AnthropicChatModel``: Anthropic's Messages API (``POST /v1/messages``) over httpx.

The wire format lives in :mod:`graph_agent.models.anthropic_format`, and ``response_format``
(an answer tool the model is made to call) in :mod:`graph_agent.models.anthropic_structured`;
the HTTP machinery (clients, retries, SSE streaming, errors) is
:class:`~graph_agent.models.http_chat.HTTPChatModel`'s, the same as
:class:`~graph_agent.models.openai.OpenAIChatModel`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import httpx

from graph_agent.messages import AssistantMessage
from graph_agent.models.anthropic_format import StreamDecoder, build_request_body, parse_message
from graph_agent.models.anthropic_structured import (
    StructuredStreamDecoder,
    other_tools_callable,
    structured_answer,
    structured_output,
)
from graph_agent.models.base import ModelRequest
from graph_agent.models.endpoint import resolve_endpoint
from graph_agent.models.http_chat import HTTPChatModel, StreamDecoding
from graph_agent.models.retry import RetryPolicy

__all__ = ["AnthropicChatModel"]

logger = logging.getLogger("graph_agent.models.anthropic")

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


class AnthropicChatModel(HTTPChatModel):
    """A Claude model served over Anthropic's Messages API.

    Args:
        model: The model name, e.g. ``"claude-sonnet-4-5"``.
        base_url: The API root, as the Anthropic SDKs take it: ``https://api.anthropic.com``
            (the default, or ``ANTHROPIC_BASE_URL``) or a proxy's root. Requests go to its path
            plus ``/v1/messages`` (a root already ending in ``/v1`` gets ``/messages``).
        api_key: Sent as ``x-api-key``. Defaults to ``ANTHROPIC_API_KEY``, but only when
            ``base_url`` is that default too, so your Anthropic key never goes to another
            server.
        timeout: Seconds for connecting, sending and each wait for the next bytes, or an
            ``httpx.Timeout``.
        max_retries: Extra attempts on 408/409/429/5xx (529 "overloaded" included) and
            connection errors, honouring ``retry-after``.
        options: Extra request fields sent with every call, e.g. ``{"temperature": 0}``;
            a call's own ``options`` override them, and ``None`` values are left out.
        max_tokens: The most tokens an answer may take (the API requires a limit); an
            option of the same name overrides it for a call.
        thinking: Extended thinking: a token budget (below ``max_tokens``), or the API's
            ``thinking`` object; ``None``: off.
        headers: Extra HTTP headers, e.g. ``{"anthropic-beta": "..."}``, or another
            ``anthropic-version`` than ``2023-06-01``.
        retry: Backoff settings; its ``max_retries`` is replaced by ``max_retries``.

    Thinking blocks come back on the answer's ``thinking_blocks`` (their text also as its
    ``reasoning``) and are sent back unchanged with the conversation, as the API requires when
    the model thinks and calls tools. ``options={"response_format": Model}`` makes the model
    call a tool whose input is the answer, returned as the answer's JSON text (see
    :mod:`graph_agent.models.anthropic_structured`, also for what thinking changes). Errors are
    those of :mod:`graph_agent.models.errors`, with the server's own message and never the key.

    Example:
        >>> from graph_agent.models import AnthropicChatModel
        >>> model = AnthropicChatModel("claude-sonnet-4-5", api_key="sk-ant-...", thinking=2048)
        >>> model
        AnthropicChatModel(model='claude-sonnet-4-5', base_url='https://api.anthropic.com')
        >>> # reply = model.generate([UserMessage("hi")], tools=[get_weather])
        >>> # for chunk in model.stream([UserMessage("hi")]): print(chunk.text, end="")
    """

    provider: str | None = "anthropic"  # its traces' gen_ai.provider.name
    _logger: ClassVar[logging.Logger] = logger
    _example_url: ClassVar[str] = ANTHROPIC_BASE_URL
    _not_found_hint: ClassVar[str] = (
        "; check the model name, and that base_url is the API root (requests go to "
        "its /v1/messages)"
    )

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = 60.0,
        max_retries: int = 2,
        options: Mapping[str, Any] | None = None,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        thinking: int | Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a whole number of 1 or more, got {max_tokens!r}")
        if isinstance(thinking, int) and not isinstance(thinking, bool):
            if not 0 < thinking < max_tokens:
                raise ValueError(
                    f"thinking={thinking} must be a token budget above 0 and below "
                    f"max_tokens={max_tokens} (the answer's text comes out of max_tokens too); "
                    "raise max_tokens or lower the budget"
                )
        elif thinking is not None and not isinstance(thinking, Mapping):
            raise ValueError(
                f"thinking must be a token budget (e.g. 2048), the API's thinking object or "
                f"None, got {thinking!r}"
            )
        endpoint = resolve_endpoint(
            base_url,
            api_key,
            default_url=ANTHROPIC_BASE_URL,
            url_variable="ANTHROPIC_BASE_URL",
            key_variable="ANTHROPIC_API_KEY",
        )
        self.max_tokens = max_tokens
        self.thinking = thinking
        super().__init__(
            model,
            base_url=endpoint.base_url,
            base_url_source=endpoint.source,
            api_key=endpoint.api_key,
            timeout=timeout,
            max_retries=max_retries,
            options=options,
            headers={"anthropic-version": ANTHROPIC_VERSION, **dict(headers or {})},
            retry=retry,
        )

    def _endpoint_path(self, base_path: str) -> str:
        if base_path.endswith("/v1/messages"):
            return base_path
        if base_path.endswith("/v1"):
            return base_path + "/messages"
        return base_path + "/v1/messages"

    def _auth_headers(self, secret: str) -> dict[str, str]:
        return {"x-api-key": secret}

    def _body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        return build_request_body(
            self.model,
            request,
            self.options,
            max_tokens=self.max_tokens,
            thinking=self.thinking,
            stream=stream,
        )

    def _answer_tool(self, request: ModelRequest) -> str | None:
        """The name of the tool carrying the structured answer, if ``response_format`` asks
        for one (as :func:`build_request_body` offers it)."""
        output = structured_output({**self.options, **request.options}.get("response_format"))
        return None if output is None else output.name

    def _structured_calls_allowed(self, request: ModelRequest) -> bool:
        """Whether a structured answer may be calls of the request's tools (not after the
        caller's ``tool_choice="none"``, which thinking turns into ``auto`` on the wire)."""
        choice = {**self.options, **request.options}.get("tool_choice")
        return other_tools_callable(request.tools, choice)

    def _parse(self, data: Any, *, request: ModelRequest) -> AssistantMessage:
        tools_offered = bool(request.tools)
        answer_tool = self._answer_tool(request)
        if answer_tool is None:
            return parse_message(data, tools_offered=tools_offered)
        reply = parse_message(data, tools_offered=True)
        allowed = self._structured_calls_allowed(request)
        return structured_answer(reply, answer_tool, tools_offered=allowed)

    def _decoder(self, message_id: str, *, request: ModelRequest) -> StreamDecoding:
        tools_offered = bool(request.tools)
        answer_tool = self._answer_tool(request)
        if answer_tool is None:
            return StreamDecoder(message_id=message_id, tools_offered=tools_offered)
        decoder = StreamDecoder(message_id=message_id, tools_offered=True)
        allowed = self._structured_calls_allowed(request)
        return StructuredStreamDecoder(decoder, answer_tool, tools_offered=allowed)
