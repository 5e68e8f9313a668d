"""Claims about the layer trained as transformers train it, ``W = W_K W_Q^T`` (issue 38).

Two claims, labelled by what is known:

* ``li2024.kq_path``: the factorized regularization path (least loss with ``||W_K||² + ||W_Q||² <= 2R``,
  i.e. over the nuclear ball ``||W||_* <= R``, :mod:`theory.li2024.kq_path`) converges in direction to the
  nuclear-norm Graph-SVM ``W^nuc`` (:mod:`theory.li2024.nuclear`).  A theorem for single-token selection
  (Tarzanagh, Li, Thrampoulidis, Oymak 2023, Transformers as Support Vector Machines), a conjecture for
  token-priority graphs.
* ``li2024.kq_gd``: gradient descent on ``(W_K, W_Q)`` from a small random start converges in direction to
  ``W^nuc`` or to a locally optimal direction.  A conjecture (for single-token selection, Tarzanagh et al.
  prove local directions can occur; for TPGs nothing is proved).

Both are judged on the part of ``W`` off ``S_fin`` (``W^nuc`` satisfies the ≍ constraints, so it lies in
``S_fin^⊥`` like ``W^svm``; the ``S_fin`` part stays bounded along both the path and GD).

**The path criterion** (:func:`path_zone`), on the direction error ``e(t) = ||W⊥/||W⊥|| - Ŵ^nuc||`` at the
margins ``t = offset + 1, 2, 4, 8, 16`` (radii ``R_t = ||W^fin + t W^nuc||_*``; ``offset`` the finite part's
score debt, :func:`theory.li2024.regpath_verdict.margin_offset`):

* accept: ``e_last <= RESOLVED`` (1e-3), or ``e`` shrinking over the last doubling and either
  ``e_last <= CLOSE`` or ``R e`` on the
  ``(log t)/t`` track (growth at most :func:`theory.li2024.regpath_verdict.on_track_limit`, with
  ``e_last <= DIR_MAX``, as Theorem 2's rule);
* reject (only at the escalated margins 32, 64): ``e_last > CLOSE`` and ``e_last >= PLATEAU e_prev``;
* otherwise undecided, and undecided where a radius does not certify (counted by reason).

Why these thresholds and not Theorem 2's ``DIR_MAX = 0.2`` alone: a target 10° away has a limiting
``e = 2 sin 5° = 0.174 < 0.2``, so the Frobenius direction would pass a 0.2 threshold.  ``CLOSE = 0.05``
(2.9°) is a third of that.  Measured (the Gaussian problems of ``benchmarks/nuclear_angles.py`` whose two
SVMs are 11-17° apart): the nuclear path's angle to ``W^nuc`` fell 12.0, 6.6, 3.7, 2.1, 1.1° at t = 4..64
(``R e`` growth 1.10-1.13 per doubling), its angle to ``W^svm`` 17.0, 13.5, 12.1, 11.6, 11.3° (growth
1.59, 1.80, 1.91, 1.96; e ratio 0.79, 0.90, 0.95, 0.98): the track separates them from t = 8 -> 16 on, the
plateau from 16 -> 32.

**The GD criterion** (:func:`gd_decide`), on decade increments ``Δ_k = W(10^{k+1}) - W(10^k)`` (the finite
part cancels to first order), their direction error ``e_k`` to ``Ŵ^nuc`` and their change
``c_k = ||Δ̂_k - Δ̂_{k-1}||``:

* accept: ``e_last <= CLOSE`` and shrinking;
* never reject; undecided otherwise, and the reason tells two cases apart: the increment has *settled*
  elsewhere over two decades -- ``e_last > CLOSE``, ``e_last >= STALL e_{last-2}`` (the error two decades
  earlier; 0.92), ``c <= SETTLED`` over each of the last two decades (measures ``settled`` and the settled
  direction's :func:`stationarity_residual`) -- or the run is still moving.

Why a settled direction is not a rejection.  The rule rejected one whose stationarity residual was above
0.05 (neither ``W^nuc`` nor a stationary direction), calibrated on two problems.  Measured on 21 problems
(the kq-phase sweep's nine and twelve draws of ``strategies.kq.disagreeing_problems``;
``benchmarks/kq_stationarity.py``, ``benchmarks/RESULTS.md``), every run-budget where the settled test
passes: GD on the factors (valid) settles with residuals 0.034-0.069 at ``m = d`` and 0.95 at ``m = 3, 5`` on
a 6x6 problem still closing on ``W^nuc``; plain-W GD (planted, on ``W^svm``) with 0.065-0.20.  No threshold
separates them, and the residual's trend over two decades does not either (valid 0.064-1.00, planted
0.63-1.09).  The valid runs sit near a saddle of the factorized problem (their increment nearly rank one, the
second singular value creeping 0.0187, 0.0196, 0.0203 of the first a decade on a stress draw whose residual
fell 0.075, 0.062, 0.053, 0.048 from 10^5 to 10^8 steps): GD on factors from a small start can linger near
such points for decades, which no two-decade test at these budgets tells from a limit.  The stress draw was
a false 'fails' (residual 0.0532 at 10^7), and so were two of the twelve draws (0.0565 at 10^6, 0.0694 at 10^7).

``gd_escalate`` applies it at 10^5, 10^6, 10^7 steps (``GD_MAX_STEPS x budget_scale``), stopping at the
first decided budget; undecided at the largest.  Why two decades and not one: GD on the factors approaches
``W^nuc`` slowly, by 2-14% a decade, and a one-decade test (``e_last >= 0.9 e_prev``) took such runs for
stopped ones (6 false 'fails' of 36 at 10^6, 3 at 10^7: the comment at ``GD_MAX_STEPS``); over two decades
the error of those whose direction had settled fell to at most 0.891 of itself, where plain-W GD's, settled
on ``W^svm``, kept at least 0.947 (the comment at ``STALL``).

The stationarity test: ``(W_K, W_Q)`` balanced with ``W_K W_Q^T = V`` is a KKT point of
``min ½(||W_K||² + ||W_Q||²)`` s.t. the Graph-SVM constraints iff ``Y V^T = (V V^T)^{1/2}`` and
``Y^T V = (V^T V)^{1/2}`` for ``Y = Σ λ_b R_b - Σ μ_e R_e`` with ``λ >= 0`` on the active ``⇒`` rows (``R``
the constraint rows as matrices; from ``W_K = Y W_Q``, ``W_Q = Y^T W_K``).  ``W^nuc`` meets it (``Y`` its
dual, a subgradient of ``||·||_*``); ``W^svm`` need not: its own Frobenius multipliers give ``Y = W^svm``,
which meets it only when the nonzero singular values are equal, and on the problems measured below no other
multipliers came close (residuals 0.12 and 0.19).

Calibration, measured on the Gaussian problems #1 (11.2° apart) and #3 (17.3°) of
``benchmarks/nuclear_angles.py``: the nuclear path holds against ``W^nuc`` (e = 0.065, 0.067 at t = 16) and
fails against ``W^svm`` (plateau at e = 0.197, 0.302 at t = 64); plain-W GD (Theorem 1's run, 10^5 steps)
settles against ``W^nuc`` (c = 0.006 and 0.019, KKT residual 0.12 and 0.20: the former rejection, above) and
holds against ``W^svm``; GD on ``(W_K, W_Q)`` (m = d) is undecided, still moving at 10^5 steps (e = 0.21 and 0.22, c = 0.08
and 0.04), as ``benchmarks/RESULTS.md`` found.  The two-decade rule's calibration on the kq-phase sweep's
problems is at ``STALL``.
"""
from __future__ import annotations

