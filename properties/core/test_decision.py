"""The three-valued sequential decision (``theory.core.decision``): its budget ladder and its combination
rule, on synthetic statistics (no training)."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from theory.core.decision import (ACCEPT, BETWEEN, ESCALATION, REJECT, Outcome, Statistic, budget_ladder, combine,
                                  Verdict, sequential)

pytestmark = pytest.mark.theorem("Decision procedure")


@given(first=st.integers(1, 10**7), maximum=st.integers(1, 10**9))
def test_ladder_ends_at_the_budget_nearest_the_maximum(first, maximum):
    """x10 steps from the first budget; the last lies within sqrt(10) of the maximum (when the maximum is
    above the first), so a decision's power does not depend on where in a decade its first budget falls."""
    ladder = budget_ladder(first, maximum)
    assert ladder[0] == first and all(b * ESCALATION == c for b, c in zip(ladder, ladder[1:])), ladder
    if maximum > first * math.sqrt(ESCALATION) * 1.001:
        assert ladder[-1] / maximum < math.sqrt(ESCALATION) * 1.001, ladder
        assert maximum / ladder[-1] < math.sqrt(ESCALATION) * 1.001, ladder
    elif maximum < first * math.sqrt(ESCALATION) * 0.999:
        assert ladder == [first], ladder


def test_a_first_budget_just_above_a_decade_keeps_its_escalations():
    """The deep run's case: 1.02e5 under a maximum of 1e7 gets the same two escalations as 1e5."""
    assert budget_ladder(102036, 10**7) == [102036, 1020360, 10203600]
    assert len(budget_ladder(10**5, 10**7)) == len(budget_ladder(102036, 10**7)) == 3


def _stat(zone, trend=False):
    return Statistic("s", 0.0, zone, trend=trend)


@pytest.mark.parametrize("zones,expected", [
    ([ACCEPT, ACCEPT, ACCEPT], Outcome.HOLDS),
    ([BETWEEN, BETWEEN, BETWEEN], Outcome.UNDECIDED),
    ([REJECT, BETWEEN, REJECT], Outcome.UNDECIDED),   # never twice in a row: not confirmed
    ([BETWEEN, REJECT, REJECT], Outcome.FAILS),
    ([REJECT, ACCEPT, REJECT], Outcome.HOLDS),        # decided at the second budget
])
def test_fails_only_when_confirmed_at_two_consecutive_budgets(zones, expected):
    """``sequential`` on a run whose statistic walks through ``zones``: holds at the first all-accept budget,
    fails at the first reject that follows a reject, undecided at the last budget otherwise."""
    budgets = [10, 100, 1000]
    seen = []

    def judge(run, earlier):
        seen.append(run)
        return [_stat(zones[budgets.index(run)])], {"steps": run}

    verdict, _ = sequential(judge, budgets, budgets[0], lambda run, steps: steps)
    assert verdict.outcome is expected, (zones, verdict)
    assert seen == budgets[:len(verdict.history)], seen


def test_a_trend_statistic_is_confirmed_evidence():
    assert combine([_stat(REJECT, trend=True)], None) is Outcome.FAILS
    assert combine([_stat(REJECT)], None) is Outcome.UNDECIDED


@pytest.mark.parametrize("zones", [[ACCEPT, BETWEEN], [BETWEEN, ACCEPT, ACCEPT], [ACCEPT, REJECT]])
def test_a_verdict_holds_only_when_every_statistic_accepts(zones):
    """All hold, not any: one statistic still between (or rejecting, unconfirmed) keeps the verdict open."""
    stats = [Statistic(f"s{i}", 0.0, z) for i, z in enumerate(zones)]
    assert combine(stats, None) is Outcome.UNDECIDED, zones


def test_one_confirmed_rejection_fails_the_verdict_whatever_the_others_say():
    stats = [Statistic("a", 0.0, ACCEPT), Statistic("b", 0.0, ACCEPT), Statistic("c", 1.0, REJECT, trend=True)]
    assert combine(stats, None) is Outcome.FAILS
    earlier = Verdict(Outcome.UNDECIDED, {}, [Statistic("c", 1.0, REJECT)])
    assert combine([Statistic("a", 0.0, ACCEPT), Statistic("c", 1.0, REJECT)], earlier) is Outcome.FAILS
