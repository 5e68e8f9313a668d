"""The claims of Li et al. 2024 that the suite checks, as objects (:class:`theory.core.claims.Claim`).

Each judge runs the reference implementation on a user's problem and decides with the paper package's
criteria (:mod:`theory.li2024.criteria`, :mod:`theory.li2024.automaton`, :mod:`theory.li2024.local_convergence`).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from theory.core.claims import Assumption, Claim, Domain
from theory.core.decision import REJECT, Outcome, Verdict
from theory.core.problem import LOSSES

PAPER = "Li, Huang, Ildiz, Rawat, Oymak (2024), Mechanics of Next Token Prediction with Self-Attention"

HEAD = Assumption("Assumption 1 (head)", "the head is biorthogonal to the embeddings: C E^T = I",
                  lambda p: p.assumptions()["head_biorthogonal"],
                  residual=lambda p: p.assumption_residuals()["head_biorthogonal"],
                  remedy="max |C E^T - I| is measured; omit \"head\" for the exact default (E E^T)^-1 E, or "
                         "write the head's entries to full float64 precision (17 significant digits)")
LABEL = Assumption("Assumption 2 (label in context)", "every label occurs in its sequence",
                   lambda p: p.assumptions()["labels_in_sequences"])
INDEPENDENT = Assumption("independent embeddings", "the K embeddings are linearly independent (K <= d)",
                         lambda p: p.assumptions()["embeddings_independent"],
                         residual=lambda p: p.assumption_residuals()["embeddings_independent"],
                         remedy="the K-th singular value of E is measured (0 when K > d)")
LOG_LOSS = Assumption("log loss", "the loss is -log u (loss \"log\")", lambda p: p.loss == "log")
# Theorem 2 asks for a loss of u that is strictly decreasing with bounded |l'|: exp(-u) and (1 - u)^2 on the
# reachable u in [0, 1]; -log u is the paper's own loss (|l'| is bounded on every ball ||W|| <= R, where u is
# bounded away from 0, which is all the path uses).  ce and lsq are not losses of u: outside the statement.
THEOREM2_LOSSES = ("log", "exp", "square")
LOSS_OF_U = Assumption("a decreasing loss of u",
                       "the loss is a strictly decreasing function of u with bounded derivative on the reachable u: "
                       "log, exp or square (ce and lsq are losses of the K head logits, not of u)",
                       lambda p: p.loss in THEOREM2_LOSSES)
# Section 5: "another loss, or a head that breaks Assumption 1" -- every loss the suite knows qualifies once the
# head is broken, and every loss but log qualifies with a biorthogonal head (with log and Assumption 1,
# Theorem 1 applies instead).
RELAXED = Assumption("relaxed setting", "Assumption 1 fails or the loss is not log (otherwise Theorem 1 applies)",
                     lambda p: p.loss != "log" or not p.assumptions()["head_biorthogonal"])


def _log_defined(p) -> bool:
    from theory.li2024.losses import log_loss_defined

    return p.loss != "log" or log_loss_defined(p)


LOSS_DEFINED = Assumption("loss defined at W(0) = 0",
                          "with the log loss, every sample's u = c_y^T f is positive under uniform attention "
                          "(otherwise -log u is infinite where GD starts)", _log_defined)


def _extend(problem, an, budget_scale: float = 1.0):
    """The decisions' escalation: past GD's first budget through the log-time continuation up to
    ``CONTINUE_MAX_STEPS x budget_scale`` once it agreed with GD over GD's last decade, on GD otherwise
    (:class:`theory.li2024.continuation.Escalation`)."""
    from theory.li2024.continuation import CONTINUE_MAX_STEPS, Escalation

    return Escalation(problem, an, horizon=max(1, int(CONTINUE_MAX_STEPS * budget_scale)))


def _undecided(reason: str, **measures) -> Verdict:
    return Verdict(Outcome.UNDECIDED, measures, reason_text=reason)


def judge_theorem1(problem, budget_scale: float = 1.0) -> Verdict:
    """GD from ``W(0) = 0`` at the safe step; Theorem 1's decision (or, with ``W^svm = 0``, convergence to a
    finite minimizer), escalating through the log-time continuation up to ``CONTINUE_MAX_STEPS x
    budget_scale`` steps-equivalent, or on GD up to ``ESCALATE_MAX_STEPS x budget_scale`` steps where the
    continuation disagreed with GD over GD's last decade (:func:`_extend`; each budget's ``engine`` is in
    the verdict's trail)."""
    from theory.li2024 import criteria
    from theory.li2024.analysis import analyze
    from theory.li2024.losses import safe_step
    from theory.li2024.training import train

    an = analyze(problem, bound=True)
    eta = safe_step(problem)
    cap = max(criteria.MIN_STEPS, int(criteria.ESCALATE_MAX_STEPS * budget_scale))
    W0 = np.zeros((problem.d, problem.d))
    if an.svm.norm == 0:
        steps = max(criteria.MIN_STEPS, int(np.ceil(criteria.finite_relaxation(an, eta))))  # 0 where λ is unknown
        if steps > cap:
            return _undecided(f"{criteria.FINITE_RELAXATIONS} convergence time constants ({steps} steps) exceed the "
                              f"budget ({cap})", steps=steps)
        v = criteria.finite_convergence_decide(train(problem, steps, eta, analysis=an),
                                               _extend(problem, an, budget_scale), max_steps=cap)[0]
        return _confirmed_theorem1(problem, v, eta, finite_limit=True)
    steps, need = criteria.run_budget(an, eta, W0)
    esc = _extend(problem, an, budget_scale)
    run = _first_run(problem, an, eta, steps, need, cap, esc)
    if isinstance(run, Verdict):
        return run
    return _confirmed_theorem1(problem, criteria.theorem1_decide(run, an, esc, max_steps=cap)[0], eta)