import numpy as np

from theory.core.claims import Claim, Domain
from theory.core.decision import ACCEPT, BETWEEN, REJECT, Outcome, Verdict
from theory.li2024.claims import HEAD, INDEPENDENT, LABEL, LOG_LOSS

__all__ = ["CLAIMS", "CLOSE", "KQ_GD", "KQ_PATH", "PLATEAU", "SETTLED", "STALL", "decade_marks", "destination",
           "gaussian_problem", "gd_budgets", "gd_decide", "gd_errors", "gd_escalate", "judge_kq_gd", "judge_kq_path",
           "path_zone", "stationarity_residual"]

PAPER = ("Tarzanagh, Li, Thrampoulidis, Oymak (2023), Transformers as Support Vector Machines, in the setting of "
         "Li et al. (2024)")
CLOSE = 0.05  # direction error counted as converged: 2.9°, a third of a 10° target's 0.174
# A direction error below this counts as converged whether or not it still shrinks.  The factorized path's
# minimizer need not be unique (the nuclear ball's faces; directions the loss does not see), and the solver
# returns one of them: on three agreeing control problems whose path was exactly along W^nuc (e <= 1e-10) up to
# t = 8, the certified point at t = 16 was off by 1.2e-7, 5.0e-5 and 1.6e-4 (a value-certified selection).
# 1e-3 is 6x the largest and 170x under a 10° target's 0.174.
RESOLVED = 1e-3
PLATEAU = 0.9  # path: e kept at least this share of itself over a doubling: not converging
SETTLED = 0.02  # GD: the increment's direction moved at most this much over the last decade
PATH_MARGINS = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
PATH_ESCALATION = np.array([32.0, 64.0])
# GD: e two decades on kept at least this share of itself (with the direction moved <= SETTLED over each of
# those two decades): the error stopped shrinking.  Calibrated both ways on decade checkpoints of the kq-phase
# sweep's 9 problems (theory.run.sweep.kq_phase_run, 3 shapes x 3 seeds), read at 10^5, 10^6 and 10^7 steps:
# valid = GD on (W_K, W_Q) at the 4 widths judged against W^nuc, on every run not yet within CLOSE (91 of the
# 108 run-budgets); planted = plain-W GD (Theorem 1's engine) judged against W^nuc (27) and GD on the factors
# judged against W^svm (108).  Where the direction had settled over both decades (c <= SETTLED twice), the
# worst valid ratio was 0.891 (the 6x6 problem of seed 1 at 10^7, widths d-1 and d: e = 0.100, 0.098, 0.089;
# 0.860 at d/2), the mildest planted 0.947 (plain-W GD on the 6x6 problem of seed 2 at 10^7: e = 0.230, 0.222,
# 0.218, converging geometrically to 0.21); the others 0.972-1.02.  0.92 sits between, 0.029 above the
# one and 0.027 below the other: a thin margin, and it widens with the budget (the valid 6x6 runs fall to
# 0.78 at 10^8, e = 0.1026 -> 0.0804; a planted run's ratio tends to 1).  Valid runs whose ratio was above
# 0.92 had not settled: 0.921-0.935 at 10^6 (c = 0.058-0.19 a decade earlier).  Runs within CLOSE are accepted
# before this test and were not counted; two of them settled slowly, 0.907 and 0.918 (the 4x6 problem of seed 1
# at 10^7, e = 0.053 -> 0.049): an approach can be this slow, which is why the margin is not wider.
STALL = 0.92
# x budget_scale; gd_escalate tries 10^5, 10^6, 10^7 (re-trained from scratch, <= 11% over the last).  Raised
# from 10^5 with the two-decade rule above (the compiled engine, theory.li2024.factor_engine: 10^6 steps in
# ~1 s on the suite's sizes, 10^7 in 5-19 s, measured on the 36 kq-phase runs).  Under the old one-decade
# rule (e_last >= PLATEAU e_prev, c_last <= SETTLED) raising the budget gave false 'fails': 6 of 36 at 10^6
# and 3 at 10^7, all runs still closing on W^nuc (the 6x6 cell's seed 1 at m = 3: e = 0.107, 0.103, 0.092,
# 0.080 at 10^5..10^8; its increment's KKT residual 0.95-0.70: a direction still on its way is not stationary
# either).  Under the two-decade rule, escalating to 10^7: 8 hold, 0 fail, 28 undecided (3 / 0 / 33 at 10^5
# before); plain-W GD against W^nuc fails on all 9 problems (5 by 10^6), GD on the factors against W^svm
# holds on none.  (Those "fail" counts are the former rule's, which rejected a settled direction on its
# stationarity residual: the module docstring says why that went.)  10^8 (100-150 s a run) is left out: no longer a check's cost.
GD_MAX_STEPS = 10_000_000
GD_MIN_STEPS = 100_000  # three decade increments (10^2 -> 10^5), the fewest gd_decide judges on


