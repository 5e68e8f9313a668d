"""Local convergence (Li et al. 2024, Section 5): with a head that breaks Assumption 1 (tied ``C = E`` or
random) and the ``ce`` loss, GD's direction matches the Graph-SVM of the *pseudo*-TPG built from the tokens
GD selects (:mod:`theory.pseudo`), not necessarily the true TPG's.

Finite-budget criterion: after ``STEPS`` plain GD steps at the relaxed problem's safe step, when the
selection has *settled* -- the pseudo-TPG built at ``τ/10`` and at ``τ`` is the same, has no ambiguous
(sample, token) pair, and ``W`` grows logarithmically along its Graph-SVM (Theorem 1's growth check) -- ``corr(W(τ), W^svm_pseudo) >= CORR_MIN`` and the incremental direction
``W(τ) - W(τ/10)`` passes Theorem 1's rate-aware test against ``W^svm_pseudo`` (``tan θ · ln(τ/τ₀) <=
DIRECTION_RATE``, :mod:`theory.criteria`; the stress profile found a settled case at 0.976 that a fixed
0.98 threshold rejected).  The claim is local: GD can spend millions of steps
in transit (seen: a token's attention falling from 0.2 to 1e-3 between 2e5 and 2e6 steps while another
rises), and there the pseudo-TPG of the moment is not yet the one GD converges to; such runs are
counted (``event``) but not judged.  Measured on 25 derandomized cases: incremental correlations
0.992-1.0 with the pseudo-TPG versus -0.92-1.0 with the true TPG.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, find, given, settings

from properties.helpers import describe, note_problem
from reports.record import record_metrics
from strategies.relaxations import relaxed_cases
from theory import criteria
from theory.analysis import analyze
from theory.losses import safe_step
from theory.pseudo import pseudo_svm, pseudo_tpgs
from theory.training import train

STEPS = 200_000
# The raw correlation carries the bounded transient (it converges like 1/log τ; the stress profile saw
# 0.948 with an incremental 0.997), so it gets the looser bound.
CORR_MIN = 0.9


def _corr(A, B):
    na, nb = np.linalg.norm(A), np.linalg.norm(B)
    return float(np.sum(A * B) / (na * nb)) if na > 0 and nb > 0 else float("nan")


def direction_rate(inc: float, svm_norm: float, eta: float) -> float:
    """Theorem 1's rate-aware direction statistic (theory/criteria.py): ``tan θ · ln(τ/τ₀)``."""
    tan = np.sqrt(max(0.0, 1.0 / inc**2 - 1.0)) if inc > 0 else np.inf
    return float(tan * np.log(max(STEPS / criteria.time_unit(svm_norm, eta), np.e)))


def local_run(case):
    p = case.problem
    traj = train(p, STEPS, safe_step(p))
    end, mid, early = traj.final, criteria._at(traj, STEPS / 10), criteria._at(traj, STEPS / 100)
    ps = pseudo_svm(p, end.W, name="relaxed head case")
    earlier = pseudo_tpgs(p, mid.W)
    settled = (earlier[1] == 0 and ps.ambiguous == 0
               and {k: g.edges for k, g in earlier[0].items()} == {k: g.edges for k, g in ps.graphs.items()})
    true = analyze(case.theory_problem, finite=False).svm
    # Log growth along the pseudo direction (Theorem 1's check 1): the run is in its asymptotic regime.
    u = ps.svm.W / ps.svm.norm if ps.svm.norm > 0 else ps.svm.W
    g1, g0 = np.sum((end.W - mid.W) * u), np.sum((mid.W - early.W) * u)
    settled = settled and g0 > 0 and criteria.GROWTH_LO <= g1 / g0 <= criteria.GROWTH_HI
    return {"pseudo": ps, "true": true, "W": end.W, "dW": end.W - mid.W, "settled": settled,
            "corr_pseudo": _corr(end.W, ps.svm.W), "inc_pseudo": _corr(end.W - mid.W, ps.svm.W),
            "corr_true": _corr(end.W, true.W), "inc_true": _corr(end.W - mid.W, true.W)}


