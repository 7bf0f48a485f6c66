"""Checkpoint serialization: msgpack with an explicit type registry.

Stored bytes are one format-version byte (:data:`FORMAT_VERSION`) followed by one msgpack value.
What msgpack knows natively (None, bool, 64-bit int, float, str, bytes, list, dict) is stored
as is; every other type needs an ext code from the registry, and nothing else can be stored:

- *leaf* types are one ext whose payload is a fixed binary or text form;
- *container* types are an array whose first item is an empty ext naming the type,
  ``[ext(code), *payload]``. msgpack's C unpacker builds arrays bottom-up and hands each to a
  hook that turns a tagged array into its object, so loading is one non-recursive pass.

==========  =====================================  ==========================================
code        type                                   payload
==========  =====================================  ==========================================
1           int beyond 64 bits                     two's-complement big-endian bytes
2           decimal.Decimal                        ``str(value)``
3           uuid.UUID                              16 bytes
4 / 5 / 6   datetime / date / time                 ISO 8601 text; a ZoneInfo zone as ``[key]``
7           timedelta                              days, seconds, microseconds (3 × int32)
8 / 9 / 10  tuple / set / frozenset                the items
11 / 12     RemoveMessage / ReplaceAll             their fields (graph_agent.graph.state)
13          a registered class keyed by its name   its registry name, then its own payload
14          str holding lone surrogates            its UTF-8 with ``surrogatepass``
15          reserved for built-ins
16-31       graph_agent.messages classes           registered by that module
32-127      your types: ``register(cls, code)``    see below
==========  =====================================  ==========================================

Registered classes: a pydantic model stores its fields by name (each value serialized in turn,
so nested registered models, datetimes and tuples come back exactly) and loads with
``model_validate(fields, by_name=True)``; a dataclass stores its ``init`` fields and loads with
``cls(**fields)``; an Enum stores ``member.value``; any other class may define
``__graph_agent_dump__(self)`` returning a storable value and a classmethod
``__graph_agent_load__(cls, data)``. Subclasses are not covered by their base's registration.

``register(cls)`` without a code keys the class by its name (``"module.qualname"``) instead:
it is stored under ext code 13 as ``[ext(13), name, *payload]``, costs a few bytes more per
value, and needs no code to be picked (``ReactAgent`` registers its ``output_schema`` this way).
Loading looks the name up in the registry and never imports it: a name that no class is
registered under in this process is refused like an unknown code.

Loading never imports or builds a type that is not registered: an unknown ext code, truncated
or trailing bytes, data over the size limit (checked before decoding), data that would take
more memory than :data:`MAX_DECODED_RATIO` allows (also checked before decoding), nesting
deeper than :data:`MAX_DEPTH` or a value that no longer validates raise
:class:`~graph_agent.graph.errors.SerializationError`. :func:`dumps` fails the same way at save
time, naming the key path of the first value it cannot store, so what saves also loads.

Every ``str`` is stored exactly, also one holding lone UTF-16 surrogates (``os.listdir()``
names of undecodable bytes, half of a split emoji), which UTF-8 cannot encode: such a string
is stored under ext code 14. :meth:`Serializer.dumps` only looks for them once packing failed,
so ordinary text costs nothing more.

Not stored exactly: ``bytearray`` and ``memoryview`` come back as ``bytes``; a ``timezone``'s
name and the ``fold`` of a datetime without a ZoneInfo zone are dropped; private attributes of
a model and non-``init`` dataclass fields are rebuilt by the class, not stored.

Example:
    >>> from datetime import date
    >>> loads(dumps({"when": date(2024, 5, 1), "pair": (1, 2)}))
    {'when': datetime.date(2024, 5, 1), 'pair': (1, 2)}
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import threading
from collections.abc import Callable
from types import MappingProxyType
from typing import Any, Final

import msgpack

from graph_agent.checkpoint.footprint import MOST_PER_BYTE, decoded_size
from graph_agent.checkpoint.serde_types import (
    _NAMED_CODE,
    _SURROGATES,
    _SURROGATES_CODE,
    _builtin_codecs,
    _Codec,
    _codec_for,
    _EncodeError,
    _name_dispatch,
    _named_codec,
    _PathStyle,
    _short,
    _with_surrogates_tagged,
)
from graph_agent.graph.errors import SerializationError, exception_text
from graph_agent.graph.state import SeqView

__all__ = [
    "FIRST_USER_CODE",
    "FORMAT_VERSION",
    "MAX_CONTAINERS",
    "MAX_DECODED_RATIO",
    "MAX_DEPTH",
    "MAX_PAYLOAD_BYTES",
    "Serializer",
    "default_serializer",
    "dumps",
    "is_registered",
    "loads",
    "register",
]

FORMAT_VERSION: Final = 1
MAX_PAYLOAD_BYTES: Final = 64 * 1024 * 1024
"""Default size limit of stored data, checked before decoding and at save time."""
MAX_CONTAINERS: Final = 1_000_000
"""Default limit of the lists and maps one load may build. Each costs 60 to 80 bytes however
little data it held (an empty array is one byte), so without it a payload under the size limit
could take gigabytes; it is only counted when the data could hold more (see ``loads``)."""
MAX_DECODED_RATIO: Final = 16
"""Default limit of the memory one load may build, per stored byte: at most this many times
the data's size, counting data under a quarter of ``max_payload_bytes`` as that quarter (so any
load may take 256 MiB by default). Real checkpoints take 1 to 14 times their size (text 1-3,
messages 7-10, lists of numbers 4-14); data of millions of tiny strings or numbers would take
20 to 60 times, and is refused before anything is built (see
:mod:`~graph_agent.checkpoint.footprint`)."""
MAX_DEPTH: Final = 1024
"""Nesting limit in msgpack containers: the limit msgpack's packer and unpacker both enforce."""
FIRST_USER_CODE: Final = 32
_CONTAINER_HEADS: Final = bytes(range(0x80, 0xA0)) + b"\xdc\xdd\xde\xdf"
"""The bytes a msgpack array or map begins with: data holds no more containers than these."""
_NOT_CONTAINER_HEADS: Final = bytes(b for b in range(256) if b not in _CONTAINER_HEADS)
_PACKER_BUFFER: Final = 4096
"""Initial buffer of a Packer (msgpack's default is 256 KiB); it grows as needed."""
_KEEP_PACKER: Final = 64 * 1024
"""A Packer goes back to the idle ones for the next dumps() unless it packed more than this, so
at most a small buffer stays alive after storing a large value."""
_IDLE_PACKERS: Final = 8
"""How many idle Packers a Serializer keeps (one per thread that serializes at a time); the
check is not atomic, so threads finishing at once may leave a few more."""
_FIRST_MESSAGE_CODE: Final = 16
_MAX_CODE: Final = 127
_HEADER: Final = bytes([FORMAT_VERSION])
# msgpack decodes ext type -1 (its Timestamp) itself, bypassing ext_hook: data that may hold one
# is decoded with hooks that reject it (see _may_hold_timestamp).
_TIMESTAMP_LEADS: Final = frozenset(b"\xd6\xd7\x04\x08\x0c")
_NATIVE: Final = frozenset({type(None), bool, int, float, bytes, bytearray, memoryview})
_AS_PLAIN: Final[dict[type, Callable[[Any], Any]]] = {SeqView: list, MappingProxyType: dict}
"""The engine's read-only views are stored as the list or dict they show."""


