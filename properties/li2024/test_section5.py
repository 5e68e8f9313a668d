"""Local convergence (Li et al. 2024, Section 5): with a head that breaks Assumption 1 (tied ``C = E`` or
random) and the ``ce`` loss, GD's direction matches the Graph-SVM of the *pseudo*-TPG built from the tokens
GD selects (:mod:`theory.li2024.pseudo`), not necessarily the true TPG's.

The finite-budget criterion (settled selection, then correlation and Theorem 1's rate-aware direction
test, with a budget escalation before a failure is believed) is :mod:`theory.li2024.local_convergence`, shared
with the ``section5-phase`` sweep.  Runs in transit are counted (``event`` "not judged: <reason>") but
not judged, and the judged share has a floor (``JUDGED_FLOOR``).  Selection rule: the authors' (mass >
1e-2 selected, (0.009, 0.01] ambiguous).  Judged share: 25 of 48 generated under ci (13 "selection
changed over the last decade"); an earlier count on 200 random cases, before the budget rules, judged 161.
"""
from __future__ import annotations

import pytest
from hypothesis import Phase, event, find, given, settings

from properties.helpers import describe, note_problem
from properties.judging import not_judged, scaled
from reports.record import record_metrics
from strategies.relaxations import relaxed_cases
from theory.li2024 import criteria
from theory.li2024 import local_convergence as lc
from theory.li2024.local_convergence import CORR_MIN, STEPS
from theory.li2024.losses import safe_step
from theory.li2024.training import train
from properties.li2024.runs import judge, local_run, verdict

EXAMPLES_BASE = 25
JUDGED_FLOOR = 0.35  # ci measured 52% (25/48); see the module docstring


def _alignment_property(case, outcomes: list):
    p = case.problem
    note_problem(p)
    outcome, why, r = verdict(case)
    event(f"ambiguous tokens={r['pseudo'].ambiguous > 0}")
    outcomes.append((outcome, why, p))
    if outcome == "not judged":
        not_judged(why.split(" (")[0])
    event(f"pseudo-TPG = true TPG={abs(r['corr_pseudo'] - r['corr_true']) < 1e-9}")
    event(f"budget escalated={len(r['history']) > 1}")
    event(f"verdict: {outcome}")
    record_metrics(corr_pseudo=r["corr_pseudo"], corr_true=r["corr_true"], inc_pseudo=r["inc_pseudo"],
                   steps=r["steps"])


# The claim is local (docs/theory.md: "GD converges only locally"; the paper's evidence is a mean correlation of
# ~0.99 over 10 trials, and the authors' notebook raises on a trial below 0.95).  From a random start a
# settled run can align with another direction for good: examples/section5_persistent_misalignment.json
# (stress-found, tied head, ce) keeps tan θ ≈ 0.5 over three decades (statistic 6.0, 7.3, 8.4 at 2e5, 2e6,
# 2e7 steps; raw correlation 0.918, 0.913, 0.910).  So the property is the paper's: at most this share of
# the judged cases may end not aligned (each one is listed in the failure message and counted by event).
MISALIGNED_MAX = 0.05


@pytest.mark.theorem("Section 5")
def test_gd_aligns_with_the_pseudo_tpg_svm():
    """``EXAMPLES_BASE`` judged relaxed-head cases, scaled by the profile (ci 25 derandomized, stress 200
    random): at most ``MISALIGNED_MAX`` of the judged cases end not aligned with their pseudo-TPG
    Graph-SVM (after the budget escalation of :func:`verdict`), and at least ``JUDGED_FLOOR`` of the
    generated cases are judged (the others are counted by reason: no ⇒ edge, an ambiguous token, a
    selection that changed over the last decade, no log growth)."""
    outcomes: list = []

    @settings(max_examples=scaled(EXAMPLES_BASE), deadline=None)
    @given(case=relaxed_cases("head", head_loss="ce"))
    def prop(case):
        _alignment_property(case, outcomes)

    prop()
    judged = [o for o in outcomes if o[0] != "not judged"]
    bad = [o for o in judged if o[0] == "not aligned"]
    share = len(judged) / max(1, len(outcomes))
    record_metrics(judged=len(judged), generated=len(outcomes), not_aligned=len(bad))
    assert share >= JUDGED_FLOOR, (f"judged {len(judged)} of {len(outcomes)} generated cases ({share:.0%}), below "
                                   f"the floor {JUDGED_FLOOR:.0%}: the settle criterion or the selection rule moved")
    assert len(bad) <= MISALIGNED_MAX * len(judged), (
        f"{len(bad)} of {len(judged)} judged cases not aligned (at most {MISALIGNED_MAX:.0%}):\n"
        + "\n".join(f"{why}\nproblem file: {describe(p)}" for _, why, p in bad[:3]))


