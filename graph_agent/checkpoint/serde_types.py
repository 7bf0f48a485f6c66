"""The codecs of :mod:`~graph_agent.checkpoint.serde`'s registry: how each type that msgpack
does not know is stored, and loaded back (see the table in that module's docstring).

A codec turns a value into an ext (a *leaf*: one fixed binary or text form) or into
``[type tag, *payload]`` (a *container*, rebuilt from its decoded payload); the builders here
make the codecs of the built-in types and of registered classes. Private to the serializer.
"""

from __future__ import annotations

import dataclasses
import enum
import reprlib
import struct
import sys
import uuid
from collections.abc import Callable
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final, Literal, TypeGuard
from zoneinfo import ZoneInfo

import msgpack

from graph_agent.graph.errors import SerializationError
from graph_agent.graph.state import RemoveMessage, ReplaceAll

if TYPE_CHECKING:
    from pydantic import BaseModel

_NAMED_CODE: Final = 13
_SURROGATES_CODE: Final = 14

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 40
_short = _REPR.repr

_PathStyle = Literal["leaf", "index", "element", "fields", "value", "dump"]


class _EncodeError(Exception):
    """A value that cannot be stored; the message says why."""


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class _Codec:
    cls: type
    code: int
    encode: Callable[[Any], Any]  # value -> ExtType (leaf) or [tag, *payload] (container)
    decode: Callable[[Any], Any]  # leaf: ext bytes -> value; container: payload list -> value
    path_style: _PathStyle  # how error paths name the children of a value


# ExtType's own __new__ validates in Python; building the namedtuple directly is 3x faster.
_new_ext: Final[Callable[[type, tuple[int, bytes]], msgpack.ExtType]] = tuple.__new__


def _leaf(
    cls: type, code: int, to_bytes: Callable[[Any], bytes], load: Callable[[bytes], Any]
) -> _Codec:
    return _Codec(cls, code, lambda v: _new_ext(msgpack.ExtType, (code, to_bytes(v))), load, "leaf")


def _container(
    cls: type,
    code: int,
    decode: Callable[[list[Any]], Any],
    path_style: _PathStyle,
    payload: Callable[[Any], list[Any]] | None = None,
) -> _Codec:
    """A codec storing ``[tag, *payload(value)]``; without ``payload``, the value's items."""
    tag = _new_ext(msgpack.ExtType, (code, b""))
    if payload is None:
        return _Codec(cls, code, lambda value: [tag, *value], decode, path_style)
    return _Codec(cls, code, lambda value: [tag, *payload(value)], decode, path_style)


def _one(payload: list[Any], kind: type = object) -> Any:
    if len(payload) != 1 or not isinstance(payload[0], kind):
        raise SerializationError(f"expected one {kind.__name__} as payload, got {_short(payload)}")
    return payload[0]


def _zone_suffix(tz: object, *, allow_zoneinfo: bool) -> str:
    if tz is None or type(tz) is timezone:
        return ""
    if allow_zoneinfo and isinstance(tz, ZoneInfo) and tz.key:
        return f"[{tz.key}]"
    hint = " or zoneinfo.ZoneInfo (with a key)" if allow_zoneinfo else ""
    raise _EncodeError(
        f"tzinfo of type {type(tz).__qualname__} cannot be stored; use datetime.timezone{hint}"
    )


def _datetime_load(data: bytes) -> datetime:
    text, _, zone = data.decode("ascii").partition("[")
    value = datetime.fromisoformat(text)
    if not zone:
        return value
    offset = value.utcoffset()
    if offset is None or not zone.endswith("]"):
        raise ValueError(f"bad zoned datetime {_short(data)}")
    local = value.replace(tzinfo=ZoneInfo(zone[:-1]))
    # The stored offset tells which of two equal wall times (fold) at a DST change was meant.
    return local if local.utcoffset() == offset else local.replace(fold=1)


