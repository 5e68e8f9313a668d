"""What each assumption buys: with one dropped, Hypothesis finds a counterexample and shrinks it.

Each test searches deterministically (derandomized, no database) with ``hypothesis.find`` for a case
where the affected conclusion fails, asserts that one is found and that it is small, writes it as a
problem file under the run's report folder (replayable with ``python -m theory``), and runs the same
search with the assumption held as a control, which must find nothing within the same budget.

``EXPECTED`` is the table of expected outcomes, in the shape of scikit-learn's expected-failure table.
"""
from __future__ import annotations

import json

import pytest
from hypothesis import find, settings
from hypothesis.errors import NoSuchExample

from reports.record import record_counterexample, record_relaxation, report_dir
from strategies.relaxations import relaxed_cases
from theory.core.decision import REJECT
from theory.li2024 import criteria
from theory.li2024.relaxations import (EXPECTED, escalated, svm_infeasible, theorem1_fails, theorem1_fails_at_budget,
                                       theorem1_outcome)
from theory.li2024.svm import GraphSVMInfeasible, graph_svm

BUDGET = 30  # examples generated per search (the control gets the same)
SEARCH = settings(database=None, derandomize=True, max_examples=BUDGET, deadline=None)
# A counterexample a person can check by hand: the bound asserted on every shrunk case.
MAX_SAMPLES, MAX_TOKENS, MAX_VOCAB = 3, 4, 4


# Shrinking evaluates the predicate on every candidate, and theorem1_fails trains 10x the budget on each
# failing one.  So the search shrinks with the verdict at the budget, then confirms the shrunk case with
# the escalation and, if it turns out a transient, searches again escalated from the start (a case that
# fails escalated fails at the budget, so the first search misses nothing).  Measured, CPU seconds of the
# search (ci): head 48.9 -> 9.2, label_absent 25.6 -> 5.1, loss 16.2 -> 10.7, the same shrunk case each.
# 'step' shrinks to a transient under the budget verdict (fails at 1e5 steps, passes at 1e6), so it is
# searched escalated from the start (50.7 s; 21.5 s more when it went through the first search).
ESCALATED_SEARCH = {"step"}


def find_theorem1_counterexample(relaxation):
    """A shrunk relaxed case that fails Theorem 1's escalated verdict (raises NoSuchExample if none)."""
    cases = relaxed_cases(relaxation)  # each relaxation's own shapes (strategies.relaxations.SEARCH_SHAPES)
    if relaxation not in ESCALATED_SEARCH:
        case = find(cases, theorem1_fails_at_budget, settings=SEARCH)
        if theorem1_fails(case):
            return case
    return find(cases, theorem1_fails, settings=SEARCH)


def _write(case, relaxation, theorem, what, amount, replay_args, analysis=None, traj=None):
    folder = report_dir() / "counterexamples"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{relaxation}.json"
    case.problem.save(path)
    (folder / f"{relaxation}.txt").write_text(f"{theorem}, {case.note}: {what}\n")
    E = case.problem.E
    curves = None
    if traj is not None:
        curves = {"tau": traj.series("step").tolist(), "correlation": traj.series("correlation").tolist(),
                  "finite_error": traj.series("finite_error").tolist()}
    record_counterexample(
        title=f"{theorem} without {relaxation}: {case.note}", problem=case.problem.to_json(), what_fails=what,
        amount=amount, problem_file=str(path), replay=f"python -m theory {replay_args.format(path=path)}", E=E,
        graphs={str(k): g.to_json() for k, g in analysis.graphs.items()} if analysis else None,
        svm_tokens=E @ analysis.svm.W @ E.T if analysis else None,
        fin_tokens=E @ analysis.finite.W @ E.T if analysis and analysis.finite is not None else None, curves=curves)
    return path