@pytest.mark.theorem("Section 5")
@settings(derandomize=True, max_examples=25)
@given(relaxed_cases("head"))
def test_gd_aligns_with_the_pseudo_tpg_svm(case):
    """Judged on a fixed, derandomized set of 25 cases under every profile: on random draws about 1% of
    settled, log-growing cases do not align (see the strict xfail below), so the stress profile would
    report a known limitation of the local claim rather than news."""
    p = case.problem
    note_problem(p)
    r = local_run(case)
    event(f"ambiguous tokens={r['pseudo'].ambiguous > 0}")
    event(f"pseudo-TPG = true TPG={abs(r['corr_pseudo'] - r['corr_true']) < 1e-9}")
    record_metrics(corr_pseudo=r["corr_pseudo"], corr_true=r["corr_true"], inc_pseudo=r["inc_pseudo"])
    event(f"selection settled over the last decade={r['settled']}")
    if r["pseudo"].svm.norm == 0 or not r["settled"]:
        event("not judged: pseudo-TPG without ⇒ edge, or selection not settled")
        return
    rate = direction_rate(r["inc_pseudo"], r["pseudo"].svm.norm, safe_step(p))
    assert r["corr_pseudo"] >= CORR_MIN and rate <= criteria.DIRECTION_RATE, (
        f"{case.note}: corr(W, W^svm_pseudo) = {r['corr_pseudo']:.4f} (>= {CORR_MIN}), incremental "
        f"{r['inc_pseudo']:.4f}: tan x ln(τ/τ₀) = {rate:.3g} (<= {criteria.DIRECTION_RATE})\nproblem file: {describe(p)}")


@pytest.mark.theorem("Section 5")
def test_true_tpg_fails_where_the_pseudo_tpg_holds():
    """Calibration, and the point of Section 5: some relaxed case has GD aligned with its pseudo-TPG while
    the same criterion rejects the true TPG's W^svm (the li-local gap, 0.7 vs 0.99 in the paper)."""
    def gap(case):
        r = local_run(case)
        eta = safe_step(case.problem)
        return (r["settled"] and r["pseudo"].svm.norm > 0 and r["corr_pseudo"] >= CORR_MIN
                and direction_rate(r["inc_pseudo"], r["pseudo"].svm.norm, eta) <= criteria.DIRECTION_RATE
                and direction_rate(r["inc_true"], r["true"].norm, eta) > criteria.DIRECTION_RATE)

    case = find(relaxed_cases("head"), gap, settings=settings(database=None, derandomize=True, max_examples=20,
                                                              deadline=None))
    r = local_run(case)
    record_metrics(corr_true=r["corr_true"], corr_pseudo=r["corr_pseudo"], inc_true=r["inc_true"],
                   inc_pseudo=r["inc_pseudo"])
    eta = safe_step(case.problem)
    assert (direction_rate(r["inc_true"], r["true"].norm, eta) > criteria.DIRECTION_RATE
            >= direction_rate(r["inc_pseudo"], r["pseudo"].svm.norm, eta))


# Found by the stress profile (seed 22): selection settled, log growth along the pseudo direction, yet
# the increment W(τ) - W(τ/10) is at 32° from the pseudo-TPG Graph-SVM (corr 0.844; raw corr 0.929).
LOCAL_COUNTEREXAMPLE = {"embeddings": [[0.27298068055600483, -0.7548144548445556, -0.5964366578278846], [-0.7531367549566194, 0.5551684973273434, 0.35294895935349124], [-0.36758481347296884, 0.8740614290753409, 0.31764449169915626]], "head": [[0.1257302210933933, -0.1321048632913019, 0.6404226504432821], [0.10490011715303971, -0.535669373161111, 0.36159505490948474], [1.3040000451301372, 0.9470809631292422, -0.7037352358069926]], "sequences": [[1, 0], [1, 0], [2, 0], [1, 0]], "labels": [1, 0, 0, 1], "loss": "ce"}


@pytest.mark.theorem("Section 5")
@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "a settled, log-growing run whose direction is not the pseudo-TPG Graph-SVM's within 2e5 steps: the "
    "local claim (as operationalized here) does not hold for every case on this budget"))
def test_known_counterexample_to_local_alignment():
    from theory.problem import Problem
    from strategies.relaxations import RelaxedCase

    p = Problem.from_json(LOCAL_COUNTEREXAMPLE)
    case = RelaxedCase("head", p, p.replace(head=None, loss="log"), 1.0, "random head, ce loss")
    r = local_run(case)
    assert r["settled"], "precondition: the selection settled"
    rate = direction_rate(r["inc_pseudo"], r["pseudo"].svm.norm, safe_step(p))
    assert rate <= criteria.DIRECTION_RATE, f"incremental corr {r['inc_pseudo']:.4f}, rate {rate:.3g}"
