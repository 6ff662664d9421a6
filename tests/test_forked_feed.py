"""bookgen.workers.forked.Feed: a breadth-first walk whose queue grows from the
results of fork_map, on forked workers or in this process, visits what a plain
first-in-first-out loop visits, in the same order; a failure while reading the
results neither hangs nor leaves the walk running."""

from __future__ import annotations

import os
from collections import deque

import pytest

from bookgen.workers.forked import Feed, fork_map

LIMIT = 3000


def children(item: int) -> list[int]:
    """A graph with shared children (transpositions) and leaves."""
    return [c for c in (2 * item + 1, 3 * item + 2, item + 7) if c < LIMIT and c % 11]


def expand(batch: list[int]) -> tuple[int, list[list[int]]]:
    return os.getpid(), [children(item) for item in batch]


def plain_walk(roots: list[int]) -> list[int]:
    seen = set(roots)
    queue = deque(roots)
    order = []
    while queue:
        item = queue.popleft()
        order.append(item)
        for child in children(item):
            if child not in seen:
                seen.add(child)
                queue.append(child)
    return order


def fed_walk(roots: list[int], batch: int, workers: int) -> tuple[list[int], set[int]]:
    feed: Feed[int] = Feed(batch, workers)
    feed.put(roots)
    seen = set(roots)
    order: list[int] = []
    pids = set()
    results = fork_map(expand, feed.tasks(), workers)
    sizes = []
    try:
        queue: deque[int] = deque(roots)   # what the feed hands out, in order
        for pid, found in results:
            pids.add(pid)
            sizes.append(len(found))
            for kids in found:
                order.append(queue.popleft())
                new = [c for c in kids if c not in seen]
                seen.update(new)
                queue.extend(new)
                feed.put(new)
            feed.answered()
    finally:
        feed.close()
        results.close()
    assert max(sizes) <= batch
    return order, pids


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("batch", [1, 5, 64])
def test_the_fed_walk_is_the_plain_walk(workers, batch):
    order, pids = fed_walk([0, 4, 9], batch, workers)
    expected = plain_walk([0, 4, 9])
    assert order == expected and len(expected) > 1000
    assert (os.getpid() in pids) == (workers == 1)


def test_a_failure_while_reading_stops_the_walk():
    feed: Feed[int] = Feed(4, 2)
    feed.put([0])
    results = fork_map(expand, feed.tasks(), 2)
    with pytest.raises(RuntimeError):
        try:
            for _pid, found in results:
                for kids in found:
                    feed.put(kids)
                raise RuntimeError("reader failed")
        finally:
            feed.close()
            results.close()
    assert list(feed.tasks()) == []


def test_an_empty_feed_has_no_tasks():
    feed: Feed[int] = Feed(4, 2)
    assert list(fork_map(expand, feed.tasks(), 2)) == []
