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
:mod:`theory.pseudo`).  The budget is Theorem 1's (``10^4 τ₀`` of the pseudo-TPG's Graph-SVM, at least
``STEPS``), and a failed verdict is re-judged at 10x the budget up to ``ESCALATE_MAX`` (see
:func:`verdict`: GD can sit near one selection for a decade and then switch; the former strict-xfail
counterexample was such a transit).  Judged share: 25 of 48 generated under ci (13 "selection changed
over the last decade"); an earlier count on 200 random cases, before the budget rules, judged 161.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, find, given, settings

from properties.helpers import describe, note_problem
from properties.judging import not_judged, scaled
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
JUDGED_FLOOR = 0.35  # ci measured 52% (25/48); see the module docstring


def _corr(A, B):
    na, nb = np.linalg.norm(A), np.linalg.norm(B)
    return float(np.sum(A * B) / (na * nb)) if na > 0 and nb > 0 else float("nan")


def direction_rate(inc: float, svm_norm: float, eta: float, steps: int = STEPS) -> float:
    """Theorem 1's rate-aware direction statistic (theory/criteria.py): ``tan θ · ln(τ/τ₀)``."""
    tan = np.sqrt(max(0.0, 1.0 / inc**2 - 1.0)) if inc > 0 else np.inf
    return float(tan * np.log(max(steps / criteria.time_unit(svm_norm, eta), np.e)))


def local_run(case, traj=None, select: float = SELECT, reject: float = REJECT):
    """Train (unless ``traj`` is given) and judge one relaxed case with the selection rule's thresholds.

    The budget is Theorem 1's (``criteria.budget``: ``10^4 τ₀`` with ``τ₀`` from the pseudo-TPG's
    Graph-SVM, at least ``STEPS``): the run is extended to it when the pseudo-TPG at ``STEPS`` asks for
    more, since the direction test presumes ``τ >= 10^4 τ₀``.  Measured on the ci-found case that failed
    at a fixed 2e5 steps (τ = 7.5e3 τ₀): ``tan θ · ln(τ/τ₀)`` = 3.66, 1.39, 0.14 at 2e5, 2e6, 2e7 steps
    (raw correlation 0.9923, 0.9969, 0.9980), i.e. a transient, not a wrong direction."""
    p = case.problem
    eta = safe_step(p)
    traj = traj or train(p, STEPS, eta)
    ps = pseudo_svm(p, traj.final.W, select, reject, name="relaxed head case")
    if ps.svm.norm > 0:
        need = 10**criteria.DECADES * criteria.time_unit(ps.svm.norm, eta)
        if need > criteria.MAX_STEPS:
            return {"pseudo": ps, "settled": False, "not_judged": "10^4 time units exceed MAX_STEPS",
                    "steps": traj.final.step}
        if need > traj.final.step:
            traj = train(p, criteria.budget(ps.svm.norm, eta), eta)
            ps = pseudo_svm(p, traj.final.W, select, reject, name="relaxed head case")
    steps = traj.final.step
    end, mid, early = traj.final, criteria._at(traj, steps / 10), criteria._at(traj, steps / 100)
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
            "not_judged": reason, "steps": steps,
            "corr_pseudo": _corr(end.W, ps.svm.W), "inc_pseudo": _corr(end.W - mid.W, ps.svm.W),
            "corr_true": _corr(end.W, true.W), "inc_true": _corr(end.W - mid.W, true.W)}


# A failed verdict is re-judged at 10x the budget, up to ESCALATE_MAX steps (see _alignment_property).
ESCALATE_MAX = 20_000_000


def _aligned(r, eta) -> tuple[bool, float]:
    rate = direction_rate(r["inc_pseudo"], r["pseudo"].svm.norm, eta, r["steps"])
    return r["corr_pseudo"] >= CORR_MIN and rate <= criteria.DIRECTION_RATE, rate


