"""Finite-budget, rate-aware criteria for the asymptotic theorems of Li et al. 2024.

Theorem 1 is a statement about ``τ -> ∞`` and its directional part converges only like ``1/log τ``,
so ``W(τ)/||W(τ)||`` alone is a poor witness (the paper's correlations stop near 0.97-0.99).  The
criterion below uses what the proof predicts about the *shape* of the trajectory instead.

The expected shape.  Write ``Ŵ = W^svm/||W^svm||`` and ``W(τ) = W^fin + c(τ) Ŵ + ρ(τ)``.  The tokens outside
a sample's top SCC get attention ``~ exp(-c/||W^svm||)`` (every ``⇒`` margin of ``W^svm`` is >= 1), and the
gradient along ``Ŵ`` is of that size, so ``dc/dt ≈ k exp(-c/||W^svm||)`` and ``c(τ) ≈ ||W^svm|| log(τ/τ₀)``:
*logarithmic growth*, constant per decade of τ.  The rest ``ρ`` (the ``S_fin`` error plus a part orthogonal to
``S_fin`` and ``Ŵ``) stays bounded or grows sublogarithmically.  The natural time unit is
``τ₀ = ||W^svm||² / η`` (the time for the margins to reach O(1) at step size ``η``); with ``η`` the safe step
``1/β``, ``τ₀ = β ||W^svm||²``.

The criterion, on log-spaced checkpoints with the last three decades ``τ/100, τ/10, τ`` (the budget must
reach ``τ >= 10⁴ τ₀`` so that all three lie in the asymptotic regime):

1. *log growth* -- the ``Ŵ`` coefficient gains ``g₁ = c(τ) - c(τ/10) > 0`` in the last decade and
   ``g₁/g₀ ∈ [GROWTH_LO, GROWTH_HI]`` (``g₀`` the previous decade's gain): a constant gain per decade.
   A finite minimizer has ``g₁/g₀ -> 0``; polynomial growth has ``g₁/g₀ ≈ 10^p``.
2. *incremental direction* -- the angle θ between ``W(τ) - W(τ/10)`` and ``W^svm``.  The bounded part
   cancels in the difference, so this converges much faster than the raw correlation, but not fast:
   ``tan θ = Δρ/Δc``, and when some ``⇒`` constraints are inactive in ``W^svm`` the residual ρ still drifts
   like ``log log τ`` (as for logistic regression), so ``tan θ ~ A / ln(τ/τ₀)``.  The criterion is
   ``tan θ · ln(τ/τ₀) <= DIRECTION_RATE``; a wrong limit direction keeps ``tan θ`` constant, so the product
   grows with the budget.  ``A`` depends on the problem: in an escalated verdict a product up to
   ``DIRECTION_RATE_ESCALATED`` is judged by its trend over the escalation (:func:`direction_trend`).
   The raw correlation is reported, not judged: it need not rise monotonically.  When a ``⇒`` row is
   tight in ``W^svm`` with a zero multiplier (strict complementarity fails: the degenerate case of
   Soudry et al. 2018), ``ρ`` drifts like ``log log τ`` from an offset and ``||ρ||/c`` can grow for
   decades.  Measured (stress seed 2512207974, K = 3, two embeddings at cosine 0.966, duals (22.4, 0,
   22.4) on three tight rows): the correlation fell from 0.99534 at 10³ steps to 0.995093 at 5.6·10⁵
   and rose again to 0.995113 at 10⁷ while the direction rate stayed at 1.1-1.3 and the finite error
   fell 10x per decade; the check "must not fall" rejected this valid run at both budgets.  A wrong
   limit direction is caught by point 2 at any budget.
3. *finite part* -- ``||Π_{S_fin} W(τ) - W^fin|| <= FINITE_MAX · max(1, ||W^fin||)`` and it is at most
   ``FINITE_DECAY`` times its largest value over the decade before (checkpoints in ``[τ/100, τ/10]``; the
   attention leak outside the top SCC is ``~1/τ``, and L̃ is strongly convex on S_fin), unless already below
   ``FINITE_FLOOR``.  The largest value, not the value at ``τ/10``: the error can approach 0 from one side,
   cross and return from the other (stress seed 2824523862, dim S_fin = 1: 1.2e-5 at 10⁴ steps at the
   crossing, 3.6e-5 at 2.4·10⁴, then 10x smaller per decade), and a single point next to the crossing
   made a converging run look like a stalled one.  A stalled or wrong finite part keeps its error over
   the whole window and still fails.
4. *hard retrieval* -- every sample's top SCC holds at least ``MASS_MIN`` of its attention, and the leak
   ``1 - mass`` shrank over the last decade.

Calibration (``properties/li2024/test_theorem1.py``, the relaxation suite, and 300 random + 2400 derandomized
stress examples): on valid problems the incremental correlation was >= 0.986 and ``tan θ · ln(τ/τ₀)`` at
most 1.67 (median 0.03), ``g₁/g₀`` in [0.78, 1.06], the finite error fell ~10x per decade and ended
<= 2e-3, the mass >= 0.9997.  Planted violations: a target 35° off (the budget resolves ~15-20° at
worst, since the direction converges like 1/log τ), a W^fin moved by 0.2, a frozen last decade, and
each relaxation (square loss on a cycle, tied head with ``ce``, a step 50x the safe bound, an absent
label) fail, with incremental correlations 0.0-0.98, finite errors 0.06-40 that did not shrink, or a
stalled coefficient.
"""
from __future__ import annotations

import numpy as np

from theory.core import decision
from theory.core.decision import ACCEPT, BETWEEN, REJECT, Outcome, Statistic, Verdict, zone
from theory.li2024.provenance import engine_of

