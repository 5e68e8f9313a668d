"""What the Li et al. 2024 properties share with other modules (the quality tests, the sweep's tests, the
benchmarks): the theorem problems and starts they draw, the runs at a theorem's budget, the Section 5
verdict.  Not a test module: no module imports a test module.
"""
from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import event
from hypothesis import strategies as st

from properties.judging import not_judged
from reports.record import record_inputs
from strategies import trainable_problems
from strategies.problems import structures_of
from theory.li2024 import criteria
from theory.li2024 import local_convergence as lc
from theory.li2024.analysis import analyze
from theory.li2024.losses import safe_step
from theory.li2024.pseudo import REJECT, SELECT
from theory.li2024.regpath import RoundingLevel, convex_case, regularization_path
from theory.li2024.svm import SolverError
from theory.li2024.regpath_verdict import radii_for
from theory.li2024.training import train

# ------------------------------------------------------------------------------------------------
# Theorem 1
# ------------------------------------------------------------------------------------------------
theorem_problems = trainable_problems()


@st.composite
def initial_weights(draw, d: int):
    """A random ``W(0)`` (Theorem 1 holds from any start): scale 0 .. 1, seeded.  Larger starts are as
    valid but cost ``e^{gap}`` more steps (see :func:`theory.li2024.criteria.time_unit`)."""
    scale = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]), label="init_scale")
    seed = draw(st.integers(0, 2**16), label="init_seed")
    return scale * np.random.default_rng(seed).normal(size=(d, d))


step_fractions = st.sampled_from([1.0, 0.5, 0.25])  # of the safe step 1/β


def independent_theorem1(problem, verdict, eta: float, W0=None) -> str:
    """What the independent computation (``oracles/theorem1.py``, no code shared with ``theory/``) reads of a
    failing Theorem 1 verdict on the run from ``W0`` at step ``eta``: the sentence a failure message carries,
    saying whether it confirms the rejection (a counterexample to the theorem) or not (a defect of the suite)."""
    from oracles import theorem1 as oracle
    from theory.core.decision import REJECT

    names = [s.name for s in verdict.statistics if s.zone == REJECT]
    if "moves" in names:  # W^svm = 0: log growth instead of a finite limit
        return oracle.confirm_finite_limit(problem.to_json(), eta, verdict.budget, W0=W0)[1]
    return oracle.confirm(problem.to_json(), eta, verdict.budget, names, W0=W0)[1]


def run_theorem1(problem, W0, fraction, *, beyond_gd: bool = False):
    """``(analysis, trajectory)`` at Theorem 1's budget.

    Rare nearly-collinear Gaussian embeddings and rare starts far from the ⇒ edges' boundary (either side:
    :func:`theory.li2024.criteria.start_gap`) need more than MAX_STEPS to reach the asymptotic regime (10^4
    time units).  They are counted, not judged, unless ``beyond_gd``: then GD runs MAX_STEPS and the
    continuation (where it agreed with GD over GD's last decade) takes the run straight to the first budget
    at or past 10^4 time units, as ``tpg check`` does (:meth:`theory.li2024.continuation.Escalation.first_at`);
    counted where it is refused."""
    an = analyze(problem)
    eta = fraction * safe_step(problem)
    steps, need = criteria.run_budget(an, eta, W0)
    if need > criteria.MAX_STEPS and not beyond_gd:
        not_judged("10^4 time units exceed MAX_STEPS")
    traj = train(problem, steps, eta, W0=W0, analysis=an)
    if need > criteria.MAX_STEPS:
        from theory.li2024.continuation import Escalation

        traj, why = Escalation(problem, an).first_at(traj, need)
        event(f"first budget through the continuation (10^4 time units past MAX_STEPS)={traj is not None}")
        if traj is None:
            not_judged(f"10^4 time units exceed MAX_STEPS, and {why.split(':')[0]}")
    return an, traj


# ------------------------------------------------------------------------------------------------
# Theorem 2
# ------------------------------------------------------------------------------------------------
NONZERO_SVM = structures_of(("acyclic", "cyclic", "mixed"))


