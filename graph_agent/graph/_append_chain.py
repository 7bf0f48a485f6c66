"""How an append key is stored across checkpoints: a full copy, then the parts appended since.

A checkpoint stores an append key as a *part*: the items appended since the blob it is based
on (a ``delta`` :class:`~graph_agent.graph._engine.Blob`), so a conversation of T steps stores
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
    >>> chain = AppendChain.full("v0", 100)
    >>> parts = [chain.append(f"v{n}", size=1, length=n + 100) for n in range(1, 33)]
    >>> parts[:2]  # (base, start): items[start:] stored as a delta on base
    [('v0', 100), ('v1', 101)]
    >>> parts[-1]  # the 32nd part takes in the 31 before it
    ('v0', 100)
    >>> chain.links
    [('v0', 100), ('v32', 32)]
"""

from __future__ import annotations

from collections.abc import Sequence

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


class AppendChain:
    """An append key's chain as the engine sees it: the full copy, then the parts after it,
    oldest first, as four parallel lists (index 0 is the full copy): each blob's version (the
    checkpoint that stored it), how many items it holds, its tier, and how many parts of its
    tier end with it (itself included). Parallel lists of strings and small ints: a step adds
    no object the garbage collector tracks."""

    __slots__ = ("appended", "runs", "sizes", "tiers", "versions")

    def __init__(self, version: str, size: int) -> None:
        """A chain that is one full copy of ``size`` items, stored at ``version``."""
        self.versions = [version]
        self.sizes = [size]
        self.tiers = [0]
        self.runs = [1]
        self.appended = 0
        """Items appended since the full copy (the full copy's own not counted)."""

    @classmethod
    def full(cls, version: str, size: int) -> AppendChain:
        """A chain that is one full copy of ``size`` items, stored at ``version``."""
        return cls(version, size)

    @classmethod
    def loaded(cls, stored: Sequence[tuple[str, int]]) -> AppendChain:
        """The chain a load read: ``(version, items)`` per blob, the full copy first."""
        chain = cls(*stored[0])
        for version, size in stored[1:]:
            chain._add(version, size, tier(size))
            chain.appended += size
        return chain

    @property
    def links(self) -> list[tuple[str, int]]:
        """``(version, items)`` per blob, the full copy first."""
        return list(zip(self.versions, self.sizes, strict=True))

    def append(self, version: str, size: int, length: int) -> tuple[str, int] | None:
        """Note that the last ``size`` of the list's ``length`` items were appended, to be
        stored at ``version``; returns the part to store: ``(base, start)``, the items from
        ``start`` on as a delta on ``base``, which may take in the parts before them (see the
        module docstring); or None when the list is to be stored whole: it tripled since the
        last full copy, or the chain is longer than merging keeps one (a chain stored before
        parts were merged). The caller then starts a new chain.

        Runs once per checkpoint and append key: a few operations in the usual case (a part
        no bigger than the one before, which ends no full run)."""
        appended = self.appended + size
        versions, tiers, runs = self.versions, self.tiers, self.runs
        if (appended >= FULL_AFTER and length >= 3 * self.sizes[0]) or len(versions) > MAX_LINKS:
            return None
        self.appended = appended
        level = (size.bit_length() - 1) // _TIER_BITS if size > 0 else 0
        newest = len(tiers) - 1
        if newest and (
            tiers[newest] < level or (tiers[newest] == level and runs[newest] >= MERGE_RUN - 1)
        ):
            return self._merge(version, size, length)
        base = versions[newest]
        versions.append(version)
        self.sizes.append(size)
        runs.append(runs[newest] + 1 if newest and tiers[newest] == level else 1)
        tiers.append(level)
        return base, length - size

    def _merge(self, version: str, size: int, length: int) -> tuple[str, int]:
        """:meth:`append` of a part that takes in the parts before it."""
        versions, sizes, tiers, runs = self.versions, self.sizes, self.tiers, self.runs
        merged = size
        level = tier(merged)
        while len(versions) > 1:
            if tiers[-1] < level:  # a smaller part: taken in
                take = 1
            elif tiers[-1] == level and runs[-1] >= MERGE_RUN - 1:  # a full run of its tier
                take = MERGE_RUN - 1
            else:
                break
            for _ in range(take):
                versions.pop(), tiers.pop(), runs.pop()
                merged += sizes.pop()
            level = tier(merged)
        base = versions[-1]
        self._add(version, merged, level)
        return base, length - merged

    def _add(self, version: str, size: int, level: int) -> None:
        tiers, runs = self.tiers, self.runs
        same_run = len(tiers) > 1 and tiers[-1] == level
        self.versions.append(version)
        self.sizes.append(size)
        tiers.append(level)
        runs.append(runs[-1] + 1 if same_run else 1)