def _confirmed_theorem1(problem, v: Verdict, eta: float, *, finite_limit: bool = False) -> Verdict:
    """``v`` where it does not fail; a "fails" only where the independent computation of
    ``oracles/theorem1.py`` (its own GD and flow, TPGs, Graph-SVM and ``W^fin``; no code shared with
    ``theory/``) reads one of the rejected statistics in its reject zone at the same budget, undecided
    otherwise, saying so (the measure ``independently_confirmed``)."""
    if v.outcome is not Outcome.FAILS:
        return v
    from oracles import theorem1 as oracle

    if finite_limit:
        confirmed, said = oracle.confirm_finite_limit(problem.to_json(), eta, v.budget)
    else:
        rejected = [s.name for s in v.statistics if s.zone == REJECT]
        confirmed, said = oracle.confirm(problem.to_json(), eta, v.budget, rejected)
    return _as_confirmed(v, confirmed, said)


def _as_confirmed(v: Verdict, confirmed: bool, said: str) -> Verdict:
    """A failing ``v`` as the independent computation left it: "fails" where it confirmed the rejection,
    undecided otherwise, its reading appended to the reason (measure ``independently_confirmed``)."""
    return dataclasses.replace(v, outcome=Outcome.FAILS if confirmed else Outcome.UNDECIDED,
                               measures={**v.measures, "independently_confirmed": confirmed},
                               reason_text=f"{v.reason}; {said}")


def _first_run(problem, an, eta, steps, need, cap, esc):
    """The run at the first budget of a decision from ``W(0) = 0``: GD's (``steps``) where ``10^4 τ₀`` (``need``)
    is within GD's cap; past it, GD's run continued (where the continuation agreed with GD over GD's last
    decade) straight to the first budget of the continuation's ladder at or past ``need``, where the decision
    starts.  An undecided :class:`Verdict` where the continuation is refused or ``need`` is past its horizon.
    (Nearly collinear embeddings: examples/automaton_near_collinear.json has ``10^4 τ₀ = 6.7e10`` steps,
    undecided on GD's budget of 1e7.)"""
    from theory.li2024.training import train

    gd = train(problem, steps, eta, analysis=an) if need <= esc.horizon else None
    if need <= cap:
        return gd
    beyond = f"10^4 time units ({need:.3g} steps) exceed GD's budget ({cap})"
    if gd is None:
        return _undecided(f"{beyond} and the continuation's horizon ({esc.horizon})", need=need)
    run, why = esc.first_at(gd, need)
    return run if run is not None else _undecided(f"{beyond}, and {why}", need=need)


