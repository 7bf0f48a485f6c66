"""The test Redis server: its URL, and whether it answers.

The tests of ``graph-agent serve --redis`` expect Redis on 127.0.0.1:6379 (started with
:data:`START`), as others expect PostgreSQL; ``GRAPH_AGENT_TEST_REDIS`` points them elsewhere.
When it is down the suite stops at once, saying how to start it (tests/conftest.py).
"""

from __future__ import annotations

import os

import redis

URL = os.environ.get("GRAPH_AGENT_TEST_REDIS", "redis://127.0.0.1:6379/0")
START = 'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no'
"""How to start the test server (in the background, keeping nothing on disk)."""


def unreachable() -> str | None:
    """Why the test server cannot be used, or None when it answers."""
    client = redis.Redis.from_url(URL, socket_connect_timeout=3, socket_timeout=3)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    finally:
        client.close()
    return None
