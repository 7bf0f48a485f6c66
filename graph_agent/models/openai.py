"""``OpenAIChatModel``: the OpenAI-compatible ``/chat/completions`` client over httpx.

It covers OpenAI, DashScope/Qwen (compatible mode), DeepSeek, vLLM, Ollama and llama.cpp. The
wire format lives in :mod:`graph_agent.models.openai_format`; the HTTP machinery (clients,
retries, SSE streaming, errors) is :class:`~graph_agent.models.http_chat.HTTPChatModel`'s,
shared with the other providers' clients.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any, ClassVar

import httpx

from graph_agent.messages import AssistantMessage
from graph_agent.models.base import ModelRequest
from graph_agent.models.endpoint import resolve_endpoint
from graph_agent.models.http_chat import HTTPChatModel, StreamDecoding
from graph_agent.models.openai_format import (
    StreamDecoder,
    build_request_body,
    parse_completion,
    rejects_required_tool_choice,
    server_message,
)
from graph_agent.models.retry import RetryPolicy

__all__ = ["OpenAIChatModel"]

logger = logging.getLogger("graph_agent.models.openai")

OPENAI_BASE_URL = "https://api.openai.com/v1"
DASHSCOPE_BASE_URL = "https://dashscope.aliyuncs.com/compatible-mode/v1"


class OpenAIChatModel(HTTPChatModel):
    """A chat model served over the OpenAI chat-completions API.

    Args:
        model: The model name, e.g. ``"gpt-4o-mini"``, ``"qwen-plus"``, ``"llama3"``.
        base_url: The API root (``.../v1``). Defaults to ``OPENAI_BASE_URL``, else OpenAI's.
            Requests go to its path plus ``/chat/completions``; a query (Azure's
            ``?api-version=...``) is kept. A URL that is not ``http(s)://host...`` is a
            ``ValueError``.
        api_key: Sent as a bearer token. Defaults to ``OPENAI_API_KEY``, but only when
            ``base_url`` is that default too, so your OpenAI key never goes to another server.
            Local servers (Ollama, vLLM, llama.cpp) need none.
        timeout: Seconds for connecting, sending and each wait for the next bytes (so a slow but
            steady stream does not time out), or an ``httpx.Timeout``.
        max_retries: Extra attempts on 408/409/429/5xx and connection errors.
        options: Extra request fields sent with every call, e.g. ``{"temperature": 0}``;
            a call's own ``options`` override them, and ``None`` values are left out.
        headers: Extra HTTP headers sent with every call.
        retry: Backoff settings; its ``max_retries`` is replaced by ``max_retries``.

    The API key is kept out of ``repr``, logs and error messages (a key shorter than 8
    characters is a placeholder, not a secret, and is not masked).

    ``tool_choice`` is sent as given, ``"required"`` included. A server that refuses
    ``"required"`` the way llama.cpp-based servers do (HTTP 500, with an empty body or an error
    naming ``tool_choice``) gets the request once more with ``"auto"`` at once, with a warning;
    that extra request does not count as a retry. Once such a server has accepted ``"auto"``,
    this model sends ``"auto"`` for ``"required"``.

    Example:
        >>> from graph_agent.models import OpenAIChatModel
        >>> model = OpenAIChatModel("llama3", base_url="http://127.0.0.1:11434/v1")
        >>> model
        OpenAIChatModel(model='llama3', base_url='http://127.0.0.1:11434/v1')
        >>> # reply = model.generate([UserMessage("hi")], tools=[get_weather])
        >>> # for chunk in model.stream([UserMessage("hi")]): print(chunk.text, end="")
    """

    provider: str | None = "openai"  # its traces' gen_ai.provider.name
    _logger: ClassVar[logging.Logger] = logger
    _not_found_hint: ClassVar[str] = (
        "; check the model name, and that base_url is the API root (often ending in /v1)"
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
        headers: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        endpoint = resolve_endpoint(
            base_url,
            api_key,
            default_url=OPENAI_BASE_URL,
            url_variable="OPENAI_BASE_URL",
            key_variable="OPENAI_API_KEY",
        )
        # Set once the server refused tool_choice="required" and accepted "auto" instead.
        self._required_tool_choice_refused = False
        super().__init__(
            model,
            base_url=endpoint.base_url,
            base_url_source=endpoint.source,
            api_key=endpoint.api_key,
            timeout=timeout,
            max_retries=max_retries,
            options=options,
            headers=headers,
            retry=retry,
        )

    @classmethod
    def dashscope(
        cls,
        model: str = "qwen-plus",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        **kwargs: Any,
    ) -> OpenAIChatModel:
        """Qwen on Alibaba Cloud DashScope, in OpenAI-compatible mode.

        The key defaults to ``DASHSCOPE_API_KEY``; the URL to ``DASHSCOPE_BASE_URL`` or the
        mainland endpoint (use ``https://dashscope-intl.aliyuncs.com/compatible-mode/v1``
        outside China).

        Example:
            >>> OpenAIChatModel.dashscope(model="qwen-max", api_key="k").base_url
            'https://dashscope.aliyuncs.com/compatible-mode/v1'
        """
        return cls(
            model,
            base_url=base_url or os.environ.get("DASHSCOPE_BASE_URL") or DASHSCOPE_BASE_URL,
            api_key=api_key if api_key is not None else os.environ.get("DASHSCOPE_API_KEY"),
            **kwargs,
        )

    def _endpoint_path(self, base_path: str) -> str:
        if base_path.endswith("/chat/completions"):
            return base_path
        return base_path + "/chat/completions"

    def _auth_headers(self, secret: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {secret}"}

    def _parse(self, data: Any, *, request: ModelRequest) -> AssistantMessage:
        return parse_completion(data, tools_offered=bool(request.tools))

    def _decoder(self, message_id: str, *, request: ModelRequest) -> StreamDecoding:
        return StreamDecoder(message_id=message_id, tools_offered=bool(request.tools))

    def _body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        body = build_request_body(self.model, request, self.options, stream=stream)
        if self._required_tool_choice_refused and body.get("tool_choice") == "required":
            logger.debug('%s: sends tool_choice="auto" for "required" (refused)', self._where)
            body["tool_choice"] = "auto"
        return body

    def _fallback_body(
        self, body: dict[str, Any], response: httpx.Response
    ) -> dict[str, Any] | None:
        """The request to send instead when ``response`` refused ``tool_choice="required"``
        the llama.cpp way (HTTP 500, empty or naming tool_choice); ``None`` for every other
        failure."""
        if not rejects_required_tool_choice(body, response.status_code, response.text):
            return None
        message, _ = server_message(response.text)
        logger.warning(
            "%s",
            self._redact(
                f'{self._where} refused tool_choice="required" with HTTP 500 ({message}), as '
                'llama.cpp-based servers do; sending the request again with tool_choice="auto", '
                "so the model may answer without calling a tool"
            ),
        )
        return {**body, "tool_choice": "auto"}

    def _accepted(self, *, fell_back: bool) -> None:
        """Note a successful response; after a fallback, "auto" replaces "required" from now on."""
        if fell_back and not self._required_tool_choice_refused:
            self._required_tool_choice_refused = True
            logger.info(
                '%s accepted tool_choice="auto" after refusing "required"; this model sends '
                '"auto" for "required" from now on',
                self._where,
            )
