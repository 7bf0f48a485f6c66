"""Webhooks: a run created with ``webhook=URL`` has its final record ``POST``-ed to that URL when
it ends, as LangGraph Server does, from an outbox that survives the process.

- **Which URLs**: only hosts the operator allows (``--webhook-allow``; none by default): see
  :mod:`graph_agent.serve.webhooks_policy`. A run whose webhook is not allowed is refused as it is
  created, with a 422 naming the host and the option.
- **What is sent**: LangGraph Server's payload, the run's record (``run_id``, ``thread_id``,
  ``assistant_id``, ``status``, ``metadata``, ``kwargs``, ...) with ``run_started_at``,
  ``run_ended_at``, ``webhook_sent_at`` and ``values`` (what ``runs.wait`` answers: the final
  values, ``__interrupt__`` included at a pause; null for a failed run), and ``error`` (the
  run's error, ``{"error": <class>, "message": ...}``) when it failed. Headers: ``content-type:
  application/json`` and ``webhook-id: <run_id>``, the same on every attempt, so a receiver
  that gets one twice (delivery is at least once) can tell.
- **When**: the run's end writes its payload in the outbox
  (:mod:`graph_agent.serve.webhooks_outbox`; a row written as the run was created waits for
  it); a background job
  (``Api.add_periodic``) claims due rows and posts them. A 2xx is delivered; a network error, a
  timeout, a 408, 429 or 5xx is tried again after an exponential backoff (see
  :class:`WebhookRetry`), up to its ``attempts``; another answer (a 4xx, a redirect, which is
  never followed) gives up at once. Nothing of this runs on the run's path: the run ends when it
  ends, its clients are answered as before.
- **Where the outcome shows**: in the run's record, ``metadata.webhook_delivery`` =
  ``{"status": "retrying" | "delivered" | "failed", "attempts", "url", "error"?,
  "http_status"?}`` (``GET /threads/{id}/runs/{run_id}``), and a failed attempt in the server's
  log, naming the URL without its query string or credentials.

A run without a webhook costs nothing more: no row, no check; a server that allows no webhook
host has no outbox and no background job at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx

from graph_agent.serve.pg_records import PostgresRecords
from graph_agent.serve.records import Records, RunRecord, RunStatus, now
from graph_agent.serve.tasks import Periodic
from graph_agent.serve.webhooks_outbox import Due, Orphan, PostgresOutbox, SqliteOutbox
from graph_agent.serve.webhooks_policy import DeliveryRefused, WebhookPolicy, redacted

__all__ = ["WebhookRetry", "Webhooks", "webhook_payload"]

_log = logging.getLogger(__name__)

POLL_SECONDS = 0.5
"""How often the delivery job looks for due webhooks."""
BATCH = 32
"""Most deliveries one round of the job makes (at once)."""
_RETRIED_STATUSES = frozenset({408, 425, 429})


@dataclass(kw_only=True)
class WebhookRetry:
    """How a webhook is tried: at most ``attempts`` times, the n-th retry ``first_delay *
    factor ** (n - 1)`` seconds (at most ``max_delay``) after the attempt before it, each
    attempt waiting ``timeout`` seconds for an answer. The defaults try for about 1.7 hours."""

    attempts: int = 8
    first_delay: float = 2.0
    factor: float = 4.0
    max_delay: float = 3600.0
    timeout: float = 10.0

    def delay(self, attempt: int) -> float:
        """Seconds from ``attempt`` (1 for the first) to the next."""
        return float(min(self.first_delay * self.factor ** (attempt - 1), self.max_delay))


def webhook_payload(
    record: RunRecord, status: RunStatus | str, result: Any, ended_at: str
) -> dict[str, Any]:
    """What a webhook receives for a run that ended with ``status`` and ``result`` (what
    ``runs.wait`` answered; ``None`` when it is not known)."""
    payload: dict[str, Any] = {
        **record.json(),
        "status": status,
        "run_started_at": record.created_at,
        "run_ended_at": ended_at,
        "values": None,
    }
    if isinstance(result, dict) and "__error__" in result:
        payload["error"] = result["__error__"]
    elif result is not None:
        payload["values"] = result
    elif status == "error":
        payload["error"] = {"error": "RunFailed", "message": "the run ended as an error"}
    return payload


@dataclass(kw_only=True)
class Webhooks:
    """The server's webhooks: the policy checking each run's URL, the outbox, and the job
    delivering from it (see the module docstring)."""

    policy: WebhookPolicy
    outbox: SqliteOutbox | PostgresOutbox
    retry: WebhookRetry = field(default_factory=WebhookRetry)
    transport: httpx.AsyncBaseTransport | None = None
    """The HTTP transport deliveries use (None: httpx's own; tests may pass another)."""

    @classmethod
    def on(cls, records: Records | PostgresRecords, allow: Iterable[str]) -> Webhooks | None:
        """The webhooks of a server on ``records`` allowing ``allow`` (None: no host allowed,
        so no webhooks at all).

        Raises:
            ValueError: an entry of ``allow`` is no host.
        """
        policy = WebhookPolicy(allow)
        if not policy.enabled:
            return None
        outbox: SqliteOutbox | PostgresOutbox
        if isinstance(records, PostgresRecords):
            outbox = PostgresOutbox(records)
        else:
            outbox = SqliteOutbox(records)
        return cls(policy=policy, outbox=outbox)

    def periodic(self) -> Periodic:
        """The background job delivering due webhooks."""
        return Periodic("webhooks", POLL_SECONDS, self.deliver_due)

    async def created(self, record: RunRecord, url: str) -> None:
        """A run with a webhook was created: its row waits for its end."""
        await self.outbox.add_waiting(record.run_id, url)

    def ended(self, record: RunRecord, url: str, result: Any) -> None:
        """A run of this process ended (SQLite records: a quick statement on the loop)."""
        assert isinstance(self.outbox, SqliteOutbox)
        payload = webhook_payload(record, record.status, result, record.updated_at)
        try:
            self.outbox.fill_now(record.run_id, url, payload)
        except Exception:  # its row waits; it is filled from the run's record later
            _log.exception("graph-agent serve: could not queue run %s's webhook", record.run_id)

    async def aended(self, record: RunRecord, url: str, status: RunStatus, result: Any) -> None:
        """A run of this process ended (PostgreSQL): its payload is due."""
        payload = webhook_payload(record, status, result, now())
        try:
            await self.outbox.fill(record.run_id, url, payload)
        except Exception:  # its row waits; it is filled from the run's record later
            _log.exception("graph-agent serve: could not queue run %s's webhook", record.run_id)

    async def deliver_due(self) -> None:
        """One round of the job: fill the rows of runs whose end was lost, then claim the due
        ones and deliver them (at once)."""
        for orphan in await self.outbox.orphans(BATCH):
            await self._fill_orphan(orphan)
        claimed = await self.outbox.claim(BATCH, self.retry.timeout + 30.0)
        if claimed:
            await asyncio.gather(*(self._deliver(due) for due in claimed))

    async def _fill_orphan(self, orphan: Orphan) -> None:
        if orphan.record is None:
            _log.warning(
                "graph-agent serve: the webhook of run %s (%s) is given up: the run's record "
                "was deleted before its end was written",
                orphan.run_id,
                redacted(orphan.url),
            )
            await self.outbox.settle(orphan.run_id, "failed", None, "the run's record is gone")
            return
        record = orphan.record
        payload = webhook_payload(record, record.status, orphan.result, record.updated_at)
        await self.outbox.fill(orphan.run_id, orphan.url, payload)

    async def _deliver(self, due: Due) -> None:
        try:
            outcome = await self._post(due)
        except Exception as exc:  # never the job's end: this row is settled as failed
            # named, not traced: the traceback's values may quote the URL and its query
            outcome = _Outcome(error=f"could not be sent ({type(exc).__name__})", retry=False)
        await self._settle(due, outcome)

    async def _post(self, due: Due) -> _Outcome:
        try:
            target = await self.policy.target(due.url)
        except DeliveryRefused as exc:
            return _Outcome(error=str(exc), retry=False)
        headers = {"content-type": "application/json", "webhook-id": due.run_id}
        if target.host_header is not None:
            headers["host"] = target.host_header
        body = {**due.payload, "webhook_sent_at": now()}
        try:
            async with httpx.AsyncClient(
                timeout=self.retry.timeout, follow_redirects=False, transport=self.transport
            ) as client:
                answer = await client.post(target.url, json=body, headers=headers)
        except httpx.HTTPError as exc:  # connection refused, timeout, ...
            return _Outcome(error=f"{type(exc).__name__}: {_safe(exc)}", retry=True)
        code = answer.status_code
        if 200 <= code < 300:
            return _Outcome(http_status=code)
        retry = code >= 500 or code in _RETRIED_STATUSES
        return _Outcome(http_status=code, error=f"answered HTTP {code}", retry=retry)

    async def _settle(self, due: Due, outcome: _Outcome) -> None:
        url = redacted(due.url)
        delivery: dict[str, Any] = {"status": "delivered", "attempts": due.attempt, "url": url}
        if outcome.http_status is not None:
            delivery["http_status"] = outcome.http_status
        if outcome.error is None:
            await self.outbox.settle(due.run_id, "delivered", None, None)
        else:
            delivery["error"] = outcome.error
            again = outcome.retry and due.attempt < self.retry.attempts
            delivery["status"] = "retrying" if again else "failed"
            delay = self.retry.delay(due.attempt) if again else None
            await self.outbox.settle(due.run_id, "due" if again else "failed", delay, outcome.error)
            _log.warning(
                "graph-agent serve: webhook %s of run %s, attempt %d: %s; %s",
                url,
                due.run_id,
                due.attempt,
                outcome.error,
                f"trying again in {delay:.1f} s" if delay is not None else "giving up",
            )
        await self.outbox.note(due.run_id, delivery)


@dataclass(frozen=True, kw_only=True)
class _Outcome:
    http_status: int | None = None
    error: str | None = None
    retry: bool = False


def _safe(exc: httpx.HTTPError) -> str:
    """An httpx error's message, without the URL it may quote (its query may hold a token)."""
    text = str(exc)
    request = getattr(exc, "_request", None)
    if request is not None:
        text = text.replace(str(request.url), redacted(str(request.url)))
    return text[:200]