def _iso_bytes(value: datetime | time) -> bytes:
    suffix = _zone_suffix(value.tzinfo, allow_zoneinfo=type(value) is datetime)
    return (value.isoformat() + suffix).encode()


def _iso_load(kind: type[date] | type[time]) -> Callable[[bytes], Any]:
    return lambda data: kind.fromisoformat(data.decode("ascii"))


_TIMEDELTA: Final = struct.Struct(">iii")


def _builtin_codecs() -> list[_Codec]:
    leaves: list[tuple[type, Callable[[Any], bytes], Callable[[bytes], Any]]] = [
        (
            int,
            lambda n: n.to_bytes(n.bit_length() // 8 + 1, "big", signed=True),
            lambda data: int.from_bytes(data, "big", signed=True),
        ),
        (Decimal, lambda value: str(value).encode(), lambda data: Decimal(data.decode("ascii"))),
        (uuid.UUID, lambda value: value.bytes, lambda data: uuid.UUID(bytes=data)),
        (datetime, _iso_bytes, _datetime_load),
        (date, lambda value: value.isoformat().encode(), _iso_load(date)),
        (time, _iso_bytes, _iso_load(time)),
        (
            timedelta,
            lambda td: _TIMEDELTA.pack(td.days, td.seconds, td.microseconds),
            lambda data: timedelta(*_TIMEDELTA.unpack(data)),
        ),
    ]
    return [
        *(_leaf(cls, code, dump, load) for code, (cls, dump, load) in enumerate(leaves, start=1)),
        _container(tuple, 8, tuple, "index"),
        _container(set, 9, set, "element"),
        _container(frozenset, 10, frozenset, "element"),
        _dataclass_codec(RemoveMessage, 11),
        _dataclass_codec(ReplaceAll, 12),
    ]


def _model_codec(cls: type[BaseModel], code: int) -> _Codec:
    names = tuple(cls.model_fields)
    name_set = frozenset(names)
    keeps_extra = cls.model_config.get("extra") == "allow"
    # Fields are stored by name; passing by_name costs time, so only models with aliases pay it.
    by_name: dict[str, Any] = {"by_alias": False, "by_name": True} if _has_aliases(cls) else {}
    tag = _new_ext(msgpack.ExtType, (code, b""))
    # Fields a class gained after data was stored are left out while empty (loading fills in
    # their default), so values that do not use them are written exactly as before.
    omitted = tuple(getattr(cls, "__graph_agent_omit_empty__", ()))

    def encode(model: BaseModel) -> list[Any]:  # [tag, fields]: one call per stored model
        fields = model.__dict__
        if fields.keys() != name_set:  # a cached_property value, or a field model_construct skipped
            if missing := name_set.difference(fields):
                raise _EncodeError(f"field {min(missing)!r} of {cls.__qualname__} is not set")
            fields = {name: fields[name] for name in names}
        if omitted and not all(fields[name] for name in omitted):
            fields = fields.copy()
            for name in omitted:
                if not fields[name]:
                    del fields[name]
        if keeps_extra and model.__pydantic_extra__:
            fields = {**fields, **model.__pydantic_extra__}
        return [tag, fields]

    def decode(payload: list[Any]) -> BaseModel:
        return cls.model_validate(_one(payload, dict), **by_name)

    return _Codec(cls, code, encode, decode, "fields")


def _is_model(cls: type) -> TypeGuard[type[BaseModel]]:
    """True for a pydantic model class; pydantic is not imported for this (none exists before
    it is, and importing it costs megabytes)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and issubclass(cls, pydantic.BaseModel)


def _has_aliases(cls: type[BaseModel]) -> bool:
    return any(f.alias or f.validation_alias for f in cls.model_fields.values())


def _dataclass_codec(cls: type, code: int) -> _Codec:
    names = tuple(field.name for field in dataclasses.fields(cls) if field.init)

    def payload(value: Any) -> list[Any]:
        return [{name: getattr(value, name) for name in names}]

    def decode(payload: list[Any]) -> Any:
        return cls(**_one(payload, dict))

    return _container(cls, code, decode, "fields", payload)


def _codec_for(cls: type, code: int) -> _Codec:
    target: Any = cls  # the lambdas call class-specific methods
    if issubclass(cls, enum.Enum):
        return _container(cls, code, lambda p: target(_one(p)), "value", lambda m: [m.value])
    if hasattr(cls, "__graph_agent_dump__") and hasattr(cls, "__graph_agent_load__"):

        def load(payload: list[Any]) -> Any:
            return target.__graph_agent_load__(_one(payload))

        return _container(cls, code, load, "dump", lambda v: [v.__graph_agent_dump__()])
    if _is_model(cls):
        return _model_codec(cls, code)
    if dataclasses.is_dataclass(cls):
        return _dataclass_codec(cls, code)
    raise TypeError(
        f"cannot register {cls.__qualname__}: only pydantic models, dataclasses, Enum subclasses "
        "and classes defining __graph_agent_dump__ / __graph_agent_load__ can be registered"
    )


def _named_codec(cls: type, name: str) -> _Codec:
    """``cls`` stored as ``[ext(13), name, *payload]``: its own codec with the name in front."""
    inner = _codec_for(cls, _NAMED_CODE)
    encode_inner = inner.encode
    tag = _new_ext(msgpack.ExtType, (_NAMED_CODE, b""))

    def encode(value: Any) -> list[Any]:
        return [tag, name, *encode_inner(value)[1:]]

    return _Codec(cls, _NAMED_CODE, encode, inner.decode, inner.path_style)


def _name_dispatch(by_name: dict[str, _Codec]) -> _Codec:
    """The codec of ext code 13: finds the class by the name stored first, then loads it.

    It only ever decodes; it is never looked up by type (its ``cls`` is a placeholder).
    """

    def decode(payload: list[Any]) -> Any:
        name = payload[0] if payload else None
        if type(name) is not str:
            raise SerializationError(
                f"stored data is malformed: ext code {_NAMED_CODE} must be followed by a class "
                f"name, got {_short(payload)}"
            )
        codec = by_name.get(name)
        if codec is None:
            raise SerializationError(
                f"stored data holds a {_short(name)}, which no class is registered under by name "
                "in this process (it is never imported); call "
                "graph_agent.checkpoint.serde.register(cls) for it before loading"
            )
        del payload[0]
        try:
            return codec.decode(payload)
        except SerializationError:
            raise
        except Exception as exc:
            raise SerializationError(f"cannot load {name} (registered by name): {exc}") from exc

    def encode(value: Any) -> Any:
        raise AssertionError("the by-name dispatcher never encodes")

    return _Codec(object, _NAMED_CODE, encode, decode, "index")


def _with_surrogates_tagged(value: Any) -> Any:
    """``value`` with each string UTF-8 cannot encode (it holds a lone surrogate) replaced by
    its ext 14 form, in the plain lists and dicts msgpack packs itself; other values are left
    to the packer's ``default``, which tags the strings in what it returns the same way."""
    kind = type(value)
    if kind is str:
        try:
            value.encode()
        except UnicodeEncodeError:
            return _new_ext(msgpack.ExtType, (_SURROGATES_CODE, _surrogates_kept(value)))
        return value
    if kind is list:
        return [_with_surrogates_tagged(item) for item in value]
    if kind is dict:
        return {_with_surrogates_tagged(k): _with_surrogates_tagged(v) for k, v in value.items()}
    return value


def _surrogates_kept(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


_SURROGATES: Final = _leaf(
    str, _SURROGATES_CODE, _surrogates_kept, lambda data: data.decode("utf-8", "surrogatepass")
)
"""Decodes ext 14; never looked up by type (msgpack packs every other ``str`` itself)."""