def _unit(W):
    n = float(np.linalg.norm(W))
    return W / n if n > 0 else W


def _space(an):
    from theory.li2024.regpath_verdict import WholeSpace

    return an.space if an.finite is not None else WholeSpace()


def path_zone(path, space, target, margins, final: bool) -> tuple[str, str]:
    """The path criterion's zone (module docstring) for the direction of ``path`` against ``target``.

    Parameters
    ----------
    path : list
        Certified path points (``.W``) at ``margins``.
    space : theory.li2024.subspace.CyclicSubspace or theory.li2024.regpath_verdict.WholeSpace
        ``S_fin``; the direction is read off it.
    target : numpy.ndarray
        The direction claimed (``W^nuc``; a planted one in the calibrations).
    margins : numpy.ndarray
        The margins ``t`` of the points.
    final : bool
        True at the escalated margins: only then may the zone be ``reject``.

    Returns
    -------
    tuple
        The zone (``accept``, ``between`` or ``reject``) and the measured errors and rates in words.
    """
    from theory.li2024.regpath_verdict import DIR_MAX, EXACT, direction_errors, on_track_limit, perp_norms, track_growth

    e = direction_errors(path, space, target)
    why = f"e={np.array2string(e, precision=4)} at t={np.array2string(np.asarray(margins), precision=4)}"
    if e[-1] <= EXACT:
        return ACCEPT, why + ": exact"
    if len(e) < 2:
        return BETWEEN, why + ": one certified radius"
    growth = track_growth(perp_norms(path, space), e)
    track = on_track_limit(margins[-2], margins[-1])
    usable = margins[-1] / margins[-2] > track
    shrinking = e[-1] < e[-2]
    why += f"; shrinking {shrinking}, R e grew {growth:.3f}x (track max {track:.3f}), last ratio {e[-1] / max(e[-2], 1e-300):.3f}"
    if e[-1] <= RESOLVED or shrinking and (e[-1] <= CLOSE or (usable and growth <= track and e[-1] <= DIR_MAX)):
        return ACCEPT, why
    if final and e[-1] > CLOSE and e[-1] >= PLATEAU * e[-2]:
        return REJECT, why
    return BETWEEN, why


