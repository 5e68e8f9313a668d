"""The search helpers themselves (``properties/search.py``): they find what exists, report the index of the
first hit, and say so when nothing is found."""
from __future__ import annotations

import pytest
from hypothesis import strategies as st

from properties.search import assert_found_within, first_failure


@pytest.mark.parametrize("random_seed", [0, 1, 2])
def test_first_failure_finds_a_common_condition_early(random_seed):
    index = first_failure(st.integers(0, 9), lambda x: x % 2 == 0, budget=50, random_seed=random_seed)
    assert index is not None and 1 <= index <= 10


def test_first_failure_is_deterministic_for_a_seed():
    runs = [first_failure(st.integers(0, 10**6), lambda x: x > 900_000, budget=200, random_seed=7) for _ in range(2)]
    assert runs[0] == runs[1]


def test_first_failure_returns_none_and_the_assertion_says_so():
    assert first_failure(st.integers(0, 9), lambda x: x > 9, budget=20, random_seed=0) is None
    with pytest.raises(AssertionError, match="within 20 examples \\(seed 0\\)"):
        assert_found_within(st.integers(0, 9), lambda x: x > 9, budget=20, random_seed=0, what="x > 9")
    with pytest.raises(ValueError, match="budget"):
        first_failure(st.integers(), bool, budget=0, random_seed=0)
