"""The order in which a run's tests start, so that two xdist workers finish together.

Two kinds of long test are marked:

* ``@pytest.mark.slow``: tens of seconds under every profile (a real-text experiment, a command run as
  written).
* ``@pytest.mark.heavy(seconds=S)``: a property whose every example trains a model and continues it, with a
  budget that scales with the profile (``properties.judging.scaled``): seconds under ``ci``, many minutes
  under ``deep``.  ``S`` is its measured share of a deep run (``--durations``), used only to balance them.

xdist's ``worksteal`` schedule (``conftest.pytest_xdist_make_scheduler``) first hands worker ``k`` the ``k``-th
contiguous block of the collection (``len(pending) // workers_left`` items each, in worker order), and a
worker that runs dry takes the second half of another's *queued* tests.  A test already started is never
moved, so the run cannot end before the longest chain of tests one worker started.  Measured on the deep run
at daf6656: its three longest properties (858 s, 710 s, 663 s) started late (collected in the middle) and the run
took 46 minutes, where its 40 longest tests summed to 73 (36 per worker).

:func:`deal` therefore puts the heavy properties at the heads of the blocks, longest first, each into the
block whose heavy seconds are fewest so far (the longest-processing-time rule: the blocks' heavy loads differ
by at most the longest one), then the slow tests, then the rest in collected order; the stealing balances
the short tests at the end.  The order is the same in every worker (xdist requires it) and draws do not
depend on it (``conftest._import_project_modules``).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["block_sizes", "deal", "heavy_seconds"]

T = TypeVar("T")


def heavy_seconds(item) -> float:
    """The ``seconds`` of an item's ``heavy`` marker, 0 when it has none."""
    marker = item.get_closest_marker("heavy")
    if marker is None:
        return 0.0
    seconds = marker.kwargs.get("seconds", marker.args[0] if marker.args else None)
    if not isinstance(seconds, (int, float)) or seconds <= 0:
        raise ValueError(f"{item.nodeid}: @pytest.mark.heavy needs seconds=S > 0 (its deep-run time), got {seconds!r}")
    return float(seconds)


def block_sizes(n: int, workers: int) -> list[int]:
    """The sizes of the contiguous blocks xdist's ``worksteal`` first hands ``workers`` workers from ``n``
    tests: each takes ``len(pending) // workers_left`` in turn."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    sizes, left = [], n
    for k in range(workers):
        sizes.append(left // (workers - k))
        left -= sizes[-1]
    return sizes


def deal(items: Sequence[T], *, workers: int, seconds: Callable[[T], float],
         slow: Callable[[T], bool]) -> list[T]:
    """``items`` reordered so that ``workers`` workers of xdist's ``worksteal`` start every heavy item first,
    their heavy seconds balanced (longest processing time first), then slow items, then the rest.

    Parameters
    ----------
    items : sequence
        The collected tests, in collected order.
    workers : int
        How many workers the run has (1 without xdist: the heavy items first, longest first).
    seconds : callable
        An item's heavy seconds (0 for an item that is not heavy).
    slow : callable
        Whether an item is marked slow.

    Returns
    -------
    list
        The same items, each once.
    """
    heavy = sorted((it for it in items if seconds(it) > 0), key=seconds, reverse=True)  # stable: ties keep order
    rest = [it for it in items if seconds(it) <= 0]
    rest = [it for it in rest if slow(it)] + [it for it in rest if not slow(it)]
    sizes = block_sizes(len(items), workers)
    heads: list[list[T]] = [[] for _ in sizes]
    loads = [0.0] * len(sizes)
    for it in heavy:
        open_blocks = [k for k in range(len(sizes)) if len(heads[k]) < sizes[k]]
        k = min(open_blocks, key=lambda b: (loads[b], b))
        heads[k].append(it)
        loads[k] += seconds(it)
    order: list[T] = []
    fill = iter(rest)
    for k, size in enumerate(sizes):
        order.extend(heads[k])
        order.extend(next(fill) for _ in range(size - len(heads[k])))
    return order