def judge_theorem2(problem, budget_scale: float = 1.0) -> Verdict:
    """The certified regularization path at margins offset + 1..16 past W^fin's score debt, escalated to
    32, 64 (:class:`theory.li2024.regpath_verdict.Theorem2Judge`): holds when direction and finite part hold,
    fails when either is rejected, undecided otherwise (including a radius float64 cannot certify).
    ``budget_scale`` does not apply: the margins are the criterion's."""
    from theory.li2024.analysis import analyze
    from theory.li2024.regpath import RoundingLevel, convex_case, regularization_path
    from theory.li2024.regpath_verdict import Theorem2Judge, radii_for

    an = analyze(problem)
    if an.svm.norm == 0:
        return Verdict(Outcome.NOT_APPLICABLE, {}, reason_text="W^svm = 0: no direction to converge to")
    radii = radii_for(problem, an)
    try:
        path = regularization_path(problem, radii)
    except RoundingLevel as exc:
        return _undecided(f"a radius's gradient at float64 rounding level (not certifiable): {exc}")
    judge = Theorem2Judge(problem, an, radii, path)
    out_d, why_d = judge.direction(an.svm.W)
    if an.finite is None:  # the finite-part conclusion has no target: W^fin does not exist for this loss
        out_f, why_f = Outcome.NOT_APPLICABLE, f"no single target W^fin ({an.finite_absent})"
        why_d = f"judged on the whole W̄_R/R, since without W^fin nothing bounds its S_fin part: {why_d}"
    else:
        out_f, why_f = judge.finite(an.finite.W)
    outcomes = (out_d, out_f)
    outcome = (Outcome.FAILS if Outcome.FAILS in outcomes else Outcome.UNDECIDED if Outcome.UNDECIDED in outcomes
               else Outcome.HOLDS)
    confirmed = None
    if outcome is Outcome.FAILS and convex_case(problem):
        # Only where an independent computation reads the same (oracles/one_query.py: tiny one-query problems,
        # its own path); otherwise undecided, saying so.
        from oracles import one_query

        rejected = [name for name, out in (("direction", out_d), ("finite", out_f)) if out is Outcome.FAILS]
        confirmed, said = one_query.confirm_theorem2(problem.to_json(), rejected)
        why_f = f"{why_f}; {said}"
        if not confirmed:
            outcome = Outcome.UNDECIDED
    if outcome is Outcome.FAILS and not convex_case(problem):
        # A non-convex loss's path is the best certified KKT point of several starts and its W^fin a certified
        # local minimizer of L̃: neither is certified global, which is what the theorem speaks of, so a
        # failure is not claimed (stress seed 1047730951: a square-loss path jumped at t = 16 to another basin
        # whose S_fin part is 765 from W^fin).  Tiny problems are settled by oracles/one_query.py instead.
        outcome = Outcome.UNDECIDED
        path_points = judge.extended()[2] if judge.escalated else path
        minima = max((s.certificate.get("local_minima", 1) for s in path_points), default=1)
        why_d = (f"not confirmed: the loss is not convex, so the path (best of several certified starts; "
                 f"{minima} distinct local minima on one sphere) and W^fin are certified local optima only; {why_d}")
    extra = {} if confirmed is None else {"independently_confirmed": confirmed}
    return Verdict(outcome, {"direction": out_d.value, "finite": out_f.value, "last_radius": float(radii[-1]),
                             "escalated": judge.escalated, **extra},
                   budget=len(judge.extended()[1]) if judge.escalated else len(radii),
                   reason_text=f"direction: {why_d}; finite part: {why_f}")