def _certified_prefix(problem, radii, resume=None):
    """The path at ``radii`` up to the first radius that does not certify; ``(points, why_stopped)``."""
    from theory.li2024.kq_path import nuclear_path
    from theory.li2024.svm import SolverError

    pts = []
    for R in radii:
        try:
            pts += nuclear_path(problem, [R], resume=pts[-1] if pts else resume)
        except SolverError as exc:  # RoundingLevel included
            return pts, str(exc)
    return pts, None


def judge_kq_path(problem, budget_scale: float = 1.0, target=None) -> Verdict:
    """The claim ``li2024.kq_path`` on ``problem``: the path criterion of the module docstring.

    Parameters
    ----------
    problem : Problem
        Log loss under Assumptions 1-2.
    budget_scale : float
        Below 1 the path is judged at ``t <= offset + 16`` only (no escalation, so never 'fails').
    target : numpy.ndarray, optional
        Replaces ``W^nuc`` (the calibration's planted target).

    Returns
    -------
    Verdict
        Holds, fails (only at the escalated margins), undecided (between, or radii not certified: counted
        in ``measures["certified"]``), not applicable when ``W^nuc = 0``.
    """
    from theory.li2024.analysis import analyze
    from theory.li2024.nuclear import nuclear_norm, nuclear_svm
    from theory.li2024.regpath_verdict import margin_offset

    an = analyze(problem)
    nuc = nuclear_svm(problem)
    if nuc.norm == 0:
        return Verdict(Outcome.NOT_APPLICABLE, {}, reason_text="W^nuc = 0 (no ⇒ edge): no direction to converge to")
    target = nuc.W if target is None else target
    fin = an.finite.W if an.finite is not None else np.zeros_like(nuc.W)
    offset = margin_offset(problem, an)
    margins = offset + PATH_MARGINS
    radii = [nuclear_norm(fin + t * nuc.W) for t in margins]
    space = _space(an)
    pts, stopped = _certified_prefix(problem, radii)
    if len(pts) < 3:
        return Verdict(Outcome.UNDECIDED, {"certified": len(pts)}, budget=len(pts),
                       reason_text=f"only {len(pts)} radii certified: {stopped}")
    zone, why = path_zone(pts, space, target, margins[:len(pts)], final=False)
    if zone == ACCEPT:
        return Verdict(Outcome.HOLDS, {"certified": len(pts)}, budget=len(pts), reason_text=why)
    if budget_scale < 1 or stopped:
        reason = why + (f"; not escalated: radius t = {margins[len(pts)]:.4g} not certified: {stopped}" if stopped
                        else "; not escalated (budget scale < 1)")
        return Verdict(Outcome.UNDECIDED, {"certified": len(pts)}, budget=len(pts), reason_text=reason)
    more_m = offset + PATH_ESCALATION
    more, stopped = _certified_prefix(problem, [nuclear_norm(fin + t * nuc.W) for t in more_m], resume=pts[-1])
    allm = np.concatenate([margins, more_m[:len(more)]])
    zone, why2 = path_zone(pts + more, space, target, allm, final=not stopped and len(more) == len(more_m))
    outcome = {ACCEPT: Outcome.HOLDS, REJECT: Outcome.FAILS, BETWEEN: Outcome.UNDECIDED}[zone]
    reason = f"at t <= {margins[-1]:.4g}: {why}; escalated: {why2}" + (f"; stopped: {stopped}" if stopped else "")
    return Verdict(outcome, {"certified": len(pts) + len(more), "escalated": True}, budget=len(pts) + len(more),
                   reason_text=reason)