def _check_code(cls: type, code: int) -> None:
    if type(code) is not int:
        raise TypeError(f"ext code must be an int, got {code!r}")
    if not _FIRST_MESSAGE_CODE <= code <= _MAX_CODE:
        raise ValueError(
            f"ext code {code} for {cls.__qualname__} is outside {FIRST_USER_CODE}.."
            f"{_MAX_CODE}; 0..15 are the serializer's built-ins"
        )
    if code < FIRST_USER_CODE and not cls.__module__.startswith("graph_agent."):
        raise ValueError(
            f"ext code {code} is reserved for graph_agent's message classes; "
            f"register {cls.__qualname__} under {FIRST_USER_CODE}..{_MAX_CODE}"
        )


def _same_definition(old: type, new: type) -> bool:
    """True when ``new`` is ``old`` defined again, as by ``importlib.reload``."""
    return (old.__module__, old.__qualname__) == (new.__module__, new.__qualname__)


def _message_codec(by_code: dict[int, _Codec], code: int) -> _Codec | None:
    """The codec of a message class (codes 16-31) once :mod:`graph_agent.messages`, which
    registers them and loads on first use (``import graph_agent`` leaves it out), is imported:
    data stored by another process loads without the caller importing it first."""
    if not _FIRST_MESSAGE_CODE <= code < FIRST_USER_CODE or "graph_agent.messages" in sys.modules:
        return None
    importlib.import_module("graph_agent.messages")  # registers the message classes (by name:
    # the messages import this module, and the package's import graph has no cycle)

    return by_code.get(code)


