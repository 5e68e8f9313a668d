"""Section 5's verdicts against an independent computation (oracles/flow.py).

Before the suite reports that GD does not align with its pseudo-TPG's Graph-SVM, a computation that shares
no code with ``theory/`` must read the same: :mod:`oracles.flow` runs its own GD (on positions, not
pooled tokens) and its own gradient flow in log time (scipy's LSODA) to 2e12 steps-equivalent, builds the
pseudo-TPG and states its Graph-SVM in cvxpy.  These tests compare, on the suite's Section 5 examples:

* the Graph-SVM of the last budget's pseudo-TPG, within 1e-6 relative (two solvers of one strictly convex
  programme);
* the statistic ``tan θ · ln(τ/τ₀)`` at every budget both read, within 1% relative plus 0.01 of the interval
  the two computations' resolutions leave it (the suite's continuation and the oracle's flow integrate the same
  equation from the same GD state to different tolerances; measured: 3-4 significant digits agree on every
  budget of the examples below before 2e11, rates near 0 to 0.002).  Late the oracle's own tolerance is the
  reading's resolution: it solves each decade to ``16 eps t`` per entry of ``W``
  (:func:`oracles.flow.entry_tolerance`), 1.25e-3 at 2e12 steps-equivalent on
  ``section5_raw_correlation_lags_transit``, where its state was 2.1e-3 from the same solve at a hundredth of
  that tolerance and its rate 0.021 against 0.00039 there (the suite's 0.0002; on the machine this comparison
  was written on the two agreed within 0.002, on the machine of 2026-11-30 the oracle read 0.021).  So the rate is compared over every increment within ``E`` of the suite's: ``E`` is the
  suite's bound at ``τ`` and ``τ/10`` plus the oracle's tolerance there in Frobenius norm (``d`` times the
  entry's).  Planted: the oracle run at twice the step (a time map off by 2) differs by 3-10% (0.15-0.6) on the
  same budgets, where ``E`` is below 1e-3 of the increment, and the comparison fails;
* the verdict: every settled misalignment the suite calls "not aligned" the oracle reads as one, and the
  aligned or undecided ones it does not (a planted check: the oracle's reading must be able to say no).
"""
from __future__ import annotations

import numpy as np
import pytest

from oracles import flow as flow_oracle
from theory.core.problem import Problem
from theory.li2024 import local_convergence as lc
from theory.li2024.claims import independent_reading

pytestmark = pytest.mark.theorem("Section 5")

SVM_RTOL = 1e-6
RATE_RTOL, RATE_ATOL = 1e-2, 1e-2


def _both(name: str):
    p = Problem.load(f"examples/{name}.json")
    outcome, why, r = lc.verdict(p, p.replace(head=None, loss="log"))
    return p, outcome, why, r, independent_reading(p, r["eta"])


def _resolved(p, r, steps: int) -> tuple[float, float]:
    """The rate's interval at ``steps`` over every increment within ``E`` of the suite's (module docstring),
    against that budget's own pseudo-TPG's Graph-SVM (the selection may change between budgets)."""
    from theory.li2024 import criteria
    from theory.li2024.local_continuation import _angle_interval, _shift
    from theory.li2024.provenance import deviation_from_exact
    from theory.li2024.pseudo import pseudo_svm

    run, eta = r["traj"], r["eta"]
    end, mid = criteria._at(run, steps), criteria._at(run, steps / 10)
    S = pseudo_svm(p, end.W, lc.SELECT, lc.REJECT, name="the budget's").svm.W
    d = S.shape[0]
    E = sum(deviation_from_exact(c) + d * flow_oracle.entry_tolerance(eta, c.step) for c in (end, mid))
    v = end.W - mid.W
    cos = float(np.sum(v * S) / (np.linalg.norm(v) * np.linalg.norm(S)))
    # the angle widened as the suite's robust measures widen it for its own bound
    angles = _angle_interval(cos, _shift(E, float(np.linalg.norm(v))))
    lo, hi = (criteria.direction_rate(float(np.cos(a)), float(np.linalg.norm(S)), eta, int(end.step)) for a in angles)
    return lo, hi


def _agree(p, r, reading) -> None:
    S, T = r["pseudo"].svm.W, reading.last.svm
    assert T is not None and np.linalg.norm(S - T) <= SVM_RTOL * np.linalg.norm(S), (
        f"Graph-SVM differs: {np.linalg.norm(S - T) if T is not None else None} against |W^svm| {np.linalg.norm(S)}")
    at = {b.steps: b.rate for b in reading.budgets}
    compared = 0
    for steps, _, rate, *_ in r["history"]:
        if steps in at and np.isfinite(rate):
            lo, hi = _resolved(p, r, steps)
            slack = RATE_RTOL * rate + RATE_ATOL
            assert lo - slack <= at[steps] <= hi + slack, (
                f"statistic differs at {steps:.0e}: suite {rate:.4g} (resolved to [{lo:.4g}, {hi:.4g}]), "
                f"oracle {at[steps]:.4g}")
            compared += 1
    assert compared >= 2, (r["history"], sorted(at))


