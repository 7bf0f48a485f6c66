"""The checkpoint serializer: exact round trips, save-time errors with paths, safe loading."""

from __future__ import annotations

import dataclasses
import enum
import re
import subprocess
import sys
import time as clock
import tracemalloc
import uuid
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from graph_agent import messages
from graph_agent.checkpoint import footprint, serde
from graph_agent.checkpoint.serde import MAX_DEPTH, Serializer
from graph_agent.graph.errors import SerializationError
from graph_agent.graph.state import RemoveMessage, ReplaceAll


class Color(enum.Enum):
    RED = "red"
    PAIR = (1, 2)


class Level(enum.IntEnum):
    LOW = 1


class Mode(enum.StrEnum):
    FAST = "fast"


class Point(BaseModel):
    model_config = ConfigDict(frozen=True)

    x: int
    y: int


class Event(BaseModel):
    model_config = ConfigDict(frozen=True)

    at: datetime
    where: Point
    history: list[Point] = Field(default_factory=list)
    span: tuple[int, ...] = ()
    extra: Any = None


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str


class Wrapper(BaseModel):
    payload: Any = None


@dataclasses.dataclass(frozen=True, slots=True)
class Span:
    start: datetime
    tags: frozenset[str]
    derived: int = dataclasses.field(default=0, init=False)


class Money:
    """A plain class stored through the dump/load pair."""

    def __init__(self, cents: int, currency: str) -> None:
        self.cents, self.currency = cents, currency

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and vars(self) == vars(other)

    def __graph_agent_dump__(self) -> tuple[int, str]:
        return (self.cents, self.currency)

    @classmethod
    def __graph_agent_load__(cls, data: tuple[int, str]) -> Money:
        return cls(*data)


class Unregistered:
    pass


@pytest.fixture
def ser() -> Serializer:
    """A serializer with the test types registered, apart from the default registry."""
    serializer = Serializer()
    for code, cls in enumerate([Color, Level, Mode, Point, Event, Loose, Wrapper, Span, Money], 32):
        serializer.register(cls, code)
    return serializer


def fingerprint(value: Any) -> Any:
    """A hashable form of ``value`` that tells types apart (1, 1.0 and True; tuple and list)."""
    kind = type(value)
    if kind in (list, tuple):
        return (kind.__name__, tuple(fingerprint(item) for item in value))
    if kind in (set, frozenset):
        return (kind.__name__, frozenset(fingerprint(item) for item in value))
    if kind is dict:
        return ("dict", tuple((fingerprint(k), fingerprint(v)) for k, v in value.items()))
    if kind is float:
        return ("float", repr(value))
    if kind is datetime:
        return ("datetime", value.isoformat(), str(value.tzinfo), value.utcoffset())
    return (kind.__name__, value)


def round_trip(value: Any, serializer: Serializer | None = None) -> Any:
    serializer = serializer or Serializer()
    return serializer.loads(serializer.dumps(value))


def assert_round_trips(value: Any, serializer: Serializer | None = None) -> None:
    assert fingerprint(round_trip(value, serializer)) == fingerprint(value)


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -1,
        2**63 - 1,
        2**64 - 1,
        -(2**63),
        1.5,
        -0.0,
        float("inf"),
        "",
        "héllo ✓",
        b"",
        b"\x00\xff",
        [],
        {},
        [1, [2.0, [True]]],
        {"a": {"b": None}},
    ],
)
def test_native_values_round_trip_with_their_exact_types(value: Any) -> None:
    assert_round_trips(value)


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 3**200, -(7**300)])
def test_integers_beyond_64_bits_round_trip(value: int) -> None:
    assert round_trip(value) == value


def test_tuples_nested_in_dicts_in_lists_come_back_as_tuples() -> None:
    value = [{"pair": (1, (2, "three")), "empty": ()}, ({"in": [()]},)]
    assert_round_trips(value)


def test_sets_and_frozensets_round_trip() -> None:
    assert_round_trips({"s": {1, "a", (2, 3)}, "f": frozenset({frozenset({1}), b"x"}), "e": set()})


def test_dict_keys_may_be_ints_tuples_and_frozensets() -> None:
    assert_round_trips({1: "int", (1, "a"): "tuple", frozenset({2}): "frozenset", None: 0})


