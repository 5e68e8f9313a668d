"""The start order of a run's tests (properties/schedule.py), checked against xdist's own scheduler.

The order only pays if it matches what xdist's ``worksteal`` schedule does with it, so the tests drive the
real ``WorkStealingScheduling`` over simulated workers (each holds the test it runs and the next one, as
xdist's worker loop does, and gives back only queued tests to a steal) with measured durations, and compare
when the last worker finishes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from xdist.scheduler import WorkStealingScheduling

from properties.schedule import block_sizes, deal, heavy_seconds

# Test durations (s) of a stress run of the four theorem modules (at e8359ed, its report's durations):
# the five properties marked heavy, then the others of more than a second.
HEAVY = {"s5-relaxed-head": 80.9, "s5-whole-domain": 64.7, "continuation-validity": 62.6,
         "t1-wrong-target": 37.6, "t1-finite-minimizer": 21.2}
LIGHT = [26.4, 26.3, 17.3, 16.4, 16.3, 15.9, 14.8, 14.7, 8.8, 8.5, 8.3, 7.7, 7.3, 7.0, 5.3, 3.2, 1.6, 1.4, 1.2,
         1.2] + [0.5] * 20


@dataclass(frozen=True)
class _Item:
    name: str
    seconds: float
    heavy: bool = False
    slow: bool = False


def _collected(heavy_at: int) -> list[_Item]:
    """The measured tests in a collected order with the heavy ones together after ``heavy_at`` light ones."""
    light = [_Item(f"t{i}", s) for i, s in enumerate(LIGHT)]
    heavy = [_Item(name, s, heavy=True) for name, s in HEAVY.items()]
    return light[:heavy_at] + heavy + light[heavy_at:]


@dataclass(eq=False)
class _Worker:
    """An xdist worker as the scheduler sees it: a queue, the running test and the one it took next."""
    name: str
    queue: list[int] = field(default_factory=list)
    held: list[int] = field(default_factory=list)  # [running, next]: taken out of the queue, not stealable
    busy_until: float = 0.0
    shutting_down: bool = False
    outbox: list = field(default_factory=list)

    @property
    def gateway(self):  # the scheduler names workers by their gateway's id in its messages
        return type("Gateway", (), {"id": self.name})()

    def send_runtest_some(self, indices):
        self.queue.extend(indices)

    def send_steal(self, indices):
        self.outbox.append(list(indices))

    def shutdown(self):
        self.shutting_down = True


@dataclass
class _Config:
    """What the scheduler reads of pytest's config: the ``--tx`` specs (``-n N`` is ``N*popen``)."""
    workers: int

    def getvalue(self, name):
        assert name == "tx", name
        return [f"{self.workers}*popen"]


def _makespan(order: list[_Item], workers: int = 2) -> tuple[float, list[list[str]]]:
    """When the last of ``workers`` simulated workers finishes ``order`` under xdist's worksteal scheduler,
    and which tests each ran."""
    sched = WorkStealingScheduling(_Config(workers))
    nodes = [_Worker(f"gw{k}") for k in range(workers)]
    for node in nodes:
        sched.add_node(node)
    for node in nodes:
        sched.add_node_collection(node, [it.name for it in order])
    sched.schedule()
    ran: dict[str, list[str]] = {n.name: [] for n in nodes}
    now = 0.0

    def settle():
        for node in nodes:  # answer steals the way xdist's worker does: all still queued, or none
            while node.outbox:
                want = node.outbox.pop(0)
                stolen = want if all(i in node.queue for i in want) else []
                node.queue = [i for i in node.queue if i not in stolen]
                sched.remove_pending_tests_from_node(node, stolen)
            while len(node.held) < 2 and node.queue:
                node.held.append(node.queue.pop(0))
                if len(node.held) == 1:
                    node.busy_until = now + order[node.held[0]].seconds

    settle()
    while any(n.held for n in nodes):
        node = min((n for n in nodes if n.held), key=lambda n: n.busy_until)
        now = node.busy_until
        done = node.held.pop(0)
        ran[node.name].append(order[done].name)
        if node.held:
            node.busy_until = now + order[node.held[0]].seconds
        sched.mark_test_complete(node, done)
        settle()
    assert sorted(sum(ran.values(), [])) == sorted(it.name for it in order), "a test was lost or run twice"
    return now, list(ran.values())


def _dealt(items: list[_Item], workers: int = 2) -> list[_Item]:
    return deal(items, workers=workers, seconds=lambda it: it.seconds if it.heavy else 0.0,
                slow=lambda it: it.slow)


@pytest.mark.parametrize("n,workers", [(45, 2), (46, 2), (7, 3), (1, 2), (900, 2)])
def test_block_sizes_are_the_first_split_of_xdists_worksteal(n, workers):
    sched = WorkStealingScheduling(_Config(workers))
    nodes = [_Worker(f"gw{k}") for k in range(workers)]
    for node in nodes:
        sched.add_node(node)
    for node in nodes:
        sched.add_node_collection(node, [f"t{i}" for i in range(n)])
    sched.schedule()
    assert [len(node.queue) for node in nodes] == block_sizes(n, workers)
    assert [i for node in nodes for i in node.queue] == list(range(n)), "blocks are contiguous, in worker order"


def test_the_dealt_order_finishes_near_the_even_split():
    """Under the real scheduler the dealt order ends within the longest light test of an even split of the
    work, wherever the heavy tests were collected; collected just before the middle (one worker's first block
    ends on them, as the deep run's order had them), they end over half the longest heavy test later."""
    total = sum(HEAVY.values()) + sum(LIGHT)
    for heavy_at in range(0, len(LIGHT) + 1, 5):
        span, ran = _makespan(_dealt(_collected(heavy_at)))
        assert span <= total / 2 + max(LIGHT), (heavy_at, span, total / 2, ran)
    late, _ = _makespan(_collected(20))
    assert late > total / 2 + max(HEAVY.values()) / 2, "the simulation must see the cost of heavy tests started late"


def test_heavy_items_lead_each_block_with_balanced_seconds():
    items = _collected(len(LIGHT)) + [_Item("slow-one", 40.0, slow=True)]
    for workers in (1, 2, 3):
        order = _dealt(items, workers)
        assert sorted(it.name for it in order) == sorted(it.name for it in items)
        blocks, start = [], 0
        for size in block_sizes(len(order), workers):
            blocks.append(order[start:start + size])
            start += size
        loads = []
        for block in blocks:
            k = sum(it.heavy for it in block)
            assert all(it.heavy for it in block[:k]), "heavy tests start their block"
            assert [it.seconds for it in block[:k]] == sorted((it.seconds for it in block[:k]), reverse=True)
            loads.append(sum(it.seconds for it in block[:k]))
        assert max(loads) - min(loads) <= max(HEAVY.values()), (workers, loads)
        first_light = [it for block in blocks for it in block if not it.heavy]
        assert first_light[0].slow, "the slow test comes right after the heavy ones"


def test_a_heavy_marker_without_seconds_is_refused():
    class Marked:
        nodeid = "x::t"

        def __init__(self, **kwargs):
            self.kwargs = kwargs

        def get_closest_marker(self, name):
            return pytest.mark.heavy(**self.kwargs).mark if name == "heavy" else None

    assert heavy_seconds(Marked(seconds=12)) == 12.0
    for bad in ({}, {"seconds": 0}, {"seconds": "long"}):
        with pytest.raises(ValueError, match="heavy needs seconds"):
            heavy_seconds(Marked(**bad))