def _record(p, an, radii):
    record_inputs(K=p.K, n=p.n, T=max(len(s) for s in p.sequences), n_sccs=an.n_sccs, dim_sfin=an.space.dim,
                  svm_norm=an.svm.norm)


# Theorem 2 is judged on the strategies' whole declared domain (condition number <= 1e3).  Ill-conditioned
# embeddings push the radii to 1e4-1e5; under the global rounding floor their gradients (~1e-8) sat at
# float64 rounding level and kappa <= 10 was needed.  With the floor following the local curvature
# (theory.li2024.losses.local_smoothness), measured on 300 random examples at kappa <= 1e3: 288 judged and
# passed, 12 counted as not certifiable (all with kappa >= 300: 12 of the 68 with kappa > 100), none failed.
REGPATH_CONDITION = 1e3
def certified_path(dp):
    """``(problem, analysis, radii, path)``: the certified path along ``radii_for``; problems with a radius
    whose gradient float64 cannot resolve are counted and skipped.  (A cap MAX_RADIUS = 300 skipped 4-12% of
    the problems until the rounding floor followed the local curvature; with it, no cap is needed: stress,
    200 examples, 0 skipped.)"""
    p = dp.problem
    try:
        an = analyze(p)
    except SolverError:
        if convex_case(p):
            raise  # L̃ is strictly convex: its minimizer must certify
        # A non-convex L̃ (bounded losses): its Newton descent can stall short of the certificate (stress seed
        # 1047730951: gradient 4.95e-12 against 3.8e-12 after 25 steps).  Counted by reason.
        not_judged("non-convex loss: W^fin not certified")
    radii = radii_for(p, an)
    _record(p, an, radii)
    try:
        return p, an, radii, regularization_path(p, radii)  # certified, else SolverError
    except RoundingLevel:
        not_judged("a radius's gradient at float64 rounding level (not certifiable)")
    except SolverError:
        if convex_case(p):
            raise  # the convex program must certify every radius
        # A non-convex loss: no start reached a certified KKT point at some radius (stress seed 1047730951,
        # square loss at R = 3616: every start ended where the loss falls inward).  Counted by reason.
        not_judged("non-convex loss: no start certified at a radius")


# ------------------------------------------------------------------------------------------------
# Section 5
# ------------------------------------------------------------------------------------------------
def local_run(case, traj=None, select: float = SELECT, reject: float = REJECT) -> dict:
    """:func:`theory.li2024.local_convergence.local_run` of one relaxed case."""
    return lc.local_run(case.problem, case.theory_problem, traj, select, reject)


def verdict(case, traj=None, select: float = SELECT, reject: float = REJECT) -> tuple[str, str, dict]:
    """:func:`theory.li2024.local_convergence.verdict` of one relaxed case (budget escalation included)."""
    return lc.verdict(case.problem, case.theory_problem, traj, select, reject, note=case.note)


def judge(case, traj, select: float = SELECT, reject: float = REJECT) -> str:
    """``"not judged"``, ``"aligned"`` or ``"not aligned"`` for one trained case under a selection rule
    (the property's own verdict, escalation included)."""
    return verdict(case, traj, select, reject)[0]