def test_naive_and_fixed_offset_datetimes_round_trip_with_microseconds() -> None:
    india = timezone(timedelta(hours=5, minutes=30))
    values = [
        datetime(2024, 1, 2, 3, 4, 5, 678901),
        datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        datetime(1, 1, 1, tzinfo=india),
    ]
    for value in values:
        loaded = round_trip(value)
        assert loaded == value and loaded.tzinfo == value.tzinfo


def test_zoneinfo_datetimes_keep_their_zone_and_the_fold_of_an_ambiguous_time() -> None:
    zone = ZoneInfo("America/New_York")
    for fold in (0, 1):
        value = datetime(2024, 11, 3, 1, 30, tzinfo=zone, fold=fold)  # happens twice that night
        loaded = round_trip(value)
        assert (loaded.tzinfo, loaded.fold, loaded.utcoffset()) == (zone, fold, value.utcoffset())


def test_dates_times_and_timedeltas_round_trip() -> None:
    values = [
        date(2024, 2, 29),
        time(23, 59, 59, 999999),
        time(1, 2, tzinfo=UTC),
        timedelta(days=-5, microseconds=3),
        timedelta.max,
        timedelta.min,
    ]
    assert_round_trips(values)


def test_decimals_and_uuids_round_trip() -> None:
    values = [Decimal("1.10"), Decimal("-0"), Decimal("1E+999"), uuid.uuid4()]
    loaded = round_trip(values)
    assert loaded == values and [str(d) for d in loaded[:3]] == ["1.10", "-0", "1E+999"]


def test_registered_enum_members_round_trip_including_int_and_str_enums(ser: Serializer) -> None:
    loaded = round_trip([Color.RED, Color.PAIR, Level.LOW, Mode.FAST], ser)
    assert loaded == [Color.RED, Color.PAIR, Level.LOW, Mode.FAST]
    assert [type(member) for member in loaded] == [Color, Color, Level, Mode]


def test_an_int_enum_member_that_is_not_registered_is_refused_rather_than_stored_as_int() -> None:
    with pytest.raises(SerializationError, match="object of type Level is not registered"):
        Serializer().dumps({"level": Level.LOW})


def test_remove_message_and_replace_all_round_trip_without_registration() -> None:
    value = [RemoveMessage("m1"), ReplaceAll([1, (2,)])]
    assert round_trip(value) == value


def test_a_registered_frozen_pydantic_model_round_trips(ser: Serializer) -> None:
    loaded = round_trip(Point(x=1, y=2), ser)
    assert loaded == Point(x=1, y=2) and type(loaded) is Point


def test_nested_models_with_datetime_and_tuple_fields_round_trip_exactly(ser: Serializer) -> None:
    when = datetime(2024, 5, 1, 12, 0, 0, 5, tzinfo=ZoneInfo("Asia/Shanghai"))
    event = Event(
        at=when,
        where=Point(x=1, y=2),
        history=[Point(x=0, y=0)],
        span=(1, 2),
        extra={"nested": Point(x=3, y=4), "when": (when,)},
    )
    loaded = round_trip({"events": [event]}, ser)["events"][0]
    assert loaded == event
    assert type(loaded.extra["nested"]) is Point and loaded.at.tzinfo == ZoneInfo("Asia/Shanghai")
    assert type(loaded.extra["when"]) is tuple


def test_extra_fields_of_a_model_that_allows_them_are_kept(ser: Serializer) -> None:
    loaded = round_trip(Loose.model_validate({"name": "a", "colour": Color.RED}), ser)
    assert loaded.model_extra == {"colour": Color.RED}


def test_a_model_with_field_aliases_round_trips_by_field_name() -> None:
    class Aliased(BaseModel):
        sender: str = Field(alias="from")

    serializer = Serializer()
    serializer.register(Aliased, 40)
    assert round_trip(Aliased.model_validate({"from": "ann"}), serializer).sender == "ann"


def test_a_model_built_without_a_required_field_fails_at_save_time(ser: Serializer) -> None:
    with pytest.raises(SerializationError, match=r"at state\[0\]: field 'y' of Point is not set"):
        ser.dumps([Point.model_construct(x=1)])


def test_a_registered_dataclass_round_trips_and_recomputes_fields_outside_init(
    ser: Serializer,
) -> None:
    value = Span(start=datetime(2024, 1, 1), tags=frozenset({"a", "b"}))
    assert round_trip(value, ser) == value


def test_a_class_with_dump_and_load_methods_round_trips(ser: Serializer) -> None:
    assert round_trip({"price": Money(250, "EUR")}, ser) == {"price": Money(250, "EUR")}


