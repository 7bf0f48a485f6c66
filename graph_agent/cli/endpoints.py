"""Which real model ``--online`` / ``--base-url`` / ``--model`` mean.

Keys and URLs come from the environment (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``,
``DASHSCOPE_API_KEY``) or the flags, but only the flags switch the demo online: a key in the
environment alone never does, so first runs and CI stay offline.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_agent.cli.errors import EXIT_USAGE, CliError
from graph_agent.models.base import ChatModel

if TYPE_CHECKING:
    from graph_agent.models.openai import OpenAIChatModel

__all__ = ["Endpoint", "online_model", "wants_online"]

OPENAI_DEFAULT_MODEL = "gpt-4o-mini"
DASHSCOPE_DEFAULT_MODEL = "qwen-plus"
_OPENAI_URL = "https://api.openai.com/v1"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A real model and a description of it for the header (never the key)."""

    model: ChatModel
    description: str


def wants_online(*, online: bool, base_url: str | None, model: str | None) -> bool:
    """Whether the flags ask for a real model."""
    return online or base_url is not None or model is not None


def online_model(
    environ: Mapping[str, str],
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
) -> Endpoint:
    """The OpenAI-compatible model the flags and the environment point at.

    Order: ``--base-url`` (key from ``--api-key-env``, or ``OPENAI_API_KEY`` when the URL is
    ``OPENAI_BASE_URL``); else ``OPENAI_API_KEY``/``OPENAI_BASE_URL``; else ``DASHSCOPE_API_KEY``.

    Raises:
        CliError: no endpoint is configured, or it needs a key that is not set.
    """
    from graph_agent.models.openai import OpenAIChatModel

    key = _key_from(environ, api_key_env)
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
    raise _missing_key(
        "--online needs a model endpoint, and none is set: no OPENAI_API_KEY, "
        "OPENAI_BASE_URL or DASHSCOPE_API_KEY in the environment"
    )


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


def _shown(chat: OpenAIChatModel) -> str:
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