# ------------------------------------------------------------------------------------------------
# GD on (W_K, W_Q)
# ------------------------------------------------------------------------------------------------
def stationarity_residual(V: np.ndarray, problem, graphs=None) -> float:
    """Relative residual of the factorized max-margin KKT conditions at the direction ``V`` (module
    docstring), after scaling ``V`` to least ``⇒`` margin 1.

    Parameters
    ----------
    V : numpy.ndarray
        A direction (d x d).
    problem : Problem
        Its problem (the Graph-SVM rows).
    graphs : dict, optional
        The problem's TPGs (computed when omitted).

    Returns
    -------
    float
        ``||A(λ, μ) - rhs|| / ||rhs||`` at the least-squares multipliers (``λ >= 0`` on the ``⇒`` rows within
        10% of the least margin, ``μ`` free); ``inf`` when ``V`` does not separate (a ``⇒`` margin <= 0).
    """
    from scipy.optimize import lsq_linear

    from theory.li2024.svm import SolverError, constraints

    cons = constraints(problem, graphs)
    d = problem.d
    margins = cons.dominate @ V.ravel()
    if len(margins) == 0 or margins.min() <= 0:
        return float("inf")
    V = V / margins.min()
    margins = margins / margins.min()
    U, s, Vt = np.linalg.svd(V)
    left, right = (U * s) @ U.T, (Vt.T * s) @ Vt
    active = np.flatnonzero(margins <= 1 + 0.1)  # complementary slackness, to the direction's accuracy
    rows = [cons.dominate[b].reshape(d, d) for b in active] + [r.reshape(d, d) for r in cons.equal]
    cols = [np.concatenate([(Rb @ V.T).ravel(), (Rb.T @ V).ravel()]) for Rb in rows]
    A = np.array(cols).T
    rhs = np.concatenate([left.ravel(), right.ravel()])
    lb = np.concatenate([np.zeros(len(active)), np.full(len(cons.equal), -np.inf)])
    # The multipliers 0 are feasible, so the optimum is at most 1: a larger answer is the solver's failure
    # (trf returned 1.8e12 on a degenerate system of the kq-phase 4x4 problem of seed 1), and BVLS is asked.
    for method in ("trf", "bvls"):
        with np.errstate(invalid="ignore", over="ignore"):
            res = lsq_linear(A, rhs, bounds=(lb, np.full(len(rows), np.inf)), method=method)
        out = float(np.linalg.norm(A @ res.x - rhs) / np.linalg.norm(rhs))
        if np.isfinite(out) and out <= 1.0 + 1e-9:
            return out
    raise SolverError(f"stationarity residual: lsq_linear gave {out:.3g} > 1 (zero multipliers give 1)")


