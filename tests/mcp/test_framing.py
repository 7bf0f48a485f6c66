"""A server's messages split with a cap on their size: in linear time, byte for byte under the
cap, and a message over it dropped keeping what tells which request it answers."""

from __future__ import annotations

import json
import random
import time

import pytest

from graph_agent.mcp.framing import Dropped, EventStream, Lines, answered_id, too_large

LONG = b"x" * 5_000


def fed(lines: Lines, data: bytes, size: int) -> list[bytes | Dropped]:
    found: list[bytes | Dropped] = []
    for start in range(0, len(data), size):
        found += lines.feed(data[start : start + size])
    return found


def test_lines_under_the_limit_come_whole_however_the_bytes_are_cut():
    data = b'{"id":1}\n\n{"id":2,"result":"two"}\nlast'
    for size in (1, 2, 7, 1000):
        lines = Lines(limit=64)
        assert fed(lines, data, size) == [b'{"id":1}', b"", b'{"id":2,"result":"two"}']
        assert lines.rest() == b"last"


def test_a_line_over_the_limit_is_dropped_keeping_its_size_and_both_ends():
    message = b'{"jsonrpc":"2.0","id":3,"result":"' + LONG + b'"}'
    lines = Lines(limit=1_000)

    found = fed(lines, message + b"\n" + b"next\n", 64)

    dropped, after = found
    assert isinstance(dropped, Dropped)
    assert dropped.size == len(message)
    assert message.startswith(dropped.head) and message.endswith(dropped.tail)
    assert dropped.request_id() == 3
    assert after == b"next"


def test_a_thirty_megabyte_line_is_read_in_linear_time():
    # the SDK's stdio reader joins a line's pieces again for each new one: about 40 s here
    chunk = b"x" * 65_536
    lines = Lines(limit=4 * 1024 * 1024)

    started = time.monotonic()
    for _ in range(458):
        assert lines.feed(chunk) == []
    (dropped,) = lines.feed(b"\n")

    assert time.monotonic() - started < 2
    assert isinstance(dropped, Dropped) and dropped.size == 458 * 65_536


@pytest.mark.parametrize(
    ("message", "request_id"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":{"text":"', 7),  # Python's SDK: id first
        (b'{"result":{"content":[{"id":99}]},"jsonrpc":"2.0","id":7}', 7),  # TypeScript's: last
        (b'{ "jsonrpc" : "2.0" , "id" : "call-7" , "error": {', "call-7"),
        (b'{"jsonrpc":"2.0","result":{"id":99,"text":"', None),  # only a nested id: unknown
        (b'{"result":{"items":[1],"id":99}}', None),
        (b'{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{', None),
        (b'{"method":"notifications/message","params":{"data":"', None),
        (b'{"jsonrpc":"2.0","id":1.5,"result":{', None),
    ],
)
def test_the_request_answered_is_told_by_a_top_level_id_at_either_end(message, request_id):
    assert answered_id(message[:256], message[-256:]) == request_id


def events(stream: EventStream, data: bytes, size: int) -> bytes:
    out = b"".join(stream.feed(data[i : i + size]) for i in range(0, len(data), size))
    return out + stream.rest()


def test_events_under_the_limit_pass_byte_for_byte_however_the_bytes_are_cut():
    data = (
        b"event: endpoint\r\ndata: /messages/?session_id=1\r\n\r\n"
        b": ping\r\n\r\n"
        b'event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n'
        b"id: 4\ndata: a\ndata: b\n\n"
    )
    for size in (1, 3, 10, len(data)):
        assert events(EventStream(200, lambda dropped: None), data, size) == data


def test_an_event_over_the_limit_is_replaced_by_the_error_answering_its_request():
    big = json.dumps({"jsonrpc": "2.0", "id": 9, "result": {"text": "x" * 5_000}}).encode()
    small = b'event: message\r\ndata: {"jsonrpc":"2.0","id":10,"result":{}}\r\n\r\n'
    stream = EventStream(1_000, lambda dropped: too_large(dropped.request_id() or 0, 1_000))

    out = events(stream, b"event: message\r\ndata: " + big + b"\r\n\r\n" + small, 97)

    replaced, rest = out.split(b"\n\n", 1)
    assert replaced.startswith(b"event: message\ndata: ")
    error = json.loads(replaced.split(b"data: ", 1)[1])
    assert error["id"] == 9 and "over 1,000 bytes (max_result_bytes)" in error["error"]["message"]
    assert rest == small


def test_an_event_over_the_limit_that_answers_no_request_is_left_out():
    seen: list[Dropped] = []
    data = b"data: " + b"y" * 3_000 + b"\n\n" + b"data: after\n\n"

    def replace(dropped: Dropped) -> None:
        seen.append(dropped)

    out = events(EventStream(1_000, replace), data, random.Random(1).randint(5, 50))

    assert out == b"data: after\n\n"
    (dropped,) = seen
    assert dropped.size > 3_000 and dropped.head.startswith(b"yyy")