def test_message_classes_round_trip_through_the_default_serializer() -> None:
    reply = messages.AssistantMessage(
        "sum", tool_calls=[messages.ToolCall("c1", "add", {"a": 1})], usage=messages.Usage()
    )
    value = {"messages": [messages.UserMessage("hi"), reply]}
    assert serde.loads(serde.dumps(value)) == value


def test_an_unregistered_type_fails_at_save_time_naming_its_exact_key_path(
    ser: Serializer,
) -> None:
    state = {"messages": [1, 2, 3, Wrapper(payload=Unregistered())]}
    with pytest.raises(SerializationError) as caught:
        ser.dumps(state)
    assert str(caught.value) == (
        "cannot serialize value at state['messages'][3].payload: object of type Unregistered is "
        "not registered; register it with graph_agent.checkpoint.serde.register(Unregistered, "
        "code)"
    )


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ((1, [Unregistered()]), "blob[1][0]"),
        ({"k": {Unregistered()}}, "blob['k']<element 0>"),
        ({Unregistered(): 1}, "blob<key <"),
        (Money(1, Unregistered()), "blob.__graph_agent_dump__()[1]"),  # type: ignore[arg-type]
    ],
)
def test_save_time_errors_name_paths_into_tuples_sets_keys_and_dumped_values(
    ser: Serializer, value: Any, path: str
) -> None:
    with pytest.raises(SerializationError, match=re.escape(f"at {path}")):
        ser.dumps(value, root="blob")


def test_a_reference_cycle_fails_at_save_time() -> None:
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(SerializationError, match=r"state\['x'\]\[0\].*reference cycle"):
        Serializer().dumps({"x": looped})


def test_nesting_is_stored_up_to_the_depth_limit_and_refused_beyond_it_at_save_time() -> None:
    def nested(depth: int) -> Any:
        value: Any = 0
        for _ in range(depth):
            value = [value]
        return value

    loaded, depth = round_trip(nested(MAX_DEPTH)), 0
    while loaded != 0:  # unwrapped by hand: == on 1024 levels would hit Python's recursion limit
        (loaded,), depth = loaded, depth + 1
    assert depth == MAX_DEPTH
    with pytest.raises(SerializationError, match=f"nested deeper than {MAX_DEPTH} levels"):
        Serializer().dumps(nested(MAX_DEPTH + 1))


def test_a_datetime_with_an_unsupported_tzinfo_fails_at_save_time() -> None:
    class Custom(tzinfo):
        def utcoffset(self, dt: datetime | None) -> timedelta:
            return timedelta(0)

        def dst(self, dt: datetime | None) -> timedelta:
            return timedelta(0)

        def tzname(self, dt: datetime | None) -> str:
            return "custom"

    with pytest.raises(
        SerializationError, match=r"at state\['when'\]: tzinfo of type \S*Custom cannot"
    ):
        Serializer().dumps({"when": datetime(2024, 1, 1, tzinfo=Custom())})


LONE = "name-\udcff.txt"  # os.listdir() of a name that is not UTF-8


@pytest.mark.parametrize(
    "value",
    [
        LONE,
        "\ud83d",  # the first half of an emoji split between two chunks
        [LONE, "ok", {LONE: (LONE, b"x")}],
        {"files": frozenset({LONE, "a"}), "pair": ("\udc80", 1)},
        {(LONE, 1): {LONE}},
    ],
    ids=["alone", "half-pair", "in-list-and-dict-key", "in-sets-and-tuples", "in-hashed-keys"],
)
def test_a_string_with_a_lone_surrogate_round_trips_exactly(value: Any) -> None:
    assert_round_trips(value)


def test_lone_surrogates_round_trip_inside_registered_classes_and_messages(
    ser: Serializer,
) -> None:
    value = {"model": Loose(name=LONE, note=LONE), "money": Money(1, LONE)}
    assert ser.loads(ser.dumps(value)) == value
    message = messages.ToolResponseMessage(tool_call_id="c1", content=LONE)
    assert serde.loads(serde.dumps([message])) == [message]


def test_a_dumps_that_kept_a_lone_surrogate_leaves_its_packer_reusable_once(
    ser: Serializer,
) -> None:
    for _ in range(3):
        assert ser.loads(ser.dumps([LONE])) == [LONE]
        assert ser.loads(ser.dumps({"plain": "text"})) == {"plain": "text"}
    assert len({id(packer) for packer in ser._idle}) == len(ser._idle)  # none handed out twice


