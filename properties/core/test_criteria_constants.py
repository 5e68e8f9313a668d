"""The decision constants of every three-valued verdict, pinned by the values they were calibrated on.

Each statistic's zones (:func:`theory.core.decision.zone`) are checked on the measured values their
docstrings and ``benchmarks/RESULTS.md`` ("Three-valued verdicts: margins") quote: the worst valid value
must be accepted, the mildest planted violation rejected, and a value inside the indifference zone left
between (the budget escalates there).  So moving an accept threshold across its reject threshold, or
joining a claim's conditions with "any holds" instead of "all hold", fails here at once, where the
property suite (few, derandomized examples far from the edges) may not notice.  Mutants:
``benchmarks/mutants.py`` (``*-past-*``, ``*-any``); the table of which tests kill them is in
``benchmarks/RESULTS.md``, "Decision constants".  Pure functions of numbers: no training, milliseconds.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from theory.core.decision import ACCEPT, BETWEEN, REJECT
from theory.li2024 import automaton, criteria, regpath_verdict
from theory.tian2023 import real_text, verdicts


def _q(x: float) -> float:
    """The decade ratio of a quantity converging like ``e^{-t/T}`` at a budget of ``x T``
    (:data:`theory.li2024.criteria.MOVE_STALL`'s table: 0.69 at x = 10, 0.07 at x = 30)."""
    return (math.exp(-x / 10) - math.exp(-x)) / (math.exp(-x / 100) - math.exp(-x / 10))


def _rows(*rows):
    """Parameter rows named by their ``what`` (the last field) up to its first colon or parenthesis."""
    def slug(what):
        head = re.split(r"[:(;]", what)[0].strip()
        return re.sub(r"[^0-9A-Za-z.=<>+-]+", "-", head).strip("-")[:48]

    return [pytest.param(*r, id=slug(r[-1])) for r in rows]


# ------------------------------------------------------------------------------------------------
# The zones are ordered: accept, then room to escalate, then reject
# ------------------------------------------------------------------------------------------------
ORDERED = {
    "theorem1-growth": lambda: (criteria.GROWTH_REJECT_LO < criteria.GROWTH_LO <= 1 <= criteria.GROWTH_HI
                                < criteria.GROWTH_REJECT_HI),
    "theorem1-direction-trend": lambda: criteria.TREND_HOLD < criteria.TREND_FAIL,
    "theorem1-direction-rate": lambda: criteria.DIRECTION_RATE < criteria.DIRECTION_RATE_ESCALATED,
    "theorem1-finite": lambda: criteria.FINITE_DECAY < criteria.FINITE_STALL,
    "finite-convergence-moves": lambda: criteria.MOVE_DECAY < criteria.MOVE_STALL,
    "theorem2-finite": lambda: regpath_verdict.FIN_DECAY < regpath_verdict.PLATEAU,
    "automaton": lambda: automaton.DECAY < automaton.STALL,
    "snap-late-exponent": lambda: (verdicts.LATE_REJECT[0] < verdicts.LATE_EXPONENT[0] <= 1
                                   <= verdicts.LATE_EXPONENT[1] < verdicts.LATE_REJECT[1]),
}


@pytest.mark.parametrize("verdict", sorted(ORDERED))
def test_accept_zone_ends_before_the_reject_zone_begins(verdict):
    assert ORDERED[verdict](), f"{verdict}: the accept threshold reaches into the reject zone"


# ------------------------------------------------------------------------------------------------
# Theorem 1 (theory.li2024.criteria)
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rate, gamma, expected, what", _rows(
    (2.9, None, ACCEPT, "first budget, inside DIRECTION_RATE"),
    (3.14, None, BETWEEN, "first budget, theorem1_direction_constant.json at 1e5 steps: escalate"),
    (3.58, 0.418, ACCEPT, "theorem1_slow_direction.json at 1e7 steps: holds by its trend"),
    (3.38, 0.5372, BETWEEN, "worst valid γ (RESULTS.md margins): above TREND_HOLD, escalates, never rejected"),
    (4.0, 0.6757, REJECT, "mildest planted γ (RESULTS.md margins: 20° off on theorem1_direction_constant.json)"),
    (4.0, 0.716, REJECT, "planted γ of the criteria docstring (20° off, 1e7 steps)"),
    (4.0, 1.0, REJECT, "a wrong limit: γ = 1"),
    (4.0, 0.6, BETWEEN, "γ between TREND_HOLD and TREND_FAIL: escalate"),
))
def test_theorem1_direction_zone(rate, gamma, expected, what):
    assert criteria.direction_zone(rate, gamma) == expected, what


