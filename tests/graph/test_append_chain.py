"""How an append key's parts are laid out: every load rebuilds the list exactly, reads few
parts however long the conversation, and each item is stored a bounded number of times."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from graph_agent.graph._append_chain import MERGE_RUN, AppendChain, tier


def write(sizes: list[int]) -> tuple[dict[str, tuple[str | None, int, int]], list[str]]:
    """Store a list that grows by ``sizes`` items per step, as the engine would: returns the
    stored parts (version -> (base, first item, last item + 1)) and each step's version."""
    stored: dict[str, tuple[str | None, int, int]] = {"v0": (None, 0, 10**9)}
    # a first full copy too big to triple here: this tests the parts alone
    chain, length, versions = AppendChain.full("v0", 10**9), 10**9, ["v0"]
    for step, size in enumerate(sizes, start=1):
        version = f"v{step:05d}"
        length += size
        part = chain.append(version, size, length)
        assert part is not None  # the full copy is never wanted here: it started at 10**9
        base, start = part
        stored[version] = (base, start, length)
        versions.append(version)
    return stored, versions


def load(stored: dict[str, tuple[str | None, int, int]], version: str) -> tuple[list[int], int]:
    """The items a load of ``version`` rebuilds (as positions), and how many parts it read."""
    parts = []
    while version is not None:
        base, start, end = stored[version]
        parts.append(range(start, end))
        version = base
    return [item for part in reversed(parts[:-1]) for item in part], len(parts) - 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=80), min_size=1, max_size=400))
def test_every_version_loads_exactly_from_few_parts_storing_each_item_a_few_times(sizes):
    stored, versions = write(sizes)
    length, most_tiers = 10**9, tier(sum(sizes)) + 1
    for version, size in zip(versions[1:], sizes, strict=True):
        length += size
        items, parts = load(stored, version)  # the items after the full copy
        assert items == list(range(10**9, length))
        assert parts <= (MERGE_RUN - 1) * most_tiers + 1
    copies = sum(end - start for version, (_, start, end) in stored.items() if version != "v0")
    assert copies <= (1 + most_tiers) * sum(sizes)


def test_a_long_conversation_of_single_messages_reads_a_hundred_parts_at_most():
    stored, versions = write([1] * 15_000)
    depths = [load(stored, version)[1] for version in versions[-300:]]
    assert max(depths) <= 3 * (MERGE_RUN - 1) + 1  # tiers 0, 1 and 2 (15,000 < 32**3)
    copies = sum(end - start for version, (_, start, end) in stored.items() if version != "v0")
    assert copies < 4 * 15_000  # each item in at most one part per tier, and once on its own
    assert math.log(15_000, MERGE_RUN) < 3


def test_a_chain_stored_before_parts_were_merged_is_stored_whole_at_its_next_write():
    # one part per step, as a release before merging stored them; not tripled (a big first copy)
    legacy = [("v0", 10_000), *((f"v{i:05d}", 1) for i in range(1, 1_000))]
    assert AppendChain.loaded(legacy).append("v01000", 1, 11_000) is None  # store it whole
    # a shorter one is merged away: its parts are taken into one on the full copy
    assert AppendChain.loaded(legacy[:100]).append("v00100", 1, 10_100) == ("v0", 10_000)