class _Decoder:
    """The msgpack hooks of one :meth:`Serializer.loads` call."""

    __slots__ = ("by_code", "open_tags")

    def __init__(self, by_code: dict[int, _Codec]) -> None:
        self.by_code = by_code
        self.open_tags = 0  # type tags seen minus tags consumed at the head of an array

    def ext_hook(self, code: int, data: bytes) -> Any:
        codec = self.by_code.get(code) or _message_codec(self.by_code, code)
        if codec is None:
            raise SerializationError(
                f"stored data uses ext code {code}, which no type is registered under in this "
                f"process; register the class with graph_agent.checkpoint.serde.register(cls, "
                f"{code}) before loading"
            )
        if codec.path_style != "leaf":
            if data:
                raise SerializationError(f"stored data is malformed: tag {code} has a payload")
            self.open_tags += 1
            return codec
        try:
            return codec.decode(data)
        except Exception as exc:
            raise SerializationError(
                f"stored {codec.cls.__qualname__} (ext code {code}) is malformed: {exc}"
            ) from exc

    def list_hook(self, items: list[Any]) -> Any:
        if not items or type(items[0]) is not _Codec:
            return items
        codec: _Codec = items[0]
        del items[0]
        self.open_tags -= 1
        try:
            return codec.decode(items)
        except SerializationError:
            raise
        except Exception as exc:
            raise SerializationError(
                f"cannot load {codec.cls.__qualname__} (ext code {codec.code}): {exc}"
            ) from exc

    def counted(
        self,
        list_hook: Callable[[list[Any]], Any],
        object_hook: Callable[[dict[Any, Any]], Any] | None,
        limit: int,
    ) -> tuple[Callable[[list[Any]], Any], Callable[[dict[Any, Any]], Any]]:
        """The hooks, also counting the containers built: past ``limit`` the load stops."""
        left = [limit]

        def spend() -> None:
            left[0] -= 1
            if left[0] < 0:
                raise SerializationError(
                    f"stored data holds more than {limit:,} lists and maps, the limit "
                    "(max_containers) that keeps a load's memory bounded; it is corrupt, or "
                    "load it with Serializer(max_containers=...) raised"
                )

        def counted_list(items: list[Any]) -> Any:
            spend()
            return list_hook(items)

        def counted_object(mapping: dict[Any, Any]) -> Any:
            spend()
            return mapping if object_hook is None else object_hook(mapping)

        return counted_list, counted_object

    def checked_list_hook(self, items: list[Any]) -> Any:
        _reject_timestamps(items)
        return self.list_hook(items)

    def checked_object_hook(self, mapping: dict[Any, Any]) -> dict[Any, Any]:
        _reject_timestamps(mapping)
        _reject_timestamps(mapping.values())
        return mapping


