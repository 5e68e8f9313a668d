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
counted (``event`` "not judged: <reason>") but not judged, and the judged share has a floor
(``JUDGED_FLOOR``).  Selection rule: the authors' (mass > 1e-2 selected, (0.009, 0.01] ambiguous;
:mod:`theory.pseudo`).  Measured with it: 16-18 of 25 derandomized cases judged (the old 0.1 / 0.01 rule
judged 43%), and on 200 random cases 161 judged (37 selection not settled or ambiguous, 2 without ⇒
edge) of which 3 do not align (2 by the raw correlation 0.891 / 0.894 with the increment aligned, 1 by
the increment, rate 5.7 > 3) -- the known limitation of ``test_known_counterexample_to_local_alignment``,
which the stress profile (10x the ci examples, random) is expected to meet about once per 60 cases.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, find, given, settings

from properties.helpers import describe, note_problem, profile_examples
from reports.record import record_metrics
from strategies.relaxations import relaxed_cases
from theory import criteria
from theory.analysis import analyze
from theory.losses import safe_step
from theory.pseudo import REJECT, SELECT, pseudo_svm, pseudo_tpgs
from theory.training import train

STEPS = 200_000
# The raw correlation carries the bounded transient (it converges like 1/log τ; the stress profile saw
# 0.948 with an incremental 0.997), so it gets the looser bound.
CORR_MIN = 0.9
EXAMPLES_BASE = 25
JUDGED_FLOOR = 0.5


def _corr(A, B):
    na, nb = np.linalg.norm(A), np.linalg.norm(B)
    return float(np.sum(A * B) / (na * nb)) if na > 0 and nb > 0 else float("nan")


def direction_rate(inc: float, svm_norm: float, eta: float) -> float:
    """Theorem 1's rate-aware direction statistic (theory/criteria.py): ``tan θ · ln(τ/τ₀)``."""
    tan = np.sqrt(max(0.0, 1.0 / inc**2 - 1.0)) if inc > 0 else np.inf
    return float(tan * np.log(max(STEPS / criteria.time_unit(svm_norm, eta), np.e)))


def local_run(case, traj=None, select: float = SELECT, reject: float = REJECT):
    """Train (unless ``traj`` is given) and judge one relaxed case with the selection rule's thresholds."""
    p = case.problem
    traj = traj or train(p, STEPS, safe_step(p))
    end, mid, early = traj.final, criteria._at(traj, STEPS / 10), criteria._at(traj, STEPS / 100)
    ps = pseudo_svm(p, end.W, select, reject, name="relaxed head case")
    earlier = pseudo_tpgs(p, mid.W, select, reject)
    same = {k: g.edges for k, g in earlier[0].items()} == {k: g.edges for k, g in ps.graphs.items()}
    true = analyze(case.theory_problem, finite=False).svm
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
            "not_judged": reason,
            "corr_pseudo": _corr(end.W, ps.svm.W), "inc_pseudo": _corr(end.W - mid.W, ps.svm.W),
            "corr_true": _corr(end.W, true.W), "inc_true": _corr(end.W - mid.W, true.W)}


def _alignment_property(case, judged: list):
    p = case.problem
    note_problem(p)
    r = local_run(case)
    event(f"ambiguous tokens={r['pseudo'].ambiguous > 0}")
    event(f"pseudo-TPG = true TPG={abs(r['corr_pseudo'] - r['corr_true']) < 1e-9}")
    record_metrics(corr_pseudo=r["corr_pseudo"], corr_true=r["corr_true"], inc_pseudo=r["inc_pseudo"])
    judged.append(r["not_judged"] is None)
    if r["not_judged"] is not None:
        event(f"not judged: {r['not_judged']}")
        return
    event("judged")
    rate = direction_rate(r["inc_pseudo"], r["pseudo"].svm.norm, safe_step(p))
    assert r["corr_pseudo"] >= CORR_MIN and rate <= criteria.DIRECTION_RATE, (
        f"{case.note}: corr(W, W^svm_pseudo) = {r['corr_pseudo']:.4f} (>= {CORR_MIN}), incremental "
        f"{r['inc_pseudo']:.4f}: tan x ln(τ/τ₀) = {rate:.3g} (<= {criteria.DIRECTION_RATE})\nproblem file: {describe(p)}")


@pytest.mark.theorem("Section 5")
def test_gd_aligns_with_the_pseudo_tpg_svm():
    """``EXAMPLES_BASE`` relaxed-head cases scaled by the profile (ci 25 derandomized, stress 250 random):
    every settled case aligns with its pseudo-TPG Graph-SVM, and at least ``JUDGED_FLOOR`` of the cases
    are judged (the reasons for the others are events: no ⇒ edge, an ambiguous token, a selection that
    changed over the last decade, no log growth)."""
    judged: list = []

    @settings(max_examples=profile_examples(EXAMPLES_BASE), deadline=None)
    @given(relaxed_cases("head"))
    def prop(case):
        _alignment_property(case, judged)

    prop()
    share = sum(judged) / max(1, len(judged))
    record_metrics(judged_share=share, examples=len(judged))
    assert share >= JUDGED_FLOOR, (f"only {sum(judged)} of {len(judged)} relaxed-head cases judged "
                                   f"(floor {JUDGED_FLOOR:.0%}): the settle criterion or the selection rule moved")


def judge(case, traj, select: float = SELECT, reject: float = REJECT) -> str:
    """``"not judged"``, ``"aligned"`` or ``"not aligned"`` for one trained case under a selection rule."""
    r = local_run(case, traj, select, reject)
    if r["not_judged"] is not None:
        return "not judged"
    rate = direction_rate(r["inc_pseudo"], r["pseudo"].svm.norm, safe_step(case.problem))
    return "aligned" if r["corr_pseudo"] >= CORR_MIN and rate <= criteria.DIRECTION_RATE else "not aligned"


@pytest.mark.theorem("Section 5")
def test_alignment_property_catches_a_planted_threshold():
    """Calibration: on the same 10 trained cases the rule (select > 1e-2) judges at least ``JUDGED_FLOOR``
    and all judged cases align, while a planted threshold of 0.5 fails the property (a token that shares
    its SCC's attention is dropped, the pseudo SCC breaks and GD no longer follows that Graph-SVM;
    measured on 25 cases: 7 of 19 judged cases not aligned, against 0 of 18 with the rule)."""
    runs = []

    @settings(max_examples=10, derandomize=True, deadline=None, database=None)
    @given(relaxed_cases("head"))
    def collect(case):
        runs.append((case, train(case.problem, STEPS, safe_step(case.problem))))

    collect()
    rule = [judge(c, t) for c, t in runs]
    planted = [judge(c, t, 0.5, 0.45) for c, t in runs]
    record_metrics(judged_rule=sum(v != "not judged" for v in rule), failed_planted=planted.count("not aligned"))
    assert "not aligned" not in rule and sum(v != "not judged" for v in rule) >= JUDGED_FLOOR * len(runs), rule
    assert "not aligned" in planted or sum(v != "not judged" for v in planted) < JUDGED_FLOOR * len(runs), planted


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
