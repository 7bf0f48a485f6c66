"""``graph-agent threads list|show|history|delete``: what a SQLite checkpoint file holds.

These read the database directly, without the graph that wrote it: ``show`` prints a
checkpoint's state as JSON (keys starting with ``_``, the runtime's bookkeeping, only with
``--all``), ``history`` lists a thread's checkpoints newest first with the step, the nodes that
wrote, what runs next, the time and the bytes the checkpoint itself stores. ``delete`` also
deletes what ``graph-agent serve`` records of the thread in its file beside the database, so
a server running on it stops listing the thread.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console, JustifyMethod
from rich.highlighter import JSONHighlighter
from rich.table import Table
from rich.text import Text

from graph_agent.checkpoint.base import Checkpoint
from graph_agent.checkpoint.codec import encode_header
from graph_agent.checkpoint.serde import dumps
from graph_agent.checkpoint.sqlite import SqliteSaver
from graph_agent.cli.errors import CliError
from graph_agent.cli.output import make_console, printable, to_json
from graph_agent.cli.serve import records_path
from graph_agent.cli.targets import db_option, open_existing_saver
from graph_agent.graph.errors import SerializationError, ThreadBusyError
from graph_agent.node import pending_interrupts
from graph_agent.serve.records import Records

__all__ = ["checkpoint_bytes", "threads_command"]

_NUMERIC = frozenset({"checkpoints", "step", "bytes"})
_NO_WRAP = frozenset({"thread", "checkpoint", "checkpoints", "step", "time", "updated", "bytes"})


def threads_command(args: argparse.Namespace) -> int:
    saver = open_existing_saver(args.db, read_only=args.action != "delete")
    console = make_console(plain=args.plain)
    plain = args.plain or not console.is_terminal
    try:
        if args.action == "list":
            return _list(saver, console, plain, args.db)
        thread = args.thread
        if args.action == "delete":
            return _delete(saver, console, thread, args.db)
        _check_known(saver, thread, args.db)
        if args.action == "show":
            history = f"graph-agent threads history {shlex.quote(thread)}{db_option(args.db)}"
            return _show(saver, console, plain, thread, args.checkpoint, args.all, history)
        return _history(saver, console, plain, thread, args.limit)
    finally:
        saver.close()


def _check_known(saver: SqliteSaver, thread: str, db: str, *, served: bool = False) -> None:
    """Refuse a thread that has no checkpoint in ``db`` (nor, ``served``, a server's record)."""
    if saver.get(thread) is None and not served:
        known = saver.threads()
        hint = f"threads in {db}: {', '.join(known[:8])}" if known else "it is empty"
        raise CliError(f"no thread {thread!r} in {db}", hint)


def _status(checkpoint: Checkpoint) -> str:
    if pending_interrupts(checkpoint.pending_writes):
        return "paused"
    if checkpoint.next:
        return ", ".join(checkpoint.next)
    return "finished"


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    local = moment.astimezone()
    today = datetime.now(local.tzinfo).date()
    return local.strftime("%H:%M:%S" if local.date() == today else "%Y-%m-%d %H:%M")


def _list(saver: SqliteSaver, console: Console, plain: bool, db: str) -> int:
    rows = []
    for thread in saver.threads():
        checkpoints = list(saver.list(thread))
        newest = checkpoints[0]
        rows.append(
            [
                thread,
                str(len(checkpoints)),
                str(newest.step),
                _status(newest),
                _when(newest.created_at),
                f"{saver.stored_bytes(thread):,}",
            ]
        )
    if not rows:
        console.print(Text(printable(f"no threads in {db}")))
        return 0
    headers = ["thread", "checkpoints", "step", "next", "updated", "bytes"]
    _table(console, plain, headers, rows, title=f"threads in {db}")
    return 0


def _show(
    saver: SqliteSaver,
    console: Console,
    plain: bool,
    thread: str,
    checkpoint_id: str | None,
    everything: bool,
    history_command: str,
) -> int:
    checkpoint = saver.get(thread, checkpoint_id)
    if checkpoint is None:
        raise CliError(
            f"thread {thread!r} has no checkpoint {checkpoint_id!r}",
            f"list them with: {history_command}",
        )
    values = {
        key: value
        for key, value in sorted(checkpoint.values.items())
        if everything or not key.startswith("_")
    }
    document = {
        "thread": thread,
        "checkpoint": checkpoint.id,
        "step": checkpoint.step,
        "created_at": checkpoint.created_at,
        "next": list(checkpoint.next),
        "interrupts": list(pending_interrupts(checkpoint.pending_writes)),
        "values": values,
    }
    text = printable(to_json(document), multiline=True)
    if plain:
        console.file.write(text + "\n")
    else:
        console.print(JSONHighlighter()(text), soft_wrap=True)
    return 0


def checkpoint_bytes(checkpoint: Checkpoint, parent: Checkpoint | None) -> int:
    """About what a saver stores for ``checkpoint``: its header and the keys it changed (for a
    list that grew, only the new items)."""
    try:
        total = len(encode_header(checkpoint))
        for key, version in checkpoint.versions.items():
            if version != checkpoint.id:
                continue
            value = checkpoint.values.get(key)
            before = parent.values.get(key) if parent is not None else None
            if isinstance(value, list) and isinstance(before, list) and _extends(value, before):
                value = value[len(before) :]  # what an append key stores: the new items
            total += len(dumps(value))
    except SerializationError:
        return 0
    return total


def _extends(value: list[Any], before: list[Any]) -> bool:
    return len(before) <= len(value) and value[: len(before)] == before


def _history(
    saver: SqliteSaver, console: Console, plain: bool, thread: str, limit: int | None
) -> int:
    checkpoints = list(saver.list(thread))
    by_id = {c.id: c for c in checkpoints}
    rows = []
    for checkpoint in checkpoints[:limit] if limit is not None else checkpoints:
        metadata: dict[str, Any] = checkpoint.metadata
        parent = by_id.get(checkpoint.parent_id) if checkpoint.parent_id else None
        source = str(metadata.get("source", ""))
        writers = ", ".join(metadata.get("writers") or ()) or "-"
        rows.append(
            [
                str(checkpoint.step),
                checkpoint.id,
                writers if source in ("loop", "") else f"{writers} ({source})",
                _status(checkpoint),
                _when(checkpoint.created_at),
                f"{checkpoint_bytes(checkpoint, parent):,}",
            ]
        )
    headers = ["step", "checkpoint", "written by", "next", "time", "bytes"]
    _table(console, plain, headers, rows, title=f"history of {thread}, newest first")
    return 0


def _delete(saver: SqliteSaver, console: Console, thread: str, db: str) -> int:
    """Delete ``thread`` holding its lease, as a run would: a thread that is running is
    refused, and no run can start on it meanwhile. A thread ``graph-agent serve`` keeps in
    ``db`` loses its record there too (its runs and their events), so the server stops
    listing it; one with a run of the server's running or waiting is refused."""
    records = _server_records(db)
    try:
        record = records.thread(thread) if records is not None else None
        _check_known(saver, thread, db, served=record is not None)
        try:
            lease = saver.acquire(thread)
        except ThreadBusyError as exc:
            raise _busy(thread) from exc
        try:
            if record is not None and record.status == "busy":
                raise _busy(thread, served=True)
            count = sum(1 for _ in saver.list(thread))
            size = saver.stored_bytes(thread)
            saver.delete_thread(thread)
            if records is not None and record is not None:
                records.delete_thread(thread)
        finally:
            saver.release(lease)
    finally:
        if records is not None:
            records.close()
    served = " and the server's record of it" if record is not None else ""
    console.print(
        Text(printable(f"deleted thread {thread} ({count} checkpoints, {size:,} bytes){served}"))
    )
    return 0


def _server_records(db: str) -> Records | None:
    """The thread and run records ``graph-agent serve --db DB`` keeps next to ``db`` (``None``
    when no server used the file), opened beside a server that may be running."""
    path = records_path(db)
    return Records(path, serving=False) if Path(path).is_file() else None


def _busy(thread: str, *, served: bool = False) -> CliError:
    what = "has a run of graph-agent serve running or waiting" if served else "is running"
    return CliError(
        f"thread {thread!r} {what}, so it was not deleted",
        "wait for its run to finish (or stop it), then delete it",
    )


def _table(
    console: Console,
    plain: bool,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str,
) -> None:
    """The rows under the headers: aligned columns in plain mode, a rich table on a terminal.
    Every cell is one line (through :func:`printable`): an id holding a newline never forges a
    row."""
    title = printable(title)
    rows = [[printable(cell) for cell in row] for row in rows]
    if plain:
        widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
        for row in (headers, *rows):
            cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
            console.file.write("  ".join(cells).rstrip() + "\n")
        return
    table = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD)
    for header in headers:
        justify: JustifyMethod = "right" if header in _NUMERIC else "left"
        if header in _NO_WRAP:  # ids are copied into other commands: never cut them short
            width = max(len(row[len(table.columns)]) for row in rows) if rows else None
            table.add_column(header, justify=justify, no_wrap=True, min_width=width)
        else:
            table.add_column(header, justify=justify, overflow="fold")
    for row in rows:
        table.add_row(*row)
    console.print(table)