@pytest.mark.theorem("Section 5")
def test_persistent_misalignment_is_a_genuine_counterexample():
    """The stress-found case behind ``MISALIGNED_MAX`` (replay: ``python -m theory train
    examples/section5_persistent_misalignment.json --steps 20000000``): settled, and not aligned at every
    budget up to 2e7 steps with a growing statistic, i.e. not a transient."""
    from strategies.relaxations import RelaxedCase
    from theory.core.problem import Problem

    p = Problem.load("examples/section5_persistent_misalignment.json")
    case = RelaxedCase("head", p, p.replace(head=None, loss="log"), 1.0, "tied head, ce loss")
    outcome, why, r = verdict(case)
    record_metrics(outcome=outcome)
    rates = [q for _, _, q in r.get("history", [])]
    assert outcome == "not aligned" and rates == sorted(rates) and len(rates) == 3, (outcome, why)


@pytest.mark.theorem("Section 5")
def test_alignment_property_catches_a_planted_threshold():
    """Calibration: on the same 10 trained cases the rule (select > 1e-2) judges at least ``JUDGED_FLOOR``
    and all judged cases align, while a planted threshold of 0.5 fails the property (a token that shares
    its SCC's attention is dropped, the pseudo SCC breaks and GD no longer follows that Graph-SVM;
    measured on 25 cases: 7 of 19 judged cases not aligned, against 0 of 18 with the rule)."""
    runs = []

    @settings(max_examples=10, derandomize=True, deadline=None, database=None)
    @given(relaxed_cases("head", head_loss="ce"))
    def collect(case):
        runs.append((case, train(case.problem, STEPS, safe_step(case.problem))))

    collect()
    rule = [judge(c, t) for c, t in runs]
    planted = []
    for c, t in runs:  # stop at the first definite failure: each one costs an escalation to ESCALATE_MAX
        planted.append(judge(c, t, 0.5, 0.45))
        if planted[-1] == "not aligned":
            break
    record_metrics(judged_rule=sum(v != "not judged" for v in rule), failed_planted=planted.count("not aligned"))
    assert "not aligned" not in rule and sum(v != "not judged" for v in rule) >= JUDGED_FLOOR * len(runs), rule
    assert "not aligned" in planted or sum(v != "not judged" for v in planted) < JUDGED_FLOOR * len(runs), planted


@pytest.mark.theorem("Section 5")
def test_true_tpg_fails_where_the_pseudo_tpg_holds():
    """Calibration, and the point of Section 5: some relaxed case has GD aligned with its pseudo-TPG while
    the same criterion rejects the true TPG's W^svm (the li-local gap, 0.7 vs 0.99 in the paper)."""
    def gap(case):
        r = local_run(case)
        if not (r["settled"] and r["pseudo"].svm.norm > 0 and r["corr_pseudo"] >= CORR_MIN):
            return False
        pseudo, true = lc.rates(r)
        return pseudo <= criteria.DIRECTION_RATE < true

    # Existence is the claim: the first case found is judged, not shrunk (shrinking retrains every
    # candidate: 40 s of this test with it, 8 s without, under ci, and the claim is the same).
    case = find(relaxed_cases("head", head_loss="ce"), gap, settings=settings(database=None, derandomize=True, max_examples=20,
                                                              deadline=None, phases=[Phase.generate]))
    r = local_run(case)
    record_metrics(corr_true=r["corr_true"], corr_pseudo=r["corr_pseudo"], inc_true=r["inc_true"],
                   inc_pseudo=r["inc_pseudo"])
    pseudo, true = lc.rates(r)
    assert true > criteria.DIRECTION_RATE >= pseudo, f"rates: pseudo {pseudo:.3g}, true {true:.3g}"


# Found by the stress profile (seed 22): selection settled, log growth along the pseudo direction, yet
# the increment W(τ) - W(τ/10) is at 32° from the pseudo-TPG Graph-SVM (corr 0.844; raw corr 0.929).
LOCAL_COUNTEREXAMPLE = {"embeddings": [[0.27298068055600483, -0.7548144548445556, -0.5964366578278846], [-0.7531367549566194, 0.5551684973273434, 0.35294895935349124], [-0.36758481347296884, 0.8740614290753409, 0.31764449169915626]], "head": [[0.1257302210933933, -0.1321048632913019, 0.6404226504432821], [0.10490011715303971, -0.535669373161111, 0.36159505490948474], [1.3040000451301372, 0.9470809631292422, -0.7037352358069926]], "sequences": [[1, 0], [1, 0], [2, 0], [1, 0]], "labels": [1, 0, 0, 1], "loss": "ce"}


@pytest.mark.theorem("Section 5")
def test_transit_is_not_a_counterexample():
    """Regression (was a strict xfail): this case fails the direction test at the first budget (2e5 steps,
    the selection looks settled) because GD is in transit between selections; the property's verdict,
    which escalates the budget, does not call it a failure (measured: aligned or converging by 2e7)."""
    from strategies.relaxations import RelaxedCase
    from theory.core.problem import Problem

    p = Problem.from_json(LOCAL_COUNTEREXAMPLE)
    case = RelaxedCase("head", p, p.replace(head=None, loss="log"), 1.0, "random head, ce loss")
    r = local_run(case)
    assert r["settled"], "precondition: the selection looks settled at the first budget"
    assert not lc.aligned(r)[0], "precondition: the fixed-budget test fails here"
    outcome, why, _ = verdict(case)
    record_metrics(outcome=outcome)
    assert outcome != "not aligned", why
