"""A process that sweeps a saver slowly, to be killed midway (``test_retention_crash``):
``python -m tests.checkpoint.retention_sweeper sqlite PATH`` or ``postgres DSN``."""

from __future__ import annotations

import sys
import time
from datetime import datetime

from graph_agent.checkpoint import RetentionPolicy
from graph_agent.checkpoint.base import CheckpointSaver


class SlowPolicy(RetentionPolicy):
    """Takes its time over each thread, inside the thread's transaction."""

    def keep(self, last_activity: datetime | None, now: datetime) -> int | None:
        time.sleep(0.01)
        return super().keep(last_activity, now)


def main(kind: str, where: str) -> None:
    saver: CheckpointSaver
    if kind == "sqlite":
        from graph_agent.checkpoint.sqlite import SqliteSaver

        saver = SqliteSaver(where)
    else:
        from graph_agent.checkpoint.postgres import PostgresSaver

        saver = PostgresSaver(where, pool_size=1)
    print("sweeping", flush=True)
    saver.sweep(SlowPolicy(checkpoint_keep=1, batch_size=3))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
