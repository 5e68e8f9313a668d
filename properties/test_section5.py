"""Local convergence (Li et al. 2024, Section 5): with a head that breaks Assumption 1 (tied ``C = E`` or
random) and the ``ce`` loss, GD's direction matches the Graph-SVM of the *pseudo*-TPG built from the tokens
GD selects (:mod:`theory.pseudo`), not necessarily the true TPG's.

Finite-budget criterion: after ``STEPS`` plain GD steps at the relaxed problem's safe step, when the
selection has *settled* -- the pseudo-TPG built at ``τ/10`` and at ``τ`` is the same and has no ambiguous
(sample, token) pair -- ``corr(W(τ), W^svm_pseudo) >= CORR_MIN`` and the incremental direction
``corr(W(τ) - W(τ/10), W^svm_pseudo) >= INC_MIN``.  The claim is local: GD can spend millions of steps
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
CORR_MIN, INC_MIN = 0.9, 0.98


def _corr(A, B):
    na, nb = np.linalg.norm(A), np.linalg.norm(B)
    return float(np.sum(A * B) / (na * nb)) if na > 0 and nb > 0 else float("nan")


def local_run(case):
    p = case.problem
    traj = train(p, STEPS, safe_step(p))
    end, mid = traj.final, criteria._at(traj, STEPS / 10)
    ps = pseudo_svm(p, end.W, name="relaxed head case")
    earlier = pseudo_tpgs(p, mid.W)
    settled = (earlier[1] == 0 and ps.ambiguous == 0
               and {k: g.edges for k, g in earlier[0].items()} == {k: g.edges for k, g in ps.graphs.items()})
    true = analyze(case.theory_problem, finite=False).svm
    return {"pseudo": ps, "true": true, "W": end.W, "dW": end.W - mid.W, "settled": settled,
            "corr_pseudo": _corr(end.W, ps.svm.W), "inc_pseudo": _corr(end.W - mid.W, ps.svm.W),
            "corr_true": _corr(end.W, true.W), "inc_true": _corr(end.W - mid.W, true.W)}


@pytest.mark.theorem("Section 5")
@given(relaxed_cases("head"))
def test_gd_aligns_with_the_pseudo_tpg_svm(case):
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
    assert r["corr_pseudo"] >= CORR_MIN and r["inc_pseudo"] >= INC_MIN, (
        f"{case.note}: corr(W, W^svm_pseudo) = {r['corr_pseudo']:.4f} (>= {CORR_MIN}), incremental "
        f"{r['inc_pseudo']:.4f} (>= {INC_MIN})\nproblem file: {describe(p)}")


@pytest.mark.theorem("Section 5")
def test_true_tpg_fails_where_the_pseudo_tpg_holds():
    """Calibration, and the point of Section 5: some relaxed case has GD aligned with its pseudo-TPG while
    the same criterion rejects the true TPG's W^svm (the li-local gap, 0.7 vs 0.99 in the paper)."""
    def gap(case):
        r = local_run(case)
        return (r["settled"] and r["pseudo"].svm.norm > 0 and r["inc_pseudo"] >= INC_MIN
                and r["corr_pseudo"] >= CORR_MIN and r["inc_true"] < INC_MIN)

    case = find(relaxed_cases("head"), gap, settings=settings(database=None, derandomize=True, max_examples=20,
                                                              deadline=None))
    r = local_run(case)
    record_metrics(corr_true=r["corr_true"], corr_pseudo=r["corr_pseudo"], inc_true=r["inc_true"],
                   inc_pseudo=r["inc_pseudo"])
    assert r["inc_true"] < INC_MIN <= r["inc_pseudo"]
