"""Theorem 1 (Li et al. 2024): GD on the log loss under Assumptions 1-2.

``Π_{S_fin} W(τ) -> W^fin`` and ``W(τ)/||W(τ)|| -> W^svm/||W^svm||``; when ``W^svm = 0``, GD converges to a
finite minimizer.  Judged on a finite budget by :mod:`theory.li2024.criteria` (rate-aware; the budget is
``10^4`` time units ``τ₀ = ||W^svm||²/η``), and calibrated here: the same criterion must reject the
same trajectories when the target is wrong.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from properties.helpers import assert_close, assert_verdict, describe, note_problem
from properties.judging import aim, margin, not_judged, scaled
from reports.record import record_metrics
from strategies import trainable_problems
from theory.li2024 import criteria
from theory.li2024.analysis import analyze
from theory.li2024.losses import safe_step
from theory.core.problem import Problem
from theory.core.decision import budget_ladder
from theory.li2024.continuation import CONTINUE_MAX_STEPS, Escalation, engine_of
from theory.li2024.training import resume, train, truncate
from properties.li2024.runs import independent_theorem1, initial_weights, run_theorem1, step_fractions, theorem_problems
from theory.li2024.plants import wrong_direction

zero_problems = trainable_problems(shapes=("svm_zero",))


def extender(problem, an, recorded=None):
    """``extend(run, steps)`` for the decisions, as the claims escalate (:func:`theory.li2024.claims._extend`):
    past GD's budget through the log-time continuation once it agreed with GD over GD's last decade, up to
    10^12 steps-equivalent, on GD otherwise; with ``recorded`` (the same run extended already), its
    checkpoints up to ``steps`` where it reaches."""
    return Escalation(problem, an, recorded=recorded)


def gd_extender(problem, an, recorded=None):
    """GD only (``resume``), as the decisions escalated before the continuation: the stalled-run plant is
    built on a GD run and judged within it."""
    def extend(run, steps):
        if recorded is not None and recorded.final.step >= steps:
            return truncate(recorded, steps)
        return resume(problem, run, steps, analysis=an)
    return extend


def stalled(traj, at):
    """The run as if GD had stopped at step ``at``: every later checkpoint holds ``W(at)`` (a finite limit)."""
    from dataclasses import replace

    hold = criteria._at(traj, at)
    return replace(traj, checkpoints=[c if c.step <= hold.step else replace(hold, step=c.step)
                                      for c in traj.checkpoints])


def _final_replay() -> bool:
    """Whether this is the example Hypothesis reports (its final replay), or no Hypothesis test at all."""
    from hypothesis.control import current_build_context
    from hypothesis.errors import InvalidArgument

    try:
        return bool(current_build_context().is_final)
    except InvalidArgument:
        return True


def judge_or_count(verdict, problem, what: str, *, eta: float | None = None, W0=None) -> None:
    """Holds: passes; fails: the assertion, with the verdict, the independent computation's reading of it
    (where ``eta`` is given: :func:`properties.li2024.runs.independent_theorem1`) and the problem file;
    undecided at the maximum budget: counted as not judged under its own reason (the judged-share floor
    bounds how often)."""
    if verdict.outcome is criteria.Outcome.UNDECIDED:
        not_judged("undecided at the maximum budget")
    if verdict.outcome is criteria.Outcome.FAILS and eta is not None and _final_replay():
        # seconds a reading: only on the example Hypothesis reports, not on every failing one it shrinks through
        what = f"{what} ({independent_theorem1(problem, verdict, eta, W0)})"
    assert_verdict(verdict, problem, what)


def record_margins(verdict, side: str, only=("direction", "finite", "growth")) -> None:
    """The statistics the decision's reject zones test, for the margins table (benchmarks/margins.py):
    the direction's trend γ (escalated runs), the finite error's decade ratio, the growth ratio's log
    distance to 1."""
    m = verdict.measures
    trends = criteria.deciding_trends(verdict)
    if "direction" in only and trends:
        # the valid side's worst is the largest such γ over the escalation, the planted side's the one decided on
        margin("theorem1 direction trend γ", side, max(trends) if side == "valid" else trends[-1])
    if "finite" in only and m["finite_error"] > criteria.FINITE_FLOOR and m["finite_error_prev"] > 0:
        margin("theorem1 finite error decade ratio", side, m["finite_error"] / m["finite_error_prev"])
    if "growth" in only and 0 < m["growth_ratio"] < float("inf"):
        margin("theorem1 growth |ln ratio|", side, abs(np.log(m["growth_ratio"])))


# Judged share of generated examples, ci profile (derandomized): 78-89% (the rest: draws the problem
# strategy rejects, and 1 nearly-collinear draw whose budget exceeds MAX_STEPS).  The floor leaves room
# for the random profiles' spread; a fall below it means the strategy or the budget rule changed.
JUDGED_FLOOR = 0.6


@pytest.mark.theorem("Theorem 1")
@pytest.mark.judged(floor=JUDGED_FLOOR)
@pytest.mark.heavy(seconds=211)
@given(data=st.data(), fraction=step_fractions)
def test_gd_log_loss_converges_to_svm_direction_and_finite_part(data, fraction):
    dp = data.draw(theorem_problems, label="problem")
    p = dp.problem
    W0 = data.draw(initial_weights(p.d), label="W0")
    an, traj = run_theorem1(p, W0, fraction, beyond_gd=True)
    note_problem(p, an)
    assert an.svm.norm > 0, f"strategy promised a ⇒ edge: {describe(p)}"
    verdict, traj = criteria.theorem1_decide(traj, an, extender(p, an))
    event(f"budgets used={len(verdict.history)}")
    for label, score in criteria.theorem1_edges(verdict).items():
        aim(f"theorem1 {label}", score, describe(p))
    record_margins(verdict, "valid")
    judge_or_count(verdict, p, "Theorem 1 (GD, log loss)", eta=traj.eta, W0=W0)


# W^svm = 0: GD converges to W^fin like e^{-t/τ}, τ = 1 / (η λ_min) with λ_min the smallest curvature of
# L̃ on S_fin at W^fin.  The criterion's decade ratio (theory.li2024.criteria.finite_convergence) is
# (e^{-x/10} - e^{-x}) / (e^{-x/100} - e^{-x/10}) at budget T = x τ: 0.69 at x = 10, 0.51 at x = 12, 0.07 at
# x = 30.  Stress found both x = 12 cases (seeds 1769151185 and 72702926: λ_min = 8.7e-5 and 4.3e-5, τ =
# 8.2e3 and 8.2e4 steps, ratios 0.503 at 1e5 and 0.5036 at 1e6 steps).  The budget is therefore at least
# FINITE_TAU_BUDGET τ; runs whose budget would pass the escalation cap are counted, not judged.
FINITE_TAU_BUDGET = criteria.FINITE_RELAXATIONS


@pytest.mark.theorem("Theorem 1")
@pytest.mark.judged(floor=JUDGED_FLOOR)
@pytest.mark.heavy(seconds=168)
@given(data=st.data(), fraction=step_fractions)
def test_gd_converges_to_finite_minimizer_when_svm_is_zero(data, fraction):
    p = data.draw(zero_problems, label="problem").problem
    W0 = data.draw(initial_weights(p.d), label="W0")
    an = analyze(p, bound=True)
    note_problem(p, an)
    assert an.svm.norm == 0
    eta = fraction * safe_step(p)
    lam = an.finite.min_curvature
    tau = 1.0 / (eta * lam) if lam else 0.0
    steps = max(criteria.MIN_STEPS, int(np.ceil(FINITE_TAU_BUDGET * tau)))
    if steps > criteria.ESCALATE_MAX_STEPS:
        not_judged(f"{FINITE_TAU_BUDGET} convergence time constants exceed the step cap")
    event(f"budget from the time constant={steps > criteria.MIN_STEPS}")
    traj = train(p, steps, eta, W0=W0, analysis=an)
    verdict, traj = criteria.finite_convergence_decide(traj, extender(p, an))
    event(f"budgets used={len(verdict.history)}")
    judge_or_count(verdict, p, "W^svm = 0: GD converges", eta=eta, W0=W0)
    # With no ⇒ edge L̃ = L, so the finite limit's S_fin part is W^fin itself; the part of W(0) that GD
    # never touches (outside the span of the gradients) stays as it was.
    assert_close(an.space.project(traj.final.W), an.finite.W, 1e-5, "Π_S W(τ) vs W^fin", p)


@pytest.mark.theorem("Theorem 1")
@pytest.mark.judged(floor=JUDGED_FLOOR)
@pytest.mark.heavy(seconds=381)
@given(data=st.data())
def test_criterion_rejects_a_wrong_target(data):
    """Calibration: the trajectories the criterion accepts are rejected against a target direction 35°
    away from W^svm (same norm), or against a W^fin moved inside S_fin by 0.2 max(1, ||W^fin||).  (35°: the
    direction converges like 1/log τ, and the budget resolves 15-20° in the worst valid cases.  The move is
    in the finite criterion's own unit, FINITE_MAX max(1, ||W^fin||), four of them: a fixed 0.2 was 4.6% of a
    W^fin of norm 4.34, inside the 5% bound, and its stall was resolved only at a third budget the run did
    not have (deep run, seed 2734502900: 0.2149 then 0.2001 at 4.6e5 and 4.6e6 steps, undecided).)

    The true target is decided as the property decides it (:func:`theory.li2024.criteria.theorem1_decide`),
    and the wrong targets by the same procedure on the same runs (one escalation, whose continuation and GD
    runs serve every target, validated against the truth): they must be *rejected* (confirmed at two
    budgets), not merely left undecided."""
    from dataclasses import replace

    dp = data.draw(theorem_problems, label="problem")
    p = dp.problem
    W0 = data.draw(initial_weights(p.d), label="W0")
    an, traj = run_theorem1(p, W0, 1.0, beyond_gd=True)
    if len(budget_ladder(int(traj.final.step), CONTINUE_MAX_STEPS)) < 2:
        not_judged("no second budget past 10^4 time units (a rejection needs two)")
    esc = extender(p, an)  # the wrong targets are decided on the truth's runs: the escalation keeps each once
    truth, _ = criteria.theorem1_decide(traj, an, esc)
    if truth.outcome is criteria.Outcome.UNDECIDED:
        not_judged("truth undecided at the maximum budget")
    assert truth.passed, f"precondition: the true target holds: {truth}\nproblem file: {describe(p)}"
    event(f"budgets the truth used={len(truth.history)}")

    def verdict(target):
        return criteria.theorem1_decide(traj, target, esc)[0]

    wrong_svm = replace(an.svm, W=an.svm.norm * wrong_direction(an, 35.0, data.draw(st.integers(0, 99), label="seed")))
    v = verdict(replace(an, svm=wrong_svm))
    record_margins(v, "planted", only=("direction",))
    assert v.outcome is criteria.Outcome.FAILS, f"criterion did not reject a direction 35° off W^svm: {v}\nproblem file: {describe(p)}"
    if an.space.dim:
        size = 4 * criteria.FINITE_MAX * max(1.0, float(np.linalg.norm(an.finite.W)))
        shift = an.space.compose(np.ones(an.space.dim) / np.sqrt(an.space.dim)) * size
        wrong_fin = replace(an.finite, W=an.finite.W + shift)
        v = verdict(replace(an, finite=wrong_fin))
        record_margins(v, "planted", only=("finite",))
        assert v.outcome is criteria.Outcome.FAILS, \
            f"criterion did not reject a W^fin off by {size:.3g}: {v}\nproblem file: {describe(p)}"
        event("calibrated finite part")


@pytest.mark.theorem("Theorem 1")
@pytest.mark.judged(floor=JUDGED_FLOOR)
@pytest.mark.heavy(seconds=403)
@given(data=st.data())
def test_criterion_rejects_a_stalled_run(data):
    """Calibration of the rate-aware growth checks: the same run stopped at a tenth of its first budget
    (``W`` held from there on, as at a finite minimizer) is rejected by Theorem 1's decision at two budgets,
    and the real run (log growth) is rejected by the W^svm = 0 decision.  The second budget is the decisions'
    own escalation (the continuation once it agreed with GD over GD's last decade, else GD): the stalled
    plant reads only its checkpoint steps past ``first / 10``, and the W^svm = 0 decision reads the real run
    as the claims do, escalated to its own maximum (a run still leaving its transient at the second budget is
    rejected later: :func:`test_log_growth_leaving_its_transient_is_rejected_later`)."""
    p = data.draw(theorem_problems, label="problem").problem
    an, traj = run_theorem1(p, np.zeros((p.d, p.d)), 1.0)
    first = traj.final.step
    if criteria.escalation_steps(first) is None:
        not_judged("no second budget under the step cap")
    # The continuation's horizon is the second budget: nothing past it is read (a solve to 10^12 would be).
    esc = Escalation(p, an, horizon=criteria.escalation_steps(first))
    longer = esc(traj, criteria.escalation_steps(first))
    frozen = stalled(longer, first / 10)
    v, _ = criteria.theorem1_decide(truncate(frozen, first), an, gd_extender(p, an, recorded=frozen),
                                    max_steps=longer.final.step)
    assert v.outcome is criteria.Outcome.FAILS, \
        f"criterion did not reject a run whose W stopped moving: {v}\nproblem file: {describe(p)}"
    # And the converse: the W^svm = 0 criterion rejects this logarithmically growing run, escalated as the claims
    # escalate it (not capped at the second budget: test_log_growth_leaving_its_transient_is_rejected_later).
    v, _ = criteria.finite_convergence_decide(traj, extender(p, an))
    assert v.outcome is criteria.Outcome.FAILS, \
        f"finite-convergence criterion did not reject a log-growing run: {v}\nproblem file: {describe(p)}"


# The trend calibration trains every example twice (budget and 10x, ~0.4 s), hence its smaller example
# count.  Examples whose budget is above MIN_STEPS escalate through the continuation like the others; where
# it is refused the escalations would be GD runs of 10x and 100x more than 1e6 steps, and those are counted,
# not judged (they were all counted before the continuation: 2-4% of stress examples, three seeds of 200).
TREND_ANGLES = (15.0, 20.0, 25.0, 30.0)


@pytest.mark.theorem("Theorem 1")
@pytest.mark.judged(floor=JUDGED_FLOOR)
@settings(max_examples=scaled(8))
@given(data=st.data())
def test_direction_trend_rejects_a_slightly_wrong_target(data):
    """Calibration of the direction's trend (:func:`theory.li2024.criteria.direction_trend`): a target
    15-30° off W^svm, whose ``tan θ · ln(τ/τ₀)`` the first budget cannot resolve, is *rejected* by
    :func:`theory.li2024.criteria.theorem1_decide` on the run the true target holds on (its γ is near 1,
    in the reject zone), never left undecided."""
    from dataclasses import replace

    p = data.draw(theorem_problems, label="problem").problem
    an, traj = run_theorem1(p, np.zeros((p.d, p.d)), 1.0)
    esc = extender(p, an)  # the wrong target is decided on the truth's runs
    if traj.final.step > criteria.MIN_STEPS and not esc.reach(traj):
        not_judged("budget above MIN_STEPS, continuation refused (GD escalations of 10x and 100x that)")
    truth, _ = criteria.theorem1_decide(traj, an, esc)
    if truth.outcome is criteria.Outcome.UNDECIDED:
        not_judged("truth undecided at the maximum budget")
    assert truth.passed, f"precondition: the true target holds: {truth}\nproblem file: {describe(p)}"
    angle = data.draw(st.sampled_from(TREND_ANGLES), label="angle")
    wrong = replace(an, svm=replace(an.svm, W=an.svm.norm * wrong_direction(an, angle, data.draw(st.integers(0, 99), label="seed"))))
    v, _ = criteria.theorem1_decide(traj, wrong, esc)
    gamma = v.measures.get("direction_trend")
    event(f"wrong target {angle:g}° decided at budget {len(v.history)}: {v.outcome.value}")
    record_margins(v, "planted", only=("direction",))
    if gamma is not None:
        record_metrics(**{f"wrong_{angle:g}_gamma": gamma})
    if angle == TREND_ANGLES[0] and v.passed and len(v.history) == 1:
        # 15° is below the first budget's resolution in some valid problems (product 2.5-3.0 < 3.0): it
        # holds there and is not escalated; the cases that do escalate must be rejected.
        return
    assert v.outcome is criteria.Outcome.FAILS, \
        f"decision did not reject a target {angle:g}° off W^svm: {v}\nproblem file: {describe(p)}"


def test_problem_dependent_direction_constant_is_accepted_by_its_trend():
    """Stress-found (seed 4039340030): a valid problem whose ``tan θ · ln(τ/τ₀)`` tends to a constant
    above DIRECTION_RATE -- 3.14 at 1e5 steps, 3.12 at 1e6, 3.06 at 1e7 -- as the theory's ``A / ln τ``
    rate predicts.  The first budget is undecided, the escalated decision holds by the trend, and a
    target 20° off is rejected on the same run."""
    from dataclasses import replace

    p = Problem.load("examples/theorem1_direction_constant.json")
    an = analyze(p)
    eta = safe_step(p)
    traj = train(p, criteria.budget(an.svm.norm, eta), eta, analysis=an)
    first = criteria.theorem1(traj, an)
    assert first.outcome is criteria.Outcome.UNDECIDED and first.measures["direction_rate"] > criteria.DIRECTION_RATE, \
        f"the case is about a direction rate above the first budget's accept zone: {first}"
    v, longer = criteria.theorem1_decide(traj, an, extender(p, an))
    assert v.passed and len(v.history) >= 2, str(v)
    wrong = replace(an, svm=replace(an.svm, W=an.svm.norm * wrong_direction(an, 20.0, 0)))
    v = criteria.theorem1_decide(traj, wrong, extender(p, an, recorded=longer))[0]
    record_margins(v, "planted", only=("direction",))
    assert v.outcome is criteria.Outcome.FAILS, str(v)


# Deep seed 20261127's log-growing runs (``||W^svm|| = 1.05``, a head with entries up to 34), each still leaving its
# transient at the second budget, 1e6 steps:
# * long_transient (7e3f82e, ``test_criterion_rejects_a_stalled_run`` capped at the second budget): ``W`` moved 4.07
#   over the decade to 1e5 steps and 2.38 over the next (x0.585, between the zones): undecided at 1e6;
# * accepted_in_transient (fec0819, the same problem with one more token in its first sequence, shrunk): 6.23 then
#   2.37 (x0.381) with the gradient fallen 3e-6-fold: both accept clauses held at 1e6, and a decision on that one
#   ratio said "holds" on a run that grows like ``ln τ``.  The accept now waits a decade for its confirmation
#   (:func:`theory.li2024.criteria.finite_convergence_statistics`).
LOG_GROWTH_TRANSIENTS = [("examples/theorem1_log_growth_long_transient.json", False),
                         ("examples/theorem1_log_growth_accepted_in_transient.json", True)]


@pytest.mark.theorem("Theorem 1")
@pytest.mark.parametrize("path, accepted_at_second", LOG_GROWTH_TRANSIENTS,
                         ids=["long_transient", "accepted_in_transient"])
def test_log_growth_leaving_its_transient_is_rejected_later(path, accepted_at_second):
    """A log-growing run still leaving its transient at the second budget is undecided there (its moves between
    the zones, or accepted but not yet confirmed); escalated as the claims escalate it, the moves level (log
    growth: the same move every decade) and it is rejected at two budgets in its reject zone."""
    p = Problem.load(path)
    an, traj = run_theorem1(p, np.zeros((p.d, p.d)), 1.0)
    assert an.svm.norm > 0 and traj.final.step == criteria.MIN_STEPS, (an.svm.norm, traj.final.step)
    second = criteria.escalation_steps(traj.final.step)
    capped, _ = criteria.finite_convergence_decide(traj, Escalation(p, an, horizon=second), max_steps=second)
    assert capped.outcome is criteria.Outcome.UNDECIDED and capped.measures["moves_accepted"] is accepted_at_second, \
        f"the case is about a run still leaving its transient at the second budget, 1e6: {capped}"
    v, _ = criteria.finite_convergence_decide(traj, extender(p, an))
    assert v.outcome is criteria.Outcome.FAILS and v.budget > second, v
    last, before = v.measures["moved_last_decade"], v.measures["moved_decade_before"]
    assert 0.8 <= last / before <= 1.25, (last, before)  # log growth: the same move every decade


@pytest.mark.theorem("Theorem 1")
def test_slow_finite_convergence_is_judged_after_escalation():
    """Stress seed 1769151185 (see :func:`theory.li2024.criteria.finite_convergence_decide`): W^svm = 0, GD at
    half the safe step from 0 converges with a time constant near a tenth of the budget: at 1e5 steps the
    moves shrank only x0.503 over the last decade, the verdict is undecided there, and holds at 1e6 with W moved
    by 1.6e-6 over its last decade.  Π_S W(τ) then matches W^fin."""
    p = Problem.load("examples/finite_convergence_slow.json")
    an = analyze(p)
    assert an.svm.norm == 0
    eta = 0.5 * safe_step(p)
    traj = train(p, criteria.MIN_STEPS, eta, analysis=an)
    assert criteria.finite_convergence(traj).outcome is criteria.Outcome.UNDECIDED, \
        "the case is about a verdict the first budget cannot decide"
    verdict, longer = criteria.finite_convergence_decide(traj, extender(p, an))
    assert verdict.passed and verdict.measures["escalated_from"] == criteria.MIN_STEPS, verdict
    assert_close(an.space.project(longer.final.W), an.finite.W, 1e-5, "Π_S W(τ) vs W^fin", p)


@pytest.mark.theorem("Theorem 1")
def test_finite_convergence_budget_follows_the_time_constant():
    """Stress seed 72702926: τ = 1/(η λ_min) = 8.2e4 steps, so even the escalated 1e6 steps are 12 τ (decade
    ratio 0.5036, Π_S W off W^fin by 2.2e-5).  At FINITE_TAU_BUDGET τ the moves accept (unconfirmed there: an
    accept waits a decade, :func:`theory.li2024.criteria.finite_convergence_statistics`), the verdict holds at
    the next budget and Π_S W(τ) matches W^fin; at the fixed budget and its escalation on GD it is undecided,
    not failed; escalated through the continuation (past 10^6 steps, 12 τ) it holds, judged by the
    continuation."""
    p = Problem.load("examples/finite_convergence_slower.json")
    an = analyze(p, bound=True)
    eta = 0.25 * safe_step(p)
    tau = 1.0 / (eta * an.finite.min_curvature)
    first = train(p, criteria.MIN_STEPS, eta, analysis=an)
    fixed, _ = criteria.finite_convergence_decide(first, gd_extender(p, an), max_steps=10 * criteria.MIN_STEPS)
    assert fixed.outcome is criteria.Outcome.UNDECIDED, \
        f"the case is about budgets short of the time constant (undecided there, never failed): {fixed}"
    far, _ = criteria.finite_convergence_decide(first, extender(p, an), max_steps=10 * criteria.MIN_STEPS)
    assert far.passed and far.budget > 10 * criteria.MIN_STEPS and far.measures["engine"] == "continuation", far
    traj = train(p, int(np.ceil(FINITE_TAU_BUDGET * tau)), eta, analysis=an)
    at_budget = criteria.finite_convergence(traj)
    assert at_budget.outcome is criteria.Outcome.UNDECIDED and at_budget.measures["moves_accepted"], at_budget
    verdict, _ = criteria.finite_convergence_decide(traj, extender(p, an))
    assert verdict.passed and len(verdict.history) == 2, verdict
    assert_close(an.space.project(traj.final.W), an.finite.W, 1e-5, "Π_S W(τ) vs W^fin", p)


@pytest.mark.theorem("Theorem 1")
def test_a_finite_part_within_its_relaxation_time_is_not_rejected():
    """A main-job stress seed: ``tpg check --budget-scale 0.01`` called Theorem 1 false on a valid log-loss file
    with two nearly collinear embeddings, whose finite part relaxes with ``λ = 5.6e-10`` (``||W^fin||`` = 1.4e4,
    ``30 / (η λ)`` = 2.7e10 steps): at 1e6 steps its error 1.3846e4 was 0.999 of the decade before, the reject
    zone.  Before ``FINITE_RELAXATIONS`` time constants that stall is the relaxation itself: the verdict must
    not fail at that budget (undecided), and at the full budget, past the relaxation, it must hold (measured:
    at 1e12 steps-equivalent, through the continuation).  The planted ``W^fin`` of the calibration problems is
    past their relaxation time at the first budget and still rejected (the planted properties of this module)."""
    from theory.li2024.claims import judge_theorem1

    p = Problem.load("examples/theorem1_finite_slow_relaxation.json")
    short = judge_theorem1(p, budget_scale=0.01)
    assert short.outcome is criteria.Outcome.UNDECIDED, short
    full = judge_theorem1(p)
    assert full.outcome is criteria.Outcome.HOLDS and full.budget > criteria.finite_relaxation(
        analyze(p, bound=True), safe_step(p)), full


def _corr(W, an):
    return float(np.sum(W * an.svm.W) / (an.svm.norm * np.linalg.norm(W)))


@pytest.mark.theorem("Theorem 1")
def test_correlation_may_dip_when_a_tight_row_has_a_zero_multiplier():
    """Stress seed 2512207974 (see :mod:`theory.li2024.criteria`, point 2): three tight ``⇒`` rows in W^svm with
    multipliers (22.4, 0, 22.4) -- the degenerate case, where ρ drifts like log log τ.  The raw correlation
    falls over the judged decade (it bottoms out near 6e5 steps), which the criterion once called a
    failure; it is accepted by the direction, growth and finite checks, and a target 35° off still fails
    on the same trajectories."""
    from dataclasses import replace

    p = Problem.load("examples/theorem1_degenerate_correlation_dip.json")
    an = analyze(p)
    duals, margins = np.asarray(an.svm.duals), np.asarray(an.svm.margins)
    assert np.all(np.abs(margins - 1) < 1e-9) and duals.min() == 0, \
        f"the case is about a tight row with a zero multiplier: margins {margins}, duals {duals}"
    W0 = 0.1 * np.random.default_rng(0).normal(size=(p.d, p.d))
    eta = safe_step(p)
    traj = train(p, criteria.run_budget(an, eta, W0)[0], eta, W0=W0, analysis=an)
    v, longer = criteria.theorem1_decide(traj, an, extender(p, an))
    assert v.passed, str(v)
    mid = criteria._at(longer, longer.final.step / 10)
    assert _corr(longer.final.W, an) < _corr(mid.W, an), "the case is about a correlation that falls"
    wrong = replace(an, svm=replace(an.svm, W=an.svm.norm * wrong_direction(an, 35.0, 0)))
    v = criteria.theorem1_decide(traj, wrong, extender(p, an, recorded=longer))[0]
    assert v.outcome is criteria.Outcome.FAILS, str(v)


@pytest.mark.theorem("Theorem 1")
def test_finite_error_crossing_zero_is_not_a_stall():
    """Stress seed 2824523862 (see :mod:`theory.li2024.criteria`, point 3): dim S_fin = 1 and the finite error
    crosses 0 near 10⁴ steps, so at the budget (10⁵) its value at τ/10 (1.2e-5) was below the end value
    (1.8e-5) although it fell 10x per decade on either side.  Judged against the largest value over the
    decade before, the run passes at the budget; a W^fin moved by 0.2 still fails."""
    from dataclasses import replace

    p = Problem.load("examples/theorem1_finite_error_crossing.json")
    an = analyze(p)
    assert an.space.dim == 1
    eta = safe_step(p)
    traj = train(p, criteria.budget(an.svm.norm, eta), eta, analysis=an)
    err = lambda c: float(np.linalg.norm(an.space.project(c.W) - an.finite.W))  # noqa: E731
    assert err(criteria._at(traj, traj.final.step / 10)) < err(traj.final), "the case is about a crossing"
    v = criteria.theorem1(traj, an)
    assert v.passed, str(v)
    shift = an.space.compose(np.ones(1)) * 0.2
    v = criteria.theorem1_decide(traj, replace(an, finite=replace(an.finite, W=an.finite.W + shift)), extender(p, an))[0]
    assert v.outcome is criteria.Outcome.FAILS, str(v)


@pytest.mark.theorem("Theorem 1")
def test_favorable_start_delays_the_log_regime():
    """Stress seed 3220947494 (see :func:`theory.li2024.criteria.start_gap`): ``W(0)`` already separates the ⇒
    edges by ``s = 9.77``, so the coefficient along ``W^svm`` grows like ``n ln(1 + τ/τ₁)`` with
    ``τ₁ ≈ e^s τ₀``: its per-decade gain still grows at 10⁵ and 10⁶ steps (ratios 4.9 and 1.9) and settles
    at 10⁷.  The budget rule that counted only adverse gaps judged it at 10⁵ steps and failed it; with the
    favorable side it is not judged, and the theorem does hold there: the run passes the criterion at 10⁷."""
    p = Problem.load("examples/theorem1_favorable_start.json")
    an = analyze(p)
    W0 = np.random.default_rng(802).normal(size=(p.d, p.d))  # the property's initial_weights: scale 1, seed 802
    eta = safe_step(p)
    s = criteria.start_gap(an, W0)
    assert criteria.adverse_gap(an, W0) == 0 and s > 9, f"the case is about a favorable start: gap {s:.3g}"
    old_need = 10**criteria.DECADES * criteria.time_unit(an.svm.norm, eta, criteria.adverse_gap(an, W0))
    _, need = criteria.run_budget(an, eta, W0)
    assert old_need <= criteria.MAX_STEPS < need, (old_need, need)
    ratios = []
    for steps in (100_000, 1_000_000, 10_000_000):
        v = criteria.theorem1(train(p, steps, eta, W0=W0, analysis=an), an)
        ratios.append(v.measures["growth_ratio"])
        record_metrics(**{f"growth_ratio_{steps:.0e}": ratios[-1]})
    assert ratios[0] > ratios[1] > ratios[2] >= 1.0, f"not a transient settling into log growth: {ratios}"
    assert v.passed, str(v)


def test_a_continuation_that_disagrees_with_gd_is_not_used():
    """The validity check at work: an escalation whose continuation has a planted defect (the wrong sign of the
    step, or the time map off by 2) disagrees with GD over GD's last decade, so every later budget is GD's
    (the trail says why), the verdict is GD's own, and it stops at GD's cap; the honest continuation is used.
    On ``examples/theorem1_direction_constant.json`` (undecided at its first budget, holds escalated)."""
    p = Problem.load("examples/theorem1_direction_constant.json")
    an = analyze(p)
    eta = safe_step(p)
    traj = train(p, criteria.budget(an.svm.norm, eta), eta, analysis=an)
    gd_only, _ = criteria.theorem1_decide(traj, an, gd_extender(p, an))
    honest, _ = criteria.theorem1_decide(traj, an, extender(p, an))
    assert honest.passed and [t["engine"] for t in honest.trail] == ["gd"] + ["continuation"] * (len(honest.trail) - 1) \
        and len(honest.trail) > 1, honest.trail
    for plant in ({"sign": -1.0}, {"time_scale": 2.0}):
        esc = Escalation(p, an, plant=plant)
        v, run = criteria.theorem1_decide(traj, an, esc)
        engines = [t["engine"] for t in v.trail]
        assert engines[0] == "gd" and len(engines) > 1 and all(
            e.startswith("gd (continuation disagreed: ") for e in engines[1:]), (plant, engines)
        assert esc.reach(traj) == 0 and all(engine_of(c) == "gd" for c in run.checkpoints), plant
        assert v.outcome is gd_only.outcome and v.history == gd_only.history, (plant, v, gd_only)
        assert abs(v.measures["direction_rate"] - gd_only.measures["direction_rate"]) == 0, (plant, v, gd_only)


# The two valid problems on which the two-valued rule went red (issue "verdicts that never cry wolf"):
# K = 3 from the W(0) below, and K = 5 from 0, both at the safe step.  W(0) as the stress report printed it.
SLOW_DIRECTION_W0 = [[0.1727921, 0.41080907, 0.16521854, -0.65157862], [0.45267793, 0.22318729, -0.26847662, 0.29055905],
                     [0.1822862, 0.14706625, 0.01421112, 0.27335649], [-0.36822704, -0.08145497, -0.24105966, 0.29942311]]


@pytest.mark.theorem("Theorem 1")
@pytest.mark.parametrize("name, W0", [("theorem1_slow_direction", SLOW_DIRECTION_W0),
                                      ("theorem1_direction_transient_peak", None)])
def test_valid_slow_transients_are_never_failed(name, W0):
    """Stress-found valid runs whose direction statistic ``tan θ · ln(τ/τ₀)`` sat above the first budget's
    accept zone: 3.10, 3.38, 3.58 at 1e5..1e7 steps (slower every decade), and 6.18, 6.91, 6.78 (a transient
    that peaks, 5.63 at 1e8).  The decision procedure must not fail them.  On GD alone (cap 1e7) the second
    was undecided at the maximum budget (a rate above DIRECTION_RATE_ESCALATED); escalated through the
    continuation it holds at 1e8 (rate 5.63, γ = -1.26), every budget past the first the continuation's.
    A target 35° off is still rejected on the same runs."""
    from dataclasses import replace

    p = Problem.load(f"examples/{name}.json")
    an = analyze(p)
    eta = safe_step(p)
    W0 = np.zeros((p.d, p.d)) if W0 is None else np.asarray(W0)
    traj = train(p, criteria.run_budget(an, eta, W0)[0], eta, W0=W0, analysis=an)
    first = criteria.theorem1(traj, an)
    assert first.measures["direction_rate"] > criteria.DIRECTION_RATE, f"the case is about a slow direction: {first}"
    v, longer = criteria.theorem1_decide(traj, an, extender(p, an))
    record_metrics(outcome=v.outcome.value, budgets=len(v.history), direction_trend=v.measures["direction_trend"])
    record_margins(v, "valid", only=("direction",))
    assert v.outcome is not criteria.Outcome.FAILS, f"a valid run was failed: {v}"
    assert v.passed, f"undecided at 10^12 steps-equivalent: {v}"
    assert [t["engine"] for t in v.trail] == ["gd"] + ["continuation"] * (len(v.trail) - 1), v.trail
    wrong = replace(an, svm=replace(an.svm, W=an.svm.norm * wrong_direction(an, 35.0, 0)))
    v = criteria.theorem1_decide(traj, wrong, extender(p, an, recorded=longer))[0]
    assert v.outcome is criteria.Outcome.FAILS, str(v)


@pytest.mark.theorem("Theorem 1")
def test_the_trend_decides_at_the_continuations_last_budget():
    """TREND_AT_HORIZON (:mod:`theory.li2024.criteria`): on ``examples/theorem1_direction_transient_peak.json``,
    whose own direction turns for six decades, targets 15° off W^svm have γ below 0 between 10^7 and 10^10
    (benchmarks/RESULTS.md): decided by the trend at every budget, two of three held, at 10^9 (seed 1,
    γ = -0.64, rate 5.57) and at 10^7 (seed 2, γ = 0.06, rate 5.96).  With the trend read only at the
    continuation's last budget none holds (measured: seeds 1 and 2 fail at 10^12 with γ 1.01 and 1.19, seed 0
    ends undecided at γ 0.60), every continuation budget before the last says the trend did not decide, and
    the true target still holds."""
    from dataclasses import replace

    p = Problem.load("examples/theorem1_direction_transient_peak.json")
    an = analyze(p)
    eta = safe_step(p)
    traj = train(p, criteria.budget(an.svm.norm, eta), eta, analysis=an)
    truth, longer = criteria.theorem1_decide(traj, an, extender(p, an))
    assert truth.passed, str(truth)
    verdicts = []
    for seed in range(3):
        wrong = replace(an, svm=replace(an.svm, W=an.svm.norm * wrong_direction(an, 15.0, seed)))
        verdicts.append(criteria.theorem1_decide(traj, wrong, extender(p, an, recorded=longer))[0])
        record_metrics(**{f"seed{seed}_outcome": verdicts[-1].outcome.value, f"seed{seed}_budget": verdicts[-1].budget})
    held = [str(v) for v in verdicts if v.passed]
    assert not held, "a target 15° off W^svm held:\n" + "\n".join(held)
    for v in verdicts:
        cont = [t for t in v.trail if t["engine"] == "continuation"]
        assert cont and all(not t["direction_trend_decides"] for t in cont[:-1]), [
            (t["steps"], t.get("direction_trend_decides")) for t in v.trail]


# ------------------------------------------------------------------------------------------------
# Calibration at the continuation's horizon (issue 37)
# ------------------------------------------------------------------------------------------------
POLY_EXPONENT = 0.35  # polynomial growth τ^p: its decade ratio 10^0.35 = 2.24 lies past the reject line 2


def coefficient_replaced(run, an, at, p=POLY_EXPONENT):
    """The planted polynomial growth: ``run`` with its ``W^svm`` coefficient replaced by ``c(at) (τ/at)^p`` past
    step ``at`` (GD's last step: the GD part, which the escalation's validity check reads, stays GD's)."""
    from dataclasses import replace

    Wh = an.svm.W / an.svm.norm
    c0 = float(np.sum(criteria._at(run, at).W * Wh))

    def planted(c):
        if c.step <= at:
            return c
        return replace(c, W=c.W + (c0 * (c.step / at) ** p - float(np.sum(c.W * Wh))) * Wh)
    return replace(run, checkpoints=[planted(c) for c in run.checkpoints])


@pytest.mark.theorem("Theorem 1")
@pytest.mark.judged(floor=JUDGED_FLOOR)
@pytest.mark.heavy(seconds=186)
@settings(max_examples=scaled(8))
@given(data=st.data())
def test_decisions_at_the_horizon_reject_every_plant(data):
    """Calibration both ways at the horizon the continuation opens: GD to the first budget, the continuation
    (after it agreed with GD over GD's last decade) to the last budget of the ladder to 10^12; a decision
    *started* at a drawn horizon ``H`` (10^2, 10^4 or 10^6 x the first budget, below the last) and escalated
    through the same run must hold or stay undecided on the true targets, and must *fail* (confirmed) on each plant: a target
    15°, 20° or 35° off W^svm, W^fin moved by 4 FINITE_MAX max(1, ||W^fin||), W held from H/10 on (a finite
    limit), the W^svm coefficient growing like τ^0.35 past GD's budget.  Every budget past the first is the
    continuation's.  A 15-20° target whose ``tan θ · ln(τ/τ₀)`` ends at most DIRECTION_RATE is below the
    criterion's resolution (:mod:`theory.li2024.criteria`, point 2): it may hold, counted, never undecided.

    Measured over the stress-found examples and 20 random problems, as the verdict at ``H`` after ``H/10``
    (benchmarks/RESULTS.md, "Margins at the continuation's horizon"): every plant rejected at every horizon
    10^6..10^12, except 15° targets on ``examples/theorem1_direction_constant.json`` up to 10^8 (γ 0.55-0.64,
    under the reject line: those escalate, and fail at 10^9) and on the degenerate example at its first
    horizon (rate below 3), and 15-20° targets on ``examples/theorem1_direction_transient_peak.json``, whose
    own direction turns for six decades (valid rate 6.9 -> 1.6 over 10^6..10^12): γ < 0 between 10^7 and
    10^10, a stress-found example not drawn here."""
    from dataclasses import replace

    from theory.li2024.continuation import CONTINUE_MAX_STEPS, ContinuationFailed

    p = data.draw(theorem_problems, label="problem").problem
    an, traj = run_theorem1(p, np.zeros((p.d, p.d)), 1.0)
    note_problem(p, an)
    esc = Escalation(p, an)
    if not esc.check(traj)[0]:
        not_judged("the continuation disagreed with GD over GD's last decade")
    ladder = criteria.budgets(traj.final.step, CONTINUE_MAX_STEPS)
    try:
        run = esc(traj, ladder[-1])
    except ContinuationFailed:
        not_judged("the continuation failed before 10^12 steps")
    assert run.final.step == ladder[-1] and engine_of(run.final) == "continuation", run.final
    k = data.draw(st.sampled_from([2, 4, 6]), label="decades past the first budget")
    # a first budget above 10^5.5 makes 10^6 x it the ladder's last budget (the nearest 10^12): a decision
    # started there has nothing to escalate to, so it starts one budget lower (stress seeds 2246967733 and
    # 760961349: first budgets 456999 and 360368, undecided from 4.6e11 and 3.6e11 with no budget after)
    H = ladder[min(k, len(ladder) - 2)]
    event(f"horizon 1e{round(np.log10(H))}")

    def decide(target, plant=run):
        return criteria.theorem1_decide(truncate(plant, H), target, Escalation(p, an, recorded=plant))[0]

    truth = decide(an)
    assert truth.outcome is not criteria.Outcome.FAILS, f"a valid run failed from {H} steps: {truth}\nproblem file: {describe(p)}"
    assert all(t["engine"] == "continuation" for t in truth.trail), truth.trail
    event(f"truth from the horizon: {truth.outcome.value}")
    record_margins(truth, "valid")

    angle = data.draw(st.sampled_from([15.0, 20.0, 35.0]), label="angle")
    wrong = replace(an, svm=replace(an.svm, W=an.svm.norm * wrong_direction(an, angle, data.draw(st.integers(0, 99), label="seed"))))
    v = decide(wrong)
    record_margins(v, "planted", only=("direction",))
    if angle < 35 and v.passed and v.measures["direction_rate"] <= criteria.DIRECTION_RATE:
        event(f"target {angle:g}° below the resolution at {H} steps")
    else:
        assert v.outcome is criteria.Outcome.FAILS, f"from {H} steps, a target {angle:g}° off W^svm was not rejected: {v}\n" \
                                                    f"problem file: {describe(p)}"
    if an.space.dim:
        size = 4 * criteria.FINITE_MAX * max(1.0, float(np.linalg.norm(an.finite.W)))
        shift = an.space.compose(np.ones(an.space.dim) / np.sqrt(an.space.dim)) * size
        v = decide(replace(an, finite=replace(an.finite, W=an.finite.W + shift)))
        record_margins(v, "planted", only=("finite",))
        assert v.outcome is criteria.Outcome.FAILS, f"from {H} steps, a W^fin off by {size:.3g} was not rejected: {v}\n" \
                                                    f"problem file: {describe(p)}"
    v = decide(an, stalled(run, H / 10))
    assert v.outcome is criteria.Outcome.FAILS, f"from {H} steps, a run held from H/10 was not rejected: {v}\nproblem file: {describe(p)}"
    v = decide(an, coefficient_replaced(run, an, traj.final.step))
    record_margins(v, "planted", only=("growth",))
    assert v.outcome is criteria.Outcome.FAILS, f"from {H} steps, growth like τ^{POLY_EXPONENT} was not rejected: {v}\n" \
                                                f"problem file: {describe(p)}"
