"""The PostgreSQL savers' node cache plans (``add_node(..., cache=CachePolicy(...))``): results
kept beside the threads in ``graph_agent_node_cache``, keyed by namespace and key (see
:mod:`~graph_agent.checkpoint.postgres_plans` for what a plan is).
"""

from __future__ import annotations

from graph_agent.checkpoint.postgres_plans import Plan, Query, _name


def cache_read_plan(namespace: str, key: str, now: float) -> Plan[bytes | None]:
    rows = yield Query(
        "SELECT data FROM graph_agent_node_cache WHERE namespace = %(ns)s AND key = %(key)s "
        "AND (expires_at IS NULL OR expires_at > %(now)s)",
        {"ns": _name(namespace), "key": _name(key), "now": now},
    )
    return bytes(rows[0][0]) if rows else None


def cache_write_plan(namespace: str, key: str, data: bytes, expires_at: float | None) -> Plan[None]:
    yield Query(
        "INSERT INTO graph_agent_node_cache (namespace, key, data, expires_at) "
        "VALUES (%(ns)s, %(key)s, %(data)s, %(expires)s) ON CONFLICT (namespace, key) "
        "DO UPDATE SET data = EXCLUDED.data, expires_at = EXCLUDED.expires_at",
        {"ns": _name(namespace), "key": _name(key), "data": data, "expires": expires_at},
    )


def cache_delete_plan(namespace: str | None) -> Plan[None]:
    if namespace is None:
        yield Query("DELETE FROM graph_agent_node_cache", {})
    else:
        yield Query(
            "DELETE FROM graph_agent_node_cache WHERE namespace = %(ns)s", {"ns": _name(namespace)}
        )
