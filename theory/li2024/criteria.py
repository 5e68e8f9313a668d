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

from dataclasses import dataclass, field

import numpy as np

# g₁/g₀ is 1 for log growth and -> 0 (geometrically) for a finite limit.  Valid runs: 0.97-1.06 in
# 300 random examples, but the stress profile found 0.78 at the minimum budget (a slow approach to
# the log regime), hence the wide band.
GROWTH_LO, GROWTH_HI = 0.6, 1.25
DIRECTION_RATE = 3.0
# In an escalated verdict, a direction rate in (DIRECTION_RATE, DIRECTION_RATE_ESCALATED] is judged by its
# trend instead (see direction_trend).  The stress profile found a valid run with tan θ · ln(τ/τ₀) = 3.14
# at 1e5 steps and 3.12 at 1e6: the constant A of the theory's 1/ln τ rate, for that problem, above the
# first calibration's largest 1.67.  6.0 < tan(35°) · ln(10^4) = 6.45: a target 35° off fails on the cap
# alone at every budget; targets 15-30° off (products 2.5-7.4) grow 1.16-1.25x over an escalation and
# fail the trend (test_theorem1.py::test_direction_trend_rejects_a_slightly_wrong_target).
DIRECTION_RATE_ESCALATED = 6.0
FINITE_MAX = 0.05
FINITE_DECAY = 0.5
FINITE_FLOOR = 1e-6
MASS_MIN = 0.99
DECADES = 4  # budget: τ >= 10^DECADES τ₀
# At least 10^5 steps: the stress profile found valid runs still accelerating at 2·10^4 steps although
# 10^4 τ₀ was smaller (transients τ₀ does not see, e.g. the finite part's own convergence).
MIN_STEPS, MAX_STEPS = 100_000, 1_000_000


@dataclass
class Verdict:
    """A criterion's decision with every measured quantity, printable as the test's message."""

    passed: bool
    measures: dict
    failures: list[str] = field(default_factory=list)

    def __str__(self):
        m = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.measures.items())
        return ("PASS" if self.passed else "FAIL: " + "; ".join(self.failures)) + f"  [{m}]"


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
    """``ln(τ/τ₀)`` (at least 1): the budget in the logarithmic time of the direction's convergence."""
    return float(np.log(max(steps / time_unit(svm_norm, eta, gap), np.e)))


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


def direction_trend(earlier: dict, later: dict) -> tuple[float, float]:
    """``(growth, allowed)``: how much ``tan θ · ln(τ/τ₀)`` grew from an ``earlier`` verdict's measures to a
    ``later`` one at 10x the budget, and the most it may grow for a direction converging to W^svm.

    The theory (module docstring, point 2) predicts ``tan θ ~ A / ln(τ/τ₀)``: the product tends to a
    problem-dependent constant ``A``.  A wrong limit direction keeps ``tan θ`` constant, so the product grows
    by ``L₂/L₁`` (``L = ln(τ/τ₀)``; 1.15-1.25 at the budgets judged).  ``allowed`` is the geometric midpoint
    ``sqrt(L₂/L₁)`` of those two predictions."""
    p1, p2 = earlier["direction_rate"], later["direction_rate"]
    growth = p2 / p1 if p1 > 0 else float("inf")
    return growth, float(np.sqrt(later["log_time"] / earlier["log_time"]))


