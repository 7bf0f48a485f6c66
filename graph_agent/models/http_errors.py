"""How an HTTP chat model's failed attempt becomes a :class:`ModelError`: the error of an HTTP
status, a failed connection, a cut stream or an answer it cannot use (each naming the model and
never quoting its API key), and the wait before the next attempt (``None``: give up).

:class:`HTTPFailures` is a base of :class:`~graph_agent.models.http_chat.HTTPChatModel`: its
methods read the model's ``retry``, ``timeout``, key and logger.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, TypeVar

import httpx
from httpx_sse import SSEError
from pydantic import SecretStr

from graph_agent.models.errors import (
    ModelConnectionError,
    ModelError,
    ModelResponseError,
    ModelStreamCutError,
    ModelTimeoutError,
)
from graph_agent.models.openai_format import status_error
from graph_agent.models.retry import RetryPolicy, is_retryable_status, retry_after_seconds

# Keys shorter than this are placeholders (local servers take any key, e.g. "x"), not secrets;
# masking them would garble every message that happens to contain those letters.
_MIN_SECRET_LENGTH = 8

_Failure = tuple[ModelError, float | None]
_E = TypeVar("_E", bound=ModelError)

_STARTED_NOTE = " (not retried: part of the answer had already been streamed)"


class HTTPFailures:
    """The errors of an HTTP chat model's attempts (a base of ``HTTPChatModel``, which sets the
    attributes declared here)."""

    _logger: ClassVar[logging.Logger]
    _not_found_hint: ClassVar[str]
    retry: RetryPolicy
    timeout: float | httpx.Timeout
    _api_key: SecretStr
    _where: str

    def _redact(self, text: str) -> str:
        secret = self._api_key.get_secret_value()
        if len(secret) < _MIN_SECRET_LENGTH:
            return text
        return text.replace(secret, "***")

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except RecursionError:
            raise ModelResponseError(
                f"the body of its HTTP {response.status_code} answer is JSON nested too deeply "
                f"to read ({len(response.content)} bytes)",
                status_code=response.status_code,
            ) from None
        except ValueError:
            kind = response.headers.get("content-type", "no content-type")
            raise ModelResponseError(
                f"the body of its HTTP {response.status_code} answer is not JSON ({kind}): "
                f"{response.text[:200]!r}",
                status_code=response.status_code,
            ) from None

    def _unusable(self, error: _E) -> _E:
        """``error``, raised while reading an answer, naming this model and without the key.

        The wire format's errors quote what the server sent, and a server (or a proxy) may echo
        the key back in an error object, an error event or a body that is not JSON.
        """
        return type(error)(self._redact(f"{self._where}: {error}"), status_code=error.status_code)

    def _not_a_stream(self, exc: SSEError) -> ModelResponseError:
        return ModelResponseError(
            self._redact(f"{self._where} did not answer with an event stream: {exc}")
        )

    def _undecodable(self, exc: httpx.DecodingError) -> ModelResponseError:
        return ModelResponseError(
            self._redact(
                f"{self._where} sent a body that does not match its Content-Encoding ({exc}): "
                "the server, or a proxy in between, compressed it wrongly; passing "
                "headers={'Accept-Encoding': 'identity'} asks for an uncompressed body"
            )
        )

    def _failure(
        self,
        attempt: int,
        *,
        exc: httpx.TransportError | None = None,
        response: httpx.Response | None = None,
        error: ModelError | None = None,
        started: bool = False,
        cut: bool = False,
        answered: httpx.Response | None = None,
    ) -> _Failure:
        """The error of a failed attempt, and the wait before the next one (``None``: give up).

        ``started``: a stream had already yielded part of the answer, so there is no retry
        (decided here, before any delay is computed or a retry is announced). ``cut``: ``exc``
        broke an event stream the server had begun. ``answered``: the last error response an
        earlier attempt of this call got; when the last attempt then cannot connect, the call
        fails with that answer (the server was reached, and its message says what is wrong),
        noting the failed connection, rather than as a server that cannot be reached.
        """
        if response is not None:
            retry_after = retry_after_seconds(response.headers)
            too_long = retry_after is not None and retry_after > self.retry.max_retry_after
            retryable = is_retryable_status(response.status_code)
            delay = (
                self.retry.delay_before_retry(attempt, retry_after)
                if retryable and not too_long
                else None
            )
            error = self._status_error(
                response,
                attempts=attempt if retryable and not too_long else 1,
                note=(
                    f"; the server asked to retry after {retry_after:g} s, longer than the "
                    f"{self.retry.max_retry_after:g} s this client waits"
                    if too_long
                    else ""
                ),
            )
        elif exc is not None:
            delay = None if started else self.retry.delay_before_retry(attempt, None)
            error = self._transport_error(exc, attempt, started=started, cut=cut)
            if delay is None and answered is not None and type(error) is ModelConnectionError:
                error = self._status_error(
                    answered,
                    attempts=attempt,
                    note=f"; the last attempt's connection then failed: {_detail(exc)}",
                )
                error.__cause__ = exc
        else:
            assert error is not None
            delay = None if started else self.retry.delay_before_retry(attempt, None)
            if started or (delay is None and attempt > 1):
                note = _STARTED_NOTE if started else f" (gave up after {attempt} attempts)"
                error = type(error)(f"{error}{note}", status_code=error.status_code)
        if started:
            self._logger.debug(
                "%s: attempt %d failed (%s) after part of the answer was streamed; not retried",
                self._where,
                attempt,
                _short_reason(error),
            )
        elif delay is not None:
            self._logger.warning(
                "%s: attempt %d of %d failed (%s); retrying in %.2f s",
                self._where,
                attempt,
                self.retry.max_retries + 1,
                _short_reason(error),
                delay,
            )
        return error, delay

    def _status_error(self, response: httpx.Response, *, attempts: int, note: str) -> ModelError:
        """The error of an HTTP error ``response``, with the server's own message."""
        return status_error(
            response.status_code,
            response.reason_phrase,
            response.text,
            where=self._where,
            key_configured=bool(self._api_key.get_secret_value()),
            attempts=attempts,
            retry_after=retry_after_seconds(response.headers),
            redact=self._redact,
            note=note,
            not_found_hint=self._not_found_hint,
        )

    def _transport_error(
        self, exc: httpx.TransportError, attempt: int, *, started: bool = False, cut: bool = False
    ) -> ModelConnectionError:
        if started:
            tries = _STARTED_NOTE
        else:
            tries = f" (gave up after {attempt} attempts)" if attempt > 1 else ""
        if isinstance(exc, httpx.TimeoutException):
            kind = type(exc).__name__
            error: ModelConnectionError = ModelTimeoutError(
                self._redact(
                    f"{self._where} did not answer in time ({kind}, timeout {self.timeout}){tries}"
                )
            )
        elif cut:
            error = ModelStreamCutError(
                self._redact(
                    f"{self._where}: the connection broke mid-stream: {_detail(exc)}{tries}"
                )
            )
        else:
            error = ModelConnectionError(
                self._redact(f"{self._where}: connection failed: {_detail(exc)}{tries}")
            )
        error.__cause__ = exc
        return error


def _detail(exc: httpx.TransportError) -> str:
    return str(exc) or type(exc).__name__


def _short_reason(error: ModelError) -> str:
    if error.status_code is not None:
        return f"HTTP {error.status_code}"
    return type(error).__name__