def verdict(case, traj=None, select: float = SELECT, reject: float = REJECT) -> tuple[str, str, dict]:
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
    fails (the planted-threshold calibration below)."""
    p = case.problem
    eta = safe_step(p)
    r = local_run(case, traj, select, reject)
    if r["not_judged"] is not None:
        return "not judged", r["not_judged"], r
    ok, rate = _aligned(r, eta)
    history = [(r["steps"], r["corr_pseudo"], rate)]
    while not ok and r["steps"] * 10 <= ESCALATE_MAX:
        r = local_run(case, train(p, r["steps"] * 10, eta), select, reject)
        if r["not_judged"] is not None:
            return "not judged", f"in transit when the budget was extended ({r['not_judged']})", r
        ok, rate = _aligned(r, eta)
        history.append((r["steps"], r["corr_pseudo"], rate))
    r["history"] = history
    trail = "; ".join(f"{n:.0e} steps: corr {c:.4f}, tan x ln(τ/τ₀) {q:.3g}" for n, c, q in history)
    if ok:
        return "aligned", trail, r
    if rate < history[0][2]:
        return "not judged", f"converging but not aligned within {ESCALATE_MAX:.0e} steps", r
    return "not aligned", (f"{case.note}: corr(W, W^svm_pseudo) = {r['corr_pseudo']:.4f} (>= {CORR_MIN}), "
                           f"incremental {r['inc_pseudo']:.4f}: tan x ln(τ/τ₀) = {rate:.3g} "
                           f"(<= {criteria.DIRECTION_RATE}); budgets: {trail}"), r


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


# The claim is local (THEORY.md: "GD converges only locally"; the paper's evidence is a mean correlation of
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
    @given(case=relaxed_cases("head"))
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
    from theory.problem import Problem

    p = Problem.load("examples/section5_persistent_misalignment.json")
    case = RelaxedCase("head", p, p.replace(head=None, loss="log"), 1.0, "tied head, ce loss")
    outcome, why, r = verdict(case)
    record_metrics(outcome=outcome)
    rates = [q for _, _, q in r.get("history", [])]
    assert outcome == "not aligned" and rates == sorted(rates) and len(rates) == 3, (outcome, why)


def judge(case, traj, select: float = SELECT, reject: float = REJECT) -> str:
    """``"not judged"``, ``"aligned"`` or ``"not aligned"`` for one trained case under a selection rule
    (the property's own verdict, escalation included)."""
    return verdict(case, traj, select, reject)[0]


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
        eta = safe_step(case.problem)
        return (r["settled"] and r["pseudo"].svm.norm > 0 and r["corr_pseudo"] >= CORR_MIN
                and direction_rate(r["inc_pseudo"], r["pseudo"].svm.norm, eta, r["steps"]) <= criteria.DIRECTION_RATE
                and direction_rate(r["inc_true"], r["true"].norm, eta, r["steps"]) > criteria.DIRECTION_RATE)

    case = find(relaxed_cases("head"), gap, settings=settings(database=None, derandomize=True, max_examples=20,
                                                              deadline=None))
    r = local_run(case)
    record_metrics(corr_true=r["corr_true"], corr_pseudo=r["corr_pseudo"], inc_true=r["inc_true"],
                   inc_pseudo=r["inc_pseudo"])
    eta = safe_step(case.problem)
    assert (direction_rate(r["inc_true"], r["true"].norm, eta, r["steps"]) > criteria.DIRECTION_RATE
            >= direction_rate(r["inc_pseudo"], r["pseudo"].svm.norm, eta, r["steps"]))


# Found by the stress profile (seed 22): selection settled, log growth along the pseudo direction, yet
# the increment W(τ) - W(τ/10) is at 32° from the pseudo-TPG Graph-SVM (corr 0.844; raw corr 0.929).
LOCAL_COUNTEREXAMPLE = {"embeddings": [[0.27298068055600483, -0.7548144548445556, -0.5964366578278846], [-0.7531367549566194, 0.5551684973273434, 0.35294895935349124], [-0.36758481347296884, 0.8740614290753409, 0.31764449169915626]], "head": [[0.1257302210933933, -0.1321048632913019, 0.6404226504432821], [0.10490011715303971, -0.535669373161111, 0.36159505490948474], [1.3040000451301372, 0.9470809631292422, -0.7037352358069926]], "sequences": [[1, 0], [1, 0], [2, 0], [1, 0]], "labels": [1, 0, 0, 1], "loss": "ce"}


@pytest.mark.theorem("Section 5")
def test_transit_is_not_a_counterexample():
    """Regression (was a strict xfail): this case fails the direction test at the first budget (2e5 steps,
    the selection looks settled) because GD is in transit between selections; the property's verdict,
    which escalates the budget, does not call it a failure (measured: aligned or converging by 2e7)."""
    from strategies.relaxations import RelaxedCase
    from theory.problem import Problem

    p = Problem.from_json(LOCAL_COUNTEREXAMPLE)
    case = RelaxedCase("head", p, p.replace(head=None, loss="log"), 1.0, "random head, ce loss")
    r = local_run(case)
    assert r["settled"], "precondition: the selection looks settled at the first budget"
    assert not _aligned(r, safe_step(p))[0], "precondition: the fixed-budget test fails here"
    outcome, why, _ = verdict(case)
    record_metrics(outcome=outcome)
    assert outcome != "not aligned", why
