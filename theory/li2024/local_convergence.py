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
not judged, with the reason.  The budget is Theorem 1's (``10^4 τ₀`` of the pseudo-TPG's Graph-SVM, at
least ``STEPS``), and a failed verdict is re-judged at 10x the budget up to ``ESCALATE_MAX`` (see
:func:`verdict`).
"""
from __future__ import annotations

import numpy as np

from theory.li2024 import criteria
from theory.li2024.analysis import analyze
from theory.li2024.losses import safe_step
from theory.core.problem import Problem
from theory.li2024.pseudo import REJECT, SELECT, pseudo_svm, pseudo_tpgs
from theory.li2024.training import train

STEPS = 200_000
# The raw correlation carries the bounded transient (it converges like 1/log τ; the stress profile saw
# 0.948 with an incremental 0.997), so it gets the looser bound.
CORR_MIN = 0.9
# A failed verdict is re-judged at 10x the budget, up to ESCALATE_MAX steps (see verdict).
ESCALATE_MAX = 20_000_000

OUTCOMES = ("aligned", "not aligned", "not judged")


def _corr(A, B) -> float:
    na, nb = np.linalg.norm(A), np.linalg.norm(B)
    return float(np.sum(A * B) / (na * nb)) if na > 0 and nb > 0 else float("nan")


def local_run(problem: Problem, theory_problem: Problem, traj=None, select: float = SELECT,
              reject: float = REJECT) -> dict:
    """Train (unless ``traj`` is given) and measure one relaxed problem with the selection rule's
    thresholds; ``theory_problem`` is the same data under the assumptions (for the true TPG's W^svm).

    The budget is Theorem 1's (``criteria.budget``: ``10^4 τ₀`` with ``τ₀`` from the pseudo-TPG's
    Graph-SVM, at least ``STEPS``): the run is extended to it when the pseudo-TPG at ``STEPS`` asks for
    more, since the direction test presumes ``τ >= 10^4 τ₀``.  Measured on the ci-found case that failed
    at a fixed 2e5 steps (τ = 7.5e3 τ₀): ``tan θ · ln(τ/τ₀)`` = 3.66, 1.39, 0.14 at 2e5, 2e6, 2e7 steps
    (raw correlation 0.9923, 0.9969, 0.9980), i.e. a transient, not a wrong direction."""
    p = problem
    eta = safe_step(p)
    traj = traj or train(p, STEPS, eta)
    ps = pseudo_svm(p, traj.final.W, select, reject, name="relaxed head case")
    if ps.svm.norm > 0:
        need = 10**criteria.DECADES * criteria.time_unit(ps.svm.norm, eta)
        if need > criteria.MAX_STEPS:
            return {"pseudo": ps, "settled": False, "not_judged": "10^4 time units exceed MAX_STEPS",
                    "steps": traj.final.step, "eta": eta}
        if need > traj.final.step:
            traj = train(p, criteria.budget(ps.svm.norm, eta), eta)
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
        reason = "pseudo-TPG without ⇒ edge"
    elif earlier[1] > 0 or ps.ambiguous > 0:
        reason = "an ambiguous token at τ/10 or τ"
    elif not same:
        reason = "selection changed over the last decade"
    elif not growth:
        reason = "no log growth along the pseudo-TPG Graph-SVM"
    else:
        reason = None
    return {"pseudo": ps, "true": true, "W": end.W, "dW": end.W - mid.W, "settled": reason is None,
            "not_judged": reason, "steps": steps, "eta": eta,
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
            reject: float = REJECT, note: str = "") -> tuple[str, str, dict]:
    """``(outcome, why, last run)`` with outcome ``"aligned"``, ``"not judged"`` or ``"not aligned"``; a
    failed verdict escalates the budget before it is believed.

    The claim is about the limit, and with a head that breaks Assumption 1 GD can sit for a decade or more
    near one pseudo-TPG's direction and then change its selection (a token at attention 1e-4 coming back
    to 0.14): measured on the former strict-xfail ``LOCAL_COUNTEREXAMPLE``, ``tan θ · ln(τ/τ₀)`` = 7.8,
    16.3, 3.2 at 2e5, 2e6, 2e7 steps with raw correlation 0.930, 0.866, 0.9989 (the selection changed
    after 2e6), and on a ci-found case 13.7, 4.9, 0.005.  So a failed verdict is re-judged at 10x the
    budget up to ``ESCALATE_MAX``; the verdict at the last budget counts.  If it still fails there but the
    statistic fell below its value at the first budget, the run is converging and out of budget: not
    judged.  A wrong limit direction keeps ``tan θ`` constant, so the statistic grows with the budget and
    fails (the planted-threshold calibration of ``properties/li2024/test_section5.py``)."""
    p = problem
    r = local_run(p, theory_problem, traj, select, reject)
    if r["not_judged"] is not None:
        return "not judged", r["not_judged"], r
    ok, rate = aligned(r)
    history = [(r["steps"], r["corr_pseudo"], rate)]
    while not ok and r["steps"] * 10 <= ESCALATE_MAX:
        r = local_run(p, theory_problem, train(p, r["steps"] * 10, r["eta"]), select, reject)
        if r["not_judged"] is not None:
            return "not judged", f"in transit when the budget was extended ({r['not_judged']})", r
        ok, rate = aligned(r)
        history.append((r["steps"], r["corr_pseudo"], rate))
    r["history"] = history
    trail = "; ".join(f"{n:.0e} steps: corr {c:.4f}, tan x ln(τ/τ₀) {q:.3g}" for n, c, q in history)
    if ok:
        return "aligned", trail, r
    if rate < history[0][2]:
        return "not judged", f"converging but not aligned within {ESCALATE_MAX:.0e} steps", r
    return "not aligned", (f"{note + ': ' if note else ''}corr(W, W^svm_pseudo) = {r['corr_pseudo']:.4f} "
                           f"(>= {CORR_MIN}), incremental {r['inc_pseudo']:.4f}: tan x ln(τ/τ₀) = {rate:.3g} "
                           f"(<= {criteria.DIRECTION_RATE}); budgets: {trail}"), r