def _reject_timestamps(values: Any) -> None:
    if msgpack.Timestamp in map(type, values):
        raise SerializationError(
            "stored data holds a msgpack Timestamp (ext code -1), which graph_agent never writes"
        )


def _may_hold_timestamp(data: bytes) -> bool:
    # Ext -1 is a 0xff type byte after a header ending in 0xd6, 0xd7 or a length of 4, 8 or 12.
    # UTF-8 text never holds 0xff, so the common case is one memchr; many hits give up early.
    at = data.find(b"\xff", 1)
    for _ in range(32):
        if at == -1:
            return False
        if data[at - 1] in _TIMESTAMP_LEADS:
            return True
        at = data.find(b"\xff", at + 1)
    return True


class Serializer:
    """A type registry with ``dumps`` and ``loads``.

    The module functions use :data:`default_serializer`, where graph_agent.messages registers
    its classes. Build another only to keep a registry apart, as tests do.

    Args:
        max_payload_bytes: The largest stored data, header included, that :meth:`loads`
            accepts and :meth:`dumps` produces.
        max_containers: The most lists and maps one :meth:`loads` builds.
        max_decoded_ratio: How much memory one :meth:`loads` may build, per stored byte (see
            :data:`MAX_DECODED_RATIO`).

    Example:
        >>> from pydantic import BaseModel
        >>> class Point(BaseModel):
        ...     x: int
        ...     y: int
        >>> serializer = Serializer()
        >>> serializer.register(Point, 32)
        >>> serializer.loads(serializer.dumps({"path": (Point(x=1, y=2),)}))
        {'path': (Point(x=1, y=2),)}
    """

    def __init__(
        self,
        *,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        max_containers: int = MAX_CONTAINERS,
        max_decoded_ratio: int = MAX_DECODED_RATIO,
    ) -> None:
        self.max_payload_bytes = max_payload_bytes
        self.max_containers = max_containers
        self.max_decoded_ratio = max_decoded_ratio
        self._by_type: dict[type, _Codec] = {}
        self._by_code: dict[int, _Codec] = {}
        self._by_name: dict[str, _Codec] = {}
        self._lock = threading.Lock()
        by_type = self._by_type

        def default(value: object) -> Any:
            codec = by_type.get(type(value))
            if codec is not None:
                return codec.encode(value)
            plain = _AS_PLAIN.get(type(value))
            if plain is None:
                raise TypeError(f"cannot serialize {type(value).__qualname__}")
            return plain(value)

        self._default = default
        self._idle: list[msgpack.Packer] = []
        for codec in _builtin_codecs():
            self._add(codec)
        self._by_code[_NAMED_CODE] = _name_dispatch(self._by_name)
        self._by_code[_SURROGATES_CODE] = _SURROGATES

    def register(self, cls: type, code: int | None = None) -> None:
        """Make ``cls`` storable under ext ``code``, or by its name without one; idempotent.

        Without a code the class is keyed by ``"module.qualname"`` (see the module docstring);
        a class that is already registered, with a code or by name, stays as it is. With a code,
        a class registered by name moves to that code for saving, and what was saved under its
        name still loads.

        Raises:
            ValueError: ``code`` is reserved or taken by another class, ``cls`` already has
                another code, or (without a code) another class is registered under its name.
            TypeError: ``cls`` is not a pydantic model, dataclass, Enum or dump/load class.
        """
        if not isinstance(cls, type):
            raise TypeError(f"register() needs a class, got {cls!r}")
        if code is None:
            self._add_named(cls)
            return
        _check_code(cls, code)
        self._add(_codec_for(cls, code))

    def is_registered(self, cls: type) -> bool:
        """True when values of exactly this class can be stored (built-in types included)."""
        return cls in self._by_type

    def dumps(self, obj: object, *, root: str = "state") -> bytes:
        """Serialize ``obj``; ``root`` names it in error messages (``state['messages'][3]``).

        Raises:
            SerializationError: Something in ``obj`` cannot be stored; the message names the
                first such value by its path, and why.
        """
        # Packers are reused (building one costs more than packing a small value). One is taken
        # from the idle list while in use (list.pop and append are atomic), so another thread or
        # a nested dumps() (from a __graph_agent_dump__) gets its own; a threading.local lookup
        # costs as much as packing a small value. msgpack resets a packer after an error; one
        # that grew past _KEEP_PACKER is dropped.
        idle = self._idle
        try:
            packer = idle.pop()
        except IndexError:
            packer = msgpack.Packer(
                default=self._default,
                use_bin_type=True,
                strict_types=True,
                buf_size=_PACKER_BUFFER,
            )
        try:
            body: bytes = packer.pack(obj)
        except UnicodeEncodeError:  # a lone surrogate (msgpack reset the packer: it is reused)
            body = self._pack_keeping_surrogates(obj, root)
        except Exception as exc:
            if len(idle) < _IDLE_PACKERS:
                idle.append(packer)
            raise SerializationError(_describe_failure(obj, root, self._by_type, exc)) from exc
        if len(body) <= _KEEP_PACKER and len(idle) < _IDLE_PACKERS:
            idle.append(packer)
        if len(body) >= self.max_payload_bytes:
            raise SerializationError(
                f"cannot serialize value at {root}: {len(body) + 1} bytes "
                f"exceed max_payload_bytes={self.max_payload_bytes}"
            )
        return _HEADER + body

    def _pack_keeping_surrogates(self, obj: object, root: str) -> bytes:
        """Pack ``obj`` storing each string UTF-8 cannot encode under ext code 14: the slow
        path :meth:`dumps` takes once packing failed on one."""
        default = self._default

        def keeping_surrogates(value: object) -> Any:
            return _with_surrogates_tagged(default(value))

        packer = msgpack.Packer(default=keeping_surrogates, use_bin_type=True, strict_types=True)
        try:
            body: bytes = packer.pack(_with_surrogates_tagged(obj))
        except Exception as exc:
            raise SerializationError(_describe_failure(obj, root, self._by_type, exc)) from exc
        return body

    def loads(self, data: bytes | bytearray | memoryview) -> Any:
        """Rebuild a value from :meth:`dumps` output, building only registered types.

        Raises:
            SerializationError: The data is not bytes, too large (or would take too much
                memory), truncated, has trailing bytes, an unknown version or ext code, is too
                deep, or a value fails to load.
        """
        data = _checked_input(data, self.max_payload_bytes)
        size = len(data)
        floor = self.max_decoded_ratio * (self.max_payload_bytes >> 2)  # what any load may take
        if size * MOST_PER_BYTE > floor:  # (rare: the data may take more than that)
            self._check_footprint(data, max(floor, self.max_decoded_ratio * size))
        checked = _may_hold_timestamp(data)
        decoder = _Decoder(self._by_code)
        list_hook: Callable[[list[Any]], Any] = (
            decoder.checked_list_hook if checked else decoder.list_hook
        )
        object_hook: Callable[[dict[Any, Any]], Any] | None = (
            decoder.checked_object_hook if checked else None
        )
        limit = self.max_containers
        if size > limit and len(data.translate(None, _NOT_CONTAINER_HEADS)) > limit:
            list_hook, object_hook = decoder.counted(list_hook, object_hook, limit)
        try:
            value = msgpack.unpackb(
                memoryview(data)[1:],
                ext_hook=decoder.ext_hook,
                list_hook=list_hook,
                object_hook=object_hook,
                strict_map_key=False,
                max_str_len=size,
                max_bin_len=size,
                max_ext_len=size,
                max_array_len=size,
                max_map_len=size // 2,
            )
        except (SerializationError, MemoryError):
            raise
        except msgpack.StackError as exc:
            raise SerializationError(f"stored data nests deeper than {MAX_DEPTH} levels") from exc
        except msgpack.ExtraData as exc:
            raise SerializationError("stored data has trailing bytes after its value") from exc
        except Exception as exc:
            raise SerializationError(f"stored data is corrupt or truncated: {exc}") from exc
        if checked:
            _reject_timestamps((value,))
        if decoder.open_tags:
            raise SerializationError("stored data is malformed: a type tag outside its array")
        return value

    def _check_footprint(self, data: bytes, budget: int) -> None:
        """Refuse data that would take more than ``budget`` bytes of memory to load."""
        if decoded_size(data, budget) is None:
            raise SerializationError(
                f"stored data of {len(data):,} bytes would take more than {budget:,} bytes of "
                f"memory to load (max_decoded_ratio={self.max_decoded_ratio}: it holds millions "
                "of tiny values); it is corrupt, or load it with Serializer(max_decoded_ratio=...) "
                "raised"
            )

    def _add_named(self, cls: type) -> None:
        if cls in self._by_type:
            return
        name = f"{cls.__module__}.{cls.__qualname__}"
        codec = _named_codec(cls, name)
        with self._lock:
            if cls in self._by_type:
                return
            taken = self._by_name.get(name)
            if taken is not None:
                raise ValueError(
                    f"another class is already registered under the name {name!r} (a class "
                    "defined again, e.g. inside a function called twice); register each class "
                    "by name once, or give them codes with register(cls, code)"
                )
            self._by_name[name] = codec
            self._by_type[cls] = codec

    def _add(self, codec: _Codec) -> None:
        with self._lock:
            taken = self._by_code.get(codec.code)
            if taken is not None and taken.cls is codec.cls:
                return
            previous = self._by_type.get(codec.cls)
            if previous is not None and previous.code != _NAMED_CODE:
                raise ValueError(
                    f"{codec.cls.__qualname__} is already registered under ext code "
                    f"{previous.code}; a class has one code (asked for {codec.code})"
                )
            if taken is not None and not _same_definition(taken.cls, codec.cls):
                raise ValueError(
                    f"ext code {codec.code} is already registered to "
                    f"{taken.cls.__module__}.{taken.cls.__qualname__}; pick "
                    f"another code for {codec.cls.__qualname__}"
                )
            self._by_code[codec.code] = codec  # a reloaded class replaces its old definition
            self._by_type[codec.cls] = codec