@pytest.mark.parametrize("rate, gamma, what", _rows(
    (6.78, -0.1, "the valid K = 5 transient (6.18, 6.91, 6.78; γ < 0): a trend accept needs the rate under "
                 "DIRECTION_RATE_ESCALATED too"),
    (6.45, 0.3, "35° at 10^4 time units: tan(35°) · ln(10^4) = 6.45 with a falling trend, above the cap"),
    (5.0, 0.6, "a rate under the cap with γ between the zones: the cap alone does not accept"),
))
def test_theorem1_trend_accept_needs_both_conditions(rate, gamma, what):
    """The trend accepts when γ <= TREND_HOLD *and* the rate is at most DIRECTION_RATE_ESCALATED, not either."""
    assert criteria.direction_zone(rate, gamma) == BETWEEN, what


@pytest.mark.parametrize("rate, gamma, log_time, expected, what", _rows(
    (7.61, 0.243, 32.19, ACCEPT, "examples/section5_trend_between_the_lines.json at 2e14: level, tan θ 0.237"),
    (6.21, -0.206, 24.48, ACCEPT, "examples/section5_converging_at_the_rounding_floor.json at 2e12: tan θ 0.254"),
    (7.56, -3.9, 29.24, BETWEEN, "a 15° target on a run turning fast (converging_past_horizon at 2e14): tan θ "
                                 "0.259 under the line, its rate falling fast: not level"),
    (9.621, -0.499, 30.43, BETWEEN, "the mildest level 15° target measured (converging_past_the_extension at "
                                    "2e15): tan θ 0.316, above the line"),
    (9.35, -1.72, 34.77, BETWEEN, "section5_persistent_misalignment.json at 2e15: still falling, tan θ 0.269"),
    (7.61, 0.55, 32.19, BETWEEN, "γ above TREND_HOLD: not level, whatever the angle"),
    (7.61, 0.243, None, BETWEEN, "no log time given: the rate cap alone"),
    (6.62, 1.0, 30.83, REJECT, "a settled misalignment (examples/section5_misaligned_at_horizon.json at 2e15)"),
))
def test_the_level_trend_is_an_angle(rate, gamma, log_time, expected, what):
    """Above ``DIRECTION_RATE_ESCALATED`` a trend accepts only when level (``|γ| <= TREND_HOLD``) with
    ``tan θ = rate / L <= DIRECTION_LEVEL_TAN`` (measured rows, benchmarks/trend_resolution.py)."""
    assert criteria.direction_zone(rate, gamma, log_time=log_time) == expected, what


