"""The server's tables in PostgreSQL (see :mod:`graph_agent.serve.pg_records`): their
definitions, made or brought up to date as a server starts, the advisory-lock keys that
serialise that and the runs started on one thread, and the function that starts a run in one
statement."""

from __future__ import annotations

THREAD_COLUMNS = "thread_id, created_at, updated_at, metadata, status, assistant_id"
RUN_COLUMNS = (
    "run_id, thread_id, assistant_id, created_at, updated_at, status, metadata, "
    "multitask_strategy, kwargs"
)
_TABLES = (
    """CREATE TABLE IF NOT EXISTS graph_agent_serve_threads (
        thread_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
        metadata TEXT NOT NULL, status TEXT NOT NULL, assistant_id TEXT)""",
    """CREATE TABLE IF NOT EXISTS graph_agent_serve_runs (
        seq BIGSERIAL, run_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL,
        assistant_id TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
        status TEXT NOT NULL, metadata TEXT NOT NULL, multitask_strategy TEXT NOT NULL,
        kwargs TEXT NOT NULL, request TEXT NOT NULL, result TEXT, attempt INTEGER NOT NULL
        DEFAULT 0, worker BIGINT, cancel TEXT, alive_until TIMESTAMPTZ)""",
    # tables made before claims had a heartbeat
    "ALTER TABLE graph_agent_serve_runs ADD COLUMN IF NOT EXISTS alive_until TIMESTAMPTZ",
    """CREATE INDEX IF NOT EXISTS graph_agent_serve_runs_by_thread
        ON graph_agent_serve_runs (thread_id, seq)""",
    """CREATE INDEX IF NOT EXISTS graph_agent_serve_runs_unfinished
        ON graph_agent_serve_runs (seq) WHERE status IN ('pending', 'running')""",
    """CREATE TABLE IF NOT EXISTS graph_agent_serve_events (
        run_id TEXT NOT NULL, seq BIGINT NOT NULL, event TEXT NOT NULL, data TEXT NOT NULL,
        PRIMARY KEY (run_id, seq))""",
    # a thread's unfinished runs, read as each of its runs starts and ends: the thread's
    # finished runs (thousands, on a busy thread) are not in it
    """CREATE INDEX IF NOT EXISTS graph_agent_serve_runs_unfinished_by_thread
        ON graph_agent_serve_runs (thread_id, seq) WHERE status IN ('pending', 'running')""",
)
SCHEMA_LOCK = 0x6761_7365_7276  # an advisory lock: two processes never create tables at once
THREAD_LOCKS = 0x6761_7372
"""First key of the two-key transaction locks that serialise the runs started on one thread
(the second is the thread id's hash); two-key locks never clash with the workers' one-key
session locks."""

CREATE_START_RUN = f"""CREATE OR REPLACE FUNCTION graph_agent_serve_start_run(
    p_run_id text, p_thread_id text, p_assistant_id text, p_created_at text, p_updated_at text,
    p_status text, p_metadata text, p_strategy text, p_kwargs text, p_request text,
    p_write_thread boolean, p_thread_created_at text, p_thread_metadata text,
    p_thread_assistant_id text, p_worker bigint, p_timeout double precision, p_now text,
    p_in_band boolean, p_channel text)
RETURNS TABLE (unfinished text[], claimed boolean) LANGUAGE plpgsql AS $$
DECLARE
    earlier text[];
    taken boolean;
    other text;
BEGIN
    PERFORM pg_advisory_xact_lock({THREAD_LOCKS}, hashtext(p_thread_id));
    -- each statement of a function sees what committed before it began: this one, all
    -- that the runs started before the lock was ours wrote
    SELECT coalesce(array_agg(r.run_id ORDER BY r.seq DESC), '{{}}') INTO earlier
    FROM graph_agent_serve_runs r
    WHERE r.thread_id = p_thread_id AND r.status IN ('pending', 'running');
    IF cardinality(earlier) > 0 AND p_strategy = 'reject' THEN
        RETURN QUERY SELECT earlier, false;
        RETURN;
    END IF;
    IF p_write_thread AND cardinality(earlier) = 0 THEN
        INSERT INTO graph_agent_serve_threads ({THREAD_COLUMNS})
        VALUES (p_thread_id, p_thread_created_at, p_now, p_thread_metadata, 'busy',
            p_thread_assistant_id)
        ON CONFLICT (thread_id) DO UPDATE SET updated_at = EXCLUDED.updated_at,
            metadata = EXCLUDED.metadata, status = EXCLUDED.status,
            assistant_id = EXCLUDED.assistant_id;
    ELSE
        UPDATE graph_agent_serve_threads t SET status = 'busy', updated_at = p_now,
            assistant_id = coalesce(p_assistant_id, t.assistant_id)
        WHERE t.thread_id = p_thread_id;
    END IF;
    IF p_strategy IN ('interrupt', 'rollback') AND cardinality(earlier) > 0 THEN
        IF p_strategy = 'rollback' THEN
            DELETE FROM graph_agent_serve_runs r
            WHERE r.run_id = ANY (earlier) AND r.status = 'pending';
        END IF;
        UPDATE graph_agent_serve_runs r SET cancel = p_strategy, updated_at = p_now,
            status = CASE r.status WHEN 'pending' THEN 'interrupted' ELSE r.status END
        WHERE r.run_id = ANY (earlier) AND r.status IN ('pending', 'running');
        IF p_in_band THEN
            FOREACH other IN ARRAY earlier LOOP
                PERFORM pg_notify(p_channel, 'c:' || other || ':' || p_strategy);
                PERFORM pg_notify(p_channel, 'd:' || other);
            END LOOP;
        END IF;
    END IF;
    taken := p_worker IS NOT NULL AND cardinality(earlier) = 0;
    INSERT INTO graph_agent_serve_runs ({RUN_COLUMNS}, request, attempt, worker,
        alive_until)
    VALUES (p_run_id, p_thread_id, p_assistant_id, p_created_at, p_updated_at,
        CASE WHEN taken THEN 'running' ELSE p_status END, p_metadata, p_strategy, p_kwargs,
        p_request, taken::int, CASE WHEN taken THEN p_worker END,
        CASE WHEN taken THEN clock_timestamp() + p_timeout * interval '1 second' END);
    IF p_in_band AND NOT taken THEN
        PERFORM pg_notify(p_channel, 'q');
    END IF;
    RETURN QUERY SELECT earlier, taken;
END
$$"""
"""A run's start (:meth:`PostgresRecords.astart_run`) as a function, so that it takes one
statement, and one round trip, where a transaction of six took a pipeline: the thread's lock,
then its unfinished runs read under it, the thread's record, the runs it cancels, the run (a
function's statements each see what committed before they began; one statement sees only what
committed before it began, before the lock was granted). A change of its parameters or
result needs a new name: a server of the older version may share the database."""
START_RUN = (
    "SELECT unfinished, claimed FROM graph_agent_serve_start_run(%s::text, %s::text, "
    "%s::text, %s::text, %s::text, %s::text, %s::text, %s::text, %s::text, %s::text, "
    "%s::boolean, %s::text, %s::text, %s::text, %s::bigint, %s::float8, %s::text, %s::boolean, "
    "%s::text)"
)

SCHEMA = (*_TABLES, CREATE_START_RUN)
"""What a server runs as it starts, in one transaction under :data:`SCHEMA_LOCK`."""