def _checked_input(data: object, limit: int) -> bytes:
    """``data`` as bytes, once its type, size (before any copy) and header are known good."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise SerializationError(f"stored data must be bytes, got {type(data).__qualname__}")
    size = data.nbytes if isinstance(data, memoryview) else len(data)
    if size > limit:
        raise SerializationError(f"stored data is {size} bytes, over max_payload_bytes={limit}")
    if size < 2:
        raise SerializationError(f"stored data is truncated: {size} byte(s)")
    if data[0] != FORMAT_VERSION:
        raise SerializationError(
            f"stored data has format version {data[0]}; this graph_agent reads version "
            f"{FORMAT_VERSION} (or the data is not a graph_agent checkpoint)"
        )
    return data if isinstance(data, bytes) else bytes(data)


@dataclasses.dataclass(frozen=True, slots=True)
class _PathStep:
    parent: _PathStep | None
    segment: str
    value: object


def _describe_failure(obj: object, root: str, by_type: dict[type, _Codec], exc: Exception) -> str:
    """Find the first value msgpack would stop at (walking as it does) and say why."""
    stack: list[tuple[object, int, _PathStep | None]] = [(obj, 0, None)]
    while stack:
        value, depth, step = stack.pop()
        if depth > MAX_DEPTH:
            return f"cannot serialize value at {_render(step, root)}: {_too_deep(step)}"
        try:
            children, levels = _children(value, by_type)
        except _EncodeError as problem:
            return f"cannot serialize value at {_render(step, root)}: {problem}"
        for segment, child in reversed(children):
            stack.append((child, depth + levels, _PathStep(step, segment, child)))
    return f"cannot serialize value at {root}: {type(exc).__name__}: {exception_text(exc)}"


def _children(value: object, by_type: dict[type, _Codec]) -> tuple[list[tuple[str, Any]], int]:
    """The (path segment, child) pairs msgpack packs for ``value``, and their nesting levels."""
    plain = _AS_PLAIN.get(type(value))
    if plain is not None:
        value = plain(value)
    kind = type(value)
    if kind in _NATIVE or kind is msgpack.ExtType:
        return [], 0
    if kind is str:
        return [], 0
    if isinstance(value, list) and kind is list:
        return [(f"[{index}]", item) for index, item in enumerate(value)], 1
    if isinstance(value, dict) and kind is dict:
        pairs = [
            [(f"<key {_short(key)}>", key), (f"[{_short(key)}]", item)]
            for key, item in value.items()
        ]
        return [pair for key_and_item in pairs for pair in key_and_item], 1
    codec = by_type.get(kind)
    if codec is None:
        raise _EncodeError(
            f"object of type {kind.__qualname__} is not registered; register it "
            f"with graph_agent.checkpoint.serde.register({kind.__name__}, code)"
        )
    try:
        encoded = codec.encode(value)
    except _EncodeError:
        raise
    except Exception as exc:
        raise _EncodeError(
            f"{kind.__qualname__} could not be encoded: {type(exc).__name__}: {exception_text(exc)}"
        ) from exc
    if codec.code == _NAMED_CODE:
        encoded = encoded[1:]  # [name, *payload]: the name stands where the tag would be
    return _codec_children(codec.path_style, encoded)


def _codec_children(style: _PathStyle, encoded: Any) -> tuple[list[tuple[str, Any]], int]:
    if style == "leaf":
        return [], 0
    payload = encoded[1:]
    if style == "index":
        return [(f"[{index}]", item) for index, item in enumerate(payload)], 1
    if style == "element":
        return [(f"<element {index}>", item) for index, item in enumerate(payload)], 1
    if style == "fields":
        return [(f".{name}", item) for name, item in payload[0].items()], 2
    return [(".value" if style == "value" else ".__graph_agent_dump__()", payload[0])], 1


def _too_deep(step: _PathStep | None) -> str:
    ancestors = []
    while step is not None:
        ancestors.append(id(step.value))
        step = step.parent
    if ancestors[0] in ancestors[1:]:
        return "the value contains itself (a reference cycle)"
    return f"nested deeper than {MAX_DEPTH} levels"


def _render(step: _PathStep | None, root: str) -> str:
    segments = []
    while step is not None:
        segments.append(step.segment)
        step = step.parent
    segments.reverse()
    if len(segments) > 12:
        segments[6:-4] = [f"...{len(segments) - 10} more..."]
    return root + "".join(segments)


default_serializer = Serializer()
"""The registry the module functions use; graph_agent.messages registers its classes here."""


def dumps(obj: object, *, root: str = "state") -> bytes:
    """Serialize ``obj`` with :data:`default_serializer` (see :meth:`Serializer.dumps`)."""
    return default_serializer.dumps(obj, root=root)


def loads(data: bytes | bytearray | memoryview) -> Any:
    """Load :func:`dumps` output with :data:`default_serializer` (see :meth:`Serializer.loads`)."""
    return default_serializer.loads(data)


def register(cls: type, code: int | None = None) -> None:
    """Make ``cls`` storable under ext ``code`` (32..127 for your types), or by its name
    (``"module.qualname"``) without one; idempotent (see :meth:`Serializer.register`).

    Call it at import time of the module defining ``cls``, so that every process that may load
    a checkpoint has registered it (see :class:`Serializer` for an example).
    """
    default_serializer.register(cls, code)


def is_registered(cls: type) -> bool:
    """True when values of exactly ``cls`` can be stored by :func:`dumps`."""
    return default_serializer.is_registered(cls)
