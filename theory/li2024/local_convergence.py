"""Local convergence (Li et al. 2024, Section 5) judged on a finite budget.

With a head that breaks Assumption 1 (tied ``C = E`` or random) and the ``ce`` loss, GD's direction
matches the Graph-SVM of the *pseudo*-TPG built from the tokens GD selects (:mod:`theory.li2024.pseudo`), not
necessarily the true TPG's.  One criterion, used by the property (``properties/li2024/test_section5.py``) and
the ``section5-phase`` sweep (:mod:`theory.run.sweep`):

After ``STEPS`` plain GD steps at the relaxed problem's safe step, when the selection has *settled* -- the
pseudo-TPG built at ``τ/10`` and at ``τ`` is the same, has no ambiguous (sample, token) pair, and ``W``
grows logarithmically along its Graph-SVM (Theorem 1's growth check) -- ``corr(W(τ), W^svm_pseudo) >=
CORR_MIN`` and the incremental direction ``W(τ) - W(τ/10)`` passes Theorem 1's rate-aware test against
``W^svm_pseudo`` (``tan θ · ln(τ/τ₀) <= DIRECTION_RATE``, :mod:`theory.li2024.criteria`; the stress profile found a
settled case at 0.976 that a fixed 0.98 threshold rejected).  The claim is local: GD can spend millions
of steps in transit (seen: a token's attention falling from 0.2 to 1e-3 between 2e5 and 2e6 steps while
another rises), and there the pseudo-TPG of the moment is not yet the one GD converges to; such runs are
not judged at that budget.  The budget is Theorem 1's (``10^4 τ₀`` of the pseudo-TPG's Graph-SVM, at
least ``STEPS``), and a verdict that is not "aligned" there (failed, or a selection still changing) is
re-judged at 10x the budget through the log-time continuation up to 10^12 steps-equivalent
(:mod:`theory.li2024.local_continuation`), or on GD up to ``ESCALATE_MAX`` where the continuation's bound did
not hold over GD's last decade (see :func:`verdict`).  At the ladder's last budget the direction is judged as
Theorem 1's is there, by its trend over the last decade, and the raw correlation is reported, not judged
(:func:`trend_accepts`); a verdict aligned at an earlier budget is confirmed there, and rejected where the
last budget, on the same selection, is in Theorem 1's reject zone (``_rejected_at_horizon``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.li2024 import criteria
from theory.li2024 import local_continuation as lcont
from theory.li2024.analysis import analyze
from theory.li2024.losses import TokenData, attention, log_sublevel_floor, safe_step, smoothness
from theory.core.problem import Problem
from theory.li2024.pseudo import REJECT, SELECT, pseudo_svm, pseudo_tpgs
from theory.li2024.provenance import engine_of
from theory.li2024.training import resume, train, truncate

STEPS = 200_000
# The raw correlation carries the bounded transient (it converges like 1/log τ; the stress profile saw
# 0.948 with an incremental 0.997), so it gets the looser bound.
CORR_MIN = 0.9
# A failed verdict is re-judged at 10x the budget, up to ESCALATE_MAX steps (see verdict).
ESCALATE_MAX = 20_000_000

OUTCOMES = ("aligned", "not aligned", "not judged")
# A "not judged" verdict whose reason starts so is the criterion's own UNDECIDED at its largest budget (the
# selection settled, and the statistics within the bound of their lines, or converging but not yet across):
# counted as undecided by the report.  The other reasons say the claim's premise, a settled selection with
# a ⇒ edge, was not met there.
UNDECIDED = "undecided: "
# Why a budget is not judged: the settle criterion's reasons (on GD, local_run; through the continuation, _state).
NO_EDGE = "pseudo-TPG without ⇒ edge"
AMBIGUOUS = "an ambiguous token at τ/10 or τ"
CHANGED = "selection changed over the last decade"
NO_GROWTH = "no log growth along the pseudo-TPG Graph-SVM"
# Region floors tried before the proved one (section5_step): u0/2, u0/8, u0/32, then the sublevel floor.
REGION_TRIES = 3


@dataclass(frozen=True)
class Step:
    """GD's constant step for Section 5 and where it is safe.

    ``u_floor`` is None when the step is proved safe wherever GD from ``W(0) = 0`` goes
    (:func:`theory.li2024.losses.safe_step`); otherwise the step's curvature bound holds on the region
    ``{W : u_i(W) >= u_floor for every sample}`` only, and a run at it counts only if it stays there
    (:func:`region_left`).  ``tries`` counts the region floors tried before this one."""

    eta: float
    u_floor: float | None = None
    tries: int = 0

    @property
    def proved(self) -> bool:
        return self.u_floor is None

    def describe(self) -> str:
        if self.proved:
            return f"η = {self.eta:.3g} (1/β, proved safe)"
        return f"η = {self.eta:.3g} (1/β on u >= {self.u_floor:.3g}, checked at every checkpoint)"


def _u(problem: Problem, W: np.ndarray, data: TokenData) -> np.ndarray:
    """Every sample's ``u_i = h_{y_i}^T a_i(W)``."""
    a = attention(problem.E @ W @ problem.E.T, data)
    return (a * data.H[data.labels]).sum(axis=1)


def section5_step(problem: Problem, tries: int = 0) -> Step:
    """The step of Section 5's runs: :func:`theory.li2024.losses.safe_step`, except for the log loss with a head
    that breaks Assumption 1.

    There ``u = h_y^T a`` is not bounded away from 0, and the only bound GD provably keeps is the
    sublevel floor (:func:`theory.li2024.losses.log_sublevel_floor`): it lets one sample carry the whole
    loss of ``W(0)``, and the step it proves is 1e3-1e10 times below the valid problem's on drawn cases
    (measured on 30 drawn log-loss broken-head problems), too small to reach Theorem 1's ``10^4 τ₀``.  So
    the step is the curvature bound on a *region* ``{u_i >= u_floor}`` with ``u_floor = min_i u_i(0) / 2``
    (``/8``, ``/32`` on the ``tries``-th retry), and a run counts only if it stays in the region at every
    checkpoint and descends (:func:`region_left`): the descent lemma holds on every segment inside the
    region, and a run that leaves it is re-run at the next floor, finally at the proved step.  Measured on
    those 30 problems: 28 never went below ``min_i u_i(0)``, 1 went to 0.89 of the first floor (re-run
    at the second).  Checkpoints are 8 per decade, so this is a measured guard, not a proof between them;
    :meth:`Step.describe` says which kind of step a verdict used."""
    if problem.loss != "log" or problem.assumptions()["head_biorthogonal"]:
        return Step(safe_step(problem))
    proved = log_sublevel_floor(problem)
    u0 = float(_u(problem, np.zeros((problem.d, problem.d)), TokenData.from_problem(problem)).min())
    floor = u0 / 2 / 4**tries
    if tries >= REGION_TRIES or floor <= proved:
        return Step(safe_step(problem), tries=tries)
    return Step(1.0 / smoothness(problem, u_floor=floor), floor, tries)