@pytest.mark.parametrize("rate, gamma, log_time, expected, what", (
    (2.1, 0.9, 30.0, "rate", "a rate under DIRECTION_RATE: accepted by itself, whatever the trend"),
    (5.6, -0.58, 19.9, "trend", "a falling lsq rate at 2e12 (RESULTS.md, Section 5 at the horizon)"),
    (7.61, 0.243, 32.11, "level", "the seed-8 draw at 2e14: γ 0.243, tan θ 0.237"),
    (9.621, -0.499, 30.43, None, "the mildest level 15° target: tan θ 0.316"),
    (7.61, 0.243, None, None, "no log time given: no level clause"),
))
def test_the_zone_names_the_clause_that_accepts(rate, gamma, log_time, expected, what):
    """:func:`~theory.li2024.criteria.direction_clause` on measured rows, and the zone accepts exactly where it names
    a clause (a grid of rates, trends and log times): a verdict's reason and its zone read one table."""
    assert criteria.direction_clause(rate, gamma, log_time=log_time) == expected, what
    for r in np.linspace(0.0, 12.0, 121):
        for g in np.linspace(-1.0, 1.0, 21):
            for L in (None, 12.0, 25.0, 40.0):
                accepted = criteria.direction_zone(r, g, log_time=L) == ACCEPT
                assert accepted == (criteria.direction_clause(r, g, log_time=L) is not None), (r, g, L)


@pytest.mark.parametrize("log_time", [9.21, 12.0, 16.0, 21.0])
def test_the_level_trend_adds_nothing_at_gds_budgets(log_time):
    """Below ``L = DIRECTION_RATE_ESCALATED / DIRECTION_LEVEL_TAN`` (21.4) every level accept is one the rate cap
    already makes: GD's budgets (``L <= 16``) are judged as before the clause."""
    for rate in np.linspace(0.0, 12.0, 241):
        for gamma in np.linspace(-1.0, 1.0, 41):
            assert (criteria.direction_zone(rate, gamma, log_time=log_time)
                    == criteria.direction_zone(rate, gamma)), (rate, gamma, log_time)


@pytest.mark.parametrize("ratio, g1, converging, expected, what", _rows(
    (0.78, 1.0, False, ACCEPT, "worst valid low ratio (stress, minimum budget; criteria docstring)"),
    (1.16, 1.0, False, ACCEPT, "worst valid |ln ratio| 0.15 (RESULTS.md margins)"),
    (1.261, 1.0, False, BETWEEN, "the valid transient 1.261 at 1.1e5 steps (theorem1_decide): escalate"),
    (0.0, 0.0, False, REJECT, "a frozen run (planted): no gain"),
    (_q(13), 1.0, False, REJECT, "a coefficient converging to a finite limit, budget 13 time constants"),
    (10 ** 0.35, 1.0, False, REJECT, "polynomial growth τ^0.35"),
    (0.55, 1.0, False, BETWEEN, "between GROWTH_REJECT_LO and GROWTH_LO"),
    (1.5, 1.0, False, BETWEEN, "between GROWTH_HI and GROWTH_REJECT_HI"),
    (1.86, 1.0, True, BETWEEN, "the favorable start's 1.86 after 4.93: converging, never rejected"),
))
def test_theorem1_growth_zone(ratio, g1, converging, expected, what):
    assert criteria.growth_zone(ratio, g1, converging) == expected, what


@pytest.mark.parametrize("fe, fe_prev, expected, what", _rows(
    (0.1003e-2, 1e-2, ACCEPT, "worst valid decade ratio 0.1003 (RESULTS.md margins)"),
    (0.9673 * 0.2, 0.2, REJECT, "mildest planted ratio 0.9673 of a W^fin moved by 0.2"),
    (0.9673 * 0.03, 0.03, REJECT, "the same stall on an error under the bound FINITE_MAX"),
    (0.7 * 0.03, 0.03, BETWEEN, "ratio 0.7: between FINITE_DECAY and FINITE_STALL"),
))
def test_theorem1_finite_zone(fe, fe_prev, expected, what):
    assert criteria.finite_zone(fe, fe_prev, 1.0) == expected, what