def gd_errors(checkpoints, space, target):
    """The decade increments of a run and their direction errors.

    Parameters
    ----------
    checkpoints : list
        Checkpoints (``.step``, ``.W``) including the decades 10^2, 10^3, ...
    space : theory.li2024.subspace.CyclicSubspace or theory.li2024.regpath_verdict.WholeSpace
        ``S_fin``; increments are read off it.
    target : numpy.ndarray
        The direction compared with.

    Returns
    -------
    tuple
        The end step of each increment, the errors ``e_k = ||Δ̂_k - target/||target|| ||``, the changes
        ``c_k = ||Δ̂_k - Δ̂_{k-1}||`` (NaN first) and the unit increments.
    """
    steps = [c.step for c in checkpoints]
    Ws = {c.step: c.W for c in checkpoints}
    decades = [s for s in steps if s > 0 and np.isclose(np.log10(s), round(np.log10(s)))]
    incs = []
    for a, b in zip(decades, decades[1:]):
        D = Ws[b] - Ws[a]
        incs.append(_unit(D - space.project(D)))
    u = _unit(target)
    e = np.array([np.linalg.norm(D - u) for D in incs])
    c = np.array([np.nan] + [np.linalg.norm(incs[i] - incs[i - 1]) for i in range(1, len(incs))])
    return decades[1:], e, c, incs


def gd_decide(checkpoints, problem, an, target) -> Verdict:
    """The GD criterion of the module docstring on a trajectory's checkpoints, at one budget.

    Parameters
    ----------
    checkpoints : list
        Checkpoints (``.step``, ``.W``) at the decades 10^2, 10^3, ... (any trajectory: the calibration
        passes plain-W GD's).
    problem : Problem
        The problem.
    an : Analysis
        :func:`theory.li2024.analysis.analyze` of ``problem``.
    target : numpy.ndarray
        ``W^nuc``, or a planted direction.

    Returns
    -------
    Verdict
        Holds or undecided (fewer than 3 increments, still moving, or settled on a direction other than
        ``target``; never fails: module docstring), with ``e_last``, ``e_prev``, ``c_last``, ``c_prev``,
        ``stall`` (``e_last`` over ``e`` two decades earlier), ``steps``, ``settled`` (and ``kkt_residual``
        where settled).  ``gd_escalate``
        runs it at growing budgets.
    """
    space = _space(an)
    steps, e, c, incs = gd_errors(checkpoints, space, target)
    if len(e) < 3:
        return Verdict(Outcome.UNDECIDED, {}, reason_text=f"{len(e)} decade increments (3 needed)")
    stall = float(e[-1] / max(e[-3], 1e-300))
    why = (f"increment direction error to the target e={np.array2string(e, precision=4)}, change "
           f"c={np.array2string(c, precision=4)} at steps {steps}; e over two decades x{stall:.3f}")
    measures = {"e_last": float(e[-1]), "e_prev": float(e[-2]), "c_last": float(c[-1]), "c_prev": float(c[-2]),
                "stall": stall, "steps": int(steps[-1])}
    settled = e[-1] > CLOSE and stall >= STALL and c[-1] <= SETTLED and c[-2] <= SETTLED
    measures["settled"] = bool(settled)
    if e[-1] <= CLOSE and e[-1] < e[-2]:
        return Verdict(Outcome.HOLDS, measures, budget=int(steps[-1]), reason_text=why)
    if settled:
        kkt = stationarity_residual(incs[-1], problem, an.graphs)
        measures["kkt_residual"] = kkt
        return Verdict(Outcome.UNDECIDED, measures, budget=int(steps[-1]),
                       reason_text=f"{why}; settled over two decades on a direction other than W^nuc (KKT residual "
                                   f"{kkt:.3g}): a limit or a saddle GD lingers near, not told apart at this budget")
    return Verdict(Outcome.UNDECIDED, measures, budget=int(steps[-1]), reason_text=f"{why}; still moving")


def gd_budgets(top: int) -> list[int]:
    """The budgets :func:`gd_escalate` tries up to ``top``.

    Parameters
    ----------
    top : int
        The largest budget allowed (steps).

    Returns
    -------
    list of int
        The decades from ``GD_MIN_STEPS`` to the largest power of 10 at most ``top`` (none when
        ``top < GD_MIN_STEPS``).
    """
    if top < GD_MIN_STEPS:
        return []
    return [10 ** k for k in range(int(round(np.log10(GD_MIN_STEPS))), int(np.floor(np.log10(top) + 1e-9)) + 1)]