# g₁/g₀ is 1 for log growth and -> 0 (geometrically) for a finite limit.  Valid runs: 0.97-1.06 in
# 300 random examples, but the stress profile found 0.78 at the minimum budget (a slow approach to
# the log regime), hence the wide accept band.
GROWTH_LO, GROWTH_HI = 0.6, 1.25
# Reject zone of the growth ratio: outside [1/2, 2] and not converging toward 1 (its log distance to 1 more
# than half of what it was one budget before).  A transient converges: the favorable start's ratios
# (start_gap) 4.93, 1.86, 1.116 have log distances 1.60, 0.62, 0.11, each under half the one before.  A
# finite limit drives the ratio to 0 (distance -> ∞) and polynomial growth ``τ^p`` keeps it at ``10^p``
# (a constant distance): neither converges.
GROWTH_REJECT_LO, GROWTH_REJECT_HI = 0.5, 2.0
DIRECTION_RATE = 3.0
# The direction's trend over an escalation, ``γ = ln(rate₂/rate₁) / ln(L₂/L₁)`` (``L = ln(τ/τ₀)``): a
# converging direction has ``tan θ ~ A/L``, so the rate tends to the constant A and γ -> 0; a wrong limit
# keeps ``tan θ`` constant, the rate grows like L and γ -> 1 (less while the run's own direction still
# turns: the angle to a wrong target is the wrong angle plus or minus the run's shrinking own angle).
# Accept γ <= TREND_HOLD (the geometric midpoint of the two predictions, the earlier "grew at most
# sqrt(L₂/L₁)" rule) while the rate is at most DIRECTION_RATE_ESCALATED; reject γ >= TREND_FAIL; between
# them the budget escalates.  Measured, valid runs (the two stress cases of the issue "verdicts that never
# cry wolf", examples/theorem1_slow_direction.json and theorem1_direction_transient_peak.json): γ = 0.522,
# 0.418, 0.318 at 1e6, 1e7, 1e8 steps, and 0.537, -0.11, -1.26: the worst valid γ is 0.54.  Planted: a
# target 20° off on examples/theorem1_direction_constant.json (whose own rate is 3.1 at every budget) has
# γ = 0.716 at 1e7 steps; the calibration property records every planted γ (benchmarks/RESULTS.md).
# TREND_FAIL sits between 0.54 and 0.72.  Re-measured at the continuation's horizon (issue 37; benchmarks/
# RESULTS.md, "Decisions through the continuation"): the worst valid γ (rate above DIRECTION_RATE) falls
# 0.54, 0.42, 0.32, 0.23, 0.14, 0.07, 0.01 at 1e6..1e12 steps and the mildest settled 20° plant rises 0.68 ..
# 0.89, so both lines keep their places at every horizon; the one case no line on γ separates (targets on
# examples/theorem1_direction_transient_peak.json dip below the valid worst between 1e7 and 1e10, while the
# run's own direction turns) is why they did not move.
TREND_HOLD, TREND_FAIL = 0.5, 0.65
# TREND_AT_HORIZON (a rule, not a constant: theorem1_statistics' ``trend_decides``).  On the budgets the
# continuation produces, γ decides only at the ladder's last budget (the one nearest 10^12 steps, or the last
# the continuation reached): an escalated decision there reads the trend where the two predictions lie
# furthest apart, at no GD cost (one solve to the top, about 10^2-10^3 gradient evaluations).  Measured
# (benchmarks/RESULTS.md, "Decisions through the continuation"): worst valid γ 0.54 at 1e6 against 0.014 at
# 1e12; mildest settled planted γ 0.68 (20°) and 0.55 (15°) at 1e6 against 0.74 and 0.60 at 1e12, so the gap
# the zones sit in grows from 0.14 to 0.59.  The theory bounds the valid side too: even a degenerate problem
# (a tight row with a zero multiplier) drifts only like ``log log τ``, its rate like ``ln L`` and so
# ``γ = 1/ln L``, 0.30-0.32 for L = 23-29 (1e12 steps, τ₀ <= 10^2), under TREND_HOLD.  The zones did not move.
# A trend accept needs the rate at most this: 6.0 < tan(35°) · ln(10^4) = 6.45.  Above it and not rejected
# by the trend, the verdict escalates (and is undecided at the maximum budget): the cap never fails a run
# by itself (it failed the valid K = 5 stress case at 6.91, 6.78 before it fell to 5.63 at 1e8 steps).
DIRECTION_RATE_ESCALATED = 6.0
# A level trend (|γ| <= TREND_HOLD: the rate has stopped growing and is not still falling fast) is accepted with
# tan θ = rate / L at most this, whatever the rate.  Why: DIRECTION_RATE_ESCALATED is a cap on the rate, so the angle it
# allows shrinks like 1/L (33° at L = ln(10^4), 9.9° at 2e15 steps), while a valid draw's rate tends to its own
# constant A (tan θ ~ A/L), which may be above 6: examples/section5_trend_between_the_lines.json levels at 7.60
# (γ 0.22 and -0.00 at 2e14 and 2e15, in extended precision) and was undecided at every horizon.  The line is an
# angle, calibrated on planted targets at the extended horizons (benchmarks/trend_resolution.py, benchmarks/
# RESULTS.md, "The direction's resolution at the extended horizon"): over 8 Section 5 runs, budgets 2e12..2e15 and
# 8 targets per angle, the least tan θ of a planted target with a level trend is 0.316 at 15° (17.5°), 0.355 at 20°
# and 0.664 at 35°; the valid level draws above the rate cap read 0.250 (γ 0.42), 0.236 and 0.220 (seed-8 draw at
# 2e13..2e15) and 0.253 (examples/section5_converging_at_the_rounding_floor.json at 2e12).  0.28 (15.6°) sits
# between 0.25 and 0.316, 12% from each.  The lower bound on γ is measured too: targets on runs still turning fast
# read flat or falling rates (γ down to -10) at tan θ as low as 0.259 at 15° (examples/section5_converging_past_
# horizon.json at 2e14), which |γ| <= TREND_HOLD refuses.  Below L = DIRECTION_RATE_ESCALATED / 0.28 = 21.4 the
# clause adds nothing to the one before (every GD budget, L <= 16), so only the continuation's last budgets move.
# Its resolution is 15.6°: a target closer than that to a run that turns toward it is accepted (a 10° target read
# 0.174-0.203 with a level trend; at 2e12 the rate cap already accepted 3 of 8 such targets).
DIRECTION_LEVEL_TAN = 0.28
FINITE_MAX = 0.05
FINITE_DECAY = 0.5
# Reject zone of the finite part: the error kept at least FINITE_STALL of its largest value over the decade
# before.  A wrong or stalled W^fin keeps its whole error; a valid run loses ~10x per decade (the leak
# outside the top SCC is ~1/τ and L̃ is strongly convex on S_fin).  (FINITE_DECAY, FINITE_STALL) is the margin.
# An error above FINITE_MAX that does not halve per decade is rejected too: no valid run of the earlier
# single-budget calibration (300 random + 2400 derandomized stress examples) ended above 2e-3, and a
# rejection still needs two budgets.  The same STALL bounds the leak outside the top SCC when its mass is
# below MASS_MIN (valid: the leak is ~1/τ, x0.1 per decade).
FINITE_STALL = 0.9
FINITE_FLOOR = 1e-6
# The finite part relaxes on S_fin at rate η λ per step (λ the least curvature of L̃ there, ``min_curvature``);
# before this many time constants a stalled error is that relaxation, not a wrong W^fin, and the finite part
# escalates instead of rejecting (the W^svm = 0 branch's own budget, claims.judge_theorem1).  A stress seed of
# the main job found ``tpg check`` calling Theorem 1 false on a valid log-loss file with two nearly collinear
# embeddings: λ = 5.6e-10, ``||W^fin||`` = 1.4e4, 30 / (η λ) = 2.7e10 steps, and the error 1.3846e4 against
# 1.3863e4 a decade before at 1e6 (``--budget-scale 0.01``; examples/theorem1_finite_slow_relaxation.json).
# Calibrated both ways: on 200 draws of the Theorem 1 properties' strategy (theorem_problems, W^svm != 0) the
# relaxation time is 75 steps at the median and 2.4e3 at most, on the other theorem1_*.json examples 2.6e3 at
# most, so a planted W^fin (moved by 0.2) is past it at the first budget (1e5) and its rejections stand.
FINITE_RELAXATIONS = 30
MASS_MIN = 0.99
DECADES = 4  # budget: τ >= 10^DECADES τ₀
# At least 10^5 steps: the stress profile found valid runs still accelerating at 2·10^4 steps although
# 10^4 τ₀ was smaller (transients τ₀ does not see, e.g. the finite part's own convergence).
MIN_STEPS, MAX_STEPS = 100_000, 1_000_000
# The budgets of one decision: the first (run_budget), then ESCALATION x it up to the one nearest
# ESCALATE_MAX_STEPS (budgets()).
ESCALATION = decision.ESCALATION
ESCALATE_MAX_STEPS = 10_000_000


