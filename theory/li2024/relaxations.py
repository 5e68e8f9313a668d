"""What each assumption of Theorem 1 and of the Graph-SVM buys: the expected outcome when it is dropped,
and the predicates that say whether a relaxed case is a counterexample.

A relaxed case (``strategies.relaxations``) carries the ``problem`` GD trains on (the assumption dropped)
and the ``theory_problem`` the theorem's ``W^svm``/``W^fin`` come from (the same data, the assumption
held), and a ``step_factor`` on the safe step.  ``EXPECTED`` is the table of expected outcomes, in the shape of
scikit-learn's expected-failure tags: theorem x relaxation -> (outcome, why).
"""
from __future__ import annotations

from theory.core.decision import REJECT, Statistic
from theory.li2024 import criteria
from theory.li2024.analysis import analyze
from theory.li2024.losses import safe_step
from theory.li2024.svm import GraphSVMInfeasible, graph_svm
from theory.li2024.training import resume, train

__all__ = ["EXPECTED", "escalated", "svm_infeasible", "theorem1_fails", "theorem1_fails_at_budget",
           "theorem1_outcome"]

# theorem x relaxation -> (expected outcome, reason)
EXPECTED = {
    ("Theorem 1", "head"): (
        "counterexample",
        "without C E^T = I the loss is no longer -log of the label's attention: GD converges only locally, "
        "toward the Graph-SVM of a pseudo-TPG of the tokens it selects (Section 5), not W^svm/W^fin"),
    ("Theorem 1", "label_absent"): (
        "counterexample",
        "a label outside its sequence gets no attention, so its sample pulls W toward no SCC of the TPG; "
        "the TPG's edges from the absent label mean nothing to GD"),
    ("Theorem 1", "loss"): (
        "counterexample",
        "another loss has another limit objective L̃: with a cycle, Π_S W(τ) converges to that loss's own "
        "finite minimizer, not W^fin of -log (and ce with its K logits shifts the direction too)"),
    ("Theorem 1", "step"): (
        "counterexample",
        "above 2/β GD is no descent method: it overshoots, saturates the softmax or oscillates in S_fin "
        "and stops tracking W^fin and the log-rate growth along W^svm"),
    ("Graph-SVM feasibility", "dependent"): (
        "counterexample",
        "with dependent embeddings the margins (e_i - e_j)^T W e_k >= 1 can contradict the equalities or "
        "each other (e.g. e_i = e_j with i ⇒ j), so Graph-SVM is infeasible"),
}


def theorem1_outcome(case):
    """``(verdict or None, steps, eta, trajectory, analysis)``: Theorem 1's criterion on the relaxed run
    against the theory's ``W^svm``/``W^fin`` of the same data under the assumptions."""
    an = analyze(case.theory_problem, name="relaxed case")
    if an.svm.norm == 0:
        return None, 0, 0.0, None, an
    safe = safe_step(case.theory_problem, "log")
    steps = criteria.budget(an.svm.norm, safe)
    eta = case.step_factor * safe
    try:
        traj = train(case.problem, steps, eta, analysis=an)
    except FloatingPointError as exc:  # divergence is a failure of the conclusion too
        why = f"diverged: {exc}"
        return (criteria.Verdict(criteria.Outcome.FAILS, {"diverged": str(exc)},
                                 [Statistic("diverged", float("nan"), REJECT, why)], steps), steps, eta, None, an)
    return criteria.theorem1(traj, an), steps, eta, traj, an


def escalated(case, traj, an, eta):
    """Theorem 1's decision on the relaxed run over its budget and 10x it, resumed (a counterexample is a
    confirmed rejection, :func:`theory.li2024.criteria.theorem1_decide`, not a transient)."""
    return criteria.theorem1_decide(traj, an, lambda run, n: resume(case.problem, run, n, analysis=an),
                                    max_steps=criteria.ESCALATION * traj.final.step)[0]


def theorem1_fails(case) -> bool:
    """The relaxed run is rejected by Theorem 1's decision at its budget and at 10x it (:func:`escalated`):
    a counterexample must not be a transient.  (Measured: a shrunk 'step' case that failed at 1e5 steps
    passed at 1e6; 25 of 25 generated 'step' cases failed at both.)"""
    verdict, steps, eta, traj, an = theorem1_outcome(case)
    if verdict is None or verdict.passed:
        return False
    if traj is None:  # diverged
        return True
    return escalated(case, traj, an, eta).outcome is criteria.Outcome.FAILS


def theorem1_fails_at_budget(case) -> bool:
    """The relaxed run is not accepted at its budget (the first half of :func:`theorem1_fails`: a
    statistic outside its accept zone, which the decision at 10x then confirms or not)."""
    verdict = theorem1_outcome(case)[0]
    return verdict is not None and not verdict.passed


def svm_infeasible(case) -> bool:
    try:
        graph_svm(case.problem, name="relaxed case")
    except GraphSVMInfeasible:
        return True
    return False