def region_left(problem: Problem, traj, step: Step) -> str | None:
    """Why a run at ``step`` does not count (``None`` when it does): some checkpoint has a sample with
    ``u_i`` below the step's floor, or the loss rose between checkpoints (beyond its rounding)."""
    if step.proved:
        return None
    data = TokenData.from_problem(problem)
    low = min(float(_u(problem, c.W, data).min()) for c in traj.checkpoints)
    if low < step.u_floor:
        return f"min u = {low:.3g} below the step's floor {step.u_floor:.3g}"
    L = traj.series("loss")
    if np.any(np.diff(L) > 8 * np.finfo(float).eps * np.maximum(1.0, np.abs(L[:-1]))):
        return "the loss rose between checkpoints"
    return None


def train_section5(problem: Problem, steps: int, step: Step | None = None, start=None):
    """``(trajectory, step)``: GD for ``steps`` at ``step`` (default :func:`section5_step`), re-run at the
    next region floor while the run leaves its region (:func:`region_left`).  ``start``: a shorter run at the
    same step, resumed instead of trained again (:func:`theory.li2024.training.resume`)."""
    step = step or section5_step(problem)
    while True:
        try:
            if start is not None and start.eta == step.eta and not start.normalized:
                traj = resume(problem, start, steps)
            else:
                traj = train(problem, steps, step.eta)
            why = region_left(problem, traj, step)
        except FloatingPointError as exc:
            if step.proved:
                raise
            why = str(exc)
        if why is None:
            return traj, step
        step = section5_step(problem, step.tries + 1)


def _corr(A, B) -> float:
    na, nb = np.linalg.norm(A), np.linalg.norm(B)
    return float(np.sum(A * B) / (na * nb)) if na > 0 and nb > 0 else float("nan")


def local_run(problem: Problem, theory_problem: Problem, traj=None, select: float = SELECT,
              reject: float = REJECT, step: Step | None = None) -> dict:
    """Train (unless ``traj`` is given) and measure one relaxed problem with the selection rule's
    thresholds; ``theory_problem`` is the same data under the assumptions (for the true TPG's W^svm).
    ``step`` is the run's (default :func:`section5_step`; a given ``traj`` must have been trained at it).

    The budget is Theorem 1's (``criteria.budget``: ``10^4 τ₀`` with ``τ₀`` from the pseudo-TPG's
    Graph-SVM, at least ``STEPS``): the run is extended to it when the pseudo-TPG at ``STEPS`` asks for
    more, since the direction test presumes ``τ >= 10^4 τ₀``.  Measured on the ci-found case that failed
    at a fixed 2e5 steps (τ = 7.5e3 τ₀): ``tan θ · ln(τ/τ₀)`` = 3.66, 1.39, 0.14 at 2e5, 2e6, 2e7 steps
    (raw correlation 0.9923, 0.9969, 0.9980), i.e. a transient, not a wrong direction."""
    p = problem
    if traj is None:
        traj, step = train_section5(p, STEPS, step)
    step = step or section5_step(p)
    eta = step.eta
    ps = pseudo_svm(p, traj.final.W, select, reject, name="relaxed head case")
    if ps.svm.norm > 0:
        need = 10**criteria.DECADES * criteria.time_unit(ps.svm.norm, eta)
        if need > criteria.MAX_STEPS:
            return {"pseudo": ps, "settled": False, "not_judged": "10^4 time units exceed MAX_STEPS",
                    "steps": traj.final.step, "eta": eta, "step": step, "traj": traj}
        if need > traj.final.step:
            traj, extended = train_section5(p, criteria.budget(ps.svm.norm, eta), step, start=traj)
            if extended != step:  # the longer run left the region: start over at the smaller step
                return local_run(p, theory_problem, None, select, reject, extended)
            ps = pseudo_svm(p, traj.final.W, select, reject, name="relaxed head case")
    steps = traj.final.step
    end, mid, early = traj.final, criteria._at(traj, steps / 10), criteria._at(traj, steps / 100)
    earlier = pseudo_tpgs(p, mid.W, select, reject)
    same = {k: g.edges for k, g in earlier[0].items()} == {k: g.edges for k, g in ps.graphs.items()}
    true = analyze(theory_problem, finite=False).svm
    # Log growth along the pseudo direction (Theorem 1's check 1): the run is in its asymptotic regime.
    u = ps.svm.W / ps.svm.norm if ps.svm.norm > 0 else ps.svm.W
    g1, g0 = np.sum((end.W - mid.W) * u), np.sum((mid.W - early.W) * u)
    growth = bool(g0 > 0 and criteria.GROWTH_LO <= g1 / g0 <= criteria.GROWTH_HI)
    if ps.svm.norm == 0:
        reason = NO_EDGE
    elif earlier[1] > 0 or ps.ambiguous > 0:
        reason = AMBIGUOUS
    elif not same:
        reason = CHANGED
    elif not growth:
        reason = NO_GROWTH
    else:
        reason = None
    return {"pseudo": ps, "true": true, "W": end.W, "dW": end.W - mid.W, "settled": reason is None,
            "not_judged": reason, "steps": steps, "eta": eta, "step": step, "traj": traj, "engine": "gd",
            "corr_pseudo": _corr(end.W, ps.svm.W), "inc_pseudo": _corr(end.W - mid.W, ps.svm.W),
            "corr_true": _corr(end.W, true.W), "inc_true": _corr(end.W - mid.W, true.W)}


def rates(r: dict) -> tuple[float, float]:
    """``tan θ · ln(τ/τ₀)`` of the increment against the pseudo-TPG's and the true TPG's Graph-SVM."""
    return (criteria.direction_rate(r["inc_pseudo"], r["pseudo"].svm.norm, r["eta"], r["steps"]),
            criteria.direction_rate(r["inc_true"], r["true"].norm, r["eta"], r["steps"]))


def aligned(r: dict) -> tuple[bool, float]:
    """The criterion on one settled run: ``(passed, tan θ · ln(τ/τ₀) against the pseudo-TPG's W^svm)``."""
    rate = rates(r)[0]
    return r["corr_pseudo"] >= CORR_MIN and rate <= criteria.DIRECTION_RATE, rate