def time_unit(svm_norm: float, eta: float, adverse_gap: float = 0.0) -> float:
    """``τ₀ = e^{g₀} ||W^svm||² / η``: steps for the margins to reach O(1).

    ``g₀ >= 0`` is the worst initial score gap against a ``⇒`` edge (``max -(e_i - e_j)^T W(0) e_k``): the
    coefficient grows like ``log τ``, so undoing a gap ``g₀`` costs a factor ``e^{g₀}`` in time.  The
    budget rule (:func:`run_budget`) passes :func:`start_gap` instead, which also counts a favorable start.
    """
    return float(np.exp(max(0.0, adverse_gap))) * svm_norm**2 / eta


def _least_edge_score(analysis, W0) -> float:
    """``min over ⇒ edges of (e_i - e_j)^T W(0) e_k`` (0 without ⇒ edges)."""
    from theory.li2024.svm import constraints

    rows = constraints(analysis.problem, analysis.graphs).dominate
    return float((rows @ np.asarray(W0).ravel()).min()) if rows.shape[0] else 0.0


def adverse_gap(analysis, W0) -> float:
    """``max(0, max over ⇒ edges of -(e_i - e_j)^T W(0) e_k)``."""
    return max(0.0, -_least_edge_score(analysis, W0))


def start_gap(analysis, W0) -> float:
    """``|s|`` with ``s = min over ⇒ edges of (e_i - e_j)^T W(0) e_k``, the least-saturated edge's score gap
    at the start, of either sign: the gap the budget rule (:func:`run_budget`) puts into ``τ₀``.

    An adverse start (``s < 0``) costs ``e^{-s}`` time units (:func:`time_unit`).  A favorable one delays the
    logarithmic regime as much: the edge leaks attention ``e^{-s - c/n}`` (``n = ||W^svm||``, ``c`` the
    coefficient along ``Ŵ``, whose margins are ``1/n``), the gradient along ``Ŵ`` is that leak over ``n``, so
    ``dc/dt ≈ (η/n) e^{-s - c/n}`` and ``c(τ) = n ln(1 + τ/τ₁)`` with ``τ₁ = e^{s} n²/η = e^{s} τ₀``: the
    gain per decade is constant only for ``τ >> τ₁`` (its ratio to the decade before is 4.8 at ``τ = 3 τ₁``,
    1.8 at ``30 τ₁``, 1.11 at ``300 τ₁``).  Measured (stress seed 3220947494, K = 4, ``W(0)`` of norm 5.7,
    ``s = 9.77``, ``n = 0.167``, ``τ₀ = 0.5``): growth ratios 4.93, 1.86, 1.116, 1.012 at 10⁵..10⁸ steps, the
    curve above with ``τ₁ = 3.3·10⁴`` (3.8 ``e^{s} τ₀``); the budget rule without the favorable side judged it
    at 10⁵ and 10⁶ steps and failed it.  The direction statistic keeps :func:`adverse_gap` (a larger
    ``τ₀`` there would shrink ``ln(τ/τ₀)`` and loosen it)."""
    return abs(_least_edge_score(analysis, W0))