# bytes graph_agent wrote before strings with lone surrogates could be stored (format 1)
WRITTEN_BEFORE = bytes.fromhex(
    "01de0012a474657874aa68c3a96c6c6f20e29c93a56279746573c40200ffa4696e74739500ffcf7fffffffffffff"
    "ffc70901400000000000000000c70b01ff00000000000000000000a5666c6f6174cb3ff8000000000000a5747570"
    "6c6593c7000801a161a373657493c700090102a666726f7a656e92c7000aa178a47768656ec72004323032342d30"
    "352d30315431323a33303a31352e3132333435362b30303a3030a57a6f6e6564c72b04323032342d31312d303354"
    "30313a33303a30302d30343a30305b416d65726963612f4e65775f596f726b5da3646179c70a05323032342d3035"
    "2d3031a5636c6f636bd70630383a31353a3330a47370616ec70c07000000020000000500000007a56d6f6e6579c7"
    "050231322e3530a3756964d8030000000000000000000000000000002aa565646974739292c7000b81a26964a26d"
    "3192c7000c81a56974656d7392c70008a161a86d657373616765739392c7001183a26964a27531a7636f6e74656e"
    "74a26869a4726f6c65a47573657292c7001287a26964a26131a7636f6e74656e74a0a4726f6c65a9617373697374"
    "616e74aa746f6f6c5f63616c6c739192c7001485a26964a26331a46e616d65a3616464a9617267756d656e747381"
    "a16101ad7261775f617267756d656e7473c0a67261775f6964c0ad66696e6973685f726561736f6ec0a575736167"
    "65c0a9726561736f6e696e67c092c7001386a26964a27431a7636f6e74656e74a132a4726f6c65a4746f6f6cac74"
    "6f6f6c5f63616c6c5f6964a26331a46e616d65a3616464a869735f6572726f72c201c093c700080102c3"
)


def test_data_written_by_the_format_before_lossless_strings_still_loads() -> None:
    expected = {
        "text": "héllo ✓",
        "bytes": b"\x00\xff",
        "ints": [0, -1, 2**63 - 1, 2**70, -(2**80)],
        "float": 1.5,
        "tuple": (1, "a"),
        "set": {1, 2},
        "frozen": frozenset({"x"}),
        "when": datetime(2024, 5, 1, 12, 30, 15, 123456, tzinfo=UTC),
        "zoned": datetime(2024, 11, 3, 1, 30, tzinfo=ZoneInfo("America/New_York")),
        "day": date(2024, 5, 1),
        "clock": time(8, 15, 30),
        "span": timedelta(days=2, seconds=5, microseconds=7),
        "money": Decimal("12.50"),
        "uid": uuid.UUID(int=42),
        "edits": [RemoveMessage("m1"), ReplaceAll(["a"])],
        "messages": [
            messages.UserMessage(content="hi", id="u1"),
            messages.AssistantMessage(
                content="", id="a1", tool_calls=[messages.ToolCall("c1", "add", {"a": 1})]
            ),
            messages.ToolResponseMessage(tool_call_id="c1", name="add", content="2", id="t1"),
        ],
        1: None,
        (1, 2): True,
    }
    loaded = serde.loads(WRITTEN_BEFORE)
    assert fingerprint(loaded) == fingerprint(expected)
    assert serde.dumps(expected) == WRITTEN_BEFORE  # and such values are still written the same


def test_a_value_larger_than_the_payload_limit_fails_at_save_time() -> None:
    with pytest.raises(SerializationError, match="exceed max_payload_bytes=100"):
        Serializer(max_payload_bytes=100).dumps("x" * 200)


def test_an_unknown_ext_code_on_load_raises() -> None:
    data = b"\x01" + msgpack.packb([msgpack.ExtType(77, b""), {}])
    with pytest.raises(SerializationError, match="ext code 77, which no type is registered"):
        Serializer().loads(data)


