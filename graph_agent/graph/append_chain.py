"""How an append key is stored across checkpoints: a full copy, then the parts appended since.

A checkpoint stores an append key as a *part*: the items appended since the blob it is based
on (a ``delta`` :class:`~graph_agent.graph.engine.Blob`), so a conversation of T steps stores
each message once, not T times. A load reads the key's chain of parts back to its last full
copy, one row each. Left alone, that chain grows with the conversation (thousands of rows to
load a long thread), so parts are merged as they pile up, like a base-32 counter:

- a part's *tier* is its size's order of magnitude in base 32 (``< 32`` items: 0, ``< 1024``:
  1, ...), and a new part first takes in the smaller parts before it (its base moves back);
- when 31 parts of one tier end the chain, the next part of that tier takes them in too: one
  part of the next tier replaces 32.

Older checkpoints keep the parts they were stored with (their history stays loadable), so an
item is stored once per tier it passes through: at most ``1 + log₃₂(items)`` times (4 for a
million items), while a load reads at most 31 parts per tier (about 100 rows at 15,000
messages instead of thousands). A full copy is stored again when the list has tripled since
the last one (and :data:`FULL_AFTER` items were appended), which keeps every chain short and
the copies within 1.5 times the list.

Example:
    >>> chain = AppendChain.full("v0", 0)
    >>> parts = [chain.append(f"v{n}", size=1, length=n) for n in range(1, 33)]
    >>> [(part.base, part.start) for part in parts[:2]]
    [('v0', 0), ('v1', 1)]
    >>> parts[-1]  # the 32nd part takes in the 31 before it
    Part(base='v0', start=0)
    >>> [(link.version, link.size) for link in chain.links]
    [('v0', 0), ('v32', 32)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MERGE_RUN = 32
"""Parts of one tier that merge into one part of the next tier (the base of the counter)."""
FULL_AFTER = 64
"""Items appended since the last full copy before the list may be stored whole again (once it
has also tripled): short lists are never copied over and over."""
MAX_LINKS = 8 * MERGE_RUN
"""More parts than merging ever leaves (31 per tier): a chain stored before parts were merged,
stored whole at its next write."""
_TIER_BITS = MERGE_RUN.bit_length() - 1  # log2(32) = 5: tier = floor(log2(size) / 5)


def tier(size: int) -> int:
    """A part's tier: its size's order of magnitude in base :data:`MERGE_RUN`."""
    return (size.bit_length() - 1) // _TIER_BITS if size > 0 else 0


@dataclass(slots=True)
class Link:
    """One stored blob of the chain: its version (the checkpoint that stored it), how many
    items it holds, its tier, and how many parts of its tier end with it (itself included)."""

    version: str
    size: int
    tier: int = 0
    run: int = 1


@dataclass(frozen=True, slots=True)
class Part:
    """What to store for the items appended since the last checkpoint: ``items[start:]`` as a
    delta on ``base`` (``start`` may lie before those items: the part takes in smaller ones)."""

    base: str
    start: int


class AppendChain:
    """An append key's chain as the engine sees it: the full copy, then the parts after it,
    oldest first (``links[0]`` is the full copy)."""

    __slots__ = ("appended", "links")

    def __init__(self, links: list[Link], appended: int) -> None:
        self.links = links
        self.appended = appended
        """Items appended since the full copy (the full copy's own not counted)."""

    @classmethod
    def full(cls, version: str, size: int) -> AppendChain:
        """A chain that is one full copy of ``size`` items, stored at ``version``."""
        return cls([Link(version, size)], 0)

    @classmethod
    def loaded(cls, stored: Sequence[tuple[str, int]]) -> AppendChain:
        """The chain a load read: ``(version, items)`` per blob, the full copy first."""
        full_version, full_size = stored[0]
        chain = cls([Link(full_version, full_size)], 0)
        for version, size in stored[1:]:
            chain._push(Link(version, size, tier(size)))
            chain.appended += size
        return chain

    def full_size(self) -> int:
        return self.links[0].size

    def wants_full_copy(self, length: int) -> bool:
        """Whether a list of ``length`` items should be stored whole instead of as a part:
        it tripled since the last full copy, or the chain is longer than merging keeps one
        (a chain stored before parts were merged)."""
        if len(self.links) > MAX_LINKS:
            return True
        return self.appended >= FULL_AFTER and length >= 3 * self.full_size()

    def append(self, version: str, size: int, length: int) -> Part:
        """Note that the last ``size`` of the list's ``length`` items were appended, to be
        stored at ``version``; returns the part to store, which may take in the parts before
        it (see the module docstring)."""
        links = self.links
        self.appended += size
        merged = size
        level = tier(merged)
        while len(links) > 1:
            newest = links[-1]
            if newest.tier < level:  # a smaller part: taken in
                take = 1
            elif newest.tier == level and newest.run >= MERGE_RUN - 1:  # a full run of its tier
                take = MERGE_RUN - 1
            else:
                break
            for _ in range(take):
                merged += links.pop().size
            level = tier(merged)
        base = links[-1].version
        self._push(Link(version, merged, level))
        return Part(base, length - merged)

    def _push(self, link: Link) -> None:
        newest = self.links[-1]
        if len(self.links) > 1 and newest.tier == link.tier:
            link.run = newest.run + 1
        self.links.append(link)
