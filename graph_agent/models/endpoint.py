"""Where an HTTP chat model sends its requests: the base URL and key a provider's client resolves
from its arguments and environment, and the check that a base URL is ``http(s)://host...``."""

from __future__ import annotations

import dataclasses
import os

import httpx

__all__ = ["Endpoint", "resolve_endpoint"]


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a client sends its requests, and with which key (see :func:`resolve_endpoint`)."""

    base_url: str
    api_key: str | None
    source: str
    """What named ``base_url``: ``"base_url"``, or the environment variable it came from."""


def resolve_endpoint(
    base_url: str | None,
    api_key: str | None,
    *,
    default_url: str,
    url_variable: str,
    key_variable: str,
) -> Endpoint:
    """The URL and key of a provider's client: ``base_url``, else ``$url_variable``, else
    ``default_url``; ``api_key``, else ``$key_variable`` but only when the URL is that default
    (``$url_variable`` or ``default_url``), so a provider's key never goes to another server.

    Example:
        >>> resolve_endpoint("http://127.0.0.1:8080/", None, default_url="https://api.x.com",
        ...                  url_variable="X_BASE_URL", key_variable="X_API_KEY")
        Endpoint(base_url='http://127.0.0.1:8080', api_key=None, source='base_url')
    """
    default = os.environ.get(url_variable) or default_url
    resolved = (base_url or default).rstrip("/")
    if api_key is None and resolved == default.rstrip("/"):
        api_key = os.environ.get(key_variable) or None
    return Endpoint(resolved, api_key, "base_url" if base_url else url_variable)


def _parse_base_url(base_url: str, *, source: str, example: str) -> httpx.URL:
    """``base_url`` as a URL, or a ``ValueError`` naming ``source`` and what is wrong.

    The URL itself is not repeated: it may carry credentials (user:pass@, ?key=).
    """
    fix = f"set {source} to the API root, e.g. {example!r}"
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"{source} is not a valid URL ({exc}); {fix}") from None
    if url.scheme not in ("http", "https"):
        raise ValueError(f"{source} must start with http:// or https://; {fix}")
    if not url.host:
        raise ValueError(f"{source} names no host; {fix}")
    return url