def log_time(steps: int, svm_norm: float, eta: float, gap: float = 0.0) -> float:
    """``ln(τ/τ₀)`` (at least 1): the budget in the logarithmic time of the direction's convergence; NaN when
    ``W^svm = 0`` (no ⇒ edge, so no time unit: Section 5 reports its rate against a true TPG without one)."""
    unit = time_unit(svm_norm, eta, gap)
    if unit == 0:
        return float("nan")
    return float(np.log(max(steps / unit, np.e)))


def direction_rate(inc: float, svm_norm: float, eta: float, steps: int, gap: float = 0.0) -> float:
    """``tan θ · ln(τ/τ₀)`` for an incremental correlation ``inc = cos θ`` after ``steps`` steps (the
    statistic of point 2 of the module docstring; ``inf`` when the increment does not point forward)."""
    tan = float(np.sqrt(max(0.0, 1.0 / inc**2 - 1.0))) if inc > 0 else float("inf")
    return tan * log_time(steps, svm_norm, eta, gap)


def run_budget(analysis, eta: float, W0) -> tuple[int, float]:
    """``(steps, need)`` for a run from ``W0``: ``need = 10^DECADES τ₀`` with :func:`start_gap`, ``steps`` that
    clipped to ``[MIN_STEPS, MAX_STEPS]``.  A run whose ``need`` exceeds ``MAX_STEPS`` cannot reach the
    asymptotic regime within the budget and is not judged."""
    need = float(10**DECADES * time_unit(analysis.svm.norm, eta, start_gap(analysis, W0)))
    return int(np.clip(need, MIN_STEPS, MAX_STEPS)), need


def budget(svm_norm: float, eta: float) -> int:
    """Steps for Theorem 1's criterion: ``10^DECADES τ₀`` clipped to ``[MIN_STEPS, MAX_STEPS]`` (runs from
    ``W(0) = 0``; from another start use :func:`run_budget`)."""
    return int(np.clip(10**DECADES * time_unit(svm_norm, eta), MIN_STEPS, MAX_STEPS))


def _at(traj, step: float):
    return min(traj.checkpoints, key=lambda c: abs(np.log(max(c.step, 1)) - np.log(max(step, 1))))


def direction_trend(earlier: dict, later: dict) -> float:
    """``γ = ln(rate₂/rate₁) / ln(L₂/L₁)``: how ``tan θ · ln(τ/τ₀)`` grew from an ``earlier`` verdict's
    measures to a ``later`` one, as an exponent of the logarithmic time ``L = ln(τ/τ₀)``.

    The theory (module docstring, point 2) predicts ``tan θ ~ A / L``: the product tends to a problem-
    dependent constant ``A`` and γ -> 0.  A wrong limit direction keeps ``tan θ`` constant, so the product
    grows like ``L`` and γ = 1 (see TREND_HOLD, TREND_FAIL)."""
    p1, p2 = earlier["direction_rate"], later["direction_rate"]
    l1, l2 = earlier["log_time"], later["log_time"]
    if not (p1 > 0 and p2 < float("inf")) or l2 <= l1:
        return float("inf") if p2 > p1 else 0.0
    if p2 == 0:  # the increment lies exactly on W^svm: the rate fell to 0, as fast as a trend can fall
        return float("-inf")
    return float(np.log(p2 / p1) / np.log(l2 / l1))


def theorem1(traj, analysis, earlier: Verdict | None = None) -> Verdict:
    """Theorem 1 at one budget (see the module docstring): four statistics, each in its accept zone, its
    reject zone or between (:mod:`theory.core.decision`).  ``analysis.svm.W`` must be nonzero.

    Everything is recomputed from the checkpoints' ``W`` and ``analysis``, so the same trajectory can be
    judged against another target (the calibration tests do exactly that).  ``earlier`` is the verdict of
    the same run one budget before (a tenth of this one): it adds the direction's trend and confirms a
    rejection.  The outcome at this budget is :func:`theory.core.decision.combine`'s; the escalation
    through budgets is :func:`theorem1_decide`'s."""
    if analysis.svm.norm == 0:
        raise ValueError("theorem1(): W^svm = 0, use finite_convergence() instead")
    stats, m = theorem1_statistics(traj, analysis, earlier)
    v = Verdict(decision.combine(stats, earlier), m, stats, int(traj.final.step))
    v.history = (earlier.history if earlier is not None else []) + [(v.budget, v.outcome.value)]
    return v


