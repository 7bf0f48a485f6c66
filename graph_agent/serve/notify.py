"""How the processes serving one PostgreSQL database tell each other that something changed: a
run to claim, a run's new events, its end, a cancel (the payloads are listed at
:data:`graph_agent.serve.pg_records.CHANNEL`).

Two implementations of one :class:`Notifier`:

- :class:`PostgresNotifier` (the default): ``LISTEN``/``NOTIFY`` on the database itself. The
  records' statements notify in SQL (``pg_notify``), so a notification goes out with the commit
  of the change it announces, in the same round trip, and never before it.
- :class:`RedisNotifier` (``graph-agent serve --postgres DSN --redis URL``): Redis pub/sub, for
  deployments that keep notification traffic off the database (or whose pooler does not pass
  ``LISTEN`` through). The records publish once the change is committed.

Either way a notification is a hint: whoever hears one reads the rows, and whoever missed one
(a reconnect, a lost message) reads them at its next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Notifier", "NotifierUnreachable", "PostgresNotifier", "RedisNotifier", "redis_where"]

_log = logging.getLogger(__name__)

Deliver = Callable[[str], None]
"""Called with each payload heard (on the event loop)."""

RECONNECT_SECONDS = 0.5


class NotifierUnreachable(ConnectionError):
    """The notifier could not connect when the server started: the message says where."""


class Notifier:
    """Publishes payloads on a channel and delivers those every process publishes there.

    ``in_band`` notifiers are told by the database itself (the records' statements notify in
    SQL): :meth:`publish` is then never called.
    """

    in_band = False

    async def publish(self, channel: str, payloads: Sequence[str]) -> None:
        """Send ``payloads`` to every process listening on ``channel``."""
        raise NotImplementedError

    async def listen(self, channel: str, deliver: Deliver, listening: asyncio.Event) -> None:
        """Deliver every payload published on ``channel`` until cancelled; set ``listening``
        once subscribed (again after each reconnect, when ``deliver`` gets ``""``: what was
        published meanwhile was missed)."""
        raise NotImplementedError

    async def check(self) -> None:
        """Raise :class:`NotifierUnreachable` unless the notifier answers now."""

    async def aclose(self) -> None:
        """Close what :meth:`publish` opened."""


class PostgresNotifier(Notifier):
    """``LISTEN``/``NOTIFY`` on the database of ``dsn``."""

    in_band = True

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    async def publish(self, channel: str, payloads: Sequence[str]) -> None:
        raise RuntimeError("PostgresNotifier is in band: the records' statements notify")

    async def listen(self, channel: str, deliver: Deliver, listening: asyncio.Event) -> None:
        import psycopg

        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
                async with conn:
                    await conn.execute(f"LISTEN {channel}")
                    listening.set()
                    deliver("")
                    async for note in conn.notifies():
                        deliver(note.payload)
            except psycopg.Error as exc:
                _log.warning("graph-agent serve: LISTEN connection lost (%s); reconnecting", exc)
                await asyncio.sleep(RECONNECT_SECONDS)


class RedisNotifier(Notifier):
    """Redis pub/sub at ``url`` (``redis://[:password@]host:port/db``), with redis-py's
    asyncio client; the channel is the records' (one per database schema), so servers on other
    schemas sharing the Redis never hear each other."""

    def __init__(self, url: str) -> None:
        try:
            import redis.asyncio
        except ImportError as exc:
            raise ImportError(
                "--redis needs redis-py 5 or later: pip install 'graph-agent[serve]'"
            ) from exc
        self.url = url
        self.where = redis_where(url)
        self._client: Any = redis.asyncio.Redis.from_url(url, socket_connect_timeout=5)

    async def check(self) -> None:
        import redis

        try:
            await self._client.ping()
        except (redis.RedisError, OSError) as exc:
            raise NotifierUnreachable(
                f"cannot reach Redis at {self.where} ({type(exc).__name__}: {exc}); check the "
                "--redis URL and that Redis is up"
            ) from exc

    async def publish(self, channel: str, payloads: Sequence[str]) -> None:
        import redis

        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for payload in payloads:
                    pipe.publish(channel, payload)
                await pipe.execute()
        except (redis.RedisError, OSError) as exc:  # listeners catch up at their next poll
            _log.warning(
                "graph-agent serve: could not publish to Redis at %s (%s)", self.where, exc
            )

    async def listen(self, channel: str, deliver: Deliver, listening: asyncio.Event) -> None:
        import redis

        while True:
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(channel)
                listening.set()
                deliver("")
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        data = message["data"]
                        deliver(data.decode() if isinstance(data, bytes) else str(data))
            except (redis.RedisError, OSError) as exc:
                _log.warning("graph-agent serve: Redis subscription lost (%s); reconnecting", exc)
                await asyncio.sleep(RECONNECT_SECONDS)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()


def redis_where(url: str) -> str:
    """A Redis URL's host, port and database, for messages (never its password)."""
    parts = urllib.parse.urlsplit(url)
    database = parts.path.lstrip("/") or "0"
    return f"{parts.hostname or 'localhost'}:{parts.port or 6379}/{database}"