def judge_automaton(problem, budget_scale: float = 1.0) -> Verdict:
    """The automaton reading on the problem's own sequences used as contexts (after Theorem 1's budget),
    escalated like :func:`judge_theorem1` (through the continuation where it agreed with GD)."""
    from theory.li2024 import criteria
    from theory.li2024.analysis import analyze
    from theory.li2024.automaton import automaton_decide
    from theory.li2024.losses import safe_step

    an = analyze(problem)
    if an.svm.norm == 0:
        return Verdict(Outcome.NOT_APPLICABLE, {}, reason_text="W^svm = 0: no priority to retrieve by")
    eta = safe_step(problem)
    contexts = [list(s) for s in dict.fromkeys(tuple(s) for s in problem.sequences)]
    cap = max(criteria.MIN_STEPS, int(criteria.ESCALATE_MAX_STEPS * budget_scale))
    steps, need = criteria.run_budget(an, eta, np.zeros((problem.d, problem.d)))
    esc = _extend(problem, an, budget_scale)
    traj = _first_run(problem, an, eta, steps, need, cap, esc)
    if isinstance(traj, Verdict):
        return traj
    v = automaton_decide(traj, an, contexts, esc, max_steps=cap)[0]
    # The reading is Theorem 1's limit: a leak that has not started to fall below 10^4 τ₀ says nothing about
    # it, so a rejection there is not a failure (examples/automaton_near_collinear.json: τ₀ ≈ 6.7e6 steps, the
    # leak 0.55 -> 0.57 at 1e6 -> 1e7 steps was judged "fails" while Theorem 1 on the same file was undecided
    # for this very reason).  An acceptance before it stands: the leak is already in its accept zone
    # (examples/automaton_clipped_budget.json holds at 1e7 < 10^4 τ₀).
    if v.outcome is Outcome.FAILS and v.budget < need:
        return dataclasses.replace(v, outcome=Outcome.UNDECIDED, measures={**v.measures, "need": need},
                                   reason_text=f"rejected at {v.budget} steps, below 10^4 time units ({need:.3g} "
                                               f"steps) where the reading applies: {v.reason}")
    if v.outcome is Outcome.FAILS:  # only where the independent computation reads the same (oracles/theorem1.py)
        from oracles import theorem1 as oracle

        confirmed, said = oracle.confirm_automaton(problem.to_json(), eta, v.budget,
                                                   [s.name for s in v.statistics if s.zone == REJECT])
        v = _as_confirmed(v, confirmed, said)
    return v


def judge_section5(problem, budget_scale: float = 1.0) -> Verdict:
    """Section 5's local alignment with the pseudo-TPG (:func:`theory.li2024.local_convergence.verdict`).

    A "fails" is reported only where the independent computation of ``oracles/flow.py`` (its own GD and
    gradient flow, pseudo-TPG and Graph-SVM; no code shared with ``theory/``) reads the same settled
    misalignment at the horizon; otherwise the verdict is undecided and says so.  ``budget_scale``
    multiplies the ladder's horizon (``HORIZON``, 2e12 steps-equivalent), its extensions and GD's cap
    together (the verdict's ``horizon``), the horizon at least the first budget (``STEPS``)."""
    from theory.li2024 import local_convergence
    from theory.li2024.local_continuation import HORIZON

    horizon = max(local_convergence.STEPS, int(HORIZON * budget_scale))
    outcome, why, r = local_convergence.verdict(problem, problem.replace(head=None, loss="log"), horizon=horizon)
    mapped = {"aligned": Outcome.HOLDS, "not aligned": Outcome.FAILS, "not judged": Outcome.UNDECIDED}[outcome]
    measures = {k: r[k] for k in ("steps", "eta", "corr_pseudo", "inc_pseudo", "engine", "gd_deviation_bound")
                if k in r and r[k] is not None}
    if r.get("step") is not None:  # the log loss with a broken head runs at a region step: say which kind
        why = f"{why}; step {r['step'].describe()}"
    if mapped is Outcome.FAILS:
        confirmed, said = independent_misalignment(problem, r["eta"], horizon=r.get("steps"))
        measures["independently_confirmed"] = confirmed
        why = f"{why}; {said}"
        if not confirmed:
            mapped = Outcome.UNDECIDED
    return Verdict(mapped, measures, budget=int(r.get("steps", 0) or 0), reason_text=why)