def horizon_rates(run, target, eta) -> list[tuple[int, float]]:
    """``[(τ/10, rate), (τ, rate)]``: the rate ``tan θ · ln(τ/τ₀)`` of the continued ``run``'s increment against
    ``target`` at its last budget ``τ`` and a decade before (what :func:`theory.li2024.local_convergence.trend_accepts`
    reads), ``θ`` the angle of the increment over the decade ending there."""
    out = []
    for b in (run.final.step // 10, run.final.step):
        end, mid = criteria._at(run, b), criteria._at(run, b / 10)
        v = end.W - mid.W
        inc = float(np.sum(v * target) / (np.linalg.norm(v) * np.linalg.norm(target)))
        out.append((int(end.step), criteria.direction_rate(inc, float(np.linalg.norm(target)), eta, int(end.step))))
    return out


def extended_horizon(path: str, top: int):
    """``(problem, run, pseudo, eta, budgets)``: the Section 5 example at ``path`` run as its verdict runs it (GD,
    then the first-order continuation with the path bound in extended precision, ``lcont.EXTENDED``) to ``top``
    steps-equivalent, with the budgets ``2·10^k`` past GD's run and the pseudo-TPG read at the last one reached."""
    from theory.core.problem import Problem
    from theory.li2024 import local_continuation as lcont

    p = Problem.load(path)
    r = lc.local_run(p, p.replace(head=None, loss="log"))
    budgets = [2 * 10**k for k in range(1, 20) if r["steps"] < 2 * 10**k <= top]
    run, why = lcont.continued(p, r["traj"], budgets, variant=lcont.EXTENDED)
    if run is None:
        raise RuntimeError(f"{path}: the continuation was not used ({why})")
    reached = [b for b in budgets if b <= run.final.step]
    pseudo = lcont.robust_measures(p, run, reached[-1], SELECT, REJECT)["pseudo"]
    return p, run, pseudo, r["eta"], reached


# ------------------------------------------------------------------------------------------------
# Section 5's continuation against GD (the bound properties of both orders)
# ------------------------------------------------------------------------------------------------
def section5_problems():
    """Problems of Section 5's whole stated domain and the relaxed-head ``ce`` cases: what the bound
    properties of both orders draw."""
    from strategies.domains import problems_for
    from strategies.relaxations import relaxed_cases
    from theory.li2024.claims import SECTION5

    return st.one_of(problems_for(SECTION5), relaxed_cases("head", head_loss="ce").map(lambda case: case.problem))


def section5_span(problem, start: int, budget: int):
    """``(gd, its run truncated at start, the checkpoint steps past start)``: GD at Section 5's step to
    ``budget``, the span over which a continuation from GD's state at ``start`` is compared with it (not
    judged where GD diverges at that step)."""
    from theory.li2024.training import truncate

    try:
        gd, _ = lc.train_section5(problem, budget)
    except FloatingPointError:
        not_judged("GD diverged at Section 5's step")
    return gd, truncate(gd, start), [c.step for c in gd.checkpoints if c.step > start]


def distances_to_gd(gd, cont) -> dict:
    """``{step: ||W_GD - W||}`` at every continued checkpoint of ``cont``."""
    from theory.li2024.provenance import engine_of

    at = {c.step: c for c in gd.checkpoints}
    return {c.step: float(np.linalg.norm(c.W - at[c.step].W)) for c in cont.checkpoints if engine_of(c) != "gd"}


def over_bound(distances: dict, bounds: dict) -> float:
    """The largest distance over its bound (a zero bound: 0 for a zero distance, else infinite)."""
    return max(d / bounds[k] if bounds[k] > 0 else (0.0 if d == 0 else float("inf")) for k, d in distances.items())


def bounds_by(cont, which: str) -> dict:
    """``{step: δ}`` at every continued checkpoint of a run continued with ``shadow=True``, with one of its two
    bounds in place of their minimum: ``which`` is ``"gronwall_bound"`` or ``"shadowing_bound"``."""
    from theory.li2024.provenance import deviation, engine_of

    return {c.step: deviation(c) - c.gd_deviation_bound + getattr(c, which)
            for c in cont.checkpoints if engine_of(c) != "gd"}


def without_path_bound(monkeypatch) -> None:
    """Section 5's continuation without its bound on GD's distance from the flow's path
    (:mod:`theory.li2024.shadowing`): what the ladder decides with Grönwall's bound and the second order only."""
    from theory.li2024 import local_continuation as lcont

    continued = lcont.continued
    monkeypatch.setattr(lcont, "continued", lambda *a, variant=lcont.FIRST_ORDER, **k: continued(
        *a, variant=dataclasses.replace(variant, shadow=False), **k))