@pytest.mark.parametrize("leak, leak_prev, expected, what", _rows(
    (1e-4, 1e-3, ACCEPT, "valid: the leak is ~1/τ, x0.1 per decade"),
    (0.005, 0.004, REJECT, "a growing leak above MASS_MIN"),
    (0.0012, 0.001, REJECT, "a growing leak, top-SCC mass 0.9988"),
    (0.095, 0.1, REJECT, "mass below MASS_MIN with the leak kept x0.95"),
    (0.05, 0.1, BETWEEN, "mass below MASS_MIN, the leak halving: escalate"),
))
def test_theorem1_leak_zone(leak, leak_prev, expected, what):
    assert criteria.leak_zone(leak, leak_prev) == expected, what


@pytest.mark.parametrize("moved, moved_prev, expected, what", _rows(
    (_q(30), 1.0, ACCEPT, "converging, budget 30 time constants (FINITE_TAU_BUDGET)"),
    (0.094, 0.187, BETWEEN, "stress seed 1769151185 at 1e5 steps (x0.503): undecided, holds at 1e6"),
    (1.0, 1.0, REJECT, "logarithmic growth: the same move every decade"),
    (1.2, 1.0, REJECT, "moves growing x1.2 per decade"),
))
def test_finite_convergence_moves_zone(moved, moved_prev, expected, what):
    assert criteria.moves_zone(moved, moved_prev, 1e-8) == expected, what


# ------------------------------------------------------------------------------------------------
# Theorem 2 (theory.li2024.regpath_verdict), automaton, Theorem 4's snap
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("f, expected, what", _rows(
    ([1e-3, 1e-4], ACCEPT, "valid: geometric decay"),
    ([5e-3, 0.9479 * 5e-3], REJECT, "kept 0.9479 per doubling (the mildest planted Theorem 2 ratio)"),
    ([0.2, 0.19], REJECT, "a wrong W^fin plateaus above FIN_MAX"),
    ([4e-3, 2.8e-3], BETWEEN, "ratio 0.7: between FIN_DECAY and PLATEAU"),
))
def test_theorem2_finite_zone(f, expected, what):
    assert regpath_verdict.finite_zone(np.array(f), 1.0)[0] == expected, what


@pytest.mark.parametrize("x, x0, expected, what", _rows(
    (0.0008, 0.0084, ACCEPT, "stress seed 2725772940 at 1e8 steps (x0.1 per decade)"),
    (0.084, 0.84, BETWEEN, "the same run at 1e6 steps: above LEAK_MAX, shrinking: undecided"),
    (0.005, 0.005, REJECT, "a wrong rule: the error constant in τ"),
    (0.009, 0.0095, REJECT, "kept x0.95 under the bound"),
    (0.005, 0.0075, BETWEEN, "x0.67: between DECAY and STALL"),
))
def test_automaton_error_zone(x, x0, expected, what):
    assert automaton.error_zone(x, x0, automaton.LEAK_MAX) == expected, what


@pytest.mark.parametrize("p, expected, what", _rows(
    (0.90, ACCEPT, "measured valid low end (40 random layouts: [0.90, 1.25])"),
    (1.25, ACCEPT, "measured valid high end"),
    (0.0, REJECT, "a linear continuation"),
    (2.0, REJECT, "a bounded approach"),
    (1.9, REJECT, "inside the upper reject zone"),
    (1.7, BETWEEN, "between LATE_EXPONENT and LATE_REJECT"),
))
def test_snap_late_exponent_zone(p, expected, what):
    assert verdicts.late_exponent_zone(p) == expected, what


# ------------------------------------------------------------------------------------------------
# Real-text figures: all hold, not any
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("parts, expected", [
    ([real_text.HOLDS, real_text.UNDECIDED], real_text.UNDECIDED),
    ([real_text.UNDECIDED, real_text.HOLDS, real_text.HOLDS], real_text.UNDECIDED),
    ([real_text.HOLDS, real_text.FAILS], real_text.FAILS),
    ([real_text.HOLDS, real_text.HOLDS], real_text.HOLDS),
])
def test_real_text_figure_holds_only_when_every_part_holds(parts, expected):
    assert real_text._combine(parts) == expected
