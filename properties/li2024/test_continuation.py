"""The log-time continuation (:mod:`theory.li2024.continuation`) stands in for discrete GD: measured, not assumed.

On drawn Theorem 1 problems (log loss, Assumptions 1-2) discrete GD runs from 0 to 10^5 steps at the safe
step; from its state there both discrete GD and the continuation go on to 10^6 steps, and every statistic of
Theorem 1's verdict (:func:`theory.li2024.criteria.theorem1_statistics`: growth ratio, direction rate, finite
error, leak) and ``W`` itself must agree within the tolerance :func:`theory.li2024.continuation.compare`
derives from the GD-vs-flow bound ``D = η ∫ ||H g|| dt`` (the module docstring's derivation), the measured
integration error and GD's rounding.  Two planted defects must disagree beyond it on every drawn problem:
the wrong sign of the step, and a time map off by a factor 2 (the continuation of a step 2η).  They are
judged against the honest run's bounds: a defective engine's own bound is integrated along its own wrong
path.  The regression case ``examples/theorem1_slow_direction.json`` reproduces issue 37's measurement.

Measured (stress profile, commit after ab5c28d, 160 judged examples of every shape, 51 rejected by the
strategy): on every valid run the worst distance/tolerance over all statistics was 0.17-0.43 (always ``W``
itself: the rigorous bound is ~2.3x GD's actual deviation from the flow; every verdict statistic sat far
lower); the mildest planted defect was 3.5e4 times its tolerance (the time map off by 2; the wrong sign
1e9-4e11), and once (1 draw in 211) the time-map plant's integrator stalled (MAX_EVALS), counted as caught.
Caught by ``W``, the growth ratio and the leak on every draw, also by the direction rate or the finite error
on most.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from properties.helpers import describe, note_problem, plant_stall_past
from properties.judging import margin, not_judged, scaled
from strategies import trainable_problems
from theory.core.problem import Problem
from theory.li2024 import criteria
from theory.li2024.analysis import analyze
from theory.li2024.continuation import bounds_of, compare, continue_flow, engine_of
from theory.li2024.losses import safe_step
from theory.li2024.training import log_checkpoints, resume, train, truncate

START, BUDGET = 10**5, 10**6
PLANTS = {"wrong sign of the step": {"sign": -1.0}, "time map off by 2": {"time_scale": 2.0}}


def runs(problem, an, budget=BUDGET):
    """``(gd, continuation)`` from the same GD state at START to ``budget`` (the continuation's error measured)."""
    eta = safe_step(problem)
    start = train(problem, START, eta, analysis=an)
    return resume(problem, start, budget, analysis=an), continue_flow(problem, start, budget, an,
                                                                       estimate_error=True), start


def bucket(x: float) -> str:
    """A decade bucket of a distance/tolerance ratio, for the run's statistics."""
    return "inf" if not np.isfinite(x) else "0" if x <= 0 else f"1e{int(np.floor(np.log10(x)))}"


def report(agreements) -> str:
    return "\n".join(f"  {'ok ' if a.agrees else 'BAD'} {a}" for a in agreements)


@pytest.mark.theorem("Theorem 1")
@pytest.mark.heavy(seconds=614)
@settings(max_examples=scaled(20))
@given(dp=trainable_problems())
def test_continuation_agrees_with_gd_and_catches_planted_defects(dp):
    p = dp.problem
    an = analyze(p)
    note_problem(p, an)
    if an.finite is None:
        not_judged("no W^fin")  # the finite error is undefined; Theorem 1's verdict is not run either
    gd, cont, start = runs(p, an)
    assert all(engine_of(c) == "gd" for c in cont.checkpoints if c.step <= START)
    assert all(engine_of(c) == "continuation" for c in cont.checkpoints if c.step > START)
    got = compare(gd, cont, an, BUDGET)
    bad = [a for a in got if not a.agrees]
    assert not bad, f"continuation and GD disagree beyond the derived tolerance:\n{report(got)}\nproblem file: {describe(p)}"
    worst = max(a.excess for a in got)
    margin("continuation distance over tolerance", "valid", worst)
    event(f"valid: worst distance/tolerance {bucket(worst)}")
    honest = bounds_of(cont)
    for name, plant in PLANTS.items():
        try:
            wrong = continue_flow(p, start, BUDGET, an, **plant)
        except FloatingPointError:  # the integrator stalled on the planted path: no run to stand in for GD
            event(f"'{name}' caught: the integrator stalled")
            continue
        caught = [a for a in compare(gd, wrong, an, BUDGET, bounds=honest) if not a.agrees]
        assert caught, f"planted '{name}' agrees with GD within the tolerance:\n" \
                       f"{report(compare(gd, wrong, an, BUDGET, bounds=honest))}\nproblem file: {describe(p)}"
        margin("continuation distance over tolerance", "planted", max(a.excess for a in caught))
        event(f"'{name}': largest distance/tolerance {bucket(max(a.excess for a in caught))}")
        event(f"'{name}' caught by: {', '.join(sorted(a.name.split(' at step')[0] for a in caught))}")


SLOW = "examples/theorem1_slow_direction.json"
# Issue 37: the increment's tan θ at 10^6 .. 10^12 steps (LSODA from GD's state at 10^5).
ISSUE_TAN = [0.206, 0.189, 0.174, 0.159, 0.147, 0.135, 0.125]


def _tan(traj, an, budget):
    _, m = criteria.theorem1_statistics(truncate(traj, budget), an)
    inc = m["incremental_correlation"]
    return float(np.sqrt(1 / inc**2 - 1))


@pytest.mark.theorem("Theorem 1")
def test_slow_direction_regression_to_1e12_steps():
    """The stress-found slow case: the continuation matches GD at 10^6 and 10^7 within the derived tolerance
    (issue 37: relative 7.4e-8 and 1.3e-8 in W), reaches 10^12 steps in a few hundred evaluations, and the
    increment's tan θ keeps falling decade after decade (0.206 .. 0.125)."""
    p = Problem.load(SLOW)
    an = analyze(p)
    gd, cont, start = runs(p, an, 10**7)
    for budget in (10**6, 10**7):
        got = compare(gd, cont, an, budget)
        assert all(a.agrees for a in got), f"at {budget} steps:\n{report(got)}"
    at = {c.step: c for c in gd.checkpoints}
    rel = {s: float(np.linalg.norm(c.W - at[s].W) / c.norm) for c in cont.checkpoints if (s := c.step) in (10**6, 10**7)}
    assert rel[10**6] < 2e-7 and rel[10**7] < 5e-8, rel  # issue: 7.4e-8, 1.3e-8

    far = continue_flow(p, start, 10**12, an)
    assert far.final.step == 10**12 and far.nfev < 1000, (far.final.step, far.nfev)
    tans = [_tan(far, an, 10**e) for e in range(6, 13)]
    assert all(b < a for a, b in zip(tans, tans[1:])), tans
    assert np.allclose(tans, ISSUE_TAN, atol=1.5e-3), tans
    # The W^svm coefficient gains about the same every decade (1.47-1.51: logarithmic growth).
    gains = [criteria.theorem1_statistics(truncate(far, 10**e), an)[1]["growth"] for e in range(6, 13)]
    assert 1.4 < min(gains) and max(gains) < 1.6, gains


@pytest.mark.theorem("Theorem 1")
@pytest.mark.parametrize("name", list(PLANTS))
def test_planted_defects_are_caught_on_the_regression_case(name):
    """Explicit examples of the plants: each disagrees on W and on at least one verdict statistic."""
    p = Problem.load(SLOW)
    an = analyze(p)
    gd, cont, start = runs(p, an)
    wrong = continue_flow(p, start, BUDGET, an, **PLANTS[name])
    got = compare(gd, wrong, an, BUDGET, bounds=bounds_of(cont))
    caught = {a.name.split(" at step")[0] for a in got if not a.agrees}
    assert "W" in caught and caught - {"W"}, report(got)


def test_continuation_refuses_what_it_does_not_integrate():
    p = Problem.load(SLOW)
    eta = safe_step(p)
    with pytest.raises(NotImplementedError):
        continue_flow(p, train(p, 10, eta, normalized=True), 100)
    with pytest.raises(ValueError):
        continue_flow(p, train(p, 0, eta), 100)


DEGENERATE = "examples/theorem1_degenerate_correlation_dip.json"


def _degenerate_start():
    """The degenerate case from the start its Theorem 1 regression test uses (0.1 N(0, 1), seed 0), GD to its budget."""
    p = Problem.load(DEGENERATE)
    an = analyze(p)
    eta = safe_step(p)
    W0 = 0.1 * np.random.default_rng(0).normal(size=(p.d, p.d))
    return p, an, train(p, criteria.run_budget(an, eta, W0)[0], eta, W0=W0, analysis=an)


@pytest.mark.theorem("Theorem 1")
def test_a_decade_that_stalls_lsoda_is_solved_by_bdf(monkeypatch):
    """Measured once: from GD's state at 1.6e5 steps LSODA took 50000 evaluations without leaving 1.61e6
    (continuation.SEGMENT_EVALS), on the numpy right-hand side, whose rounding noise is above the assumed
    ``eps t`` floor.  With the noise measured (:func:`theory.li2024.continuation.noise_atol`'s ``measured``)
    LSODA itself finishes on the numpy right-hand side (measured: 597 evaluations to 1.6e7; 682 on another
    machine) and agrees with discrete GD at 1.6e6 within the derived tolerance, on W and every statistic; so
    does the compiled one (:mod:`theory.li2024.flow_kernel`, another order of the same operations).

    A stall is then planted, since whether LSODA stalls without the measured noise depends on the machine's
    rounding (it did not on an AMD EPYC with the same numpy): LSODA's cap cut to 50 evaluations a decade.
    The decade is solved again by BDF, and the result still agrees with GD within the same tolerance."""
    from theory.li2024 import continuation

    p, an, start = _degenerate_start()
    tau1 = start.final.step
    gd = resume(p, start, 10 * tau1, analysis=an)
    steps = [c.step for c in gd.checkpoints if c.step > tau1] + [100 * tau1]
    measured = continue_flow(p, start, 100 * tau1, an, estimate_error=True, checkpoints=steps, compiled=False)
    assert measured.method == "LSODA" and measured.final.step == 100 * tau1, (measured.method, measured.final.step)
    got = compare(gd, measured, an, 10 * tau1)
    assert all(a.agrees for a in got), report(got)
    fast = continue_flow(p, start, 100 * tau1, an, estimate_error=True, checkpoints=steps)
    got = compare(gd, fast, an, 10 * tau1)
    assert fast.final.step == 100 * tau1 and all(a.agrees for a in got), (fast.method, report(got))
    monkeypatch.setattr(continuation, "SEGMENT_EVALS", 50)
    cont = continue_flow(p, start, 100 * tau1, an, estimate_error=True, checkpoints=steps, compiled=False)
    assert "BDF" in cont.method and cont.final.step == 100 * tau1, (cont.method, cont.final.step)
    got = compare(gd, cont, an, 10 * tau1)
    assert all(a.agrees for a in got), report(got)


@pytest.mark.theorem("Theorem 1")
def test_a_continuation_that_fails_ends_the_decision_at_the_budget_before(monkeypatch):
    """A continuation that fails past GD's budget (its integrator stalls: caps shrunk here so that it does)
    does not crash the decision: the ladder ends at the budget before, undecided there, and says why."""
    from theory.li2024 import continuation
    from theory.li2024.continuation import Escalation

    p = Problem.load("examples/theorem1_direction_transient_peak.json")
    an = analyze(p)
    eta = safe_step(p)
    traj = train(p, criteria.budget(an.svm.norm, eta), eta, analysis=an)
    esc = Escalation(p, an)
    assert esc.check(traj)[0]  # the validity check passes with the real caps
    monkeypatch.setattr(continuation, "SEGMENT_EVALS", 5)
    monkeypatch.setattr(continuation, "FALLBACK_EVALS", 5)
    v, run = criteria.theorem1_decide(traj, an, esc)
    assert v.outcome is criteria.Outcome.UNDECIDED and v.budget == traj.final.step, v
    assert "failed" in v.measures["continuation_failed"] and run.final.step == traj.final.step, v.measures


@pytest.mark.theorem("Theorem 1")
def test_budgets_before_a_failed_decade_come_from_the_one_solve_to_the_top(monkeypatch):
    """The escalation solves once to the ladder's top and cuts every budget from it.  Where that solve fails
    in a later decade, the budgets before it are still cut from it (not solved again), and a budget past
    it is tried once more on its own (its last segment ends earlier) before it raises
    :class:`ContinuationFailed`."""
    from theory.li2024 import continuation
    from theory.li2024.continuation import ContinuationFailed, Escalation

    p = Problem.load("examples/theorem1_direction_transient_peak.json")
    an = analyze(p)
    eta = safe_step(p)
    traj = train(p, criteria.budget(an.svm.norm, eta), eta, analysis=an)
    tau1 = int(traj.final.step)
    esc = Escalation(p, an)
    assert esc.check(traj)[0]
    plant_stall_past(monkeypatch, 100 * tau1, eta)
    solves = []
    real = continuation.continue_flow
    monkeypatch.setattr(continuation, "continue_flow",
                        lambda *a, **kw: solves.append(a[2]) or real(*a, **kw))
    run = esc(traj, 100 * tau1)
    assert run.final.step == 100 * tau1 and engine_of(run.final) == "continuation", run.final
    assert esc(traj, 10 * tau1).final.step == 10 * tau1
    assert len(solves) == 1, solves
    with pytest.raises(ContinuationFailed, match="planted stall"):
        esc(traj, 1000 * tau1)
    assert solves[1:] == [1000 * tau1], solves


@given(steps=st.integers(1, 2**62),
       per_decade=st.integers(1, 16))
def test_log_checkpoints_end_at_the_last_step(steps, per_decade):
    """The continuation's checkpoints (``log_checkpoints``) at every budget its ladder reaches, 2e17 in extended
    precision and beyond: sorted, distinct, from 0 to ``steps`` and none past it, with distinct ``ln τ`` (the
    solver refuses a repeated time).  Past 2^53 logspace's last point used to round above ``steps``
    (20000000000000004 for 2e16), a checkpoint after the last with the same ``ln τ``, and the extended ladder's
    solve to 2e16 failed on it; a deep run then found it one *below* the last (769891656313798 for
    769891656313799, per_decade = 1), distinct but with the same ``ln τ``."""
    cps = log_checkpoints(steps, per_decade)
    assert cps[0] == 0 and cps[-1] == steps, cps[-3:]
    assert np.all(np.diff(cps) > 0), cps
    assert np.all(np.diff(np.log(cps[1:].astype(float))) > 0), cps[-3:]