def decade_marks(steps: int) -> list[int]:
    """The checkpoints :func:`gd_errors` reads for a run of ``steps`` steps.

    Parameters
    ----------
    steps : int
        A power of 10, at least 100.

    Returns
    -------
    list of int
        10^2, 10^3, ..., ``steps``.
    """
    return [10 ** k for k in range(2, int(round(np.log10(steps))) + 1)]


def gd_escalate(run_to, problem, an, target, top: int) -> Verdict:
    """:func:`gd_decide` at the budgets :func:`gd_budgets` ``(top)``, ten times apart, until it decides.

    Parameters
    ----------
    run_to : callable
        ``run_to(steps)`` -> the run's checkpoints at :func:`decade_marks` ``(steps)``.  Deterministic from
        its start (:func:`judge_kq_gd` re-trains from scratch at each budget: the budgets are ten times
        apart, so the earlier runs add at most 11% to the last; the calibration passes plain-W GD).
    problem, an, target
        As :func:`gd_decide`.
    top : int
        The largest budget (steps).

    Returns
    -------
    Verdict
        The first decided verdict, or the verdict at the largest budget (undecided there), with the budgets
        tried in ``history`` and their measures in ``trail``.
    """
    budgets = gd_budgets(top)
    history, trail, v = [], [], None
    for B in budgets:
        v = gd_decide(run_to(B), problem, an, target)
        trail.append(dict(v.measures))
        if v.outcome is not Outcome.UNDECIDED or B == budgets[-1]:
            history.append((B, v.outcome.value))
            break
        history.append((B, "escalate"))
    if v is None:
        return Verdict(Outcome.UNDECIDED, {"budget": top},
                       reason_text=f"budget {top} steps under the {GD_MIN_STEPS} that 3 decade increments need")
    reason = v.reason if len(budgets) == 1 else f"at {history[-1][0]} steps (tried {[b for b, _ in history]}): {v.reason}"
    return Verdict(v.outcome, {**v.measures, "budgets": len(history)}, budget=history[-1][0], history=history,
                   reason_text=reason, trail=trail)


def judge_kq_gd(problem, budget_scale: float = 1.0, m: int | None = None, seed: int = 0, target=None) -> Verdict:
    """The claim ``li2024.kq_gd`` on ``problem``: GD on ``(W_K, W_Q)`` decided by :func:`gd_decide`.

    Parameters
    ----------
    problem : Problem
        Log loss under Assumptions 1-2.
    budget_scale : float
        Budgets 10^5, 10^6, ... up to ``GD_MAX_STEPS x budget_scale`` (:func:`gd_escalate`); undecided
        without running when that is under ``GD_MIN_STEPS``.
    m : int, optional
        Factor width (default ``d``).
    seed : int
        Seed of the factor start, entries ``N(0, 1e-4)``; the local safe step of
        :mod:`theory.li2024.factorized` (its compiled engine).
    target : numpy.ndarray, optional
        Replaces ``W^nuc`` (the calibration's planted target).

    Returns
    -------
    Verdict
        As :func:`gd_escalate`; not applicable when ``W^nuc = 0``.
    """
    from theory.li2024.analysis import analyze
    from theory.li2024.factorized import train_factorized
    from theory.li2024.nuclear import nuclear_svm

    cap = int(GD_MAX_STEPS * budget_scale)
    if cap < GD_MIN_STEPS:
        return Verdict(Outcome.UNDECIDED, {"budget": cap},
                       reason_text=f"budget {cap} steps under the {GD_MIN_STEPS} that 3 decade increments need")
    an = analyze(problem)
    nuc = nuclear_svm(problem)
    if nuc.norm == 0:
        return Verdict(Outcome.NOT_APPLICABLE, {}, reason_text="W^nuc = 0 (no ⇒ edge): no direction to converge to")
    width = problem.d if m is None else m

    def run_to(steps):
        return train_factorized(problem, steps, width, seed=seed, checkpoints=decade_marks(steps)).checkpoints

    return gd_escalate(run_to, problem, an, nuc.W if target is None else target, cap)


