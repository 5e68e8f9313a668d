"""The layer trained as ``W = W_K W_Q^T`` (issue 38): the factorized regularization path's certificate, the
claims ``li2024.kq_path`` and ``li2024.kq_gd`` (:mod:`theory.li2024.factorized_claims`), and their
calibrations both ways on problems whose two Graph-SVM solutions are at least 10° apart
(:func:`strategies.kq.disagreeing_problems`), with agreeing problems as the control.

Calibrations: the nuclear path judged against the Frobenius ``W^svm`` must not hold, and the Frobenius path
(Theorem 2's) judged against ``W^nuc`` must not hold; plain-W GD (Theorem 1's run) judged against ``W^nuc``
must fail; on the same problems the nuclear path judged against ``W^nuc`` must not fail.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, note, settings

from properties.judging import not_judged, scaled
from strategies.kq import agreeing_problems, disagreeing_problems
from theory.core.decision import Outcome
from theory.li2024 import factorized_claims as fc
from theory.li2024.kq_path import certify, nuclear_path
from theory.li2024.nuclear import nuclear_norm, nuclear_svm
from theory.li2024.svm import SolverError, graph_svm

pytestmark = pytest.mark.theorem("Reference")

SLOW = settings(deadline=None, max_examples=scaled(3))


def _count(v, what: str):
    event(f"{what}: {v.outcome.value}")
    if v.outcome is Outcome.UNDECIDED:
        event(f"{what} undecided: {v.reason.split(':')[0][:60]}")


@given(p=disagreeing_problems())
@settings(deadline=None, max_examples=scaled(4))
def test_path_certificate_is_scale_invariant_and_can_fail(p):
    """Each certified radius re-certifies under ``E -> 3E`` (``W/9`` at ``R/9``: the same relative gap to
    1e-6), and a planted point -- the answer shrunk to ``0.9 R`` or moved along ``W^svm`` -- is refused."""
    nuc = nuclear_svm(p)
    try:
        pts = nuclear_path(p, [nuc.norm * t for t in (1.0, 4.0)])
    except SolverError as exc:
        not_judged(f"path not certified: {str(exc)[:60]}")
    q = p.replace(embeddings=3 * p.E, head=None)
    for pt in pts:
        c = certify(pt.W / 9, q, pt.R / 9)
        assert abs(c["relative_gap"] - pt.certificate["relative_gap"]) <= 1e-6, (c, pt.certificate)
        with pytest.raises(SolverError):
            certify(0.9 * pt.W, p, pt.R)
        fro = graph_svm(p, exact=False).W
        moved = pt.W + 0.2 * pt.R * fro / nuclear_norm(fro)
        with pytest.raises(SolverError):
            certify(moved * (pt.R / nuclear_norm(moved)), p, pt.R)


# ci: 3 of 8 generated judged (38%); the rest are draws the strategy's 10° filter rejected
@pytest.mark.judged(floor=0.25)
@given(p=disagreeing_problems())
@SLOW
def test_kq_path_calibrated_both_ways(p):
    """On problems >= 10° apart: the nuclear path is not judged to converge to ``W^svm``, the Frobenius path
    is not judged to converge to ``W^nuc``, and the nuclear path against its own target does not fail."""
    from theory.li2024.analysis import analyze
    from theory.li2024.regpath import regularization_path
    from theory.li2024.regpath_verdict import margin_offset

    fro = graph_svm(p, exact=False)
    valid = fc.judge_kq_path(p)
    _count(valid, "nuclear path vs W^nuc")
    assert valid.outcome is not Outcome.FAILS, valid.reason
    planted = fc.judge_kq_path(p, target=fro.W)
    _count(planted, "nuclear path vs W^svm (planted)")
    if valid.outcome is Outcome.UNDECIDED and planted.outcome is Outcome.UNDECIDED:
        not_judged("the path did not certify far enough for either target")
    assert planted.outcome is not Outcome.HOLDS, planted.reason
    # The Frobenius path (Theorem 2's) against W^nuc: the same rule must not accept it.
    an = analyze(p)
    nuc = nuclear_svm(p)
    fin = an.finite.W if an.finite is not None else 0 * fro.W
    margins = margin_offset(p, an) + np.concatenate([fc.PATH_MARGINS, fc.PATH_ESCALATION])
    path = []
    for t in margins:  # the certified prefix: Theorem 2's path does not certify every escalated radius
        try:
            path += regularization_path(p, [np.linalg.norm(fin + t * fro.W)], resume=path[-1] if path else None)
        except SolverError:
            break
    if len(path) < 3:
        not_judged("Frobenius path: fewer than 3 radii certified")
    zone, why = fc.path_zone(path, fc._space(an), nuc.W, margins[:len(path)], final=len(path) == len(margins))
    note(why)
    event(f"Frobenius path vs W^nuc (planted): {zone}")
    assert zone != "accept", why


# ci: 3 of 8 generated judged (38%): 4 draws the 10° filter rejected, 1 plain GD still moving at 1e5 steps
@pytest.mark.judged(floor=0.25)
@given(p=disagreeing_problems())
@SLOW
def test_plain_gd_judged_against_the_nuclear_target_fails(p):
    """GD on W itself (Theorem 1's run, heading to ``W^svm``) for 10^5 steps, judged by the GD claim's rule
    against ``W^nuc``: fails (settled on a direction neither ``W^nuc`` nor factorized-stationary); against
    ``W^svm`` the same rule must not fail."""
    from theory.li2024.analysis import analyze
    from theory.li2024.losses import safe_step
    from theory.li2024.training import train

    an = analyze(p)
    traj = train(p, 100_000, safe_step(p), checkpoints=[100, 1_000, 10_000, 100_000])
    v = fc.gd_decide(traj.checkpoints, p, an, nuclear_svm(p).W)
    _count(v, "plain GD vs W^nuc (planted)")
    if v.outcome is Outcome.UNDECIDED and "still moving" in v.reason:
        not_judged("plain GD still moving at 1e5 steps")
    assert v.outcome is Outcome.FAILS, v.reason
    own = fc.gd_decide(traj.checkpoints, p, an, graph_svm(p, exact=False).W)
    assert own.outcome is not Outcome.FAILS, own.reason


@pytest.mark.judged(floor=0.5)
@given(p=agreeing_problems())
@settings(deadline=None, max_examples=scaled(2))
def test_kq_path_holds_on_the_control(p):
    """Where the two SVMs coincide (<= 1°), the path criterion holds or is undecided, never fails."""
    v = fc.judge_kq_path(p)
    _count(v, "control path")
    if v.outcome is Outcome.UNDECIDED:
        not_judged(f"control undecided: {v.reason[:50]}")
    assert v.outcome is Outcome.HOLDS, v.reason


@given(p=disagreeing_problems())
@settings(deadline=None, max_examples=scaled(1))
def test_kq_gd_claim_on_a_drawn_problem(p):
    """The conjecture on one drawn problem per ci run (10^5 factorized steps, ~4 s): a 'fails' is a finding
    (a direction neither ``W^nuc`` nor stationary), so it fails the test; undecided is counted by reason."""
    v = fc.judge_kq_gd(p)
    _count(v, "kq GD")
    note(v.reason)
    assert v.outcome is not Outcome.FAILS, v.reason


def test_claims_on_an_example_file():
    """examples/scc_above_token.json (W^nuc = W^svm there): the path claim holds; the GD claim at a
    budget under 10^5 steps is undecided without running."""
    from theory.core.problem import Problem

    p = Problem.load("examples/scc_above_token.json")
    assert fc.KQ_PATH.check(p).outcome is Outcome.HOLDS
    v = fc.KQ_GD.check(p, budget_scale=0.01)
    assert v.outcome is Outcome.UNDECIDED and "budget" in v.reason


# -- the strategies ----------------------------------------------------------------------------------
def test_the_strategies_honour_their_angles():
    """Every draw of ``disagreeing_problems(min_angle=20)`` is >= 20° apart (re-measured here), every draw of
    ``agreeing_problems(max_angle=0.5)`` <= 0.5°; a strategy that ignored its option would draw the others."""
    from hypothesis import HealthCheck, strategies as st

    from strategies.kq import svm_angle

    for strategy, ok in ((disagreeing_problems(min_angle=20.0), lambda a: a >= 20.0),
                         (agreeing_problems(max_angle=0.5, K=st.just(3)), lambda a: a <= 0.5)):
        @settings(max_examples=4, database=None, derandomize=True, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(p=strategy)
        def every_draw(p):
            a = svm_angle(p)
            assert a is not None and ok(a), a

        every_draw()


@pytest.mark.parametrize("make,name", [
    (lambda: disagreeing_problems(min_angle=120.0), "min_angle"),
    (lambda: agreeing_problems(max_angle=-1.0), "max_angle"),
    (lambda: disagreeing_problems(K=3), "K"),
])
def test_bad_strategy_options_get_one_clear_error(make, name):
    from hypothesis import find
    from hypothesis.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as info:
        find(make(), lambda _: True, settings=settings(database=None, max_examples=5))
    assert name in str(info.value) and "\n" not in str(info.value), str(info.value)


# -- the kq-phase sweep ------------------------------------------------------------------------------
def test_kq_phase_records_say_where_gd_heads(tmp_path):
    """One cell of ``kq-phase`` at 10^4 steps: its recorded angle is >= 10° and its width d/2 = 3, and its
    verdict is the heading its recorded errors say; a shape that is not ``KxD`` is bad input."""
    from theory.run import sweep

    out = tmp_path / "kq.jsonl"
    sweep.execute("kq-phase", seeds=1, out=out, overrides=["m=d/2", "shape=4x6", "steps=10000"], progress=False)
    (r,) = sweep.read_records(out)
    m = r["measures"]
    assert m["angle"] >= 10.0 and m["width"] == 3, m
    nearer_nuc = m["e_nuc"] < m["e_fro"]
    want = ("pass" if nearer_nuc and m["e_nuc"] < m["e_nuc_prev"] else
            "fail" if not nearer_nuc and m["e_fro"] < m["e_fro_prev"] else "undecided")
    assert r["verdict"] == want, r
    with pytest.raises(sweep.SweepError, match="KxD"):
        sweep.execute("kq-phase", seeds=1, out=tmp_path / "bad.jsonl", overrides=["shape=44", "m=d"], progress=False)


# -- the finite part ---------------------------------------------------------------------------------
@pytest.mark.judged(floor=0.2)
@given(p=disagreeing_problems())
@settings(deadline=None, max_examples=scaled(2))
def test_nuclear_path_finite_part_tends_to_W_fin(p):
    """Measured, not claimed by any paper: the factorized path's ``S_fin`` part tends to the same ``W^fin`` as
    the Frobenius path's (on 19 Gaussian problems its error fell geometrically, to 2e-8..7e-7 at margin 16 on the 17 certified that far), by
    Theorem 2's finite-part rule (:func:`theory.li2024.regpath_verdict.finite_verdict`); ``W^fin`` moved by
    0.2 along ``S_fin`` (Theorem 1's planted finite part) is rejected by the same rule on the same path."""
    from theory.li2024.analysis import analyze
    from theory.li2024.regpath_verdict import finite_errors, finite_verdict, margin_offset

    an = analyze(p)
    if an.finite is None or an.space.dim == 0:
        not_judged("no S_fin part")
    nuc = nuclear_svm(p)
    margins = margin_offset(p, an) + fc.PATH_MARGINS
    pts, stopped = fc._certified_prefix(p, [nuclear_norm(an.finite.W + t * nuc.W) for t in margins])
    if len(pts) < 4:
        not_judged("fewer than 4 radii certified")
    fin = an.finite.W
    ok, why = finite_verdict(finite_errors(pts, an.space, fin), float(np.linalg.norm(fin)))
    note(why)
    assert ok, why
    shift = an.space.compose(np.eye(an.space.dim)[0])  # a unit direction of S_fin
    planted = fin + 0.2 * shift
    ok, why = finite_verdict(finite_errors(pts, an.space, planted), float(np.linalg.norm(planted)))
    assert not ok, why