def theorem1(traj, analysis, earlier: Verdict | None = None) -> Verdict:
    """Theorem 1 on a finite budget (see the module docstring).  ``analysis.svm.W`` must be nonzero.

    Everything is recomputed from the checkpoints' ``W`` and ``analysis``, so the same trajectory can be
    judged against another target (the calibration tests do exactly that).  ``earlier`` is the verdict of
    the same run at a tenth of this budget (see :func:`theorem1_escalated`): with it, a direction rate
    above ``DIRECTION_RATE`` but within ``DIRECTION_RATE_ESCALATED`` is accepted when it did not grow by
    more than :func:`direction_trend` allows."""
    if analysis.svm.norm == 0:
        raise ValueError("theorem1(): W^svm = 0, use finite_convergence() instead")
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
    fails = []
    if not (g1 > 0 and GROWTH_LO <= ratio <= GROWTH_HI):
        fails.append(f"coefficient along W^svm is not growing logarithmically (gain {g1:.3g} in the last decade, "
                     f"ratio to the previous decade {ratio:.3g} not in [{GROWTH_LO}, {GROWTH_HI}])")
    gap = adverse_gap(analysis, traj.checkpoints[0].W)
    rate = direction_rate(inc, sn, traj.eta, end.step, gap)
    m["direction_rate"], m["log_time"] = rate, log_time(end.step, sn, traj.eta, gap)
    direction_ok = rate <= DIRECTION_RATE
    why = f"> {DIRECTION_RATE}"
    if not direction_ok and earlier is not None:
        growth, allowed = direction_trend(earlier.measures, m)
        m["direction_trend"], m["direction_trend_max"] = growth, allowed
        direction_ok = rate <= DIRECTION_RATE_ESCALATED and growth <= allowed
        why = (f"> {DIRECTION_RATE}, and escalated it is above {DIRECTION_RATE_ESCALATED} or grew "
               f"{growth:.3g}x over the escalation (a converging direction: <= {allowed:.3g}x)")
    if not direction_ok:
        fails.append(f"incremental direction corr(W(τ)-W(τ/10), W^svm) = {inc:.4f}: its tangent x ln(τ/τ₀) = "
                     f"{rate:.3g} {why}")
    fin_scale = max(1.0, float(np.linalg.norm(Wfin)))
    m["finite_scale"] = fin_scale
    fe, fe_prev = m["finite_error"], m["finite_error_prev"]
    if fe > FINITE_MAX * fin_scale:
        fails.append(f"finite error ||Π_S W - W^fin|| = {fe:.3g} > {FINITE_MAX * fin_scale:.3g}")
    elif fe > FINITE_FLOOR and fe > FINITE_DECAY * fe_prev:
        fails.append(f"finite error not shrinking ({fe:.3g} at the end, {fe_prev:.3g} at most over the decade "
                     f"before)")
    leak, leak_prev = 1 - end.top_scc_mass, 1 - mid.top_scc_mass
    if end.top_scc_mass < MASS_MIN or leak > leak_prev + 1e-12:
        fails.append(f"top-SCC attention {end.top_scc_mass:.4f} (needs >= {MASS_MIN} and a shrinking leak, "
                     f"was {mid.top_scc_mass:.4f})")
    return Verdict(not fails, m, fails)


# A failed verdict is re-judged once at ESCALATION x the budget (at most ESCALATE_MAX_STEPS steps).
ESCALATION = 10
ESCALATE_MAX_STEPS = 10_000_000


def escalation_steps(steps: int) -> int | None:
    """The budget of the one re-judgement a failed verdict at ``steps`` gets, or None past the cap (the
    rule shared by :func:`theorem1_escalated` and the automaton property)."""
    longer = steps * ESCALATION
    return longer if longer <= ESCALATE_MAX_STEPS else None


def theorem1_escalated(traj, analysis, retrain) -> tuple[Verdict, object]:
    """Theorem 1's verdict, with a failure re-judged at ``ESCALATION`` x the budget before it is believed.

    ``retrain(steps)`` returns the same run (same problem, start and step size) trained for ``steps``.
    The bands above are asymptotic statements; at the minimum budget a valid run can still be in its
    transient: the stress profile (steered by ``hypothesis.target`` to the band's edge) found a valid run
    with ``g₁/g₀`` = 1.261 at 1.1e5 steps, 1.037 at 1.1e6 and 1.004 at 1.1e7 (direction rate 0.57, 0.20,
    0.08).  Every planted violation fails at any budget: a finite limit drives ``g₁/g₀`` to 0, polynomial
    growth keeps it at ``10^p``, a wrong direction grows ``tan θ · ln(τ/τ₀)`` with ``ln τ``.  The verdict
    returned is the last one, its measures say ``escalated_from`` and the first failures are kept."""
    v = theorem1(traj, analysis)
    steps = traj.final.step
    if v.passed or escalation_steps(steps) is None:
        return v, traj
    longer = retrain(escalation_steps(steps))
    v2 = theorem1(longer, analysis, earlier=v)
    v2.measures["escalated_from"] = steps
    if not v2.passed:
        v2.failures.insert(0, f"(also at {steps} steps: {'; '.join(v.failures)})")
    return v2, longer


