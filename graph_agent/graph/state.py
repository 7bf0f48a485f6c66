"""Keyed state: the read-only :class:`OverAllState` view and the per-key merge strategies.

A node returns a partial update (a dict); each key is merged into the state by its strategy:

- :class:`ReplaceStrategy` (the default, also for keys never declared): the new value wins.
- :class:`AppendStrategy`: lists grow. A single item or a list of items is appended; an item whose
  ``id`` is already present replaces it in place, :class:`RemoveMessage` deletes one,
  :class:`ReplaceAll` swaps the whole list.
- :class:`MergeStrategy`: dicts are merged key by key (shallow).
- any ``callable(old, new) -> merged``; ``old`` is ``None`` on the key's first write.

Nodes never receive the engine's containers: lists appear as :class:`SeqView` (read-only
sequences) and dicts as read-only mappings. Append keys are stored in an :class:`AppendLog` that
only ever grows in place; a view remembers its length, so a view taken at step *n* keeps showing
step *n* even after later appends, without the engine copying the list per step.

A strategy also owns its key's storage contract (:meth:`KeyStrategy.store`): by default a
changed key is stored whole at the next checkpoint; an append key is kept in an
:class:`AppendKey`, which stores the items appended since the last checkpoint as a part, merges
parts as they pile up and stores the list whole again when it has to (see
:mod:`graph_agent.graph._append_chain`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol, overload

from graph_agent.graph._append_chain import AppendChain
from graph_agent.graph.saver import Blob
from graph_agent.graph.values import Interrupt


@dataclass(frozen=True, slots=True)
class RemoveMessage:
    """Written to an :class:`AppendStrategy` key, removes the item whose id is ``id``."""

    id: str


@dataclass(frozen=True, slots=True, init=False)
class ReplaceAll:
    """Written to an :class:`AppendStrategy` key, replaces the whole list with ``items``."""

    items: tuple[Any, ...]

    def __init__(self, items: Iterable[Any]) -> None:
        object.__setattr__(self, "items", tuple(items))


class SeqView(Sequence[Any]):
    """A read-only view of the first ``length`` items of a list the engine owns.

    Compares equal to a list or tuple with the same items; ``+`` with a list gives a new list.
    Use ``list(view)`` where a real list is needed (for example ``json.dumps``).
    """

    __slots__ = ("_items", "_len")

    def __init__(self, items: list[Any], length: int | None = None) -> None:
        self._items = items
        self._len = len(items) if length is None else length

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self._items[i] for i in range(self._len)[index]]
        length = self._len
        if index < 0:
            index += length
        if 0 <= index < length:
            return self._items[index]
        raise IndexError("state list index out of range")

    def __iter__(self) -> Iterator[Any]:
        return itertools.islice(self._items, self._len)

    def __reversed__(self) -> Iterator[Any]:
        items = self._items
        return (items[i] for i in range(self._len - 1, -1, -1))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SeqView | list | tuple):
            return len(other) == self._len and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Iterable[Any]) -> list[Any]:
        return [*self, *other]

    def __radd__(self, other: Iterable[Any]) -> list[Any]:
        return [*other, *self]

    def __repr__(self) -> str:
        return repr(list(self))


def read_only(value: Any) -> Any:
    """How a stored value is shown to nodes: lists as :class:`SeqView`, dicts as mappings."""
    if isinstance(value, list):
        return SeqView(value)
    if isinstance(value, dict):
        return MappingProxyType(value)
    return value


def item_id(item: Any) -> Any:
    """The id an :class:`AppendStrategy` matches on: an ``id`` attribute or key, else ``None``."""
    if isinstance(item, dict):
        return item.get("id")
    return getattr(item, "id", None)


class AppendLog:
    """The engine's storage for one append key: a list that only grows in place.

    Replacing or removing items never edits the list in place; it builds a new one, so views
    handed out earlier keep showing what they showed.
    """

    __slots__ = ("ids", "items")

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self.items: list[Any] = []
        self.ids: dict[Any, int] = {}
        self.extend(items)

    def view(self) -> SeqView:
        return SeqView(self.items, len(self.items))

    def extend(self, new_items: Iterable[Any]) -> bool:
        """Append, replacing items whose id is present. Returns False if the list was rewritten."""
        items, ids = self.items, self.ids
        pure_append = True
        for item in new_items:
            if isinstance(item, RemoveMessage):
                self._remove(item.id)
                items, ids, pure_append = self.items, self.ids, False
                continue
            key = item.get("id") if isinstance(item, dict) else getattr(item, "id", None)
            if key is not None:  # item_id(item), inlined: this runs for every appended item
                try:
                    index = ids.get(key)
                except TypeError:
                    raise _unhashable_id(key, f"the item {_short(item)}") from None
                if index is not None:
                    if pure_append:
                        self._copy_on_write()
                        items, ids, pure_append = self.items, self.ids, False
                    items[index] = item
                    continue
                ids[key] = len(items)
            items.append(item)
        return pure_append

    def replace_all(self, new_items: Iterable[Any]) -> None:
        self.items = []
        self.ids = {}
        self.extend(new_items)

    def _copy_on_write(self) -> None:
        self.items = list(self.items)
        self.ids = dict(self.ids)

    def _remove(self, key: Any) -> None:
        try:
            present = key in self.ids
        except TypeError:
            raise _unhashable_id(key, "RemoveMessage") from None
        if not present:
            raise KeyError(f"RemoveMessage({key!r}): no item with that id")
        kept = [item for item in self.items if item_id(item) != key]
        self.replace_all(kept)


def _unhashable_id(key: Any, what: str) -> TypeError:
    return TypeError(
        f"{what} has the id {_short(key)} ({type(key).__name__}), which is unhashable; an id "
        "an AppendStrategy key matches on must be hashable: use a str (or an int, a tuple)"
    )


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class KeyStore(Protocol):
    """A key's value during a run, kept by its strategy's own means, and what each checkpoint
    stores of it (see :meth:`KeyStrategy.store`)."""

    def view(self) -> Any:
        """The value as nodes see it (read-only)."""
        ...

    def write(self, new: Any) -> Any:
        """Take a node's write; return the new :meth:`view`. Raises ``KeyError`` or
        ``TypeError`` for a write the key cannot take (the engine names the node)."""
        ...

    def blob(self, checkpoint_id: str, version: str | None) -> Blob | None:
        """What the checkpoint ``checkpoint_id`` stores of the key, written since the last
        one (stored at ``version``, None if never); None: nothing to store. A ``full`` blob
        holds the value; a ``delta`` blob holds a list of items savers append to the list
        its ``base`` version loads as."""
        ...


class KeyStrategy:
    """How a node's write to one key is merged into the state.

    Subclass and implement :meth:`merge`; the strategy object must be cheap to call and keep
    no state of its own.
    """

    def merge(self, old: Any, new: Any) -> Any:
        """Return the key's value after writing ``new`` over ``old`` (``None`` when unset)."""
        raise NotImplementedError

    def store(
        self,
        value: Any = None,
        version: str | None = None,
        chain: Sequence[tuple[str, int]] | None = None,
    ) -> KeyStore | None:
        """The key's storage contract: a :class:`KeyStore` keeping the key during a run, from
        its stored ``value`` and ``version`` (None: a new key) and ``chain``
        (``Checkpoint.chains``: the blobs a load rebuilt it from); or None (the default):
        writes go through :meth:`merge`, and a changed value is stored whole at the next
        checkpoint."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))


class ReplaceStrategy(KeyStrategy):
    """The new value replaces the old one (the default for every key)."""

    def merge(self, old: Any, new: Any) -> Any:
        return new


class AppendStrategy(KeyStrategy):
    """Lists that grow; id-aware (see the module docstring). Kept in an :class:`AppendKey`
    (unless a subclass changes :meth:`merge`: then writes go through it)."""

    def merge(self, old: Any, new: Any) -> Any:
        log = AppendLog(old or ())
        apply_append(log, new)
        return log.items

    def store(
        self,
        value: Any = None,
        version: str | None = None,
        chain: Sequence[tuple[str, int]] | None = None,
    ) -> KeyStore | None:
        if type(self).merge is not AppendStrategy.merge:
            return None
        return AppendKey(value, version, chain)


class AppendKey:
    """An append key during a run: its :class:`AppendLog`, and how it is stored.

    A checkpoint stores the items appended since the last one as a part (a ``delta``
    :class:`~graph_agent.graph.saver.Blob` on an earlier version); :class:`AppendChain` lays
    the parts out (merged as they pile up, the list stored whole again once tripled). A key
    whose items were replaced or removed, or never stored, is stored whole.
    """

    __slots__ = ("chain", "log", "rewritten", "stored_length")

    def __init__(
        self,
        value: Any = None,
        version: str | None = None,
        chain: Sequence[tuple[str, int]] | None = None,
    ) -> None:
        self.log = AppendLog(value or ())
        self.stored_length = len(self.log.items)
        """How many items the last checkpoint stored (the items after them are new)."""
        self.rewritten = False
        """Items were replaced or removed since the last checkpoint."""
        self.chain = (
            AppendChain.loaded(chain)
            if chain
            else AppendChain.full(version or "", self.stored_length)
        )

    def view(self) -> SeqView:
        items = self.log.items
        return SeqView(items, len(items))

    def write(self, new: Any) -> SeqView:
        log = self.log
        # apply_append(), inlined for the usual writes: a list, or one item
        if type(new) is list:
            appended_only = log.extend(new)
        elif isinstance(new, ReplaceAll | list | SeqView):
            appended_only = apply_append(log, new)
        else:
            appended_only = log.extend((new,))
        if not appended_only:
            self.rewritten = True
        items = log.items
        return SeqView(items, len(items))

    def blob(self, checkpoint_id: str, version: str | None) -> Blob | None:
        """A part (the items appended since, perhaps taking in earlier parts), the whole list,
        or None when nothing was appended (a write of ``[]``)."""
        items = self.log.items
        length = len(items)
        start = self.stored_length
        part = None
        if version is not None and not self.rewritten:
            if start == length:
                return None
            part = self.chain.append(checkpoint_id, length - start, length)
        self.stored_length = length
        self.rewritten = False
        if part is None:
            self.chain = AppendChain(checkpoint_id, length)
            return _new_blob(Blob, ("full", list(items), None))
        return _new_blob(Blob, ("delta", items[part[1] :], part[0]))


_new_blob: Callable[[type[Blob], tuple[str, Any, str | None]], Blob] = tuple.__new__
"""``Blob(*fields)`` without the named tuple's Python-level ``__new__``: one is made per
checkpoint and changed key."""


class MergeStrategy(KeyStrategy):
    """Dicts merged key by key; the new keys win (shallow)."""

    def merge(self, old: Any, new: Any) -> Any:
        if not isinstance(new, Mapping):
            raise TypeError(f"MergeStrategy needs a dict, got {type(new).__name__}")
        if not old:
            return dict(new)
        return {**old, **new}


class CallableStrategy(KeyStrategy):
    """Wraps a plain ``callable(old, new) -> merged``."""

    def __init__(self, fn: Callable[[Any, Any], Any]) -> None:
        self.fn = fn

    def merge(self, old: Any, new: Any) -> Any:
        return self.fn(old, new)

    def __repr__(self) -> str:
        return f"CallableStrategy({getattr(self.fn, '__qualname__', self.fn)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CallableStrategy) and other.fn == self.fn

    def __hash__(self) -> int:
        return hash(self.fn)


def as_strategy(value: KeyStrategy | Callable[[Any, Any], Any]) -> KeyStrategy:
    """Accept a strategy object, a strategy class, or a plain merge callable."""
    if isinstance(value, KeyStrategy):
        return value
    if isinstance(value, type) and issubclass(value, KeyStrategy):
        return value()
    if callable(value):
        return CallableStrategy(value)
    raise TypeError(f"not a key strategy: {value!r}")


def apply_append(log: AppendLog, new: Any) -> bool:
    """Write ``new`` (an item, a list, ReplaceAll) into ``log``; False if the list was rewritten."""
    if isinstance(new, ReplaceAll):
        log.replace_all(new.items)
        return False
    if isinstance(new, list | SeqView):
        return log.extend(new)
    return log.extend((new,))


class OverAllState(Mapping[str, Any]):
    """A read-only view of the graph state.

    ``state["k"]`` raises ``KeyError`` for unset keys; ``state.value("k", default)`` does not.
    Lists come back as read-only sequences and dicts as read-only mappings. ``interrupts`` lists
    the interrupts a paused run waits on (always empty on the state a node receives). Private
    keys (an agent's bookkeeping) can be read by name but are left out of iteration, ``data()``
    and comparisons.

    Example:
        >>> state = OverAllState({"x": 1})
        >>> state["x"], state.value("y", 0)
        (1, 0)
    """

    __slots__ = ("_hidden", "_values", "interrupts")

    def __init__(
        self,
        values: Mapping[str, Any] | None = None,
        interrupts: Sequence[Interrupt] = (),
        *,
        hidden: frozenset[str] = frozenset(),
    ) -> None:
        self._values: Mapping[str, Any] = values if values is not None else {}
        self._hidden = hidden
        self.interrupts: tuple[Interrupt, ...] = tuple(interrupts)

    def __getitem__(self, key: str) -> Any:
        value = self._values[key]  # read_only(), inlined: the most frequent call of a run
        if isinstance(value, list):
            return SeqView(value)
        if isinstance(value, dict):
            return MappingProxyType(value)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        hidden = self._hidden
        return (k for k in self._values if k not in hidden)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def value(self, key: str, default: Any = None) -> Any:
        """The value of ``key``, or ``default`` when it is not set."""
        if key not in self._values:
            return default
        return read_only(self._values[key])

    def data(self) -> dict[str, Any]:
        """A new dict of every visible key (values are read-only views)."""
        return {k: self[k] for k in self}

    def with_values(self, values: Mapping[str, Any]) -> OverAllState:
        """A view of this state with ``values`` in place of its own for those keys (the same
        keys hidden): what a node shows code it calls of writes not merged yet."""
        return OverAllState({**self._values, **values}, self.interrupts, hidden=self._hidden)

    def __repr__(self) -> str:
        suffix = f", interrupts={list(self.interrupts)!r}" if self.interrupts else ""
        shown = {k: self._values[k] for k in self}
        return f"OverAllState({shown!r}{suffix})"