def verdict(problem: Problem, theory_problem: Problem, traj=None, select: float = SELECT,
            reject: float = REJECT, note: str = "", step: Step | None = None,
            horizon: int | None = None) -> tuple[str, str, dict]:
    """``(outcome, why, last run)`` with outcome ``"aligned"``, ``"not judged"`` or ``"not aligned"``; a
    failed or unsettled verdict escalates the budget before it is believed.

    The claim is about the limit, and with a head that breaks Assumption 1 GD can sit for a decade or more
    near one pseudo-TPG's direction and then change its selection (a token at attention 1e-4 coming back
    to 0.14): measured on the former strict-xfail ``LOCAL_COUNTEREXAMPLE``, ``tan θ · ln(τ/τ₀)`` = 7.8,
    16.3, 3.2 at 2e5, 2e6, 2e7 steps with raw correlation 0.930, 0.866, 0.9989 (the selection changed
    after 2e6), and on a ci-found case 13.7, 4.9, 0.005.  So a verdict that is not "aligned" at the first
    budget is re-judged at 10x the budget, through the log-time continuation up to
    :data:`~theory.li2024.local_continuation.HORIZON` (10^12 steps-equivalent) where its bound held over GD's
    last decade on this problem (:mod:`theory.li2024.local_continuation`: each budget's statistics are judged
    over every ``W`` within the bound), on GD up to ``ESCALATE_MAX`` otherwise (failed verdicts only, as
    before the continuation).  Where the horizon is left undecided by the bound's width alone and the bound
    was already too wide at a budget within GD's reach (``ESCALATE_MAX``), GD runs to that budget and the
    ladder is judged again from there (:func:`_through_continuation`).  The verdict at the last budget
    counts.  At the last budget (the ladder's top, or ``ESCALATE_MAX`` on GD) a settled run that fails the
    single-budget rule is judged by Theorem 1's escalated zone on the trend from the settled budget a decade
    before: accepted (:func:`trend_accepts`), it is aligned; rejected (:func:`trend_rejects`), not aligned;
    otherwise undecided (a "not judged" whose reason starts with ``UNDECIDED``, as where only the bound
    leaves the last budget's statistics astride their lines).  Through the continuation an aligned budget before the last is confirmed at the last one
    (the same solve, cut later): it stands unless the last budget is settled on the same pseudo-TPG and its
    direction in Theorem 1's reject zone for every ``W`` within the bound (``_rejected_at_horizon``: a limit
    the first budget's rate could not resolve, ~10° off at 2e7 steps).  A wrong limit direction keeps ``tan θ``
    constant, so the statistic grows with the budget and fails (the planted-threshold calibration of
    ``properties/li2024/test_section5.py``).

    ``horizon`` (default :data:`~theory.li2024.local_continuation.HORIZON`) is the ladder's last budget; the
    ladder's extensions (:func:`_extension_max`) and GD's cap (:func:`_escalate_max`) scale with it, so
    ``tpg check --budget-scale`` moves every limit of the verdict together (``horizon`` at least ``STEPS``)."""
    p = problem
    horizon = int(lcont.HORIZON if horizon is None else horizon)
    if horizon < STEPS:
        raise ValueError(f"horizon must be at least STEPS ({STEPS}), got {horizon}")
    if traj is None:
        # GD for a tenth of the first budget, the continuation from there (where its bound held over GD's last
        # decade): the first budget's statistics are then judged over every W within the bound like the later
        # ones, and GD's cost (most of a Section 5 verdict's time before) falls tenfold.  Where the
        # continuation is refused: GD to the first budget, as before.
        from theory.core.decision import budget_ladder

        short, step = train_section5(p, STEPS // 10, step)
        first = {"traj": short, "step": step, "eta": step.eta, "steps": int(short.final.step),
                 "not_judged": "the first budget is the continuation's", "horizon": horizon}
        out = _through_continuation(p, theory_problem, first, select, reject, note, budget_ladder(STEPS, horizon))
        if out is not None:
            return out
        traj, step = train_section5(p, STEPS, step, start=short)
    r = local_run(p, theory_problem, traj, select, reject, step)
    r["horizon"] = horizon
    if r["not_judged"] is None and aligned(r)[0]:
        r["history"] = [(r["steps"], r["corr_pseudo"], aligned(r)[1])]
        return "aligned", _trail(r["history"]), r
    if r["not_judged"] != NO_EDGE:
        out = _through_continuation(p, theory_problem, r, select, reject, note)
        if out is not None:
            return out
    if r["not_judged"] is not None:
        return "not judged", r["not_judged"] + r.get("continuation_note", ""), r
    return _on_gd(p, theory_problem, r, select, reject, note)


def trend_accepts(earlier: tuple[int, float], later: tuple[int, float], svm_norm: float, eta: float) -> tuple[bool, float]:
    """``(accepted, γ)``: the direction at the ladder's last budget judged by Theorem 1's escalated zone
    (:func:`theory.li2024.criteria.direction_zone`) on its trend ``γ`` from the settled budget a decade
    before; ``earlier`` and ``later`` are ``(steps, tan θ · ln(τ/τ₀))`` (through the continuation, the rate's
    least value within the bound at the earlier budget and its largest at the later one: the largest γ any
    ``W`` within the bound gives).

    Accepted: the rate is at most ``DIRECTION_RATE``, or at most ``DIRECTION_RATE_ESCALATED`` with
    ``γ <= TREND_HOLD``.  The raw correlation is then reported, not judged (as in Theorem 1): it carries
    the bounded part ``ρ`` of ``W = c(τ) Ŵ + ρ`` that GD kept from its transit, and only the increment
    measures the limit.  A limit at angle ``α`` from the target has raw and incremental correlations
    that both tend to ``cos α``, while the increment's rate grows like ``tan α · ln(τ/τ₀)`` (``γ -> 1``); so at
    the horizon a wrong limit the raw correlation ``>= CORR_MIN`` would catch (``α > 25.8°``) has a rate above
    ``tan(25.8°) · 19.9 = 9.6`` (``τ = 2e12``, ``τ₀ <= 10^2``), past DIRECTION_RATE_ESCALATED.  Measured on
    the ten fresh stress seeds of benchmarks/RESULTS.md ("Section 5 at the horizon: Theorem 1's trend"): a
    ce draw whose increment stayed within 1e-4 of the pseudo-TPG's direction (rate 0.16 to 1.9e-4 over
    2e9..2e12) kept a raw correlation of 0.66..0.80 from the transit before 2e9, and three lsq draws with
    falling rates 5.6, 4.2, 3.2 (γ -0.58 .. -0.94) were undecided under the single-budget rule."""
    from theory.core.decision import ACCEPT

    gamma = _gamma(earlier, later, svm_norm, eta)
    L = criteria.log_time(later[0], svm_norm, eta)
    return criteria.direction_zone(later[1], gamma, log_time=L) == ACCEPT, gamma


def trend_rejects(earlier: tuple[int, float], later: tuple[int, float], svm_norm: float, eta: float) -> tuple[bool, float]:
    """``(rejected, γ)``: the last budget's direction in Theorem 1's reject zone, rate above ``DIRECTION_RATE``
    and ``γ >= TREND_FAIL`` over the last decade (through the continuation: the least rate at the later budget
    and the largest at the earlier one, the least γ within the bound).  A settled run that fails there but not
    so is undecided, not "not aligned": its statistic does not grow like a fixed angle's.

    Measured at the horizon (benchmarks/RESULTS.md, "Section 5 at the horizon"): the settled misalignments of
    300 random draws and of examples/section5_square_*.json have γ 0.99-1.12 over the last decade (the
    statistic gaining a constant ``tan α · ln 10`` a decade), and ``examples/section5_persistent_misalignment.json``,
    "not aligned" under the former rule (the statistic at the last budget at least its first value in the
    settled stretch: 6.03 at 2e5, 11.86 at 2e12), gains 1.23, 1.17, 1.10, 0.99, 0.80, 0.49, 0.06 a decade:
    γ = 0.04 over the last one, a direction whose ``tan θ`` now shrinks like ``1/ln τ``.  The independent
    computation of ``oracles/flow.py`` reads the same (11.79, 11.83 at 2e11, 2e12)."""
    from theory.core.decision import REJECT

    gamma = _gamma(earlier, later, svm_norm, eta)
    L = criteria.log_time(later[0], svm_norm, eta)
    return criteria.direction_zone(later[1], gamma, log_time=L) == REJECT, gamma


def _gamma(earlier, later, svm_norm, eta) -> float:
    (n1, q1), (n2, q2) = earlier, later
    return criteria.direction_trend({"direction_rate": q1, "log_time": criteria.log_time(n1, svm_norm, eta)},
                                    {"direction_rate": q2, "log_time": criteria.log_time(n2, svm_norm, eta)})


def _unresolved(gamma: float, steps: int, unit: str = " steps") -> str:
    """The reason of a settled run that fails at the last budget outside the reject zone (undecided)."""
    if not gamma == gamma:
        return f"{UNDECIDED}not aligned at {steps:.0e}{unit}, without a settled decade before it to read a trend"
    if gamma <= criteria.TREND_HOLD:
        return f"{UNDECIDED}converging but not aligned within {steps:.0e}{unit} (trend γ = {gamma:.3g})"
    return (f"{UNDECIDED}not aligned within {steps:.0e}{unit}, its trend γ = {gamma:.3g} short of a fixed "
            f"angle's (reject >= {criteria.TREND_FAIL})")


def _accepted_by(rate: float, gamma: float, steps: int, svm_norm: float, eta: float) -> str:
    """The reason naming the clause of Theorem 1's escalated zone that accepted
    (:func:`theory.li2024.criteria.direction_clause`)."""
    L = criteria.log_time(steps, svm_norm, eta)
    clause = criteria.direction_clause(rate, gamma, log_time=L)
    if clause == "rate":
        why = f"its rate {rate:.3g}"
    elif clause == "trend":
        why = f"the trend γ = {gamma:.3g}"
    elif clause == "level":
        why = (f"the level trend γ = {gamma:.3g} at tan θ = {rate / L:.3g} <= {criteria.DIRECTION_LEVEL_TAN} "
               f"(its rate {rate:.3g} above {criteria.DIRECTION_RATE_ESCALATED})")
    else:  # trend_accepts reads the zone with the same log time: no accept without a clause
        raise RuntimeError(f"the escalated zone accepted rate {rate:.3g}, γ = {gamma:.3g} by no clause")
    return f"{why} (Theorem 1's escalated zone; raw correlation not judged)"


def _trail(history) -> str:
    return "; ".join(f"{n:.0e} steps{' (' + e + ')' if e else ''}: corr {c:.4f}, tan x ln(τ/τ₀) {q:.3g}"
                     for n, c, q, *rest in history for e in [rest[0] if rest else ""])


def _skipped(skipped) -> str:
    return "".join(f"; {n:.0e}: not judged ({why})" for n, why in skipped)


def _failed(r, rate, note, history) -> str:
    return (f"{note + ': ' if note else ''}corr(W, W^svm_pseudo) = {r['corr_pseudo']:.4f} "
            f"(>= {CORR_MIN}), incremental {r['inc_pseudo']:.4f}: tan x ln(τ/τ₀) = {rate:.3g} "
            f"(<= {criteria.DIRECTION_RATE}); budgets: {_trail(history)}")


def _on_gd(p, theory_problem, r, select, reject, note):
    """The escalation on GD (x10 up to :func:`_escalate_max`) of a settled run that failed at its first budget."""
    ok, rate = aligned(r)
    history = [(r["steps"], r["corr_pseudo"], rate)]
    cap = _escalate_max(r)
    while not ok and r["steps"] * 10 <= cap:
        longer, step = train_section5(p, r["steps"] * 10, r["step"], start=r["traj"])
        if step != r["step"]:
            return "not judged", f"the longer run left the region its step holds on ({r['step'].describe()})", r
        r = local_run(p, theory_problem, longer, select, reject, step)
        if r["not_judged"] is not None:
            return "not judged", f"in transit when the budget was extended ({r['not_judged']})", r
        ok, rate = aligned(r)
        history.append((r["steps"], r["corr_pseudo"], rate))
    r["history"] = history
    if not ok and len(history) > 1:  # the ladder's last budget: Theorem 1's trend decides (trend_accepts)
        ok, gamma = trend_accepts(history[-2][::2], history[-1][::2], r["pseudo"].svm.norm, r["eta"])
        if ok:
            by = _accepted_by(rate, gamma, r["steps"], r["pseudo"].svm.norm, r["eta"])
            return "aligned", f"{_trail(history)}; accepted at the last budget by {by}", r
    if ok:
        return "aligned", _trail(history), r
    rejected, gamma = (trend_rejects(history[-2][::2], history[-1][::2], r["pseudo"].svm.norm, r["eta"])
                       if len(history) > 1 else (False, float("nan")))
    if not rejected:
        return "not judged", _unresolved(gamma, r["steps"]), r
    return "not aligned", _failed(r, rate, note, history) + f"; trend γ = {gamma:.3g} over the last decade", r


WITHIN_BOUND = "within the continuation's bound of the threshold"
AMBIGUOUS_WITHIN_BOUND = "an ambiguous token within the continuation's bound"
NO_GROWTH_WITHIN_BOUND = f"{NO_GROWTH} (within the continuation's bound)"
# The states a budget is left in by the width of the continuation's bound rather than by the run itself: the
# nominal statistics would decide, every W within the bound does not.
BOUND_LIMITED = (WITHIN_BOUND, AMBIGUOUS_WITHIN_BOUND, NO_GROWTH_WITHIN_BOUND)


def _edges(ps) -> dict:
    return {k: set(g.edges) for k, g in ps.graphs.items()}


def _rejected_at_horizon(edges: dict, ps, state: str, settled_rates: dict, ladder: list, eta: float) -> str | None:
    """Why the ladder's last budget rejects an earlier accept (None: it does not).

    The first budget's accept reads the rate against ``DIRECTION_RATE`` alone, which at ``τ = 2e7`` passes a
    limit up to ``tan⁻¹(3 / ln(τ/τ₀)) ≈ 10°`` off.  The continuation's horizon resolves more: a settled
    misalignment keeps ``tan θ`` constant, so its rate grows like ``ln(τ/τ₀)`` (``γ = 1``).  Measured on 300
    random draws of Section 5's domain (benchmarks/RESULTS.md, "Section 5 at the horizon"): three accepted
    at 2e7-2e8 (rates 1.32, 2.29, 2.67) kept the same selection, a bound of at most 7e-4, and rates rising
    linearly in ``ln τ`` to 3.0, 3.9 and 5.1 at 2e12 (γ 1.12, 1.0, 1.0 over the last decade; limits 7-11°
    off), as the square-loss misalignments do.  So the accept is rejected when the last budget is settled on
    the same pseudo-TPG and its direction is in Theorem 1's reject zone (rate above ``DIRECTION_RATE`` and
    ``γ >= TREND_FAIL``) for every ``W`` within the bound: the least rate at the top, the largest a decade
    before.  A valid converging direction has ``γ -> 0`` (the worst valid γ above the rate line at the horizon:
    -0.53 on the draws of ten fresh stress seeds; Theorem 1's 0.014)."""
    top = ladder[-1]
    prior = ladder[-2] if len(ladder) > 1 else None
    if state != "failed" or _edges(ps) != edges or top not in settled_rates or prior not in settled_rates:
        return None
    rate_lo = settled_rates[top][1]
    rejected, gamma = trend_rejects((prior, settled_rates[prior][0]), (top, rate_lo), ps.svm.norm, eta)
    if not rejected:
        return None
    angle = np.degrees(np.arctan(rate_lo / criteria.log_time(top, ps.svm.norm, eta)))
    return (f"at {top:.0e} steps-equivalent, on the same selection, tan x ln(τ/τ₀) = {rate_lo:.3g} > "
            f"{criteria.DIRECTION_RATE} grew with γ = {gamma:.3g} >= {criteria.TREND_FAIL} over the last decade "
            f"(tan θ constant: a limit about {angle:.0f}° off the pseudo-TPG's Graph-SVM)")


def _state(m: dict, ps, eta: float, b: int) -> str | None:
    """Why the budget ``b`` with the robust measures ``m`` is not judged (None: it is)."""
    if ps.svm.norm == 0:
        return NO_EDGE
    if not m["certain"]:
        return AMBIGUOUS_WITHIN_BOUND if m["nominal_certain"] else AMBIGUOUS
    if not m["same"]:
        return CHANGED
    if 10**criteria.DECADES * criteria.time_unit(ps.svm.norm, eta) > b:
        return "10^4 time units exceed the budget"
    if not criteria.GROWTH_LO <= m["growth"][0] <= m["growth"][1] <= criteria.GROWTH_HI:
        own = criteria.GROWTH_LO <= m["growth_nominal"] <= criteria.GROWTH_HI
        return NO_GROWTH_WITHIN_BOUND if own else NO_GROWTH
    return None


def _engine(c, variant: lcont.Variant) -> str:
    """The engine of checkpoint ``c``, continued by ``variant``, as a verdict's trail names it."""
    e = engine_of(c)
    if e != "continuation":
        return e
    if variant.order == 2:
        return f"{e}, second order"
    if variant.extended:
        e = f"{e}, extended precision"
    path = variant.shadow and getattr(c, "gronwall_bound", None) is not None \
        and c.gd_deviation_bound < c.gronwall_bound
    return f"{e}, path bound" if path else e


def _second_order(p, theory_problem, r, select, reject, note, ladder, anchored, undecided):
    """The ladder judged again through GD's modified equation (:mod:`theory.li2024.modified_flow`) when the
    first-order continuation left its last budget undecided by its bound (a selection or statistic within it of
    a threshold, or a trend read over every ``W`` within it: ``undecided``, that verdict, returned when the
    second order decides nothing either, with its reason appended).

    Why there only.  The first-order bound ``D`` is Grönwall's on the local error ``η² H g / 2``: through a
    late change of selection it grows by 10^3-10^5 and then stays, so every later budget is bound-limited
    (the five draws of ten fresh stress seeds left undecided at 2e12: ``D`` = 2.6-69).  The modified equation
    integrates that leading term, and its bound ``D̃`` is Grönwall's on the next one: 1e-4 to 2e-3 on the
    same five draws.  It costs a numpy solve of a few times the first order's evaluations (2-6 s a verdict on
    those draws), so it runs only where the first order could not decide.

    Before it, the first order is judged again with its bound on GD's distance from the flow's *path*
    (:mod:`theory.li2024.shadowing`: Grönwall's factor on the directions normal to the flow's velocity, and a
    time shift): a late change of selection is an escape along the flow, where ``D`` takes the escape's whole
    factor and the path bound does not (``examples/section5_ambiguous_transit.json``: ``D`` = 3.9e3 at 2e12,
    the path bound 5e-3; the second order's ``D̃`` disagreed with GD over its last decade on a square-loss
    draw).  It costs a quadrature over the solve's accepted states (0.9 s against 0.14 s to 2e12 on that file,
    benchmarks/bench_shadowing.py).

    Last, where both leave it undecided, the first order with the path bound again, with ``B``'s right-hand side
    in extended precision (``continue_flow``'s ``extended``): late at a large step the bound is the right-hand
    side's rounding ``eps t`` (:func:`theory.li2024.continuation.noise_atol`), which neither tighter bound
    removes (``examples/section5_converging_at_the_rounding_floor.json``, ce, η = 4.5: 0.115 at 2e13 and 1.14
    at 2e14, the rates' intervals across their line).  It is tried last because it costs a numpy solve."""
    out = _through_continuation(p, theory_problem, r, select, reject, note, ladder, anchored, lcont.PATH_BOUND)
    if out is not None and not out[1].startswith(UNDECIDED):
        # Its reading stands unless it is undecided too: decided, or a premise not met where the tighter bound sees
        # it (a selection still changing, or GD's own reading where it was re-run: no ⇒ edge at a point its
        # arithmetic keeps, examples/section5_stationary_start.json).
        return out[0], f"{out[1]} (first-order continuation with the path bound: Grönwall's was too wide)", out[2]
    path = r.pop("continuation_note", "").strip(" ()") if out is None else out[1]
    out = _through_continuation(p, theory_problem, r, select, reject, note, ladder, anchored, lcont.SECOND_ORDER)
    if out is not None and out[0] != "not judged":
        return out[0], f"{out[1]} (second-order continuation: the first order's bound was too wide)", out[2]
    why = r.pop("continuation_note", "").strip(" ()") if out is None else out[1]
    from theory.li2024.continuation import EXTENDED_EPS

    wider = "no floating type wider than float64 on this platform"
    if EXTENDED_EPS is not None:
        out = _through_continuation(p, theory_problem, r, select, reject, note, ladder, anchored, lcont.EXTENDED)
        if out is not None and not out[1].startswith(UNDECIDED):
            return out[0], (f"{out[1]} (first-order continuation in extended precision with the path bound: the "
                            f"float64 bounds were too wide)"), out[2]
        wider = r.pop("continuation_note", "").strip(" ()") if out is None else out[1]
    outcome, text, last = undecided
    return (outcome, f"{text}; with the path bound: {path or 'not decided'}; second-order continuation: "
                     f"{why or 'not decided'}; in extended precision: {wider or 'not decided'}", last)


# A selection that changes in the ladder's last decade leaves no settled decade to read a trend over, and a
# direction still converging at the top has a rate not yet below the escalated line.  The ladder is then extended
# a decade at a time past its natural top, to at most two decades (2e14 steps-equivalent on Section 5's ladder): the
# bound carries B's rounding floor eps t (noise_atol, in deviation_from_exact), which grows tenfold a decade.
# Measured on the draw of a fresh stress seed this was first written for
# (examples/section5_selection_changed_before_horizon.json, η = 4.3): the solve reaches 2e13 in 0.02 s, eps t is
# 0.019 there against a last-decade increment of 62.6 in W (3e-4 of it; the measured integration error 5e-4), and
# 0.19 at 2e14 (3e-3 of it).  A square-loss draw's solve stalled in the decade to 2e14 (the budgets before a stall
# are judged, and the draw is then undecided as before).  The converging draw of a fresh stress seed
# (examples/section5_converging_past_horizon.json, lsq, η = 0.19): rates 8.52, 9.61, 10.55, 10.73 from 2e9 to 2e12
# (γ 0.16 over the last decade), then 8.22 at 2e13 and 3.56 at 2e14, accepted there by the trend.
EXTENSION_MAX = 2 * 10**14
# In extended precision (lcont.EXTENDED) the same argument allows three decades more: B's floor is EXTENDED_EPS t,
# and EXTENDED_EPS = EPS / 2048 on x86-64, so the floor at 2e17 is 0.49 of float64's at 2e14
# (_extension_max: EXTENSION_MAX times the largest power of ten at most EPS / EXTENDED_EPS).  Measured on the draw of
# a fresh stress seed it was written for (examples/section5_converging_past_the_extension.json, tied-head lsq,
# η = 8.06, ||W^svm|| = 31.4, so ln(τ/τ₀) is still small at 2e14): rates 12.9, 12.8, 11.3, 9.19, 7.27 from 2e10 to
# 2e14, undecided there (the float64 bound 2.03 left a token ambiguous; in extended precision the rate was still
# above the escalated line, γ = -2.75); 5.85 at 2e15 with a bound of 0.011, aligned there by the trend.


def _horizon(r: dict) -> int:
    """The ladder's last budget for the run ``r`` (:func:`verdict`'s ``horizon``)."""
    return int(r.get("horizon", lcont.HORIZON))


def _escalate_max(r: dict) -> int:
    """GD's cap for the run ``r``: ``ESCALATE_MAX``, scaled as the horizon is."""
    return ESCALATE_MAX * _horizon(r) // lcont.HORIZON


def _extension_max(variant, horizon: int = lcont.HORIZON) -> int:
    """The last budget a ladder is extended to: :data:`EXTENSION_MAX`, three decades more in extended precision
    (the power of ten in ``EPS / EXTENDED_EPS``; the argument above ``EXTENSION_MAX``), both scaled as the
    horizon is (``EXTENSION_MAX`` is two decades past :data:`~theory.li2024.local_continuation.HORIZON`)."""
    from theory.li2024.continuation import EXTENDED_EPS
    from theory.li2024.losses import EPS

    top = EXTENSION_MAX * horizon // lcont.HORIZON
    if not variant.extended or EXTENDED_EPS is None:
        return top
    return top * 10 ** int(np.floor(np.log10(EPS / EXTENDED_EPS)))


def _past_the_horizon(p, theory_problem, r, select, reject, note, ladder, anchored, variant, undecided,
                      why="its selection changed in the decade before"):
    """``undecided`` (the ladder's last budget without a settled decade before it: its selection changed in
    that decade; or a direction converging but not yet aligned there, ``why``) judged again on the ladder
    extended by a decade (up to :func:`_extension_max`), or, at the last extension, through the second order
    (:func:`_second_order`) as any other undecided end (``variant``: the continuation's, ``lcont.Variant``)."""
    top = ladder[-1]
    if top * 10 <= _extension_max(variant, _horizon(r)):
        # the same GD run and order: its agreement check already passed
        out = _through_continuation(p, theory_problem, r, select, reject, note, ladder + [top * 10], anchored,
                                    variant, checked=True)
        if out is not None:
            return out[0], f"{out[1]} (the ladder extended past {top:.0e}: {why})", \
                out[2]
    return _second_order(p, theory_problem, r, select, reject, note, ladder, anchored, undecided) \
        if variant == lcont.FIRST_ORDER else undecided


def _through_continuation(p, theory_problem, r, select, reject, note, ladder=None, anchored=False,
                          variant=lcont.FIRST_ORDER, checked=False):
    """The budgets ``ladder`` (default ``10 τ₁, 100 τ₁, ...`` up to ``HORIZON``) through the continuation from
    GD's run in ``r`` (:mod:`theory.li2024.local_continuation`); None when the continuation is not used or
    decided nothing (``r`` then carries the reason in ``continuation_note``).  ``anchored``: ``τ₁`` is on the
    ladder and is judged on GD's own iterate (a re-run past a bound too wide to decide, below).  ``variant``: the
    continuation's equation, bound and arithmetic (:class:`theory.li2024.local_continuation.Variant`; the passes
    after the first are :func:`_second_order`'s); ``checked``: its agreement check on this GD run already passed
    (the ladder extended past a late change of selection)."""
    from theory.core.decision import budget_ladder

    gd = r["traj"]
    tau1 = int(gd.final.step)
    ladder = [b for b in (ladder or budget_ladder(tau1, _horizon(r))) if b > tau1 or (anchored and b == tau1)]
    # Most runs decide at the first continued budget: solve to it first, to the horizon only when needed.
    run, why = lcont.continued(p, gd, ladder[:1], checked=checked, variant=variant)
    if run is None:
        r["continuation_note"] = f" (not escalated: {why})"
        return None
    true = analyze(theory_problem, finite=False).svm
    history = []
    if r["not_judged"] is None:
        history.append((r["steps"], r["corr_pseudo"], aligned(r)[1], "gd"))
    state = r["not_judged"]
    last = r
    skipped = []  # (budget, why not judged there)
    settled_rates = {}  # budget -> the rate's (largest, least) value within the bound, on a settled budget
    by_trend = ""
    stopped = ""  # why the continuation ended before the ladder's last budget
    early = None  # (verdict, its pseudo-TPG's edges): aligned before the ladder's last budget, to be confirmed there

    def kept(why=""):
        outcome, text, at = early[0]
        return outcome, text + (f"; not confirmed at the last budget: {why}" if why else ""), at

    for b in ladder:
        if run.final.step < b and run.stopped is None:
            run, why = lcont.continued(p, gd, ladder, checked=True, variant=variant)
            if run is None and early is not None:
                return kept(why)
            if run is None:  # nothing decided through the continuation: GD takes over, as where it was refused
                r["continuation_note"] = f" (through the continuation: {state} at {last['steps']:.0e}; past it {why})"
                return None
        if run.final.step < b:
            # The integrator failed in a later decade: the budgets it reached are judged (a broken-head ce draw
            # of stress seeds 11-55 stalled on B past 2e8, after its verdict there; the failed solve used to
            # discard them and leave the draw to GD, not judged).  Only an aligned one decides: past the budgets
            # reached, the draw goes on as where the continuation failed (below).
            stopped = f"the continuation stopped before {b:.0e} ({run.stopped})"
            if early is not None:
                return kept(stopped)
            break
        if not r["step"].proved:
            left = region_left(p, truncate(run, b), r["step"])
            if left is not None:
                why = f"the continued run left its step's region by {b:.0e} steps-equivalent ({left})"
                if early is not None:
                    return kept(why)
                if last is r:
                    r["continuation_note"] = f" (not escalated: {why})"
                    return None
                last.setdefault("history", history)
                return "not judged", why, last
        m = lcont.robust_measures(p, run, b, select, reject)
        ps = m["pseudo"]
        last = {"pseudo": ps, "true": true, "W": m["W"], "dW": m["dW"], "steps": m["steps"], "eta": r["eta"],
                "step": r["step"], "traj": run, "engine": _engine(truncate(run, b).final, variant),
                "gd_deviation_bound": m["delta"],
                "corr_pseudo": m.get("corr_nominal", float("nan")), "inc_pseudo": m.get("inc_nominal", float("nan")),
                "corr_true": _corr(m["W"], true.W), "inc_true": _corr(m["dW"], true.W)}
        state = _state(m, ps, r["eta"], b)
        if state is None:
            (corr_lo, corr_hi), (rate_hi, rate_lo) = m["corr"], m["rate"]
            settled_rates[b] = (rate_hi, rate_lo)
            if corr_lo >= CORR_MIN and rate_hi <= criteria.DIRECTION_RATE:
                state = "aligned"
            elif corr_hi < CORR_MIN or rate_lo > criteria.DIRECTION_RATE:
                state = "failed"
            else:
                state = WITHIN_BOUND
            prior = ladder[ladder.index(b) - 1] if ladder.index(b) > 0 else None
            if state != "aligned" and b == ladder[-1] and prior in settled_rates:
                # The ladder's last budget (TREND_AT_HORIZON): Theorem 1's trend over the last decade decides
                # (trend_accepts), the raw correlation is reported, not judged.
                ok, gamma = trend_accepts((prior, settled_rates[prior][1]), (b, rate_hi), ps.svm.norm, r["eta"])
                if ok:
                    state = "aligned"
                    by = _accepted_by(rate_hi, gamma, b, ps.svm.norm, r["eta"])
                    by_trend = f"; accepted at the last budget by {by}"
        if state in ("aligned", "failed", WITHIN_BOUND):
            history.append((m["steps"], last["corr_pseudo"], criteria.direction_rate(
                last["inc_pseudo"], ps.svm.norm, r["eta"], m["steps"]), last["engine"]))
            if state == "aligned" and early is None:
                last.update(settled=True, not_judged=None, history=list(history), skipped=list(skipped))
                decided = "aligned", _trail(history) + by_trend + _skipped(skipped), last
                if b == ladder[-1]:
                    return decided
                early = decided, _edges(ps)
        if early is not None and b == ladder[-1]:
            # HORIZON_CONFIRMS: an early accept stands unless the last budget, on the same selection, rejects it
            # by Theorem 1's escalated zone for every W within the bound.
            rejected = _rejected_at_horizon(early[1], ps, state, settled_rates, ladder, r["eta"])
            if rejected is None:
                return kept()
            last.update(settled=True, not_judged=None, history=history, skipped=skipped)
            return "not aligned", (f"{note + ': ' if note else ''}{rejected}; accepted by its rate at "
                                   f"{early[0][2]['steps']:.0e} before; budgets: {_trail(history)}"
                                   + _skipped(skipped)), last
        if state != "failed":
            skipped.append((m["steps"], state))
    limited = [n for n, why in skipped if why in BOUND_LIMITED and tau1 < n <= _escalate_max(r)]
    if state in BOUND_LIMITED and limited and variant != lcont.FIRST_ORDER:
        # The bound, not the run, left the horizon undecided, and it was already too wide at a budget GD itself
        # can reach (it widened through a change of selection): GD runs to that budget, which is judged on GD's
        # iterate, and the continuation starts again from there (after its agreement check over GD's new last
        # decade).  Only here: GD to 2e7 steps costs ~30 s on K = 10, and most such draws decide at a later
        # budget through the continuation anyway (stress seed 44, six K = 10 draws re-run eagerly: all aligned
        # at 2e8, 35 s each).  Not on Grönwall's first-order bound: the path bound (_second_order) is tried first,
        # at a fraction of GD's cost (examples/section5_converging_past_horizon.json: 2 s against GD's 20 s to
        # 2e7), and this re-run follows within it where that is too wide as well.
        b1 = limited[0]
        # The path bound's pass and the second order's both come here from the same run r: GD runs once.
        reruns = r.setdefault("gd_reruns", {})
        if b1 not in reruns:
            reruns[b1] = train_section5(p, b1, r["step"], start=gd)
        longer, step = reruns[b1]
        if step == r["step"]:
            again = {"traj": longer, "step": step, "eta": r["eta"], "steps": int(longer.final.step),
                     "horizon": _horizon(r),
                     "not_judged": f"the continuation's bound was too wide at {b1:.0e}"}
            out = _through_continuation(p, theory_problem, again, select, reject, note,
                                        [n for n in ladder if n >= b1], anchored=True, variant=variant)
            if out is None or out[1].startswith(UNDECIDED):
                # The bound resolves nothing past GD's own budget, or the continuation is refused from there: GD's
                # reading stands where the GD path would end on it (a run without a ⇒ edge is not judged, not
                # escalated).  Draws of fresh stress seeds sit at a point GD's arithmetic keeps exactly
                # (examples/section5_stationary_start.json, section5_symmetric_saddle.json: W ~ 1e-12 at 2e7 steps;
                # section5_exp_stationary_saddle.json: a stationary point at ||W|| = 0.594, gradient 1e-13); the
                # continuation's own rounding, amplified there, is in its bound (10^3 to 1e199), so every later
                # budget is ambiguous, and from GD's longer run the continuation leaves the point GD keeps.
                own = local_run(p, theory_problem, longer, select, reject, step)
                if own["not_judged"] == NO_EDGE:
                    past = out[1] if out is not None else again.get("continuation_note", "").strip(" ()")
                    own["continuation_note"] = f" (on GD at {b1:.0e}; through the continuation past it: {past})"
                    return "not judged", NO_EDGE + own["continuation_note"], own
            if out is not None:
                return out[0], f"{out[1]} (GD re-run to {b1:.0e}, where the continuation's bound was too wide)", out[2]
    if stopped:
        # Nothing decided before the stop (a failed, ambiguous or bound-limited budget is not the horizon's):
        # GD takes over, as where the continuation failed outright (an lsq draw of a fresh stress seed stalled
        # before 2e6 with its 2e5 within the bound: the stop alone would have left it undecided at 2e5).
        r["continuation_note"] = f" (through the continuation: {state} at {last['steps']:.0e}; {stopped})"
        return None
    last["history"], last["skipped"] = history, skipped
    last["settled"] = state == "failed"
    last["not_judged"] = None if state == "failed" else state
    if state != "failed":
        undecided = ("not judged", f"{UNDECIDED if state in BOUND_LIMITED else ''}{state} at {last['steps']:.0e} "
                     f"steps-equivalent (continued from GD at {tau1})" + _skipped(skipped[:-1]), last)
        before = dict(skipped).get(ladder[-2]) if len(ladder) > 1 else None
        if state == CHANGED or (state in (NO_GROWTH, NO_GROWTH_WITHIN_BOUND) and before == CHANGED):
            # A selection that changed in the last decade, or in the one before it (the growth ratio at the top
            # then compares the settled decade with the change's): no settled span to judge at the top.
            return _past_the_horizon(p, theory_problem, r, select, reject, note, ladder, anchored, variant, undecided)
        if state in BOUND_LIMITED and variant == lcont.FIRST_ORDER:
            return _second_order(p, theory_problem, r, select, reject, note, ladder, anchored, undecided)
        return undecided
    rate = history[-1][2]
    # The trend is read over the last decade, within the settled stretch: a budget whose selection changed
    # separates two runs toward different pseudo-TPGs (a stress draw, seeds 11-55, square loss, was 17.2 at
    # 2e5 in transit against 4.56, 5.38, ..., 8.54 from 2e7 to 2e12: γ ~ 1, the misalignment signature).
    top, prior = ladder[-1], (ladder[-2] if len(ladder) > 1 else None)
    rejected, gamma = False, float("nan")
    if top in settled_rates and prior in settled_rates:
        rejected, gamma = trend_rejects((prior, settled_rates[prior][0]), (top, settled_rates[top][1]),
                                        last["pseudo"].svm.norm, r["eta"])
    if not rejected:
        undecided = "not judged", _unresolved(gamma, last["steps"], " steps-equivalent") + _skipped(skipped), last
        if prior not in settled_rates:  # no settled decade before the top: its selection changed late
            return _past_the_horizon(p, theory_problem, r, select, reject, note, ladder, anchored, variant, undecided)
        nominal = {n: q for n, _, q, *_ in history}
        own = _gamma((prior, nominal[prior]), (top, nominal[top]), last["pseudo"].svm.norm, r["eta"]) \
            if prior in nominal and top in nominal else float("nan")
        if gamma <= criteria.TREND_HOLD and own <= criteria.TREND_HOLD:
            # Converging (γ <= TREND_HOLD for every W within the bound and for the continued W itself) with a rate
            # not yet below the escalated line: judged again a decade later, up to _extension_max.  (Where only the
            # bound makes γ converging, the tighter bounds come first: below.)
            return _past_the_horizon(p, theory_problem, r, select, reject, note, ladder, anchored, variant, undecided,
                                     why=f"converging (γ = {gamma:.3g}) but not yet aligned there")
        if criteria.TREND_HOLD < own < criteria.TREND_FAIL:
            # Between the lines the budget escalates (criteria.TREND_HOLD): at the ladder's top, too, as a converging
            # direction's does.  Neither line moves, and a later budget is judged by the same zones, so a wrong limit
            # (γ -> 1) is rejected there as here.  Measured on the draw of a fresh stress seed
            # (examples/section5_trend_between_the_lines.json, square loss, η = 6.0): γ = 0.573 at 2e12, its rate
            # gaining 0.64 .. 0.35 a decade from 2e6 to 2e12; extended, 7.23, 7.48, 7.61, 7.60 from 2e12 to 2e15 in
            # extended precision (γ -> 0: converging), its rate above DIRECTION_RATE_ESCALATED (6.0) with no sign of
            # falling below it; aligned at 2e14 by the level trend (criteria.DIRECTION_LEVEL_TAN: γ 0.24, tan θ 0.237).
            return _past_the_horizon(p, theory_problem, r, select, reject, note, ladder, anchored, variant, undecided,
                                     why=f"its trend γ = {own:.3g} between the lines")
        # γ is read between the least rate at the top and the largest a decade before, over every W within the
        # bound: a bound of a few per cent of the increment can turn a settled misalignment's γ = 1 into a
        # "converging" one (a square-loss draw of a fresh stress seed: nominal rates 6.21, 6.95 at 2e11, 2e12,
        # within the first-order bound [5.87, 6.55] and [6.30, 7.61], γ -0.34; through the second order
        # [6.208, 6.210] and [6.949, 6.953], γ 0.99).
        return _second_order(p, theory_problem, r, select, reject, note, ladder, anchored, undecided) \
            if variant == lcont.FIRST_ORDER else undecided
    return ("not aligned", _failed(last, rate, note, history) + f"; trend γ = {gamma:.3g} over the last decade"
            + _skipped(skipped), last)