def theorem1_statistics(traj, analysis, earlier: Verdict | None = None, *,
                        trend_decides: bool = True) -> tuple[list[Statistic], dict]:
    """``(statistics, measures)`` of Theorem 1 on ``traj`` at its budget (the judge of :func:`theorem1_decide`).

    ``trend_decides`` False (a budget before the ladder's last): on a budget the continuation produced, the
    direction's trend γ is measured but does not decide, the statistic accepts only by its rate (at most
    DIRECTION_RATE) and otherwise escalates, so the trend is read at the continuation's horizon, where the
    valid and the planted γ lie furthest apart (TREND_AT_HORIZON).  On GD's budgets the trend decides at
    every budget."""
    end = traj.final
    mid, early = _at(traj, end.step / 10), _at(traj, end.step / 100)
    Wsvm, sn = analysis.svm.W, analysis.svm.norm
    Wfin = analysis.finite.W

    def coef(c):
        return float(np.sum(c.W * Wsvm) / sn)

    def corr(c):
        return coef(c) / c.norm if c.norm > 0 else 0.0

    def fin_err(c):
        return float(np.linalg.norm(analysis.space.project(c.W) - Wfin))

    dW = end.W - mid.W
    ndW = float(np.linalg.norm(dW))
    inc = float(np.sum(dW * Wsvm) / (ndW * sn)) if ndW > 0 else 0.0
    g1, g0 = coef(end) - coef(mid), coef(mid) - coef(early)
    ratio = g1 / g0 if g0 > 0 else float("inf") if g1 > 0 else 0.0
    m = {"steps": end.step, "correlation": corr(end), "incremental_correlation": inc, "growth": g1,
         "growth_ratio": ratio, "finite_error": fin_err(end),
         "finite_error_prev": max(fin_err(c) for c in traj.checkpoints if early.step <= c.step <= mid.step),
         "top_scc_mass": end.top_scc_mass, "norm": end.norm}
    prev = earlier.measures if earlier is not None else None
    stats = []

    # 1. log growth
    dist = _growth_distance(ratio)
    converging = prev is not None and dist < 0.5 * _growth_distance(prev["growth_ratio"])
    z = growth_zone(ratio, g1, converging)
    stats.append(Statistic("growth", ratio, z,
                           f"coefficient along W^svm not growing logarithmically (gain {g1:.3g} in the last decade, "
                           f"ratio to the previous decade {ratio:.3g}; accept [{GROWTH_LO}, {GROWTH_HI}], reject "
                           f"outside [{GROWTH_REJECT_LO}, {GROWTH_REJECT_HI}] unless converging to 1)"))

    # 2. incremental direction, with its trend once escalated
    gap = adverse_gap(analysis, traj.checkpoints[0].W)
    rate = direction_rate(inc, sn, traj.eta, end.step, gap)
    m["direction_rate"], m["log_time"] = rate, log_time(end.step, sn, traj.eta, gap)
    if prev is None:
        z = direction_zone(rate)
        stats.append(Statistic("direction", rate, z,
                               f"incremental direction corr(W(τ)-W(τ/10), W^svm) = {inc:.4f}: tan θ x ln(τ/τ₀) = "
                               f"{rate:.3g} > {DIRECTION_RATE} (escalate: a trend needs two budgets)"))
    else:
        gamma = direction_trend(prev, m)
        m["direction_trend"] = gamma
        if trend_decides or engine_of(end) != "continuation":
            z, when = direction_zone(rate, gamma, log_time=m["log_time"]), ""
        else:  # TREND_AT_HORIZON: the continuation reaches further, the trend waits for its last budget
            z, when = direction_zone(rate), " (the trend decides at the continuation's last budget)"
        m["direction_trend_decides"] = not when
        stats.append(Statistic("direction", rate, z,
                               f"incremental direction corr(W(τ)-W(τ/10), W^svm) = {inc:.4f}: tan θ x ln(τ/τ₀) = "
                               f"{rate:.3g} grew with exponent γ = {gamma:.3g} in ln(τ/τ₀) over the escalation "
                               f"(converging: γ -> 0, accept <= {TREND_HOLD} with the rate <= "
                               f"{DIRECTION_RATE_ESCALATED}, or level, |γ| <= {TREND_HOLD}, with tan θ = "
                               f"{rate / m['log_time']:.3g} <= {DIRECTION_LEVEL_TAN}; a wrong limit: γ = 1, reject >= "
                               f"{TREND_FAIL}){when}", trend=True))

    # 3. finite part
    fin_scale = max(1.0, float(np.linalg.norm(Wfin)))
    m["finite_scale"] = fin_scale
    fe, fe_prev = m["finite_error"], m["finite_error_prev"]
    z = finite_zone(fe, fe_prev, fin_scale)
    relax = finite_relaxation(analysis, traj.eta)
    m["finite_relaxation"] = relax
    early = ""
    if z == REJECT and end.step < relax:
        z, early = BETWEEN, (f"; before {FINITE_RELAXATIONS} relaxation time constants on S_fin ({relax:.3g} steps): "
                             f"not rejected, escalate")
    stats.append(Statistic("finite", fe, z,
                           f"finite error ||Π_S W - W^fin|| = {fe:.3g} (bound {FINITE_MAX * fin_scale:.3g}), "
                           f"{fe_prev:.3g} at most over the decade before (accept x{FINITE_DECAY}; reject >= "
                           f"x{FINITE_STALL}, or above the bound and not x{FINITE_DECAY}){early}"))

    # 4. hard retrieval
    leak, leak_prev = 1 - end.top_scc_mass, 1 - mid.top_scc_mass
    z = leak_zone(leak, leak_prev)
    stats.append(Statistic("leak", leak, z,
                           f"top-SCC attention {end.top_scc_mass:.4f} (accept >= {MASS_MIN} with a shrinking leak; reject "
                           f"a growing leak, or below {MASS_MIN} with the leak kept >= x{FINITE_STALL}; was "
                           f"{mid.top_scc_mass:.4f} a decade before)"))
    return stats, m


def finite_relaxation(analysis, eta: float) -> float:
    """Steps for ``FINITE_RELAXATIONS`` time constants of the finite part's relaxation on ``S_fin``,
    ``FINITE_RELAXATIONS / (η λ)`` with ``λ`` the least curvature of ``L̃`` there (``analysis.finite.min_curvature``,
    computed with ``analyze(..., bound=True)``); 0 where it is not known."""
    lam = getattr(analysis.finite, "min_curvature", None)
    return float(FINITE_RELAXATIONS / (eta * lam)) if lam else 0.0