def test_loading_a_code_never_registered_in_this_process_imports_nothing() -> None:
    script = """
import sys
from graph_agent.checkpoint.serde import Serializer
from graph_agent.graph.errors import SerializationError
before = set(sys.modules)
try:
    Serializer().loads(bytes.fromhex(sys.argv[1]))
except SerializationError as exc:
    assert "ext code 99" in str(exc), exc
else:
    raise SystemExit("loaded")
print(sorted(set(sys.modules) - before))
"""
    writer = Serializer()
    writer.register(Point, 99)
    data = writer.dumps(Point(x=1, y=2))
    result = subprocess.run(
        [sys.executable, "-c", script, data.hex()], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("cut", range(1, 40))
def test_every_truncation_of_valid_data_raises(ser: Serializer, cut: int) -> None:
    data = ser.dumps({"e": Event(at=datetime(2024, 1, 1), where=Point(x=1, y=2)), "t": (1,)})
    assert cut < len(data)
    with pytest.raises(SerializationError):
        ser.loads(data[:cut])


def test_trailing_garbage_after_the_value_raises() -> None:
    with pytest.raises(SerializationError, match="trailing bytes"):
        Serializer().loads(serde.dumps({"a": 1}) + b"\x00")


def test_an_unknown_format_version_raises() -> None:
    with pytest.raises(SerializationError, match="format version 2"):
        Serializer().loads(b"\x02" + msgpack.packb(1))


def test_data_that_is_not_bytes_raises() -> None:
    with pytest.raises(SerializationError, match="must be bytes, got str"):
        Serializer().loads("\x01\x01")  # type: ignore[arg-type]


def test_bytearray_and_memoryview_input_load_like_bytes() -> None:
    data = serde.dumps((1, 2))
    assert Serializer().loads(bytearray(data)) == Serializer().loads(memoryview(data)) == (1, 2)


def test_an_oversize_payload_is_rejected_before_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_decoding(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("decoded oversize data")

    data = serde.dumps(["x" * 100])
    monkeypatch.setattr(serde.default_serializer, "max_payload_bytes", 64)
    monkeypatch.setattr(msgpack, "unpackb", no_decoding)
    with pytest.raises(SerializationError, match="over max_payload_bytes=64"):
        serde.loads(data)


def test_a_deep_nesting_bomb_raises_quickly_without_recursion_error() -> None:
    bomb = b"\x01" + b"\x91" * 100_000 + b"\x00"
    started = clock.perf_counter()
    with pytest.raises(SerializationError, match="nests deeper than"):
        Serializer().loads(bomb)
    assert clock.perf_counter() - started < 0.5


@pytest.mark.parametrize(
    "header",
    [
        b"\xdd\x80\x00\x00\x00",
        b"\xdf\x80\x00\x00\x00",
        b"\xdb\x80\x00\x00\x00",
        b"\xc6\x80\x00\x00\x00",
        b"\xc9\x80\x00\x00\x00\x20",
    ],
    ids=["array", "map", "str", "bin", "ext"],
)
def test_a_huge_length_prefix_raises_quickly_without_a_big_allocation(header: bytes) -> None:
    tracemalloc.start()
    started = clock.perf_counter()
    try:
        with pytest.raises(SerializationError):
            Serializer().loads(b"\x01" + header + b"\x00\x01\x02\x03")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000 and clock.perf_counter() - started < 0.5


@pytest.mark.parametrize("empty", [b"\x90", b"\x80"], ids=["arrays", "maps"])
def test_many_empty_containers_stop_at_max_containers_with_bounded_memory(empty: bytes) -> None:
    count = 200_000  # one byte each, 60-80 bytes each once built
    data = b"\x01\xdd" + count.to_bytes(4, "big") + empty * count
    tracemalloc.start()
    try:
        with pytest.raises(SerializationError, match=r"more than 20,000 lists and maps"):
            Serializer(max_containers=20_000).loads(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000  # 20,000 containers and the outer list's slots, not 200,000


def test_data_that_only_looks_container_heavy_loads_whole() -> None:
    serializer = Serializer(max_containers=1_000)
    text = "\u0080\u0090" * 5_000  # UTF-8 bytes 0xc2 0x80 / 0xc2 0x90: container heads
    value = {"note": text, "items": [[i] for i in range(500)]}
    assert serializer.loads(serializer.dumps(value)) == value
    with pytest.raises(SerializationError, match="more than 1,000"):
        serializer.loads(serializer.dumps({"items": [[i] for i in range(1_500)]}))


def tiny_strings(count: int) -> bytes:
    """Stored data of ``count`` 2-character strings: 3 bytes each, about 60 once loaded."""
    return b"\x01\xdd" + count.to_bytes(4, "big") + b"\xa2ab" * count


def test_data_of_a_million_tiny_strings_is_refused_before_anything_is_built() -> None:
    data = tiny_strings(1_000_000)  # 3 MB that would take 60 MB
    serializer = Serializer(max_payload_bytes=len(data) + 1)  # may take 16 times 3 MB
    tracemalloc.start()
    try:
        with pytest.raises(SerializationError, match=r"would take more than [\d,]+ bytes"):
            serializer.loads(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000
    assert Serializer(max_payload_bytes=len(data) + 1, max_decoded_ratio=24).loads(data) == (
        ["ab"] * 1_000_000
    )


@pytest.mark.parametrize(
    "value",
    [
        [messages.UserMessage("ok"), messages.AssistantMessage(content="ok")] * 10_000,
        [
            messages.AssistantMessage(tool_calls=[messages.ToolCall(f"c{i}", "add", {"a": i})])
            for i in range(5_000)
        ],
        [{"id": i, "name": f"user{i}", "score": i / 2, "tags": ["a", "b"]} for i in range(20_000)],
        [i * 7919 % 50_000 for i in range(300_000)],  # token ids
        [i / 3 for i in range(100_000)],
        ["a line of a long tool output " * 8] * 5_000,
    ],
    ids=["short-messages", "tool-calls", "records", "token-ids", "floats", "text"],
)
def test_real_checkpoints_load_within_the_memory_bound_and_near_its_estimate(
    value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = serde.dumps(value)
    estimate = footprint.decoded_size(data, 2**62)
    # as if this were the largest data allowed: the budget is 16 times its size, checked
    monkeypatch.setattr(serde.default_serializer, "max_payload_bytes", len(data))
    tracemalloc.start()
    try:
        loaded = serde.loads(data)
        taken = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert loaded == value
    assert estimate is not None and 0.5 < estimate / taken < 2.5, (estimate, taken)


def test_small_data_is_loaded_without_walking_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def walked(*args: Any) -> None:
        raise AssertionError("walked data that fits any budget")

    monkeypatch.setattr(serde, "decoded_size", walked)
    value = [messages.UserMessage("hi")] * 10_000
    assert serde.loads(serde.dumps(value)) == value


@pytest.mark.parametrize(
    "body",
    [
        b"\xd6\xff\x00\x00\x00\x01",
        b"\x91\xd7\xff" + bytes(8),
        b"\x81\xa1k\xc7\x0c\xff" + bytes(12),
        b"\x81\xc7\x04\xff\x00\x00\x00\x01\x00",
    ],
    ids=["top-level", "in-array", "map-value", "map-key"],
)
def test_a_msgpack_timestamp_is_refused_although_msgpack_decodes_it_itself(body: bytes) -> None:
    with pytest.raises(SerializationError, match="Timestamp"):
        Serializer().loads(b"\x01" + body)


def test_a_type_tag_anywhere_but_the_head_of_an_array_is_refused() -> None:
    tag = msgpack.ExtType(8, b"")
    for value in ([1, tag], {"k": tag}, tag):
        with pytest.raises(SerializationError, match="type tag outside its array"):
            Serializer().loads(b"\x01" + msgpack.packb(value))


def test_a_stored_model_that_no_longer_validates_raises_naming_its_class() -> None:
    class Old(BaseModel):
        x: int

    class New(BaseModel):
        x: int
        y: int

    writer, reader = Serializer(), Serializer()
    writer.register(Old, 40)
    reader.register(New, 40)
    with pytest.raises(SerializationError, match=r"cannot load .*New \(ext code 40\)"):
        reader.loads(writer.dumps(Old(x=1)))


def test_registering_a_taken_code_raises_value_error(ser: Serializer) -> None:
    with pytest.raises(ValueError, match=r"ext code 35 is already registered to .*Point; pick"):
        ser.register(_other_model(), 35)


def _other_model() -> type[BaseModel]:
    class Other(BaseModel):
        value: int = 0

    return Other


def test_registering_a_class_under_a_second_code_raises_value_error(ser: Serializer) -> None:
    with pytest.raises(ValueError, match="Point is already registered under ext code 35"):
        ser.register(Point, 90)


def test_registering_the_same_class_and_code_again_is_a_no_op(ser: Serializer) -> None:
    ser.register(Point, 35)
    assert round_trip(Point(x=1, y=1), ser) == Point(x=1, y=1)


def test_a_reloaded_class_of_the_same_name_takes_over_its_code() -> None:
    serializer = Serializer()
    first, second = _other_model(), _other_model()
    serializer.register(first, 50)
    serializer.register(second, 50)
    assert type(round_trip(first(value=1), serializer)) is second


@pytest.mark.parametrize("code", [-1, 0, 8, 13, 15, 16, 31, 128])
def test_codes_reserved_or_out_of_range_are_refused(code: int) -> None:
    with pytest.raises(ValueError, match=f"ext code {code}"):
        Serializer().register(Point, code)


def test_registering_a_class_the_serializer_cannot_handle_raises_type_error() -> None:
    with pytest.raises(TypeError, match="cannot register Unregistered"):
        Serializer().register(Unregistered, 40)


def test_is_registered_covers_built_ins_and_registered_classes_only(ser: Serializer) -> None:
    assert ser.is_registered(tuple) and ser.is_registered(Point)
    assert not ser.is_registered(Unregistered) and not Serializer().is_registered(Point)


def test_module_functions_use_the_default_serializer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serde, "default_serializer", Serializer())
    serde.register(Point, 60)
    assert serde.is_registered(Point)
    assert serde.loads(serde.dumps([Point(x=1, y=2)])) == [Point(x=1, y=2)]


def test_classes_registered_without_a_code_round_trip_keyed_by_their_name() -> None:
    serializer = Serializer()
    for cls in (Color, Point, Event, Span, Money):
        serializer.register(cls)
    value = {
        "colour": Color.PAIR,
        "event": Event(at=datetime(2024, 1, 1), where=Point(x=1, y=2), extra=(Color.RED,)),
        "span": Span(start=datetime(2024, 1, 2), tags=frozenset({"a"})),
        "price": Money(5, "EUR"),
    }
    data = serializer.dumps(value)
    assert b"tests.checkpoint.test_serde.Point" in data
    assert msgpack.ExtType(13, b"") in msgpack.unpackb(serializer.dumps(Point(x=1, y=2))[1:])
    loaded = serializer.loads(data)
    assert loaded == value and type(loaded["event"].where) is Point


def test_registering_by_name_twice_is_a_no_op() -> None:
    serializer = Serializer()
    serializer.register(Point)
    serializer.register(Point)
    assert serializer.is_registered(Point)
    assert round_trip(Point(x=3, y=4), serializer) == Point(x=3, y=4)


def test_another_class_with_the_same_name_cannot_be_registered_by_name() -> None:
    serializer = Serializer()
    serializer.register(_other_model())
    with pytest.raises(ValueError, match=r"another class is already registered under the name"):
        serializer.register(_other_model())


def test_a_class_registered_with_a_code_keeps_that_code_when_registered_by_name(
    ser: Serializer,
) -> None:
    before = ser.dumps(Point(x=1, y=2))
    ser.register(Point)
    assert ser.dumps(Point(x=1, y=2)) == before
    assert msgpack.unpackb(before[1:])[0] == msgpack.ExtType(35, b"")


def test_a_class_registered_by_name_and_then_with_a_code_still_loads_what_its_name_saved() -> None:
    serializer = Serializer()
    serializer.register(Point)
    by_name = serializer.dumps(Point(x=1, y=2))
    serializer.register(Point, 40)
    assert msgpack.unpackb(serializer.dumps(Point(x=1, y=2))[1:])[0] == msgpack.ExtType(40, b"")
    assert serializer.loads(by_name) == Point(x=1, y=2)


def test_a_name_no_class_is_registered_under_raises_on_load() -> None:
    writer = Serializer()
    writer.register(Point)
    data = writer.dumps({"p": Point(x=1, y=2)})
    with pytest.raises(SerializationError, match=r"'tests.checkpoint.test_serde.Point'.*never"):
        Serializer().loads(data)


@pytest.mark.parametrize("payload", [[], [7, {}], [b"name", {}]])
def test_a_by_name_tag_without_a_name_after_it_raises(payload: list[Any]) -> None:
    data = b"\x01" + msgpack.packb([msgpack.ExtType(13, b""), *payload])
    with pytest.raises(SerializationError, match="must be followed by a class name"):
        Serializer().loads(data)


def test_loading_an_unknown_name_imports_nothing() -> None:
    script = """
import sys
import msgpack
from graph_agent.checkpoint.serde import Serializer
from graph_agent.graph.errors import SerializationError
data = b"\\x01" + msgpack.packb([msgpack.ExtType(13, b""), "fractions.Fraction", [1, 3]])
before = set(sys.modules)
try:
    Serializer().loads(data)
except SerializationError as exc:
    assert "fractions.Fraction" in str(exc), exc
else:
    raise SystemExit("loaded")
print(sorted(set(sys.modules) - before))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_model_registered_by_name_that_no_longer_validates_raises_naming_it() -> None:
    def model(with_y: bool) -> type[BaseModel]:
        class Shape(BaseModel):
            x: int
            if with_y:
                y: int

        return Shape

    old, new = model(with_y=False), model(with_y=True)
    writer, reader = Serializer(), Serializer()
    writer.register(old)
    reader.register(new)
    with pytest.raises(SerializationError, match=r"cannot load \S*Shape \(registered by name\)"):
        reader.loads(writer.dumps(old(x=1)))


def test_save_time_errors_name_paths_into_a_class_registered_by_name() -> None:
    serializer = Serializer()
    serializer.register(Wrapper)
    with pytest.raises(SerializationError, match=r"at state\['w'\]\.payload: object of type"):
        serializer.dumps({"w": Wrapper(payload=Unregistered())})


def test_every_truncation_of_data_keyed_by_name_raises() -> None:
    serializer = Serializer()
    serializer.register(Point)
    data = serializer.dumps([Point(x=1, y=2)])
    for cut in range(1, len(data)):
        with pytest.raises(SerializationError):
            serializer.loads(data[:cut])


hashables = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary(),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=8,
)
values = st.recursive(
    hashables,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(hashables, inner, max_size=4)
        | st.tuples(inner, inner)
        | st.sets(hashables, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(values)
def test_random_nested_values_round_trip_with_their_exact_types(value: Any) -> None:
    assert_round_trips(value)


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.text(st.characters(exclude_categories=()) | st.characters(categories=["Cs"])),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=3),
    )
)
def test_random_text_with_lone_surrogates_round_trips(value: Any) -> None:
    assert_round_trips(value)


@settings(max_examples=200, deadline=None)
@given(st.datetimes(timezones=st.none() | st.timezones() | st.just(UTC)))
def test_random_datetimes_in_any_zone_round_trip(value: datetime) -> None:
    loaded = round_trip(value)
    assert fingerprint(loaded) == fingerprint(value)
    assert loaded.replace(tzinfo=None) == value.replace(tzinfo=None)


def test_the_engines_read_only_views_are_stored_as_plain_lists_and_dicts():
    from types import MappingProxyType

    from graph_agent.graph.state import SeqView

    value = {"seq": SeqView([1, 2, 3], 2), "map": MappingProxyType({"a": (1, 2)})}
    assert serde.loads(serde.dumps(value)) == {"seq": [1, 2], "map": {"a": (1, 2)}}


def test_a_value_that_serializes_with_a_nested_dumps_round_trips(ser: Serializer) -> None:
    class Nested:  # dumps itself with a nested dumps() call: the serializer is re-entrant
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __graph_agent_dump__(self) -> bytes:
            return ser.dumps(self.inner)

        @classmethod
        def __graph_agent_load__(cls, data: bytes) -> Any:
            return cls(ser.loads(data))

    ser.register(Nested, 60)
    loaded = ser.loads(ser.dumps({"n": Nested({"a": [1, 2]}), "after": "x"}))
    assert loaded["n"].inner == {"a": [1, 2]} and loaded["after"] == "x"


def test_a_failed_dumps_leaves_the_next_one_exact(ser: Serializer) -> None:
    with pytest.raises(SerializationError):
        ser.dumps({"ok": [1, 2, 3], "bad": object()})
    assert ser.dumps({"k": "v"}) == bytes([serde.FORMAT_VERSION]) + msgpack.packb({"k": "v"})


def test_a_large_value_then_small_ones_serialize_exactly(ser: Serializer) -> None:
    big = ["x" * 1000] * 200
    assert ser.loads(ser.dumps(big)) == big
    assert ser.dumps([1]) == bytes([serde.FORMAT_VERSION]) + msgpack.packb([1])


def test_threads_serializing_at_once_each_get_exact_bytes(ser: Serializer) -> None:
    # Packers are shared between threads through an idle list: no two may pack into one buffer.
    import threading

    start = threading.Barrier(16)
    wrong: list[int] = []

    def work(n: int) -> None:
        # tuples go through Python (the registry), where another thread may take over mid-pack
        value = {"thread": n, "items": [(str(n) * (n + 1), n)] * 50}
        expected = ser.dumps(value)
        start.wait()
        for _ in range(300):
            if ser.dumps(value) != expected:
                wrong.append(n)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
