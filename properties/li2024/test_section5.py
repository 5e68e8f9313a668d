"""Local convergence (Li et al. 2024, Section 5): with a head that breaks Assumption 1 (tied ``C = E`` or
random) and the ``ce`` loss, GD's direction matches the Graph-SVM of the *pseudo*-TPG built from the tokens
GD selects (:mod:`theory.li2024.pseudo`), not necessarily the true TPG's.

The finite-budget criterion (settled selection, then correlation and Theorem 1's rate-aware direction
test, with a budget escalation before a failure is believed) is :mod:`theory.li2024.local_convergence`, shared
with the ``section5-phase`` sweep.  A run still in transit at its first budget is escalated through the
log-time continuation (:mod:`theory.li2024.local_continuation`) until its selection settles; runs that never
settle within 10^12 steps-equivalent are counted (``event`` "not judged: <reason>"), and the judged share has
a floor (``JUDGED_FLOOR``).  Selection rule: the authors' (mass > 1e-2 selected, (0.009, 0.01] ambiguous).
Judged share: 25 of 25 generated under ci, 200 of 205 under stress (seed 777777; before the continuation
escalated unsettled runs: 25 of 48 under ci, 13 "selection changed over the last decade").
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, event, find, given, settings

from properties.helpers import describe, note_problem
from properties.judging import margin, not_judged, scaled
from reports.record import record_metrics
from strategies.relaxations import relaxed_cases
from theory.li2024 import criteria
from theory.li2024 import local_convergence as lc
from theory.li2024.local_convergence import CORR_MIN, STEPS
from properties.li2024.runs import extended_horizon, horizon_rates, judge, local_run, verdict, without_path_bound

EXAMPLES_BASE = 25
# Measured: ci 25/25, stress 200/205 (seed 777777), ten fresh stress seeds in benchmarks/RESULTS.md ("Section 5
# through the continuation").  Before the continuation's escalation: 52% (25/48), with a floor of 0.35.
JUDGED_FLOOR = 0.8


def _alignment_property(case, outcomes: list):
    p = case.problem
    note_problem(p)
    outcome, why, r = verdict(case)
    event(f"ambiguous tokens={r['pseudo'].ambiguous > 0}")
    outcomes.append((outcome, why, p, r.get("eta"), r.get("steps")))
    if outcome == "not judged":
        not_judged(why.split(" (")[0])
    event(f"pseudo-TPG = true TPG={abs(r['corr_pseudo'] - r['corr_true']) < 1e-9}")
    event(f"budget escalated={len(r['history']) > 1}")
    event(f"verdict: {outcome}")
    record_metrics(corr_pseudo=r["corr_pseudo"], corr_true=r["corr_true"], inc_pseudo=r["inc_pseudo"],
                   steps=r["steps"])


def _judge_alignment(outcomes: list, judged_floor: float = None) -> None:
    """The property's two counts over ``outcomes`` (``(outcome, why, problem, eta)``): the judged share has its
    floor and at most ``MISALIGNED_MAX`` of the judged cases end not aligned (each one listed).  A count that
    would fail the property is first re-read by the independent computation (:mod:`oracles.flow`):
    only the misalignments it confirms count, and the ones it does not are listed with the failure."""
    from scipy.stats import binom

    judged = [o for o in outcomes if o[0] != "not judged"]
    bad = [o for o in judged if o[0] == "not aligned"]
    share = len(judged) / max(1, len(outcomes))
    floor = JUDGED_FLOOR if judged_floor is None else judged_floor

    def p_value(count):  # P(at least this many not aligned) were the claim's rate exactly MISALIGNED_MAX
        return float(binom.sf(count - 1, len(judged), MISALIGNED_MAX)) if count else 1.0

    unconfirmed = []
    if p_value(len(bad)) < MISALIGNED_ALPHA:
        confirmed = [o for o in bad if _confirmed(o)]
        unconfirmed = [o for o in bad if o not in confirmed]
        bad = confirmed
    record_metrics(judged=len(judged), generated=len(outcomes), not_aligned=len(bad), misaligned_p_value=p_value(len(bad)),
                   not_aligned_unconfirmed=len(unconfirmed))
    assert share >= floor, (f"judged {len(judged)} of {len(outcomes)} generated cases ({share:.0%}), below "
                            f"the floor {floor:.0%}: the settle criterion, the step or the selection rule moved")
    assert p_value(len(bad)) >= MISALIGNED_ALPHA, (
        f"{len(bad)} of {len(judged)} judged cases not aligned, each confirmed by oracles/flow.py: "
        f"P = {p_value(len(bad)):.2g} under a rate of {MISALIGNED_MAX:.0%} (at least {MISALIGNED_ALPHA:g} "
        f"required):\n" + "\n".join(f"{why}\nproblem file: {describe(p)}" for _, why, p, _ in bad[:3])
        + "".join(f"\nnot confirmed independently: {describe(p)}" for _, _, p, _ in unconfirmed[:3]))


def _confirmed(outcome) -> bool:
    """The independent computation reads the draw as a settled misalignment at the horizon (the check the
    command line's verdict uses)."""
    from theory.li2024.claims import independent_misalignment

    p, eta = outcome[2], outcome[3]
    return independent_misalignment(p, eta, horizon=outcome[4] if len(outcome) > 4 else None)[0]


@pytest.mark.theorem("Section 5")
def test_a_failing_count_counts_only_independently_confirmed_misalignments():
    """Three judged cases, all "not aligned", is improbable under the claim's 5% (P = 1.25e-4): the property
    fails when the independent computation confirms them (the square-loss tied-head misalignment), and not
    when it does not (planted: the slowly converging lsq draw, aligned by the trend, reported as not aligned)."""
    from theory.core.problem import Problem

    for name, fails in (("section5_square_tied_misalignment", True), ("section5_slow_direction_at_horizon", False)):
        p = Problem.load(f"examples/{name}.json")
        eta = lc.section5_step(p).eta
        outcomes = [("not aligned", f"planted verdict on {name}", p, eta)] * 3
        if fails:
            with pytest.raises(AssertionError, match="each confirmed by oracles/flow.py"):
                _judge_alignment(outcomes)
        else:
            _judge_alignment(outcomes)


# The claim is local (docs/theory.md: "GD converges only locally"; the paper's evidence is a mean correlation of
# ~0.99 over 10 trials, and the authors' notebook raises on a trial below 0.95).  From a random start a
# settled run can align with another direction for good: examples/section5_square_tied_misalignment.json keeps
# tan θ constant from 2e6 to 2e12 steps-equivalent (statistic 4.36 .. 9.27, γ = 1.0; confirmed by the
# independent computation of oracles/flow.py).  (The first such case,
# examples/section5_persistent_misalignment.json, 6.0, 7.3, 8.4 at 2e5..2e7 on GD, flattens at the
# continuation's horizon: undecided.)  So the property is the paper's: at most this share of
# the judged cases may end not aligned (each one is listed in the failure message and counted by event).
# The share is a rate, and a property sees a sample of it: the rule "observed share <= 5%" rejected a true
# rate of 5% with probability 0.36 on ci's 25 judged draws (binomial), and held in ci only while unsettled
# draws went unjudged.  Once Section 5 escalated them through the continuation, ci's derandomized draws judged
# 5 of 25 not aligned, all one square-loss tied-head family (Hypothesis mutates around a draw), each confirmed
# on GD alone (examples/section5_square_tied_misalignment.json: tan θ · ln(τ/τ₀) 4.36, 5.20 at 2e6, 2e7 steps,
# the continuation's 4.36, 5.20); random draws under stress (seed 777777) judged 1 and 4 of 200 not aligned.
# So the property fails when the count is improbable under the claim's rate: P(X >= count | Binomial(judged,
# MISALIGNED_MAX)) < MISALIGNED_ALPHA, a false alarm rate of 1e-3 per property at a true rate of exactly 5%
# (independent draws): ci fails from 7 of 25, stress from 22 of 200.
MISALIGNED_MAX = 0.05
MISALIGNED_ALPHA = 1e-3


@pytest.mark.theorem("Section 5")
@pytest.mark.heavy(seconds=898)
def test_gd_aligns_with_the_pseudo_tpg_svm():
    """``EXAMPLES_BASE`` judged relaxed-head cases, scaled by the profile (ci 25 derandomized, stress 200
    random): at most ``MISALIGNED_MAX`` of the judged cases end not aligned with their pseudo-TPG
    Graph-SVM (after the budget escalation of :func:`verdict`), and at least ``JUDGED_FLOOR`` of the
    generated cases are judged (the others are counted by reason: no ⇒ edge, an ambiguous token, a
    selection that changed over the last decade, no log growth)."""
    outcomes: list = []

    @settings(max_examples=scaled(EXAMPLES_BASE), deadline=None)
    @given(case=relaxed_cases("head", head_loss="ce"))
    def prop(case):
        _alignment_property(case, outcomes)

    prop()
    _judge_alignment(outcomes)


# Measured over the claim's whole domain (problems_for(SECTION5)): ci 25/27, stress 200/216 (seed 777777;
# not judged: pseudo-TPGs without a ⇒ edge, where the claim is silent, and continuations that stalled).
# Before the continuation's escalation: 120 random draws over its 11 (loss, head) pairs judged 60 (50%), with
# a floor of 0.3.
DOMAIN_JUDGED_FLOOR = 0.75


@pytest.mark.theorem("Section 5")
@pytest.mark.heavy(seconds=718)
def test_gd_aligns_with_the_pseudo_tpg_svm_on_the_whole_domain():
    """The same property over Section 5's whole stated domain (every loss with a broken head, every loss
    but log with the biorthogonal one: ``problems_for(SECTION5)``), the log loss with a broken head at
    its region step (:func:`theory.li2024.local_convergence.section5_step`); the judged share's floor is
    ``DOMAIN_JUDGED_FLOOR`` (the domain includes problems without a ⇒ edge, not judged)."""
    from strategies.domains import problems_for
    from theory.li2024.claims import SECTION5

    outcomes: list = []

    @settings(max_examples=scaled(EXAMPLES_BASE), deadline=None)
    @given(p=problems_for(SECTION5))
    def prop(p):
        note_problem(p)
        outcome, why, r = lc.verdict(p, p.replace(head=None, loss="log"), note=f"{p.loss} loss")
        outcomes.append((outcome, why, p, r.get("eta"), r.get("steps")))
        event(f"{p.loss} loss, head biorthogonal={p.assumptions()['head_biorthogonal']}: {outcome}")
        if outcome == "not judged":
            not_judged(why.split(" (")[0])
        elif not r["step"].proved:
            event(f"region step (floor tries: {r['step'].tries})")

    prop()
    _judge_alignment(outcomes, DOMAIN_JUDGED_FLOOR)


@pytest.mark.theorem("Section 5")
def test_region_step_reruns_a_run_that_leaves_its_region():
    """The log loss with a broken head runs at a step proved only on ``{u_i >= u_floor}``: a run that goes
    below the floor must be re-run at the next floor.  Planted: a floor above ``min_i u_i(0)`` (the start
    itself is outside the region) must be refused by :func:`region_left`, and :func:`train_section5`
    must end at a smaller floor whose run stays inside."""
    from theory.core.problem import Problem

    p = Problem.load("examples/section5_log_broken_head.json")
    step = lc.section5_step(p)
    assert not step.proved, "precondition: this file's step is a region step"
    traj, used = lc.train_section5(p, 20_000, step)
    assert lc.region_left(p, traj, used) is None
    planted = lc.Step(step.eta, u_floor=4 * (2 * step.u_floor))  # four times min_i u_i(0): W(0) is outside
    why = lc.region_left(p, traj, planted)
    assert why is not None and "below the step's floor" in why, why
    traj2, used2 = lc.train_section5(p, 20_000, planted)
    assert used2.tries >= 1 and lc.region_left(p, traj2, used2) is None


@pytest.mark.theorem("Section 5")
def test_persistent_misalignment_flattens_at_the_horizon():
    """The stress-found case behind ``MISALIGNED_MAX`` (replay: ``python -m theory train
    examples/section5_persistent_misalignment.json --steps 20000000``), settled from 2e5 steps on: on GD alone
    its statistic grew 6.0, 7.3, 8.4 at 2e5, 2e6, 2e7 steps (~27° off), and it was called a genuine
    counterexample.  Through the continuation it gains 1.23, 1.17, 1.10, 0.99, 0.80, 0.49, 0.06 a decade to
    11.86 at 2e12 steps-equivalent: its trend over the last decade is γ ≈ 0.05, ``tan θ`` shrinking like
    ``1/ln τ``, not a fixed angle's γ = 1.  The ladder then goes on to ``EXTENSION_MAX`` (a converging direction
    not yet below the escalated line), where the statistic *falls*: 11.42 at 2e13, 10.52 at 2e14.  Still above
    the escalated line there, so it is undecided ("converging but not aligned"); the rule before, "the statistic
    at the last budget at least its first in the settled stretch", called it not aligned.  The independent
    computation reads the same statistics (``test_flow_oracle.py``)."""
    from strategies.relaxations import RelaxedCase
    from theory.core.problem import Problem

    p = Problem.load("examples/section5_persistent_misalignment.json")
    case = RelaxedCase("head", p, p.replace(head=None, loss="log"), 1.0, "tied head, ce loss")
    outcome, why, r = verdict(case)
    record_metrics(outcome=outcome)
    rates = [h[2] for h in r.get("history", [])]
    gains = np.diff(rates)
    peak = int(np.argmax(rates))
    assert len(rates) >= 9 and r["steps"] == lc.EXTENSION_MAX, r.get("history")
    assert rates[:peak + 1] == sorted(rates[:peak + 1]) and gains[0] > 1.0, gains  # growing like ln τ at first
    assert peak < len(rates) - 2 and rates[-1] < rates[peak] - 1.0, rates  # then falling past the natural horizon
    assert outcome == "not judged" and why.startswith(lc.UNDECIDED + "converging"), why


@pytest.mark.theorem("Section 5")
def test_a_direction_level_above_the_rate_cap_is_accepted_by_its_angle(monkeypatch):
    """The draw of a fresh stress seed left undecided by every pass
    (``examples/section5_trend_between_the_lines.json``: square loss, broken head, K = 3, η = 6.02).  Its rate gains
    0.64, 0.61, 0.57, 0.51, 0.44, 0.35 a decade from 2e6 to 2e12 (trend γ = 0.573 there, between the lines), so the
    ladder is extended past its top; in extended precision the rate reads 7.48, 7.61, 7.60 at 2e13, 2e14, 2e15:
    converging (γ -> 0), but above ``DIRECTION_RATE_ESCALATED`` (6.0), a cap whose angle shrinks like ``1/L``.
    Accepted by the level trend (``|γ| <= TREND_HOLD`` with ``tan θ <= DIRECTION_LEVEL_TAN``; measured
    γ = 0.24 and tan θ = 0.237 at 2e14).  Without that clause (planted: its line at 0) the ladder goes on past
    2e14, "converging (γ = 0.204) but not yet aligned there", and the draw is undecided at 2e15, so the clause is
    what decides it.  The planted run's ladder is capped at 2e15 (``EXTENSION_MAX`` at 2e12, a thousand times that
    in extended precision) to keep it short: uncapped it goes on to 2e17 and is undecided there too (measured,
    "within the continuation's bound of the threshold"; it ended at 2e15 anyway until the continuation stopped
    failing on its integrator's trial states)."""
    from theory.core.problem import Problem

    p = Problem.load("examples/section5_trend_between_the_lines.json")
    outcome, why, r = lc.verdict(p, p.replace(head=None, loss="log"), note="square loss")
    assert outcome == "aligned" and "accepted at the last budget by the level trend" in why, why
    assert "the ladder extended past 2e+12: its trend γ = 0.57" in why and r["steps"] > 2 * 10**12, why
    tan = r["history"][-1][2] / criteria.log_time(r["steps"], r["pseudo"].svm.norm, r["eta"])
    margin("section5 level trend tan θ", "valid", tan)
    monkeypatch.setattr(criteria, "DIRECTION_LEVEL_TAN", 0.0)
    monkeypatch.setattr(lc, "EXTENSION_MAX", 2 * 10**12)
    outcome, why, _ = lc.verdict(p, p.replace(head=None, loss="log"), note="square loss")
    assert outcome == "not judged" and "converging but not aligned within 2e+15" in why, why
    assert "the ladder extended past 2e+14: converging" in why, why


@pytest.mark.theorem("Section 5")
def test_the_level_trend_refuses_planted_targets_at_the_extended_horizon():
    """Calibration of the level clause (``DIRECTION_LEVEL_TAN``) on its planted side, at the budgets it decides
    (2e13 to 2e15 steps-equivalent, each the last budget of some extension).  Three runs the verdict continues in
    extended precision: the level draw above (still 12.4° from its limit at 2e15), a draw whose rate keeps
    falling (``section5_persistent_misalignment.json``, 15° off at 2e15) and one that turns fast past 2e12
    (``section5_converging_past_horizon.json``).  Targets 15°, 20° and 35° off the pseudo-TPG's Graph-SVM
    (:func:`theory.li2024.plants.wrong_direction`, 8 each) are never accepted.  The lower bound on γ is exercised:
    on the fast-turning run some 15° targets read ``tan θ`` under the line with the rate falling fast (γ < -0.5;
    measured 0.259 at 2e14), refused only because the trend is not level."""
    import types

    from theory.li2024.plants import wrong_direction
    from theory.li2024.training import truncate

    by_level_bound = 0
    for path, top in (("examples/section5_trend_between_the_lines.json", 2 * 10**15),
                      ("examples/section5_persistent_misalignment.json", 2 * 10**15),
                      ("examples/section5_converging_past_horizon.json", 2 * 10**14)):
        p, run, ps, eta, budgets = extended_horizon(path, top)
        assert budgets[-1] == top, (path, budgets, run.stopped)
        an = types.SimpleNamespace(problem=p, svm=ps.svm)
        for b in (b for b in budgets if b >= 2 * 10**13):
            upto = truncate(run, b)
            for angle in (15, 20, 35):
                for seed in range(8):
                    target = wrong_direction(an, angle, seed) * ps.svm.norm
                    before, last = horizon_rates(upto, target, eta)
                    ok, gamma = lc.trend_accepts(before, last, ps.svm.norm, eta)
                    assert not ok, (path, b, angle, seed, before, last, gamma)
                    tan = last[1] / criteria.log_time(b, ps.svm.norm, eta)
                    if abs(gamma) <= criteria.TREND_HOLD:
                        margin("section5 level trend tan θ", "planted", tan)
                    elif tan <= criteria.DIRECTION_LEVEL_TAN and last[1] > criteria.DIRECTION_RATE_ESCALATED:
                        by_level_bound += 1
    assert by_level_bound > 0, "no planted target under the line with a falling rate: the bound on γ was not exercised"


@pytest.mark.theorem("Section 5")
def test_a_direction_converging_at_the_top_is_judged_a_decade_later(monkeypatch):
    """The extension's accepting side, on the persistent misalignment with the escalated line planted at 11.85
    (its rates over every ``W`` within the bound: [11.82, 11.90] at 2e12 with γ = 0.02, converging;
    [11.02, 11.81] at 2e13, falling; at 2e14 the bound is 0.149, most of it B's rounding floor ``eps t``, and the
    interval [6.6, 14.7] resolves nothing): undecided at the ladder's natural top, it must be aligned a decade
    later, by the trend, and stay undecided without the extension.  (The
    stress-found draw this was written for, ``examples/section5_converging_past_horizon.json``: rates 10.73 at
    2e12, 8.22 at 2e13, 3.56 at 2e14, aligned there under the real line 6; its 36 s of second-order solves are
    left to a replay, ``tpg check examples/section5_converging_past_horizon.json --claim li2024.section5``.)"""
    from theory.core.problem import Problem
    from theory.li2024 import criteria

    p = Problem.load("examples/section5_persistent_misalignment.json")
    theory_problem = p.replace(head=None, loss="log")
    monkeypatch.setattr(criteria, "DIRECTION_RATE_ESCALATED", 11.85)
    outcome, why, r = lc.verdict(p, theory_problem)
    assert outcome == "aligned" and r["steps"] == 2 * 10**13 and "converging (γ" in why, why
    # every pass, extended precision's too
    monkeypatch.setattr(lc, "_extension_max", lambda variant, horizon=None: 2 * 10**12)
    outcome, why, r = lc.verdict(p, theory_problem)
    assert outcome == "not judged" and why.startswith(lc.UNDECIDED + "converging"), why


@pytest.mark.theorem("Section 5")
def test_square_loss_tied_head_misalignment_is_genuine():
    """Found when Section 5 began escalating unsettled draws (ci's whole-domain draws, a square-loss tied-head
    family): GD alone, 2e6 steps, is settled and fails the direction test against its pseudo-TPG's Graph-SVM
    (``tan θ · ln(τ/τ₀)`` 4.36, and 5.20 at 2e7); the verdict, through the continuation to its horizon, is
    "not aligned" with the statistic growing at every budget (a wrong limit direction, not a transient)."""
    from theory.core.problem import Problem

    p = Problem.load("examples/section5_square_tied_misalignment.json")
    theory_problem = p.replace(head=None, loss="log")
    traj, _ = lc.train_section5(p, 2_000_000)
    r = lc.local_run(p, theory_problem, traj)
    assert r["settled"] and not lc.aligned(r)[0], r["not_judged"]
    assert 4.0 < lc.rates(r)[0] < 5.0, lc.rates(r)
    outcome, why, r = lc.verdict(p, theory_problem)
    rates = [h[2] for h in r["history"]]
    assert outcome == "not aligned" and rates == sorted(rates) and r["steps"] >= 10**11, why


@pytest.mark.theorem("Section 5")
def test_a_transit_before_the_settled_stretch_does_not_make_a_misalignment_converging():
    """A stress draw (seeds 11-55, square loss): in transit at 2e5 steps (correlation 0.55, statistic 17.2),
    its selection changes before 2e6, and from 2e7 on it is settled at correlation 0.95 with the statistic
    growing by ~0.79 a decade to 2e12 (tan θ constant: a wrong limit direction).  GD alone at 2e7 steps
    agrees (settled, statistic 4.56).  Read against the transit's 17.2 the verdict was "converging but not
    aligned"; the trend is read within the last settled stretch, and the verdict is "not aligned"."""
    from theory.core.problem import Problem

    p = Problem.load("examples/section5_square_misaligned_after_transit.json")
    theory_problem = p.replace(head=None, loss="log")
    traj, _ = lc.train_section5(p, 20_000_000)
    r = lc.local_run(p, theory_problem, traj)
    assert r["settled"] and not lc.aligned(r)[0] and 4.0 < lc.rates(r)[0] < 5.0, (r["not_judged"], lc.rates(r))
    outcome, why, r = lc.verdict(p, theory_problem)
    since = max(n for n, _ in r["skipped"])
    rates = [h[2] for h in r["history"] if h[0] > since]
    assert outcome == "not aligned" and rates == sorted(rates) and len(rates) >= 3, why
    assert r["history"][0][2] > rates[-1], r["history"]  # the transit's value, above every later one


@pytest.mark.theorem("Section 5")
def test_the_raw_correlation_is_not_judged_at_the_horizon(monkeypatch):
    """A stress draw (fresh seed, ce loss, random head): GD changes its selection until ~1e9 steps and keeps
    the offset of that transit, so from 2e9 to 2e12 steps-equivalent the increment lies on the pseudo-TPG's
    Graph-SVM to within 1e-4 (statistic 0.16, 0.017, 0.0019, 0.00019) while the raw correlation rises only
    0.66, 0.72, 0.77, 0.80, below ``CORR_MIN``.  At the ladder's last budget the direction is judged as in
    Theorem 1 and the raw correlation is reported: aligned.  Judged with the raw correlation there (the rule
    before, planted by switching ``trend_accepts`` off) the draw is "converging but not aligned", undecided."""
    from theory.core.problem import Problem

    p = Problem.load("examples/section5_raw_correlation_lags_transit.json")
    theory_problem = p.replace(head=None, loss="log")
    outcome, why, r = lc.verdict(p, theory_problem)
    steps, corr, rate, *_ = r["history"][-1]
    assert steps >= 1e12 and corr < CORR_MIN and rate <= criteria.DIRECTION_RATE, r["history"]
    assert outcome == "aligned" and "raw correlation not judged" in why, why
    monkeypatch.setattr(lc, "trend_accepts", lambda *a: (False, float("nan")))
    outcome, why, _ = lc.verdict(p, theory_problem)
    assert outcome == "not judged" and why.startswith(lc.UNDECIDED + "converging"), why


@pytest.mark.theorem("Section 5")
def test_the_trend_accepts_a_slow_direction_and_rejects_planted_targets():
    """Calibration both ways of the horizon's trend (:func:`theory.li2024.local_convergence.trend_accepts`).
    Valid: a stress draw (fresh seed, lsq loss, tied head) settles by 2e6 steps with its statistic above
    ``DIRECTION_RATE`` and falling (6.5, 5.0, 4.9, 4.8, 4.7, 4.5, 4.2 from 2e6 to 2e12 steps-equivalent,
    γ = -0.61 over the last decade): aligned by the trend.  Planted: targets 10°, 15° and 20° off the
    pseudo-TPG Graph-SVM (:func:`theory.li2024.plants.wrong_direction`), judged on the same runs as the
    valid one (this draw and the ce draw of the test above, whose direction has converged), keep ``tan θ``
    and so ``γ`` near 1: none is accepted, and the 10° targets on the ce draw, within
    ``DIRECTION_RATE_ESCALATED``, are refused by their trend alone.  Not resolved: a 10° target on the lsq
    draw, which is itself still 8.8° from its limit at 2e12 (such a target can look as flat, γ = 0.27
    measured); the resolution there is the cap, ``DIRECTION_RATE_ESCALATED / ln(τ/τ₀)`` = 12° at 2e12, and for a
    level trend ``DIRECTION_LEVEL_TAN`` (15.6°; benchmarks/trend_resolution.py: 8 of 8 such targets accepted)."""
    import types

    from theory.core.problem import Problem
    from theory.li2024.plants import wrong_direction

    by_trend_alone = 0
    for path, angles in (("examples/section5_slow_direction_at_horizon.json", (15, 20)),
                         ("examples/section5_raw_correlation_lags_transit.json", (10, 15, 20))):
        p = Problem.load(path)
        outcome, why, r = lc.verdict(p, p.replace(head=None, loss="log"))
        assert outcome == "aligned" and "raw correlation not judged" in why, why
        run, ps, eta = r["traj"], r["pseudo"], r["eta"]
        ok, gamma = lc.trend_accepts(*horizon_rates(run, ps.svm.W, eta), ps.svm.norm, eta)
        assert ok, gamma
        if r["history"][-1][2] > criteria.DIRECTION_RATE:
            assert "the trend γ" in why and gamma <= criteria.TREND_HOLD, why
            margin("section5 horizon trend γ", "valid", gamma)
        an = types.SimpleNamespace(problem=p, svm=ps.svm)
        for angle in angles:
            for seed in range(4):
                target = wrong_direction(an, angle, seed) * ps.svm.norm
                before, last = horizon_rates(run, target, eta)
                ok, gamma = lc.trend_accepts(before, last, ps.svm.norm, eta)
                assert not ok, (path, angle, seed, before, last, gamma)
                if criteria.DIRECTION_RATE < last[1] <= criteria.DIRECTION_RATE_ESCALATED:
                    by_trend_alone += 1
                    margin("section5 horizon trend γ", "planted", gamma)
    assert by_trend_alone > 0, "no planted target within the escalated cap: the trend was not exercised"


@pytest.mark.theorem("Section 5")
def test_an_early_accept_is_rejected_at_the_horizon(monkeypatch):
    """A random draw of Section 5's domain (log loss, random head, K = 5): settled from 2e6 steps on one
    selection, its statistic is 2.67 at 2e7 steps-equivalent (accepted by its rate alone, <= 3) and grows by
    0.49 a decade to 5.14 at 2e12 (tan θ constant: a limit ~12° off the pseudo-TPG's Graph-SVM), the bound
    1.3e-4 throughout.  The horizon rejects the early accept (``_rejected_at_horizon``); without that check
    (planted: it never rejects) the verdict is the early "aligned"."""
    from theory.core.problem import Problem

    p = Problem.load("examples/section5_misaligned_at_horizon.json")
    theory_problem = p.replace(head=None, loss="log")
    outcome, why, r = lc.verdict(p, theory_problem)
    steps = [h[0] for h in r["history"]]
    rates = [h[2] for h in r["history"]]
    assert outcome == "not aligned" and "accepted by its rate at 2e+07" in why, why
    assert rates[0] <= criteria.DIRECTION_RATE < rates[-1] and steps[-1] >= 10**12, r["history"]
    gains = np.diff(rates)
    assert np.all(gains > 0) and gains.max() < 1.2 * gains.min(), gains  # linear in ln τ: tan θ constant
    monkeypatch.setattr(lc, "_rejected_at_horizon", lambda *a: None)
    outcome, why, _ = lc.verdict(p, theory_problem)
    assert outcome == "aligned" and why.startswith("2e+07"), why


@pytest.mark.theorem("Section 5")
def test_a_bound_too_wide_within_gds_reach_is_judged_again_from_gd(monkeypatch):
    """A stress draw (seeds 11-55, ce loss): continued from GD at 2e4 steps, Grönwall's bound widened from 1.7e-4
    at 2e5 to 223 at 2e6 (a change of selection), and every budget to 2e12 was "an ambiguous token within the
    continuation's bound".  Three ways decide it, tried in this order: the first order's bound on GD's distance
    from the flow's path (:mod:`theory.li2024.shadowing`, which does not widen through the change): aligned at
    2e8; without it, GD itself re-run to 2e6 (within its reach) and continued again from there: aligned at 2e8;
    with no budget within GD's reach either (``ESCALATE_MAX = 0``), the second-order continuation (GD's modified
    equation): aligned at 2e8.  Without any of them it stays not judged."""
    from theory.core.problem import Problem

    p = Problem.load("examples/section5_bound_widened_within_gd_reach.json")
    theory_problem = p.replace(head=None, loss="log")
    outcome, why, r = lc.verdict(p, theory_problem)
    assert outcome == "aligned" and "with the path bound" in why and "GD re-run" not in why, why
    assert r["engine"] == "continuation, path bound" and r["steps"] == 2 * 10**8, (r["engine"], r["steps"])
    without_path_bound(monkeypatch)
    outcome, why, r = lc.verdict(p, theory_problem)
    assert outcome == "aligned" and "GD re-run to 2e+06" in why, why
    monkeypatch.setattr(lc, "ESCALATE_MAX", 0)
    outcome, why, _ = lc.verdict(p, theory_problem)
    assert outcome == "aligned" and "second-order continuation" in why and "GD re-run" not in why, why
    monkeypatch.setattr(lc, "_second_order", lambda *args: args[-1])
    outcome, why, _ = lc.verdict(p, theory_problem)
    assert outcome == "not judged" and "within the continuation's bound" in why, why


@pytest.mark.theorem("Section 5")
def test_alignment_property_catches_a_planted_threshold():
    """Calibration both ways.  The rule (select > 1e-2) judges at least ``JUDGED_FLOOR`` of 10 cases and
    all judged cases align; a planted threshold of 0.5 (a token that shares its SCC's attention is
    dropped, the pseudo SCC breaks and GD no longer follows that Graph-SVM) is found failing.

    The planted search is an existence search (Hypothesis's ``find``, no shrinking) with a budget from the
    measured rate: 3 of 40 derandomized draws end "not aligned" under the planted threshold (0 of 40
    under the rule), so ``PLANTED_SEARCH`` draws miss with probability 0.925^90 = 9e-4.  (It used to be the
    first of the same 10 cases: 7 of 19 judged failed on an earlier draw sequence, but the derandomized
    draws move with the code's constants, and one edit left none of the 10 failing.)"""
    runs = []

    @settings(max_examples=10, derandomize=True, deadline=None, database=None)
    @given(relaxed_cases("head", head_loss="ce"))
    def collect(case):
        runs.append((case, lc.train_section5(case.problem, STEPS)[0]))

    collect()
    rule = [judge(c, t) for c, t in runs]
    record_metrics(judged_rule=sum(v != "not judged" for v in rule))
    assert "not aligned" not in rule and sum(v != "not judged" for v in rule) >= JUDGED_FLOOR * len(runs), rule

    def planted_fails(case):
        return judge(case, lc.train_section5(case.problem, STEPS)[0], 0.5, 0.45) == "not aligned"

    found = find(relaxed_cases("head", head_loss="ce"), planted_fails,
                 settings=settings(database=None, derandomize=True, max_examples=PLANTED_SEARCH, deadline=None,
                                   phases=[Phase.generate]))
    assert judge(found, lc.train_section5(found.problem, STEPS)[0]) != "not aligned", describe(found.problem)


PLANTED_SEARCH = 90


@pytest.mark.theorem("Section 5")
def test_true_tpg_fails_where_the_pseudo_tpg_holds():
    """Calibration, and the point of Section 5: some relaxed case has GD aligned with its pseudo-TPG while
    the same criterion rejects the true TPG's W^svm (the li-local gap, 0.7 vs 0.99 in the paper)."""
    def gap(case):
        r = local_run(case)
        if not (r["settled"] and r["pseudo"].svm.norm > 0 and r["corr_pseudo"] >= CORR_MIN):
            return False
        pseudo, true = lc.rates(r)
        return pseudo <= criteria.DIRECTION_RATE < true

    # Existence is the claim: the first case found is judged, not shrunk (shrinking retrains every
    # candidate: 40 s of this test with it, 8 s without, under ci, and the claim is the same).
    case = find(relaxed_cases("head", head_loss="ce"), gap, settings=settings(database=None, derandomize=True, max_examples=20,
                                                              deadline=None, phases=[Phase.generate]))
    r = local_run(case)
    record_metrics(corr_true=r["corr_true"], corr_pseudo=r["corr_pseudo"], inc_true=r["inc_true"],
                   inc_pseudo=r["inc_pseudo"])
    pseudo, true = lc.rates(r)
    assert true > criteria.DIRECTION_RATE >= pseudo, f"rates: pseudo {pseudo:.3g}, true {true:.3g}"


# Found by the stress profile (seed 22): selection settled, log growth along the pseudo direction, yet
# the increment W(τ) - W(τ/10) is at 32° from the pseudo-TPG Graph-SVM (corr 0.844; raw corr 0.929).
LOCAL_COUNTEREXAMPLE = {"embeddings": [[0.27298068055600483, -0.7548144548445556, -0.5964366578278846], [-0.7531367549566194, 0.5551684973273434, 0.35294895935349124], [-0.36758481347296884, 0.8740614290753409, 0.31764449169915626]], "head": [[0.1257302210933933, -0.1321048632913019, 0.6404226504432821], [0.10490011715303971, -0.535669373161111, 0.36159505490948474], [1.3040000451301372, 0.9470809631292422, -0.7037352358069926]], "sequences": [[1, 0], [1, 0], [2, 0], [1, 0]], "labels": [1, 0, 0, 1], "loss": "ce"}


@pytest.mark.theorem("Section 5")
def test_transit_is_not_a_counterexample():
    """Regression (was a strict xfail): this case fails the direction test at the first budget (2e5 steps,
    the selection looks settled) because GD is in transit between selections; the property's verdict,
    which escalates the budget, does not call it a failure (measured: aligned or converging by 2e7)."""
    from strategies.relaxations import RelaxedCase
    from theory.core.problem import Problem

    p = Problem.from_json(LOCAL_COUNTEREXAMPLE)
    case = RelaxedCase("head", p, p.replace(head=None, loss="log"), 1.0, "random head, ce loss")
    r = local_run(case)
    assert r["settled"], "precondition: the selection looks settled at the first budget"
    assert not lc.aligned(r)[0], "precondition: the fixed-budget test fails here"
    outcome, why, _ = verdict(case)
    record_metrics(outcome=outcome)
    assert outcome != "not aligned", why


@pytest.mark.theorem("Section 5")
def test_a_selection_changed_in_the_last_decade_is_judged_a_decade_later(monkeypatch):
    """A log-loss draw with a broken head (a fresh stress seed): its selection changes between 2e10 and 2e11
    steps-equivalent, and 2e12, settled, fails with no settled decade before it to read a trend: undecided
    with the ladder at its natural top.  Extended by a decade (``EXTENSION_MAX``), it must be read where it
    is: a settled misalignment (rates 17.8, 19.7 at 2e12, 2e13, γ = 1; 11.2 to 18.2 from 2e7 to 2e10 on the
    selection before), confirmed by the independent computation read to the same budget."""
    from theory.core.problem import Problem
    from theory.li2024.claims import independent_misalignment

    p = Problem.load("examples/section5_selection_changed_before_horizon.json")
    theory_problem = p.replace(head=None, loss="log")
    outcome, why, r = lc.verdict(p, theory_problem)
    assert outcome == "not aligned" and "the ladder extended past 2e+12" in why and r["steps"] == 2 * 10**13, why
    confirmed, reading = independent_misalignment(p, r["eta"], horizon=r["steps"])
    assert confirmed and "2e+13" in reading, reading
    # every pass, extended precision's too
    monkeypatch.setattr(lc, "_extension_max", lambda variant, horizon=None: 10**12)
    outcome, why, _ = lc.verdict(p, theory_problem)
    assert outcome == "not judged" and "without a settled decade before it" in why, why
    # The extended pass's longer ladder (_extension_max) on its rejecting side: with only that pass extended, the
    # settled misalignment must be read there, not accepted (measured: γ = 0.998 at 2e13).
    monkeypatch.setattr(lc, "_extension_max", lambda variant, horizon=None: 10**14 if variant.extended else 10**12)
    outcome, why, r = lc.verdict(p, theory_problem)
    assert outcome == "not aligned" and r["engine"].startswith("continuation, extended precision"), (outcome, why)