def _amount(verdict) -> float:
    """The measured quantity behind the first rejected statistic (what the card shows as "by how much")."""
    rejected = [s for s in verdict.statistics if s.zone == REJECT]
    if not rejected:
        return float("nan")
    key = {"finite": "finite_error", "growth": "growth_ratio", "direction": "incremental_correlation",
           "leak": "top_scc_mass"}.get(rejected[0].name)
    return float(verdict.measures.get(key, float("nan"))) if key else float("nan")


def _assert_small(case):
    p = case.problem
    T = max(len(s) for s in p.sequences)
    assert p.n <= MAX_SAMPLES and T <= MAX_TOKENS and p.K <= MAX_VOCAB, (
        f"shrunk counterexample is not small: n={p.n} (<= {MAX_SAMPLES}), T={T} (<= {MAX_TOKENS}), "
        f"K={p.K} (<= {MAX_VOCAB})\n{json.dumps(p.to_json())}")


def _control(relaxation, predicate):
    """The same search with the assumption held must find nothing."""
    with pytest.raises(NoSuchExample):
        found = find(relaxed_cases("none"), predicate, settings=SEARCH)
        pytest.fail(f"control for {relaxation}: a counterexample with every assumption held: "
                    f"{json.dumps(found.problem.to_json())}")


@pytest.mark.theorem("Relaxations")
@pytest.mark.parametrize("relaxation", ["head", "label_absent", "loss", "step"])
def test_theorem1_needs_its_assumption(relaxation):
    expected, reason = EXPECTED[("Theorem 1", relaxation)]
    try:
        case = find_theorem1_counterexample(relaxation)
    except NoSuchExample:
        record_relaxation(theorem="Theorem 1", relaxation=relaxation, expected=expected, outcome="none found",
                          reason=reason)
        pytest.fail(f"no counterexample to Theorem 1 without '{relaxation}' in {BUDGET} examples")
    verdict, steps, eta, traj, an = theorem1_outcome(case)
    assert verdict is not None and not verdict.passed, "the shrunk case must still not be accepted when replayed"
    if traj is not None:  # a counterexample must not be a transient: rejected at 10x the budget too
        verdict = escalated(case, traj, an, eta)
        assert verdict.outcome is criteria.Outcome.FAILS, \
            f"the shrunk case is not rejected at {criteria.ESCALATION}x the budget: {verdict}"
    amount = _amount(verdict)
    path = _write(case, relaxation, "Theorem 1", "; ".join(verdict.failures), amount,
                  f"train {{path}} --steps {steps} --step-size {float(eta)!r}", an, traj)
    record_relaxation(theorem="Theorem 1", relaxation=relaxation, expected=expected,
                      outcome=f"counterexample (n={case.problem.n}, K={case.problem.K}) at {path.name}", reason=reason)
    _assert_small(case)
    _control(relaxation, theorem1_fails)


@pytest.mark.theorem("Relaxations")
def test_graph_svm_needs_independent_embeddings():
    expected, reason = EXPECTED[("Graph-SVM feasibility", "dependent")]
    case = find(relaxed_cases("dependent"), svm_infeasible, settings=SEARCH)
    with pytest.raises(GraphSVMInfeasible):
        graph_svm(case.problem)
    path = _write(case, "dependent", "Graph-SVM feasibility", "Graph-SVM infeasible (certified by an LP)", 1.0,
                  "analyze {path}")
    record_relaxation(theorem="Graph-SVM feasibility", relaxation="dependent", expected=expected,
                      outcome=f"counterexample (n={case.problem.n}, K={case.problem.K}) at {path.name}", reason=reason)
    _assert_small(case)
    # Control: with independent embeddings Graph-SVM is always feasible.
    _control("dependent", svm_infeasible)


@pytest.mark.theorem("Relaxations")
def test_expected_failure_table_covers_every_relaxation():
    from strategies.relaxations import RELAXATIONS

    assert sorted(r for _, r in EXPECTED) == sorted(RELAXATIONS)
    assert all(outcome in ("counterexample", "holds") and len(reason) > 40 for outcome, reason in EXPECTED.values())