def theorem1_edges(verdict: Verdict) -> dict[str, float]:
    """How close a Theorem 1 verdict came to each of its thresholds: 1 at the threshold, larger beyond it
    (a violation), smaller inside.  Fed to ``hypothesis.target`` so the search climbs toward near-violations.

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
MOVE_FLOOR = 1e-8


def finite_convergence(traj) -> Verdict:
    """``W^svm = 0``: GD converges to a finite minimizer.

    Criterion (rate-aware): the gradient norm fell by ``GRAD_DECAY`` relative to its start (or below 1e-8),
    and ``W`` moved over the last decade by at most ``MOVE_DECAY`` times what it moved over the decade
    before (or by less than ``MOVE_FLOOR · max(1, ||W||)``).  Convergence to a finite point makes those
    moves shrink geometrically; logarithmic growth would move it by the same amount every decade.
    """
    end = traj.final
    mid = _at(traj, end.step / 10)
    early = _at(traj, end.step / 100)
    g0 = traj.checkpoints[0].grad_norm
    moved = float(np.linalg.norm(end.W - mid.W))
    moved_prev = float(np.linalg.norm(mid.W - early.W))
    m = {"steps": end.step, "grad_norm": end.grad_norm, "grad_norm0": g0, "norm": end.norm,
         "moved_last_decade": moved, "moved_decade_before": moved_prev}
    fails = []
    if end.grad_norm > max(GRAD_DECAY * g0, 1e-8):
        fails.append(f"gradient norm {end.grad_norm:.3g} did not fall below {GRAD_DECAY:g} x {g0:.3g}")
    if moved > max(MOVE_FLOOR * max(1.0, end.norm), MOVE_DECAY * moved_prev):
        fails.append(f"W still moving: {moved:.3g} over the last decade after {moved_prev:.3g} the decade before")
    return Verdict(not fails, m, fails)


def finite_convergence_escalated(traj, retrain) -> tuple[Verdict, object]:
    """:func:`finite_convergence`, with a failure re-judged once at ``ESCALATION`` x the budget (the rule of
    :func:`theorem1_escalated`; ``retrain(steps)`` returns the same run trained for ``steps``).

    Why: convergence to a finite point makes the moves shrink geometrically only once the budget is long
    against the convergence's own time constant τ; for ``W - W* ∝ e^{-t/τ}`` the move over the last decade
    is ``e^{-T/10τ} - e^{-T/τ}`` against ``e^{-T/100τ} - e^{-T/10τ}`` before it: x0.69 at τ = T/10, above
    MOVE_DECAY.  Stress seed 1769151185 (K = 3, a flat direction of L): moves 0.187 then 0.094 (x0.503) at
    1e5 steps while the gradient had fallen from 0.033 to 1.4e-10.  Logarithmic growth (the violation) moves
    by the same amount every decade at every budget, so it fails the re-judgement too (calibrated in
    ``test_criterion_rejects_a_stalled_run``)."""
    v = finite_convergence(traj)
    steps = traj.final.step
    if v.passed or escalation_steps(steps) is None:
        return v, traj
    longer = retrain(escalation_steps(steps))
    v2 = finite_convergence(longer)
    v2.measures["escalated_from"] = steps
    if not v2.passed:
        v2.failures.insert(0, f"(also at {steps} steps: {'; '.join(v.failures)})")
    return v2, longer
