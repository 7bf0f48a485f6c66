"""Which real model ``--online`` / ``--base-url`` / ``--model`` / ``--provider`` mean.

Keys and URLs come from the environment (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``,
``DASHSCOPE_API_KEY``, ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``) or the flags, but only
the flags switch the demo online: a key in the environment alone never does, so first runs and
CI stay offline.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_agent.cli.errors import EXIT_USAGE, CliError
from graph_agent.models.base import ChatModel

if TYPE_CHECKING:
    from graph_agent.models.http_chat import HTTPChatModel

__all__ = ["PROVIDERS", "Endpoint", "online_model", "wants_online"]

OPENAI_DEFAULT_MODEL = "gpt-4o-mini"
DASHSCOPE_DEFAULT_MODEL = "qwen-plus"
ANTHROPIC_DEFAULT_MODEL = "claude-sonnet-4-5"
PROVIDERS = ("openai", "anthropic")
"""The wire formats ``--provider`` chooses: OpenAI-compatible (the default) or Anthropic's."""
_OPENAI_URL = "https://api.openai.com/v1"
_ANTHROPIC_URL = "https://api.anthropic.com"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A real model and a description of it for the header (never the key)."""

    model: ChatModel
    description: str


def wants_online(
    *, online: bool, base_url: str | None, model: str | None, provider: str | None = None
) -> bool:
    """Whether the flags ask for a real model."""
    return online or base_url is not None or model is not None or provider is not None


def online_model(
    environ: Mapping[str, str],
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
    provider: str | None = None,
) -> Endpoint:
    """The model the flags and the environment point at.

    ``--provider anthropic``: Anthropic's Messages API (see :func:`_anthropic_model`).
    Otherwise an OpenAI-compatible one, in this order: ``--base-url`` (key from
    ``--api-key-env``, or ``OPENAI_API_KEY`` when the URL is ``OPENAI_BASE_URL``); else
    ``OPENAI_API_KEY``/``OPENAI_BASE_URL``; else ``DASHSCOPE_API_KEY``; else, with only
    ``ANTHROPIC_API_KEY`` set, Anthropic.

    Raises:
        CliError: no endpoint is configured, or it needs a key that is not set.
    """
    from graph_agent.models.openai import OpenAIChatModel

    key = _key_from(environ, api_key_env)
    if provider == "anthropic":
        return _anthropic_model(environ, base_url=base_url, model=model, key=key)
    if base_url is not None:
        _check_url(base_url, "--base-url")
        name = model or environ.get("OPENAI_MODEL") or OPENAI_DEFAULT_MODEL
        with _bad_url("--base-url"):
            chat = OpenAIChatModel(name, base_url=base_url, api_key=key)
        return Endpoint(chat, _shown(chat))
    if environ.get("OPENAI_API_KEY") or environ.get("OPENAI_BASE_URL"):
        url = (environ.get("OPENAI_BASE_URL") or _OPENAI_URL).rstrip("/")
        if url == _OPENAI_URL and not (key or environ.get("OPENAI_API_KEY")):
            raise _missing_key("api.openai.com needs an API key, and OPENAI_API_KEY is not set")
        _check_url(url, "OPENAI_BASE_URL")
        name = model or environ.get("OPENAI_MODEL") or OPENAI_DEFAULT_MODEL
        with _bad_url("OPENAI_BASE_URL"):
            chat = OpenAIChatModel(
                name, base_url=url, api_key=key or environ.get("OPENAI_API_KEY") or None
            )
        return Endpoint(chat, _shown(chat))
    if environ.get("DASHSCOPE_API_KEY"):
        name = model or DASHSCOPE_DEFAULT_MODEL
        with _bad_url("DASHSCOPE_BASE_URL"):
            chat = OpenAIChatModel.dashscope(model=name, api_key=environ["DASHSCOPE_API_KEY"])
        return Endpoint(chat, f"{name} on DashScope")
    if environ.get("ANTHROPIC_API_KEY"):
        return _anthropic_model(environ, base_url=None, model=model, key=key)
    raise _missing_key(
        "--online needs a model endpoint, and none is set: no OPENAI_API_KEY, "
        "OPENAI_BASE_URL, DASHSCOPE_API_KEY or ANTHROPIC_API_KEY in the environment"
    )


def _anthropic_model(
    environ: Mapping[str, str], *, base_url: str | None, model: str | None, key: str | None
) -> Endpoint:
    """Anthropic's Messages API: ``--base-url``, else ``ANTHROPIC_BASE_URL``, else Anthropic's
    own; the key from ``--api-key-env``, else ``ANTHROPIC_API_KEY`` (never sent to another
    server than ``ANTHROPIC_BASE_URL``'s or Anthropic's); the model from ``--model``, else
    ``ANTHROPIC_MODEL``, else ``claude-sonnet-4-5``."""
    from graph_agent.models.anthropic import AnthropicChatModel

    source = "--base-url" if base_url is not None else "ANTHROPIC_BASE_URL"
    url = (base_url or environ.get("ANTHROPIC_BASE_URL") or _ANTHROPIC_URL).rstrip("/")
    _check_url(url, source)
    if key is None and (base_url is None or url == environ.get("ANTHROPIC_BASE_URL")):
        key = environ.get("ANTHROPIC_API_KEY") or None
    if url == _ANTHROPIC_URL and not key:
        raise CliError(
            "api.anthropic.com needs an API key, and ANTHROPIC_API_KEY is not set",
            "export ANTHROPIC_API_KEY=..., or pass --api-key-env VAR",
            EXIT_USAGE,
        )
    name = model or environ.get("ANTHROPIC_MODEL") or ANTHROPIC_DEFAULT_MODEL
    with _bad_url(source):
        chat = AnthropicChatModel(name, base_url=url, api_key=key)
    return Endpoint(chat, _shown(chat))


def _url_form(source: str) -> str:
    example = "http://localhost:11434/v1"
    shown = f"--base-url {example}" if source.startswith("--") else f"{source}={example}"
    return f"use the form http://host:port/v1, e.g. {shown}"


def _check_url(url: str, source: str) -> None:
    """Refuse a URL the client cannot use before any request: a bad port, no http(s) scheme
    (``localhost:11434/v1``), no host. The URL is not repeated: it may carry credentials."""
    import httpx

    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise CliError(
            f"{source} is not a valid URL ({exc})", _url_form(source), EXIT_USAGE
        ) from None
    if parsed.scheme not in ("http", "https"):
        raise CliError(
            f"{source} must start with http:// or https://", _url_form(source), EXIT_USAGE
        )
    if not parsed.host:
        raise CliError(f"{source} names no host", _url_form(source), EXIT_USAGE)


@contextlib.contextmanager
def _bad_url(source: str) -> Iterator[None]:
    """What the model client itself refuses in a URL, as a usage error naming ``source``."""
    import httpx

    try:
        yield
    except (ValueError, httpx.InvalidURL) as exc:
        reason = " ".join(str(exc).split())
        raise CliError(f"{source} cannot be used: {reason}", _url_form(source), EXIT_USAGE) from exc


def _shown(chat: HTTPChatModel) -> str:
    """The model and its URL as the client shows them in its repr and errors: without the
    credentials a URL may carry (``user:pass@``, ``?key=...``)."""
    return f"{chat.model} at {chat._display_url}"


def _key_from(environ: Mapping[str, str], api_key_env: str | None) -> str | None:
    if api_key_env is None:
        return None
    key = environ.get(api_key_env)
    if not key:
        raise CliError(
            f"--api-key-env {api_key_env}: that environment variable is not set",
            f"export {api_key_env}=... first",
            EXIT_USAGE,
        )
    return key


def _missing_key(message: str) -> CliError:
    return CliError(
        message,
        "export OPENAI_API_KEY=... (OpenAI) or DASHSCOPE_API_KEY=... (Qwen), or use a local "
        "server: --base-url http://localhost:11434/v1 --model llama3.1 (Ollama)",
        EXIT_USAGE,
    )