def growth_zone(ratio: float, g1: float, converging: bool) -> str:
    """Zone of the growth ratio ``g₁/g₀`` (gain ``g1`` over the last decade): accept in
    ``[GROWTH_LO, GROWTH_HI]``; reject outside ``[GROWTH_REJECT_LO, GROWTH_REJECT_HI]`` (or no gain) unless
    ``converging`` (its log distance to 1 under half the one a budget before)."""
    outside = g1 <= 0 or not (GROWTH_REJECT_LO <= ratio <= GROWTH_REJECT_HI)
    return zone(ratio, lambda r: g1 > 0 and GROWTH_LO <= r <= GROWTH_HI, lambda r: outside and not converging)


def direction_zone(rate: float, gamma: float | None = None, *, log_time: float | None = None) -> str:
    """Zone of the direction statistic ``tan θ · ln(τ/τ₀)``: at the first budget (``gamma`` None) accept
    ``<= DIRECTION_RATE``, else between (a trend needs two budgets); escalated, by its trend ``γ``: accept
    ``rate <= DIRECTION_RATE``, or ``γ <= TREND_HOLD`` with ``rate <= DIRECTION_RATE_ESCALATED``, or (given
    ``log_time``, ``L = ln(τ/τ₀)``) a level trend ``|γ| <= TREND_HOLD`` with ``tan θ = rate / L <=
    DIRECTION_LEVEL_TAN``; reject ``γ >= TREND_FAIL`` with ``rate > DIRECTION_RATE``."""
    if gamma is None:
        return ACCEPT if rate <= DIRECTION_RATE else BETWEEN
    return zone(gamma, lambda g: direction_clause(rate, g, log_time=log_time) is not None,
                lambda g: rate > DIRECTION_RATE and g >= TREND_FAIL)


def direction_clause(rate: float, gamma: float, *, log_time: float | None = None) -> str | None:
    """Which of :func:`direction_zone`'s escalated accept clauses holds, the first in its order: ``"rate"``
    (``rate <= DIRECTION_RATE``), ``"trend"`` (``γ <= TREND_HOLD`` under ``DIRECTION_RATE_ESCALATED``) or ``"level"``
    (``|γ| <= TREND_HOLD`` with ``tan θ <= DIRECTION_LEVEL_TAN``); ``None`` where none does.  The zone accepts by
    this function, and a verdict's reason names the clause by it: one table of clauses, not two."""
    if rate <= DIRECTION_RATE:
        return "rate"
    if gamma <= TREND_HOLD and rate <= DIRECTION_RATE_ESCALATED:
        return "trend"
    if log_time is not None and abs(gamma) <= TREND_HOLD and rate <= DIRECTION_LEVEL_TAN * log_time:
        return "level"
    return None


def finite_zone(fe: float, fe_prev: float, fin_scale: float) -> str:
    """Zone of the finite error ``fe`` (``fe_prev``: its largest value over the decade before): accept at
    most ``FINITE_MAX fin_scale`` and ``x FINITE_DECAY`` (or below ``FINITE_FLOOR``); reject kept
    ``>= x FINITE_STALL``, or above the bound and not ``x FINITE_DECAY``."""
    return zone(fe, lambda e: e <= FINITE_MAX * fin_scale and (e <= FINITE_FLOOR or e <= FINITE_DECAY * fe_prev),
                lambda e: (e > FINITE_FLOOR and e >= FINITE_STALL * fe_prev)
                or (e > FINITE_MAX * fin_scale and e > FINITE_DECAY * fe_prev))


def leak_zone(leak: float, leak_prev: float) -> str:
    """Zone of the attention outside the top SCC (``leak_prev``: a decade before): accept a top-SCC mass
    ``>= MASS_MIN`` with a leak that did not grow; reject a growing leak, or a mass below ``MASS_MIN`` with
    the leak kept ``>= x FINITE_STALL``."""
    mass = 1 - leak
    return zone(leak, lambda lk: mass >= MASS_MIN and lk <= leak_prev + 1e-12,
                lambda lk: lk > leak_prev + 1e-12 or (mass < MASS_MIN and lk >= FINITE_STALL * leak_prev))


def _growth_distance(ratio: float) -> float:
    return abs(float(np.log(ratio))) if 0 < ratio < float("inf") else float("inf")


def budgets(first: int, max_steps: int = ESCALATE_MAX_STEPS) -> list[int]:
    """The budgets of one decision from ``first``: x10 each, up to the one nearest ``max_steps``
    (:func:`theory.core.decision.budget_ladder`)."""
    return decision.budget_ladder(first, max(first, max_steps))


def escalation_steps(steps: int) -> int | None:
    """The next budget after ``steps``, or None when ``steps`` is already the last one."""
    ladder = budgets(steps)
    return ladder[1] if len(ladder) > 1 else None