@pytest.mark.parametrize("name", ["section5_square_tied_misalignment", "section5_square_misaligned_after_transit",
                                  "section5_misaligned_at_horizon"])
def test_every_misalignment_is_confirmed_independently(name):
    """The suite's "not aligned" examples: the oracle reads a settled selection whose statistic grows like
    ``ln τ`` over the last decade (γ 1.0-1.02 on both sides), with the same Graph-SVM and statistics."""
    p, outcome, why, r, reading = _both(name)
    assert outcome == "not aligned", why
    _agree(p, r, reading)
    assert reading.misaligned() and reading.gamma() >= flow_oracle.TREND_FAIL, (reading.gamma(), reading.last.rate)


@pytest.mark.parametrize("name", ["section5_slow_direction_at_horizon", "section5_raw_correlation_lags_transit",
                                  "section5_persistent_misalignment"])
def test_the_oracle_does_not_confirm_an_aligned_or_flattening_direction(name):
    """The other side: a slowly converging direction (aligned by the trend), one aligned after a transit, and
    the former "persistent misalignment" whose statistic flattens at the horizon (undecided) are not read
    as misalignments by the oracle either, and the two computations agree on their statistics."""
    p, outcome, why, r, reading = _both(name)
    assert outcome != "not aligned", why
    _agree(p, r, reading)
    assert not reading.misaligned(), [(b.steps, b.rate) for b in reading.budgets]


def test_check_reports_a_section5_failure_only_with_independent_confirmation(capsys, monkeypatch):
    """``tpg check`` on a settled misalignment: "fails", exit 1, with the independent computation's reading in
    the reason.  Planted: an oracle that does not confirm it turns the same verdict into "undecided" (exit 0),
    and the reason says why."""
    import json

    from theory.run.cli import main

    path = "examples/section5_square_tied_misalignment.json"
    rc = main(["check", path, "--claim", "li2024.section5"])
    d = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (rc, d["verdict"]) == (1, "fails"), d["reason"]
    assert d["measures"]["independently_confirmed"] is True and "confirmed by the independent computation" in d["reason"]
    monkeypatch.setattr(flow_oracle.Reading, "misaligned", lambda self: False)
    rc = main(["check", path, "--claim", "li2024.section5"])
    d = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (rc, d["verdict"]) == (0, "undecided"), d["reason"]
    assert "not confirmed by the independent computation" in d["reason"], d["reason"]


def test_the_comparison_catches_a_planted_time_map():
    """The tolerance of :func:`_agree` is checked against a case that breaks it: the oracle run at twice the
    verdict's step reads the same selection and Graph-SVM but statistics 3-10% off (5.45 against 5.20 at
    2e7 steps), and the comparison fails."""
    p = Problem.load("examples/section5_square_tied_misalignment.json")
    outcome, why, r = lc.verdict(p, p.replace(head=None, loss="log"))
    with pytest.raises(AssertionError, match="statistic differs"):
        _agree(p, r, independent_reading(p, 2 * r["eta"]))


def test_the_graph_svm_is_not_believed_without_its_certificate(monkeypatch):
    """The oracle's Graph-SVM must meet its KKT conditions, not only the solver's status and feasibility:
    planted, a solver answer scaled by 1.1 (still feasible: every ⇒ margin 1.1, every ≍ row 0) is refused."""
    import cvxpy as cp

    p = Problem.load("examples/section5_square_tied_misalignment.json")
    model = flow_oracle.Model(p.to_json())
    edges, ambiguous = flow_oracle.pseudo_edges(model, 30 * np.random.default_rng(0).normal(size=(model.d, model.d)))
    assert ambiguous == 0 and np.linalg.norm(flow_oracle.graph_svm(model, edges)) > 0
    solve = cp.Problem.solve

    def inflated(self, *args, **kwargs):
        out = solve(self, *args, **kwargs)
        var = self.variables()[0]
        var.value = 1.1 * var.value
        return out

    monkeypatch.setattr(cp.Problem, "solve", inflated)
    with pytest.raises(flow_oracle.FlowOracleError, match="KKT"):
        flow_oracle.graph_svm(model, edges)
