"""GD's modified equation (:mod:`theory.li2024.modified_flow`) stands in for GD within its bound: measured.

The second-order continuation integrates ``dW/dt = -g - (η/2) H g`` and bounds GD's distance to it by Grönwall
on the next local error, ``dD̃/dt = μ D̃ + η² (||d(H g)/dt|| / 4 + ||H² g|| / 2)`` (the module docstring's
derivation; first order in ``D̃``, as the first-order bound is).  On problems drawn from Section 5's whole
stated domain GD runs to ``BUDGET``; from its state at ``START`` both GD and the second-order continuation go
on, and at every checkpoint ``||W_GD - W|| <= D̃`` (plus the measured integration error and GD's rounding).
Planted defects of the correction (none, the wrong sign, twice it) must leave that bound wherever GD's
first-order deviation from the plain flow is large enough to see.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings

from properties.helpers import describe, note_problem
from properties.li2024.runs import distances_to_gd, over_bound, section5_problems, section5_span, without_path_bound
from properties.judging import margin, not_judged, scaled
from theory.core.problem import Problem
from theory.li2024 import local_convergence as lc
from theory.li2024.continuation import bounds_of, continue_flow
from theory.li2024.local_continuation import SECOND_ORDER, agreement
from theory.li2024.provenance import engine_of
from theory.li2024.training import truncate

START, BUDGET = 20_000, 200_000
PLANTS = {"no correction": {"correction": 0.0}, "the wrong sign": {"correction": -0.5},
          "twice the correction": {"correction": 1.0}}

@pytest.mark.slow
@pytest.mark.theorem("Section 5")
@settings(max_examples=scaled(12), deadline=None)
@given(p=section5_problems())
def test_gd_stays_within_the_second_order_bound_of_its_modified_equation(p):
    note_problem(p)
    gd, start, steps = section5_span(p, START, BUDGET)
    try:
        cont = continue_flow(p, start, BUDGET, checkpoints=steps, estimate_error=True, order=2)
    except FloatingPointError as exc:
        event(f"the second-order continuation failed: {str(exc)[:40]}")
        not_judged("the second-order continuation's integrator failed")
    honest = bounds_of(cont)
    worst = over_bound(distances_to_gd(gd, cont), honest)
    assert worst <= 1.0, (f"GD left the second-order continuation's bound: |ΔW|/D̃ = {worst:.3g} ({p.loss} loss)\n"
                          f"problem file: {describe(p)}")
    margin("section 5 second-order distance over bound", "valid", worst)
    event(f"{p.loss} loss, head biorthogonal={p.assumptions()['head_biorthogonal']}")
    # A plant of the correction moves the path by GD's first-order deviation from the plain flow (half of it,
    # all of it, half of it): seen only where that deviation stands clear of the honest bound.
    plain = distances_to_gd(gd, continue_flow(p, start, BUDGET, checkpoints=steps))
    if max(plain.values()) < 10 * max(honest[k] for k in plain):
        event("plants not checked: GD's first-order deviation is within 10x the second-order bound")
        return
    for name, plant in PLANTS.items():
        try:
            wrong = continue_flow(p, start, BUDGET, checkpoints=steps, order=2, **plant)
        except FloatingPointError:
            event(f"'{name}' caught: the integrator stalled")
            continue
        caught = over_bound(distances_to_gd(gd, wrong), honest)
        assert caught > 1.0, f"planted '{name}' stays within the bound ({caught:.3g})\nproblem file: {describe(p)}"
        margin("section 5 second-order distance over bound", "planted", caught)


TRANSIT = "examples/section5_counterexample.json"


@pytest.mark.theorem("Section 5")
def test_the_second_order_bound_holds_through_a_change_of_selection():
    """The transit regression case changes selection between 2e6 and 1e7 steps.  From GD's state at 2e5, GD to
    1e7 must stay within the second-order bound at every checkpoint (measured: at most 0.70 of it), which
    must stay at least 100 times tighter than the first-order ``D`` through the change (measured: ``D``
    4.5e-3, ``D̃`` 1.2e-5 with GD's rounding, at 1e7), and the planted corrections must leave it (measured:
    61-124 times)."""
    p = Problem.load(TRANSIT)
    gd, _ = lc.train_section5(p, 10**7)
    start = truncate(gd, 200_000)
    steps = [c.step for c in gd.checkpoints if c.step > start.final.step]
    first = bounds_of(continue_flow(p, start, 10**7, checkpoints=steps, estimate_error=True))
    second = continue_flow(p, start, 10**7, checkpoints=steps, estimate_error=True, order=2)
    honest = bounds_of(second)
    assert over_bound(distances_to_gd(gd, second), honest) <= 1.0
    assert honest[10**7] * 100 <= first[10**7], (honest[10**7], first[10**7])
    for name, plant in PLANTS.items():
        wrong = continue_flow(p, start, 10**7, checkpoints=steps, order=2, **plant)
        assert over_bound(distances_to_gd(gd, wrong), honest) > 10, name


@pytest.mark.theorem("Section 5")
@pytest.mark.parametrize("name", list(PLANTS))
def test_the_decisions_check_refuses_a_planted_correction(name):
    """A verdict uses the second-order continuation only where its bound held over GD's own last decade on the
    problem (:func:`theory.li2024.local_continuation.agreement` with ``order=2``): every planted correction
    fails that check, the honest one passes it."""
    p = Problem.load(TRANSIT)
    gd, _ = lc.train_section5(p, 200_000)
    honest, _ = agreement(p, gd, variant=SECOND_ORDER)
    wrong, where = agreement(p, gd, plant=PLANTS[name], variant=SECOND_ORDER)
    assert honest <= 1.0 < wrong, (honest, wrong, where)


LATE_TRANSIT = "examples/section5_ambiguous_after_late_transit.json"
SQUARE_LATE = "examples/section5_square_misaligned_after_late_transit.json"


SQUARE_TREND = "examples/section5_square_trend_within_bound.json"


@pytest.mark.theorem("Section 5")
@pytest.mark.parametrize("name, outcome", [(LATE_TRANSIT, "aligned"), (SQUARE_LATE, "not aligned")])
def test_what_the_first_order_bound_leaves_undecided_is_decided_through_the_second_order(monkeypatch, name, outcome):
    """Two draws of fresh stress seeds the first-order continuation leaves undecided at 2e12: a ce draw
    (``D`` = 69 from 2e8 on) and a square-loss one (``D`` = 2.7) with an ambiguous token within the bound
    after a late change of selection.  The first order alone must leave them so; through the second order the
    ce draw is aligned and the square-loss one a settled misalignment (γ = 1 over the last decade) that the
    independent computation (``oracles/flow.py``) confirms, with a deviation at the verdict's budget at least
    ten times below the first order's there (measured: 0.083 against 69 at 2e10, 0.023 against 2.7 at 2e12;
    both carry the right-hand side's rounding, ``||E||² sqrt(n) eps t`` of the size of the tolerance floor).
    The first order's path bound (:mod:`theory.li2024.shadowing`, tried before the second order) is left out
    here: it decides the ce draw itself (``test_shadowing.py``)."""
    from theory.li2024.claims import independent_misalignment
    from theory.li2024.provenance import deviation_from_exact

    p = Problem.load(name)
    theory_problem = p.replace(head=None, loss="log")
    without_path_bound(monkeypatch)
    with monkeypatch.context() as mp:
        mp.setattr(lc, "_second_order", lambda *args: args[-1])
        undecided, why, _ = lc.verdict(p, theory_problem)
    assert undecided == "not judged" and "within the continuation's bound" in why, why
    decided, why, r = lc.verdict(p, theory_problem)
    assert decided == outcome and "second-order continuation" in why, why
    assert r["engine"] == "continuation, second order", r["engine"]
    run, steps = r["traj"], r["steps"]
    second = deviation_from_exact(truncate(run, steps).final)
    first = deviation_from_exact(continue_flow(p, truncate(run, run.continued_from), steps, checkpoints=[steps]).final)
    assert second * 10 <= first, (second, first)
    if outcome == "not aligned":
        confirmed, reading = independent_misalignment(p, r["eta"])
        assert confirmed, reading


@pytest.mark.theorem("Section 5")
def test_a_trend_the_linear_bound_blurred_is_read_through_the_continuation():
    """A square-loss draw of a fresh stress seed whose trend over the last decade, read over every ``W`` within
    the first-order bound solved in its linear form (where that stalled, over its accepted states: ``D`` = 11
    at 2e11), looked flat (rates [5.87, 6.55] at 2e11 and [6.30, 7.61] at 2e12, γ -0.34).  With the bound
    solved in ``ln D`` the settled misalignment is read through the continuation: not aligned by the trend
    (nominal rates 6.21, 6.95), which the independent computation (``oracles/flow.py``) confirms.

    Which order reads it depends on the machine: the bound's forcing carries the right-hand side's *measured*
    rounding, and that differs between machines with the same numpy (2.4.6).  Measured: ``D`` 0.70 at 2e12
    on the machine of the session that solved it in ``ln D``, where the first order decides (γ 0.93); 1.39 on
    an AMD EPYC (AVX2), where the first order's trend within its bound is 0.588, short of the reject line, and
    the second order decides (γ 0.778).  With the noise the largest of 8 samples a decade
    (``_Flow.rounding_noise``) the float64 passes stay short on that machine, and the extended-precision pass
    decides."""
    from theory.li2024.claims import independent_misalignment

    p = Problem.load(SQUARE_TREND)
    outcome, why, r = lc.verdict(p, p.replace(head=None, loss="log"))
    assert outcome == "not aligned" and "trend γ" in why, why
    assert r["engine"] in ("continuation", "continuation, second order", "continuation, extended precision"), \
        r["engine"]
    confirmed, reading = independent_misalignment(p, r["eta"])
    assert confirmed, reading


@pytest.mark.theorem("Section 5")
def test_the_forcings_derivative_does_not_depend_on_its_difference_step(monkeypatch):
    """``d(H g)/dt`` is a central difference along the flow's velocity: on the late-transit draw, at GD's state
    and in the middle of its change of selection, the forcing must be the same to 1% with the step ten
    times larger or smaller (a derivative read off rounding, or off a step too long for the curvature, would
    move with it)."""
    from theory.li2024 import modified_flow
    from theory.li2024.continuation import _Flow, _gd_part

    p = Problem.load(LATE_TRANSIT)
    _, _, r = lc.verdict(p, p.replace(head=None, loss="log"))
    gd = _gd_part(r["traj"])
    flow = _Flow(p, gd.final.W, gd.eta, order=2)
    run = continue_flow(p, gd, 10**8, checkpoints=[10**8], order=2)
    B = np.linalg.pinv(p.E.T) @ (gd.final.W - run.final.W) @ np.linalg.pinv(p.E)
    states = [np.zeros(flow.n + 1), np.r_[B[:, flow.Q].ravel(), 0.0]]
    for y in states:
        F, _, dG, Hq = modified_flow.modified_field(flow, y)
        values = []
        for step in (1e-7, 1e-6, 1e-5):
            monkeypatch.setattr(modified_flow, "FD_SCORE_STEP", step)
            values.append(modified_flow.forcing(flow, y, F, dG, Hq))
        assert values[1] > 0 and max(values) <= 1.01 * min(values), values


@pytest.mark.theorem("Section 5")
@pytest.mark.parametrize("tau", [10**6, 10**8])
def test_the_forcings_derivative_is_the_change_of_h_g_along_the_solved_path(tau):
    """``||d(H g)/dt||`` (a central difference in the state along the velocity) against ``H g``'s own change
    between two states the integrator reached, ``τ`` and ``τ (1 + 1e-3)`` steps-equivalent apart, on the
    late-transit draw (before its change of selection and in its middle): the quotient must match the
    derivative at the two ends' mean to 1% (measured: 1e-6 and 4e-5; their difference is first order in the
    span, 1e-3 of it).  And the derivative's share of the forcing, ``||d(H g)/dt|| / 4``, must be at least a
    quarter of ``||H² g|| / 2`` there (measured: 0.99 and 0.94 of it): leaving it out halves the bound."""
    from theory.li2024 import modified_flow
    from theory.li2024.continuation import _Flow, _gd_part
    from theory.li2024.training import grad_norm_scores

    p = Problem.load(LATE_TRANSIT)
    _, _, r = lc.verdict(p, p.replace(head=None, loss="log"))
    gd = _gd_part(r["traj"])
    flow = _Flow(p, gd.final.W, gd.eta, order=2)
    later = tau + tau // 1000
    run = continue_flow(p, gd, later, checkpoints=[tau, later], order=2)
    at = {c.step: c for c in run.checkpoints}
    fields, terms = [], []
    for step in (tau, later):
        B = np.linalg.pinv(p.E.T) @ (gd.final.W - at[step].W) @ np.linalg.pinv(p.E)
        y = np.r_[B[:, flow.Q].ravel(), 0.0]
        F, _, dG, Hq = modified_flow.modified_field(flow, y)
        fields.append(dG)
        terms.append(modified_flow.forcing_terms(flow, y, F, dG, Hq))
    quotient = grad_norm_scores(fields[1] - fields[0], p.gram) / (gd.eta * (later - tau))
    derivative = 0.5 * (terms[0][0] + terms[1][0])
    assert abs(quotient - derivative) <= 0.01 * derivative, (quotient, derivative)
    assert all(dHg / 4 >= 0.25 * H2g / 2 for dHg, H2g in terms), terms


@pytest.mark.theorem("Section 5")
@pytest.mark.parametrize("name, status, verdict, by", [
    (LATE_TRANSIT, 0, "holds", "with the path bound"), (SQUARE_LATE, 1, "fails", "second-order continuation")])
def test_check_decides_a_late_change_of_selection(capsys, name, status, verdict, by):
    """``tpg check`` on the two late-transit draws (undecided with Grönwall's first-order bound alone): the ce
    draw holds, the square-loss draw fails with the independent computation's confirmation, and each reason
    names the bound that decided it (the ce draw: the first order's path bound, :mod:`theory.li2024.shadowing`;
    the square-loss draw: GD's modified equation, :mod:`theory.li2024.modified_flow`).

    The square-loss draw's path bound at 2e12 depends on the integrator's steps: its quadrature runs over the
    solve's accepted states, and its candidates' minimum switches with them.  Measured with four right-hand
    sides and Jacobians equal to rounding (the compiled kernels before and after they were rewritten as loops,
    each Jacobian compiled or numpy): 0.0726, 0.158, 0.162 and 0.205.  Only the smallest decides (trend γ 0.675
    within it against the reject line 0.65); with the compiled kernels of now it is 0.162 (γ -0.255 within it,
    undecided), and the second order decides (trend γ 0.876; the independent computation's γ 1)."""
    import json

    from theory.run.cli import main

    rc = main(["check", name, "--claim", "li2024.section5"])
    d = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (rc, d["verdict"]) == (status, verdict), d["reason"]
    assert by in d["reason"], d["reason"]


@pytest.mark.theorem("Section 5")
def test_the_bound_carries_the_rounding_of_b(monkeypatch):
    """The late-transit ce draw from GD's state at 2e4 to 2e7 steps: GD stays within the second-order bound
    without the float engine's rounding charge (its rounding is below 3e-10 here: a solve at rtol 1e-12 is
    within that of it), but only with the continuation's own rounding of ``B``: at 2e7 the distance is 6.7e-8
    against 2.6e-8 for ``D̃`` forced by the local error alone plus the estimated integration error (the
    estimate's second solve shares ``B``'s tolerance floor, ``||E||² sqrt(n) eps t`` = 1.6e-7 there, and its
    rounding).  The bound carries both (``rounding_floor``, and ``D̃``'s forcing by the right-hand side's
    rounding): GD must be within it at every checkpoint, and outside ``D̃`` plus the error without them."""
    from theory.li2024 import continuation
    from theory.li2024.provenance import deviation_from_exact

    p = Problem.load(LATE_TRANSIT)
    gd, _ = lc.train_section5(p, 2 * 10**7)
    start = truncate(gd, START)
    steps = [c.step for c in gd.checkpoints if c.step > START]
    run = continue_flow(p, start, 2 * 10**7, checkpoints=steps, estimate_error=True, order=2)
    dist = distances_to_gd(gd, run)
    at = {c.step: c for c in run.checkpoints if engine_of(c) != "gd"}
    assert all(dist[k] <= deviation_from_exact(at[k]) for k in dist), \
        [(k, dist[k], deviation_from_exact(at[k])) for k in dist if dist[k] > deviation_from_exact(at[k])]
    monkeypatch.setattr(continuation._Flow, "rounding_forcing", lambda self, s: 0.0)
    bare = continue_flow(p, start, 2 * 10**7, checkpoints=[2 * 10**7], estimate_error=True, order=2).final
    assert dist[2 * 10**7] > bare.gd_deviation_bound + bare.integration_error, (dist[2 * 10**7], bare)