def escalate(judge, traj, extend, max_steps: int = ESCALATE_MAX_STEPS) -> tuple[Verdict, object]:
    """:func:`theory.core.decision.sequential` over the budgets from ``traj``'s, with each budget's engine
    recorded in its measures (:func:`theory.li2024.continuation.engine_measures`: ``engine`` is ``"gd"``,
    ``"continuation"`` or ``"gd (continuation disagreed: ...)"``; the verdict's ``trail`` holds them all).

    ``judge(run, earlier, last)`` returns ``(statistics, measures)`` at ``run``'s budget; ``last`` is True at
    the ladder's last budget (Theorem 1's direction trend waits for it on the continuation's budgets:
    :func:`theorem1_statistics`).  ``max_steps`` is discrete GD's cap.  An ``extend`` with a ``reach(run)`` method
    (:class:`theory.li2024.continuation.Escalation`) may carry the ladder further, to what it reaches from
    ``traj``; it is asked only when the first budget leaves the verdict undecided (its validity check runs
    the continuation over GD's last decade, which a verdict decided at once does not need).  A continuation
    that fails past GD's budget (:class:`theory.li2024.continuation.ContinuationFailed`) ends the ladder at the
    budget before it, undecided there unless decided, with ``continuation_failed`` in the measures.
    """
    from theory.li2024.provenance import ContinuationFailed, engine_measures

    def judged(run, earlier):  # `ladder` is read when called: the one sequential() is running
        stats, m = judge(run, earlier, int(run.final.step) >= ladder[-1])
        return stats, {**m, **engine_measures(run)}

    first = int(traj.final.step)
    stats, _ = judge(traj, None, False)
    ladder = [first]
    if decision.combine(stats, None) is Outcome.UNDECIDED:
        reach = getattr(extend, "reach", None)
        ladder = budgets(first, max(max_steps, reach(traj) if reach is not None else 0))
    try:
        return decision.sequential(judged, ladder, traj, extend)
    except ContinuationFailed as exc:
        # The budgets before the failure again (extend keeps its runs): the last one it reached is the last.
        ladder = [b for b in ladder if b < exc.steps]
        v, run = decision.sequential(judged, ladder, traj, extend)
        v.measures["continuation_failed"] = str(exc)
        return v, run


def theorem1_decide(traj, analysis, extend, max_steps: int = ESCALATE_MAX_STEPS) -> tuple[Verdict, object]:
    """Theorem 1's three-valued verdict on ``traj`` (trained for its first budget), escalated x10 while
    undecided, up to ``max_steps`` (:func:`theory.core.decision.sequential`).

    ``extend(traj, steps)`` returns the same run continued to ``steps``: an
    :class:`theory.li2024.continuation.Escalation` (the continuation past GD's budget, up to 10^12 steps once
    it agreed with GD over GD's last decade; :func:`escalate`) or ``theory.li2024.training.resume`` (GD only,
    up to ``max_steps``).
    The stress profile (steered by ``hypothesis.target`` to the zones' edges) found valid runs with
    ``g₁/g₀`` = 1.261 at 1.1e5 steps, 1.037 at 1.1e6; direction rates 3.10, 3.38, 3.58 at 1e5..1e7 (γ 0.53,
    0.42); and 6.18, 6.91, 6.78 (γ 0.58, < 0): none of them fails now, each holds or ends undecided.  Every
    planted violation lands in a reject zone at two budgets: a finite limit drives ``g₁/g₀`` to 0,
    polynomial growth keeps it at ``10^p``, a wrong direction has γ = 1, a wrong W^fin stalls its error."""
    return escalate(lambda run, earlier, last: theorem1_statistics(run, analysis, earlier, trend_decides=last),
                    traj, extend, max_steps)


def deciding_trends(verdict: Verdict) -> list[float]:
    """The direction trends γ of ``verdict``'s trail at the budgets where γ could decide: the trend decided
    there (TREND_AT_HORIZON) and the rate was above DIRECTION_RATE (at or below it the rate accepts, whatever
    γ).  The margins tables read a valid run's largest and a plant's last."""
    return [t["direction_trend"] for t in verdict.trail if "direction_trend" in t
            and t.get("direction_trend_decides", True) and t["direction_rate"] > DIRECTION_RATE]


def theorem1_edges(verdict: Verdict) -> dict[str, float]:
    """How close a Theorem 1 verdict came to each of its accept zones' edges: 1 at the edge, larger beyond
    it, smaller inside.  Fed to ``hypothesis.target`` so the search climbs toward the runs the decision
    procedure finds hardest (they escalate, and end undecided rather than failed).

    ``direction``: ``tan θ · ln(τ/τ₀) / DIRECTION_RATE``; ``growth``: the growth ratio's distance to its band
    (``max(GROWTH_LO / r, r / GROWTH_HI)``); ``finite``: the S_fin error over its bound; ``leak``: the
    attention outside the top SCC over ``1 - MASS_MIN``."""
    m = verdict.measures
    r = m["growth_ratio"]
    fin_scale = max(1.0, m.get("finite_scale", 1.0))
    return {
        "direction": m["direction_rate"] / DIRECTION_RATE,
        "growth": max(GROWTH_LO / r, r / GROWTH_HI) if r > 0 else float("inf"),
        "finite": m["finite_error"] / (FINITE_MAX * fin_scale),
        "leak": (1.0 - m["top_scc_mass"]) / (1.0 - MASS_MIN),
    }


GRAD_DECAY = 1e-3
MOVE_DECAY = 0.5
# Reject zone of the moves: the last decade moved W by [MOVE_STALL, 1/MOVE_STALL] of the decade before.
# Logarithmic growth moves W by the same amount every decade (ratio -> 1).  Convergence ``e^{-t/τ}``
# gives the ratio q(x) = (e^{-x/10} - e^{-x}) / (e^{-x/100} - e^{-x/10}) at a budget of x τ: 6.3, 3.0, 1.74,
# 1.14, 0.95, 0.69, 0.07 at x = 1, 3, 5, 7, 8, 10, 30.  It lies in [0.8, 1.25] only for x in about
# [6.5, 8.8], never at two budgets 10x apart, so a converging run is never confirmed-rejected.
MOVE_STALL = 0.8
MOVE_FLOOR = 1e-8


def moves_zone(moved: float, moved_prev: float, floor: float) -> str:
    """Zone of ``W``'s move over the last decade (``moved_prev``: over the decade before): accept at most
    ``x MOVE_DECAY`` (or below ``floor``); reject a ratio in ``[MOVE_STALL, 1/MOVE_STALL]`` above ``floor``."""
    q = moved / moved_prev if moved_prev > 0 else float("inf")
    return zone(moved, lambda mv: mv <= max(floor, MOVE_DECAY * moved_prev),
                lambda mv: mv > floor and MOVE_STALL <= q <= 1 / MOVE_STALL)