def independent_reading(problem, eta: float, horizon: int | None = None):
    """The independent computation (``oracles/flow.py``) on Section 5's own protocol: GD at step ``eta`` for
    the verdict's first GD run (``STEPS / 10``), then budgets x10 to ``horizon`` (default the continuation's;
    a verdict whose ladder was extended past it passes its own last budget)."""
    from oracles import flow
    from theory.li2024.local_continuation import HORIZON
    from theory.li2024.local_convergence import STEPS

    return flow.read(problem.to_json(), eta, first=STEPS // 10, horizon=max(HORIZON, int(horizon or 0)))


def independent_misalignment(problem, eta: float, horizon: int | None = None) -> tuple[bool, str]:
    """``(confirmed, what it read)``: :func:`independent_reading` (to ``horizon``) of a settled misalignment at
    its last budget."""
    from oracles import flow

    try:
        reading = independent_reading(problem, eta, horizon)
    except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:  # FlowOracleError is a ValueError
        return False, f"not confirmed by the independent computation (oracles/flow.py): it failed ({exc})"
    last = reading.last
    if not reading.misaligned():
        return False, (f"not confirmed by the independent computation (oracles/flow.py): at {last.steps:.0e} "
                       f"steps-equivalent it reads tan x ln(τ/τ₀) = {last.rate:.3g}, not a settled misalignment")
    return True, (f"confirmed by the independent computation (oracles/flow.py): tan x ln(τ/τ₀) = {last.rate:.3g} "
                  f"at {last.steps:.0e} steps-equivalent, trend γ = {reading.gamma():.3g}")


THEOREM1 = Claim(
    "li2024.theorem1", PAPER, "Theorem 1",
    "GD on the log loss diverges in norm along W^svm/||W^svm|| and its S_fin part converges to W^fin "
    "(a finite minimizer when W^svm = 0)",
    (LOG_LOSS, HEAD, LABEL, INDEPENDENT),
    "three-valued over budgets 10^4 τ₀, x10, ...: log growth of the W^svm coefficient, the incremental "
    "direction's tan θ · ln(τ/τ₀) and its trend γ, the finite error's decay, the shrinking leak; fails only "
    "when rejected at two budgets and an independent computation (oracles/theorem1.py) reads the same",
    ("a target 15-35° off W^svm", "W^fin moved by 0.2", "a run stopped at a tenth of its budget",
     "W^svm = 0 criterion on a log-growing run", "relaxed head, loss, step size, absent label"),
    ("properties/li2024/test_theorem1.py", "properties/li2024/test_relaxations.py"),
    judge_theorem1, Domain(("log",), ("biorthogonal",)))

THEOREM2 = Claim(
    "li2024.theorem2", PAPER, "Theorem 2",
    "the regularization path W̄_R / R converges to W^svm/||W^svm|| and Π_S W̄_R to W^fin",
    (LOSS_OF_U, HEAD, LABEL, INDEPENDENT),
    "certified path points at margins up to 16 past the finite part's score debt: the direction error on "
    "its (log t)/t track and the finite error decaying geometrically, escalated to margins 32, 64",
    ("reversed-edge Graph-SVMs", "duplicated-sample W^fin"),
    ("properties/li2024/test_theorem2.py",),
    judge_theorem2, Domain(THEOREM2_LOSSES, ("biorthogonal",)), scales_budget=False)

AUTOMATON = Claim(
    "li2024.automaton", PAPER, "Section 3 (automaton reading)",
    "the trained layer hard-retrieves the top SCC present in a context and soft-composes it by the W^fin "
    "softmax",
    (LOG_LOSS, HEAD, LABEL, INDEPENDENT),
    "on held-out contexts, leak outside the top SCC and split error: accept <= 1e-2 and halving per decade, "
    "reject when kept >= 0.9 of their value a decade before at two budgets, confirmed by an independent "
    "computation (oracles/theorem1.py)",
    ("retrieval of the lowest SCC", "composition with W^fin = 0", "a planted lowest-SCC rule"),
    ("properties/li2024/test_automaton.py",),
    judge_automaton, Domain(("log",), ("biorthogonal",)))

SECTION5 = Claim(
    "li2024.section5", PAPER, "Section 5 (local convergence)",
    "with a head that breaks Assumption 1 or another loss, GD's direction matches the pseudo-TPG's Graph-SVM",
    (RELAXED, LOSS_DEFINED, LABEL, INDEPENDENT),
    "once the selection settles: corr(W, W^svm_pseudo) >= 0.9 and Theorem 1's direction rate against it "
    "(at the last budget Theorem 1's escalated zone on the rate's trend, the raw correlation reported; an "
    "earlier accept stands unless the last budget rejects it on the same selection), "
    "escalated x10 through the log-time continuation up to 10^12 steps-equivalent (judged over every W within "
    "its bound; on GD up to 2e7 steps where the bound failed over GD's last decade, and judged again from GD "
    "where only the bound, too wide within GD's 2e7 steps, left the horizon undecided); not aligned only in "
    "Theorem 1's reject zone at the last budget (rate > 3, γ >= 0.65), otherwise undecided",
    ("a planted threshold that misreads the selection", "a planted continuation (wrong sign, time map off by 2)",
     "a planted deviation bound inflated past the statistics' resolution"),
    ("properties/li2024/test_section5.py", "properties/li2024/test_pseudo.py",
     "properties/li2024/test_local_continuation.py", "properties/li2024/test_curvature.py"),
    judge_section5, Domain(LOSSES, ("biorthogonal", "broken"), exclude=(("log", "biorthogonal"),)))

CLAIMS = (THEOREM1, THEOREM2, AUTOMATON, SECTION5)