def destination(checkpoints, problem, an, nuclear, frobenius) -> tuple[str, dict]:
    """Where a GD run is heading, for the ``kq-phase`` sweep: ``"nuclear"`` when its last decade increment is
    nearer ``Ŵ^nuc`` than ``Ŵ^svm`` and got nearer over the last decade, ``"frobenius"`` the same with the
    two swapped, ``"neither"`` otherwise (nearer one while moving away from it).  A heading, not a
    convergence verdict: the measures carry the errors and :func:`gd_decide`'s verdict against ``W^nuc``.

    Parameters
    ----------
    checkpoints : list
        The run's checkpoints at decades (``.step``, ``.W``).
    problem : Problem
    an : Analysis
        :func:`theory.li2024.analysis.analyze` of ``problem``.
    nuclear, frobenius : numpy.ndarray
        ``W^nuc`` and ``W^svm``.

    Returns
    -------
    tuple
        The heading and ``{"e_nuc", "e_fro", "e_nuc_prev", "e_fro_prev", "verdict_nuc"}``.
    """
    space = _space(an)
    _, en, _, _ = gd_errors(checkpoints, space, nuclear)
    _, ef, _, _ = gd_errors(checkpoints, space, frobenius)
    v = gd_decide(checkpoints, problem, an, nuclear)
    m = {"e_nuc": float(en[-1]), "e_fro": float(ef[-1]), "e_nuc_prev": float(en[-2]), "e_fro_prev": float(ef[-2]),
         "verdict_nuc": v.outcome.value}
    if en[-1] < ef[-1] and en[-1] < en[-2]:
        return "nuclear", m
    if ef[-1] < en[-1] and ef[-1] < ef[-2]:
        return "frobenius", m
    return "neither", m


def gaussian_problem(rng, K: int, d: int):
    """A random problem as :mod:`strategies.kq` and ``benchmarks/nuclear_angles.py`` draw them.

    Parameters
    ----------
    rng : numpy.random.Generator
        The source of every draw.
    K, d : int
        Tokens and dimension (``d >= K``).

    Returns
    -------
    Problem
        Gaussian unit embeddings (K x d), 4..10 sequences of 2..6 uniform tokens, each label a token of its
        sequence, log loss, default head.
    """
    from theory.core.problem import Problem

    E = rng.standard_normal((K, d))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    seqs = [rng.integers(0, K, size=int(rng.integers(2, 7))).tolist() for _ in range(int(rng.integers(4, 11)))]
    labels = [int(rng.choice(s)) for s in seqs]
    return Problem.create(E, seqs, labels, "log")


KQ_PATH = Claim(
    "li2024.kq_path", PAPER, "Regularization path of W_K W_Q^T (theorem for single-token selection, conjecture for "
    "token-priority graphs)",
    "the factorized regularization path (least loss with ||W_K||² + ||W_Q||² <= 2R, i.e. ||W||_* <= R) converges "
    "in direction to the nuclear-norm Graph-SVM W^nuc: a theorem for single-token selection, a conjecture for "
    "token-priority graphs",
    (LOG_LOSS, HEAD, LABEL, INDEPENDENT),
    "certified nuclear-ball path at margins up to 16 past W^fin's score debt: direction error to W^nuc shrinking "
    "and <= 0.05 or on the (log t)/t track; rejected only at margins 32, 64 when it plateaus above 0.05",
    ("the nuclear path judged against the Frobenius W^svm (>= 10° apart)",
     "the Frobenius path (Theorem 2's) judged against W^nuc"),
    ("properties/li2024/test_factorized.py",),
    judge_kq_path, Domain(("log",), ("biorthogonal",)))

KQ_GD = Claim(
    "li2024.kq_gd", PAPER, "GD on (W_K, W_Q) (conjecture)",
    "gradient descent on (W_K, W_Q) from a small random start converges in direction to the nuclear-norm "
    "Graph-SVM W^nuc or to a locally optimal direction (a conjecture)",
    (LOG_LOSS, HEAD, LABEL, INDEPENDENT),
    "decade increments of W: holds when within 0.05 of W^nuc and shrinking; never fails (a direction settled "
    "over two decades elsewhere, moved <= 0.02 in each with its error kept >= 0.92 of itself, may be a saddle "
    "GD lingers near: undecided, with its stationarity residual); budgets 10^5, 10^6, 10^7 steps x budget "
    "scale, escalated while undecided",
    ("plain-W GD (Theorem 1's run, heading to W^svm) judged against W^nuc",),
    ("properties/li2024/test_factorized.py",),
    judge_kq_gd, Domain(("log",), ("biorthogonal",)))

CLAIMS = (KQ_PATH, KQ_GD)