def finite_convergence_statistics(traj, earlier: Verdict | None = None) -> tuple[list[Statistic], dict]:
    """``W^svm = 0``: GD converges to a finite minimizer.

    Accept (rate-aware): the gradient norm fell by ``GRAD_DECAY`` relative to its start (or below 1e-8),
    and ``W`` moved over the last decade by at most ``MOVE_DECAY`` times what it moved over the decade
    before (or by less than ``MOVE_FLOOR · max(1, ||W||)``), a shrink *confirmed a decade later*: the moves
    accept only where they also accepted at the budget before (``earlier``'s measure ``moves_accepted``), so
    never at a first budget, the floor aside.  Reject: the moves kept their size (ratio in
    ``[MOVE_STALL, 1/MOVE_STALL]``, logarithmic growth; see MOVE_STALL for why a converging run cannot be
    confirmed there).

    Why the confirmation (measured, deep seed 20261127): a log-growing run moves by ``c = ||W^svm|| ln 10`` a
    decade once past its transient, but while it leaves the transient its moves can shrink faster than
    ``MOVE_DECAY``: ``examples/theorem1_log_growth_accepted_in_transient.json`` moved 6.23 then 2.37 (x0.381)
    at 1e6 steps with the gradient fallen 3e-6-fold, and was accepted on that one ratio; a decade later its
    ratio is ~1 (2.37 then 2.4), in the reject zone.  Convergence ``e^{-t/τ}`` keeps shrinking: its ratio
    q(x) (MOVE_STALL's table) falls with the budget x τ, so one mode's ratio at most ``MOVE_DECAY`` at one
    budget is at most that at the next (0.51 at x = 12, ~1e-4 at 120); the valid slow files each hold one
    budget later than before (``finite_convergence_slow`` at 1e7 steps, ``_slower`` 1e8,
    ``finite_flat_curvature`` 1e9, through the escalation's continuation).  What it still cannot see: moves
    ``m_k = c + B ρ^k`` shrink x0.5 at decade k when ``B ρ^(k-1) ≥ c / (1 - 2ρ)``, and at two decades in a
    row when ``B ρ^(k-1) ≥ c / (ρ (1 - 2ρ))`` (8.3 c for ρ = 0.3): a transient that large at the budget before
    the confirming one is accepted; no such draw is known.
    """
    end = traj.final
    mid = _at(traj, end.step / 10)
    early = _at(traj, end.step / 100)
    g0 = traj.checkpoints[0].grad_norm
    moved = float(np.linalg.norm(end.W - mid.W))
    moved_prev = float(np.linalg.norm(mid.W - early.W))
    floor = MOVE_FLOOR * max(1.0, end.norm)
    q = moved / moved_prev if moved_prev > 0 else float("inf")
    raw = moves_zone(moved, moved_prev, floor)
    confirmed = moved <= floor or (earlier is not None and earlier.measures.get("moves_accepted", False))
    m = {"steps": end.step, "grad_norm": end.grad_norm, "grad_norm0": g0, "norm": end.norm,
         "moved_last_decade": moved, "moved_decade_before": moved_prev, "moves_accepted": raw == ACCEPT}
    if raw == ACCEPT and not confirmed:
        moves = Statistic("moves", q, BETWEEN,
                          f"W's moves shrank x{q:.3g} over the last decade ({moved:.3g} after {moved_prev:.3g}), "
                          f"not yet confirmed a decade later (a transient shrinks too)")
    else:
        moves = Statistic("moves", q, raw,
                          f"W still moving: {moved:.3g} over the last decade after {moved_prev:.3g} the decade before "
                          f"(accept x{MOVE_DECAY} at two budgets, reject [{MOVE_STALL}, {1 / MOVE_STALL:.3g}]x)")
    stats = [
        Statistic("gradient", end.grad_norm, ACCEPT if end.grad_norm <= max(GRAD_DECAY * g0, 1e-8) else BETWEEN,
                  f"gradient norm {end.grad_norm:.3g} did not fall below {GRAD_DECAY:g} x {g0:.3g}"),
        moves,
    ]
    return stats, m


def finite_convergence(traj, earlier: Verdict | None = None) -> Verdict:
    """:func:`finite_convergence_statistics` decided at one budget."""
    stats, m = finite_convergence_statistics(traj, earlier)
    v = Verdict(decision.combine(stats, earlier), m, stats, int(traj.final.step))
    v.history = (earlier.history if earlier is not None else []) + [(v.budget, v.outcome.value)]
    return v


def finite_convergence_decide(traj, extend, max_steps: int = ESCALATE_MAX_STEPS) -> tuple[Verdict, object]:
    """:func:`finite_convergence`, three-valued and escalated x10 while undecided (``extend`` as in
    :func:`theorem1_decide`).

    Why escalate: convergence to a finite point makes the moves shrink geometrically only once the budget
    is long against the convergence's own time constant τ (MOVE_STALL's table).  Stress seed 1769151185
    (K = 3, a flat direction of L): moves 0.187 then 0.094 (x0.503) at 1e5 steps while the gradient had
    fallen from 0.033 to 1.4e-10.  Logarithmic growth (the violation) moves by the same amount every decade once
    its transient has passed, so it is rejected at two budgets in the reject zone (calibrated in
    ``test_criterion_rejects_a_stalled_run``); a transient can outlast the first budget: deep seed 20261127
    (``examples/theorem1_log_growth_long_transient.json``) moved 4.07 then 2.38 (x0.585) at 1e6 steps, undecided
    there, and 2.40 then 2.41 at 1e8, rejected."""
    return escalate(lambda run, earlier, last: finite_convergence_statistics(run, earlier), traj, extend, max_steps)
