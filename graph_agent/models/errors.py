"""Errors of chat model calls: :class:`ModelError` and the subclasses saying what failed.

::

    GraphAgentError                        the root (graph_agent.graph.errors)
    └── ModelError (RuntimeError)          .status_code: the HTTP status, when there was one
        ├── ModelAuthenticationError       401/403: a missing, wrong or unauthorised API key
        ├── ModelNotFoundError             404: unknown model name or wrong base_url
        ├── ModelBadRequestError           400, 422, other 4xx: the server refused the request
        │   └── ModelContextLengthError    the conversation is longer than the model's context
        ├── ModelRateLimitError            429 still after the retries, or Retry-After too long
        ├── ModelServerError               408/409/5xx still after the retries
        ├── ModelConnectionError           no connection, or it broke (also mid-stream)
        │   ├── ModelTimeoutError          connect/read/write timeout
        │   └── ModelStreamCutError        the server began a streamed answer and it was
        │                                  cut: the connection dropped, or the stream
        │                                  ended without a finish reason
        ├── ModelResponseError             HTTP 200 with something that is not a completion,
        │                                  or a body that cannot be decompressed
        └── UnrecordedRequestError         a replayed model got a request it never recorded

Messages carry the server's own message and never the API key.
"""

from __future__ import annotations

from graph_agent.graph.errors import GraphAgentError

__all__ = [
    "ModelAuthenticationError",
    "ModelBadRequestError",
    "ModelConnectionError",
    "ModelContextLengthError",
    "ModelError",
    "ModelNotFoundError",
    "ModelRateLimitError",
    "ModelResponseError",
    "ModelServerError",
    "ModelStreamCutError",
    "ModelTimeoutError",
    "UnrecordedRequestError",
]


class ModelError(GraphAgentError, RuntimeError):
    """A chat model call failed. ``status_code`` is the HTTP status when there was one.

    ``transient``: another attempt later may well succeed (a lost connection, a 5xx, a rate
    limit); what a node's default ``RetryPolicy.retry_on`` retries."""

    transient: bool = False

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ModelAuthenticationError(ModelError):
    """HTTP 401 or 403: the API key is missing, wrong, or not allowed to use this model."""


class ModelNotFoundError(ModelError):
    """HTTP 404: the model name is unknown to the server, or ``base_url`` points elsewhere."""


class ModelBadRequestError(ModelError):
    """HTTP 400, 422 or another 4xx that retrying cannot fix."""


class ModelContextLengthError(ModelBadRequestError):
    """The messages (plus the requested completion) exceed the model's context window."""


class ModelRateLimitError(ModelError):
    """HTTP 429 after all retries, or the server asked to wait longer than allowed.

    ``retry_after`` is the wait in seconds the server asked for, when it said.
    """

    transient = True

    def __init__(
        self, message: str, *, status_code: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, status_code=status_code)
        self.retry_after = retry_after


class ModelServerError(ModelError):
    """HTTP 408, 409 or 5xx after all retries."""

    transient = True


class ModelConnectionError(ModelError):
    """The server could not be reached, or the connection broke (also in the middle of a stream)."""

    transient = True


class ModelTimeoutError(ModelConnectionError):
    """Connecting, sending or waiting for the next bytes took longer than the timeout."""


class ModelStreamCutError(ModelConnectionError):
    """The server answered with an event stream, and it stopped before the answer was finished.

    The connection dropped mid-stream, or the stream ended (with or without ``[DONE]``) without
    a finish reason: llama-cpp-python's server ends a stream that way when another request
    arrives. The server was reached; what it sent is incomplete and is never kept as an answer.
    """


class ModelResponseError(ModelError):
    """The server answered with success but the body is not a usable completion (not JSON, an
    error object, fields of the wrong type), or sent a body its Content-Encoding cannot decode."""


class UnrecordedRequestError(ModelError, LookupError):
    """A replaying model received a request that was never recorded."""
