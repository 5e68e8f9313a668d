"""Search helpers in the spirit of Hypothesis's own ``tests/common/debug.py``: how many examples does the
search need to find what it should?

:func:`first_failure` runs a generate-only Hypothesis search (no shrinking, no database, a fixed seed) and
returns the 1-based index of the first example that satisfies ``condition``, or ``None`` within ``budget``.
:func:`assert_found_within` turns that into an assertion whose message says what was searched, with which
seed, and how far it got.  Helpers are tested in ``properties/suite/test_search_helpers.py``.
"""
from __future__ import annotations

from typing import Callable

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

__all__ = ["assert_found_within", "first_failure"]


class _Found(Exception):
    def __init__(self, index: int):
        super().__init__(f"found at example {index}")
        self.index = index


def first_failure(strategy: st.SearchStrategy, condition: Callable[[object], bool], *, budget: int,
                  random_seed: int) -> int | None:
    """Index (1-based, among valid examples) of the first example with ``condition(example)`` true."""
    if budget < 1:
        raise ValueError(f"first_failure(): budget must be >= 1, got {budget}")
    count = [0]

    @settings(max_examples=budget, database=None, phases=[Phase.generate], deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
    @seed(random_seed)
    @given(strategy)
    def search(example):
        count[0] += 1
        if condition(example):
            raise _Found(count[0])

    try:
        search()
    except _Found as found:
        return found.index
    return None


def assert_found_within(strategy, condition, *, budget: int, random_seed: int, what: str) -> int:
    """Assert the search finds ``what`` within ``budget`` examples for ``random_seed``; return the index."""
    index = first_failure(strategy, condition, budget=budget, random_seed=random_seed)
    assert index is not None, f"expected the search to find {what} within {budget} examples (seed {random_seed}); it did not"
    return index
