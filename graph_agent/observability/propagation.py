"""The W3C trace context (``traceparent``, ``tracestate``) of an HTTP request, carried into a
run's ``RunnableConfig.metadata``: there the OpenTelemetry listener (``otel.py``) continues
the caller's trace, whatever process runs the run (``graph-agent serve`` queues runs)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

TRACE_HEADERS = ("traceparent", "tracestate")
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
_MAX_TRACESTATE = 512  # the W3C limit


def trace_context(headers: Mapping[str, str]) -> dict[str, str]:
    """The request's valid trace headers (none when its ``traceparent`` is malformed).

    Example:
        >>> trace_context({"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"})
        {'traceparent': '00-11111111111111111111111111111111-2222222222222222-01'}
        >>> trace_context({"traceparent": "junk"})
        {}
    """
    parent = headers.get("traceparent", "").strip().lower()
    if not _TRACEPARENT.fullmatch(parent):
        return {}
    found = {"traceparent": parent}
    state = headers.get("tracestate", "").strip()
    if state and len(state) <= _MAX_TRACESTATE:
        found["tracestate"] = state
    return found


def with_trace_context(body: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
    """A run request's ``body`` with the request's trace headers added to its ``metadata``
    (a ``traceparent`` the metadata already names wins)."""
    found = trace_context(headers)
    metadata = body.get("metadata")
    if not found or (metadata is not None and not isinstance(metadata, dict)):
        return body  # nothing to carry, or a bad metadata the request check reports
    return {**body, "metadata": {**found, **(metadata or {})}}
