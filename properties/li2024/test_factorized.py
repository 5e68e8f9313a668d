"""The layer trained as ``W = W_K W_Q^T`` (issue 38): the factorized regularization path's certificate, the
claims ``li2024.kq_path`` and ``li2024.kq_gd`` (:mod:`theory.li2024.factorized_claims`), and their
calibrations both ways on problems whose two Graph-SVM solutions are at least 10° apart
(:func:`strategies.kq.disagreeing_problems`), with agreeing problems as the control.

Calibrations: the nuclear path judged against the Frobenius ``W^svm`` must not hold, and the Frobenius path
(Theorem 2's) judged against ``W^nuc`` must not hold; plain-W GD (Theorem 1's run) judged against ``W^nuc``
must not hold (it settles, and the GD rule never rejects: GD on the factors settles near saddles too); on
the same problems the nuclear path judged against ``W^nuc`` must not fail.  The GD rule's two-decade stall
test both ways: a planted stall is read as settled, a slow approach to ``W^nuc`` (synthetic, and the kq-phase
run that the one-decade rule rejected) is not.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, event, given, note, settings
from hypothesis import strategies as st

from properties.judging import margin, not_judged, scaled
from reports.record import record_inputs
from strategies.kq import agreeing_problems, disagreeing_problems
from theory.core.decision import Outcome
from theory.core.problem import Problem
from theory.li2024 import factorized_claims as fc
from theory.li2024.factor_engine import COMPILED_LOSSES
from theory.li2024.factorized import train_factorized
from theory.li2024.losses import TokenData
from theory.li2024.kq_path import certify, nuclear_path
from theory.li2024.nuclear import nuclear_norm, nuclear_svm
from theory.li2024.svm import SolverError, graph_svm

pytestmark = pytest.mark.theorem("Reference")

SLOW = settings(deadline=None, max_examples=scaled(3))
# budget_scale of li2024.kq_gd here: the ci profile judges at 10^6 steps (escalated from 10^5, ~1 s a run), the
# stress and deep profiles at the claim's 10^7 (5-20 s a run).
KQ_SCALE = 0.1 if scaled(10) <= 10 else 1.0


def _count(v, what: str):
    event(f"{what}: {v.outcome.value}")
    if v.outcome is Outcome.UNDECIDED:  # the GD escalation's reason ends with why, after the measures
        why = v.reason.rsplit("; ", 1)[-1] if "(tried [" in v.reason else v.reason.split(':')[0]
        event(f"{what} undecided: {why[:60]}")


# The judged share of a property drawing disagreeing_problems(): the strategy rejects the draws whose two
# SVMs are under min_angle apart, 35 of 95 at a random seed (63% kept).  A property stops after its
# max_examples judged draws, so its share is a negative-binomial sample: against the default floor of 50%,
# 9% of stress runs (8 judged) fail with nothing wrong (main job, a fresh seed: test_kq_gd_claim_on_a_drawn_problem,
# 8 of 17); against 25%, under 1e-4 for stress and deep, while a strategy that rejects 3 draws in 4 still fails.
DISAGREEING_FLOOR = 0.25


@pytest.mark.judged(floor=DISAGREEING_FLOOR)
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


# ci: 3 of 5 generated judged (60%): 2 draws the 10° filter rejected; the 3 fail (escalated to at most 10^7 steps;
# at 10^5 steps, before the escalation, 1 of 4 was still moving)
@pytest.mark.slow
@pytest.mark.judged(floor=0.25)
@given(p=disagreeing_problems())
@SLOW
def test_plain_gd_judged_against_the_nuclear_target_settles_and_is_not_accepted(p):
    """GD on W itself (Theorem 1's run, heading to ``W^svm``), judged by the GD claim's escalation
    (:func:`theory.li2024.factorized_claims.gd_escalate`: 10^5, 10^6, 10^7 steps, plain-W GD on its compiled
    engine, 2-3 s at 10^7) against ``W^nuc``: not accepted, and read as settled over two decades elsewhere
    (21 of 21 problems settled by 10^7 in ``benchmarks/kq_stationarity.py``); against ``W^svm``, its own
    limit, the same rule accepts or finds the run still moving, never settled elsewhere."""
    from functools import lru_cache

    from theory.li2024.analysis import analyze
    from theory.li2024.losses import safe_step
    from theory.li2024.training import train

    an = analyze(p)

    @lru_cache(maxsize=None)
    def run_to(steps):
        return train(p, steps, safe_step(p), checkpoints=fc.decade_marks(steps)).checkpoints

    v = fc.gd_escalate(run_to, p, an, nuclear_svm(p).W, fc.GD_MAX_STEPS)
    _count(v, "plain GD vs W^nuc (planted)")
    assert v.outcome is not Outcome.HOLDS, v.reason
    if not v.measures.get("settled"):
        not_judged("plain GD still moving at 1e7 steps")
    margin("kq_gd two-decade stall", "planted", v.measures["stall"])
    own = fc.gd_escalate(run_to, p, an, graph_svm(p, exact=False).W, fc.GD_MAX_STEPS)
    assert own.outcome is Outcome.HOLDS or not own.measures["settled"], own.reason


def _synthetic_run(p, errors):
    """Decade checkpoints 10^2, 10^3, ... whose increments' direction errors to ``Ŵ^nuc`` are ``errors``:
    each increment a unit direction in the plane of ``Ŵ^nuc`` and ``Ŵ^svm`` (both off ``S_fin``) at that
    distance from ``Ŵ^nuc``, times ``10^k``."""
    from types import SimpleNamespace

    u = nuclear_svm(p).W
    u = u / np.linalg.norm(u)
    f = graph_svm(p, exact=False).W
    x = f - np.sum(f * u) * u
    x /= np.linalg.norm(x)
    W = np.zeros_like(u)
    out = [SimpleNamespace(step=100, W=W.copy())]
    for k, e in enumerate(errors):
        th = 2 * np.arcsin(e / 2)
        W = W + 10.0 ** (k + 2) * (np.cos(th) * u + np.sin(th) * x)
        out.append(SimpleNamespace(step=10 ** (k + 3), W=W.copy()))
    return out


def _kq_phase_problem(seed: int, K: int, d: int):
    """The problem of the kq-phase cell ``KxD`` of ``seed`` (:func:`theory.run.sweep.kq_phase_problem`)."""
    from theory.run.sweep import kq_phase_problem

    drawn = kq_phase_problem(seed, K, d)
    assert drawn is not None, "no draw 10° apart"
    return drawn[0]


# Increment errors to W^nuc per decade (10^2 -> 10^3 first).  "slow": the kq-phase 6x6 cell's seed 1 at m = 3,
# measured, to 10^6 and 10^7 steps; the one-decade rule took the first for a stop (0.1026 >= 0.9 x 0.1074, the
# direction moved 0.005).  "plain": plain-W GD's on the 6x6 cell of seed 2 (converging to 0.21, on W^svm), the
# mildest planted stall measured (0.947 over two decades); "flat": a run stopped outright.  "edge +1%" /
# "edge -1%": two decades at STALL x 1.01 and x 0.99.
SYNTHETIC = {
    "slow 1e6": ([0.2897, 0.1145, 0.1074, 0.1026], False),
    "slow 1e7": ([0.2897, 0.1145, 0.1074, 0.1026, 0.0924], False),
    "plain": ([0.2898, 0.2481, 0.2299, 0.2216, 0.2177], True),
    "flat": ([0.30, 0.2990, 0.2985, 0.2982], True),
    "edge +1%": ([0.30, 0.26, 0.25, 0.26 * fc.STALL * 1.01], True),
    "edge -1%": ([0.30, 0.26, 0.25, 0.26 * fc.STALL * 0.99], False),
}


@pytest.mark.parametrize("name", list(SYNTHETIC))
def test_gd_rule_reads_a_stall_over_two_decades_as_settled_not_a_slow_approach(name):
    """:func:`theory.li2024.factorized_claims.gd_decide` on synthetic checkpoints of the kq-phase 6x6 problem of
    seed 1 (increments in the plane of ``Ŵ^nuc`` and ``Ŵ^svm``, directions settled: c <= 0.02 a decade): a
    planted stall is settled, a slow approach (the measured errors of a run still closing on ``W^nuc``) is
    not, and the threshold decides at ``STALL`` +-1%; neither is accepted.  Where the one-decade rule
    (``e_last >= PLATEAU e_prev``) would have read the slow approach as a stall, the two-decade rule does not."""
    errors, settled = SYNTHETIC[name]
    p = _kq_phase_problem(1, 6, 6)
    from theory.li2024.analysis import analyze

    v = fc.gd_decide(_synthetic_run(p, errors), p, analyze(p), nuclear_svm(p).W)
    assert v.measures["c_last"] <= fc.SETTLED and v.measures["c_prev"] <= fc.SETTLED, v.reason
    assert v.outcome is Outcome.UNDECIDED and v.measures["settled"] is settled, v.reason
    if name == "slow 1e6":
        assert errors[-1] >= fc.PLATEAU * errors[-2] and v.measures["stall"] < fc.STALL, v.reason
    if settled:
        assert 0.0 <= v.measures["kkt_residual"] <= 1.0, v.reason  # reported with a settled direction, certified


def test_slow_approach_on_the_measured_run_is_not_rejected():
    """The kq-phase 6x6 cell's seed 1 at m = 3, GD on the factors escalated to 10^6 steps (ci) or 10^7 (stress,
    deep): still closing on ``W^nuc`` by 4-10% a decade (run to 10^8 its error fell 0.107, 0.103, 0.092,
    0.080 from 10^5), so not 'fails'.  At 10^6 the one-decade rule's settled test passed it (error kept >= 0.9
    of itself, direction moved <= 0.02) and it was rejected; the two-decade ratio is 0.896."""
    p = _kq_phase_problem(1, 6, 6)
    v = fc.judge_kq_gd(p, budget_scale=KQ_SCALE, m=3, seed=1)
    assert v.outcome is not Outcome.FAILS, v.reason
    at6 = v.trail[1]
    assert at6["e_last"] >= fc.PLATEAU * at6["e_prev"] and at6["c_last"] <= fc.SETTLED, at6
    assert at6["stall"] < fc.STALL, at6
    margin("kq_gd two-decade stall", "valid", v.measures["stall"])


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


@pytest.mark.judged(floor=DISAGREEING_FLOOR)
@given(p=disagreeing_problems())
@settings(deadline=None, max_examples=scaled(1))
def test_kq_gd_claim_on_a_drawn_problem(p):
    """The conjecture on one drawn problem per ci run (GD on the factors on the compiled engine, escalated to
    10^6 steps under ci, ~1 s, to the claim's 10^7 under stress and deep, 5-20 s): accepted, or undecided and
    counted by reason (settled elsewhere or still moving; the rule never rejects: module docstring of
    :mod:`theory.li2024.factorized_claims`).  Calibration at the same budget: the same run judged against
    the Frobenius ``W^svm`` (>= 10° from ``W^nuc``, a planted target) is not accepted."""
    v = fc.judge_kq_gd(p, budget_scale=KQ_SCALE)
    _count(v, "kq GD")
    note(v.reason)
    if v.measures.get("e_last", 0.0) > fc.CLOSE:
        margin("kq_gd two-decade stall", "valid", v.measures["stall"])
    planted = fc.judge_kq_gd(p, budget_scale=KQ_SCALE, target=graph_svm(p, exact=False).W)
    _count(planted, "kq GD vs W^svm (planted)")
    assert planted.outcome is not Outcome.HOLDS, planted.reason


@pytest.mark.slow
def test_a_saddle_plateau_is_not_a_counterexample():
    """A stress draw (main job at a5cdad3, ``examples/kq_gd_saddle_plateau.json``, K = 6, d = 8): GD on the
    factors settles over two decades 0.466 from ``W^nuc`` with its increment nearly rank one, the KKT
    residual falling 0.075, 0.062, 0.053 at 10^5..10^7 steps (0.048 at 10^8): the former rule rejected it at
    10^7 (residual above 0.05).  At the claim's 10^7 it must be undecided and read as settled, not 'fails'."""
    p = Problem.load("examples/kq_gd_saddle_plateau.json")
    v = fc.judge_kq_gd(p)
    assert v.outcome is Outcome.UNDECIDED and v.measures["settled"], v.reason
    assert 0.03 < v.measures["kkt_residual"] < 0.07, v.reason


def test_the_stationarity_residual_is_at_most_one():
    """The multipliers 0 are feasible, so the residual is in [0, 1].  On plain-W GD's decade increments of the
    kq-phase 4x4 problem of seed 1 (10^3..10^6 steps) scipy's default ``lsq_linear`` returned 2.1e13 and 1.8e12
    on a degenerate system; the residual must be re-solved (BVLS) to a value in [0, 1], and the increments
    (1-2° from ``W^svm``) must read as not stationary for the factorized problem (measured 0.164)."""
    from theory.li2024.analysis import analyze
    from theory.li2024.losses import safe_step
    from theory.li2024.training import train

    p = _kq_phase_problem(1, 4, 4)
    an = analyze(p)
    cps = train(p, 10**6, safe_step(p), checkpoints=fc.decade_marks(10**6)).checkpoints
    _, _, _, incs = fc.gd_errors(cps, fc._space(an), nuclear_svm(p).W)
    got = [fc.stationarity_residual(v, p, an.graphs) for v in incs[-3:]]
    assert all(0.1 < r <= 1.0 for r in got), got


def test_claims_on_an_example_file():
    """examples/scc_above_token.json (W^nuc = W^svm there): the path claim holds; the GD claim at a
    budget under 10^5 steps is undecided without running."""
    from theory.core.problem import Problem

    p = Problem.load("examples/scc_above_token.json")
    assert fc.KQ_PATH.check(p).outcome is Outcome.HOLDS
    v = fc.KQ_GD.check(p, budget_scale=0.001)
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


# -- the compiled engine (theory/li2024/factor_engine.py) against the numpy loop ---------------------------
U = 2.0 ** -53  # float64's unit roundoff
# Roundings on one entry's path per step outside inner products: the softmax's exp and divide, the loss's log
# or exp, the chain rule's 1/u, the step's square root and divide.
OTHER_OPS = 10
# The planted calibration judges runs that moved W by at least this many times the rounding bound.
MOVED = 1e8


class EngineBound:
    """The difference allowed between the compiled engine and the numpy loop, accumulated along the numpy
    loop's own trajectory (:func:`theory.li2024.factorized.numpy_iterates`), in Frobenius norm.

    Both engines evaluate the same map from the same state in another order (BLAS products and numpy
    reductions against loops).  At a state ``(W_K, W_Q)`` with ``G = ∇L(W)`` and step ``s``:

    * the computed ``G`` is within ``floor + γ ||G||`` of the exact one: ``floor`` the rounding floor of the
      score gradient (:func:`theory.li2024.losses.gradient_floor`, from each entry's natural scale) and
      ``γ = (3k + OTHER_OPS) u`` the chained inner products of length at most ``k = max(K, d, m)``
      (``E W_K``, the scores, ``G (E W_Q)``, ``E^T (·)``: Higham, *Accuracy and Stability of Numerical
      Algorithms*, §3.1, ``γ_n = n u / (1 - n u)``) and the other roundings;
    * the local safe step ``s = 1 / (β F + ||G||)`` is within ``ρ = γ + s (floor + γ ||G||)`` of itself,
      relatively (a constant step is exact);
    * so the factor update ``s G W_Q`` is within ``[s (floor + γ ||G||) + (ρ + γ) s ||G||] ||W_Q||`` of the
      exact one, and storing ``W_K`` rounds once more, ``u ||W_K||``; the same for ``W_Q`` with ``||W_K||``.

    Each engine is that close to exact arithmetic at each step, so the two are twice that apart.  Summed
    over the steps, on the assumption that the map does not expand a difference (the safe step keeps ``s``
    below the local curvature bound; measured on 288 drawn runs, stress profile, seeds 12-14: the largest
    difference was 0.074 of the sum, the mildest planted 1% gradient scale 2.5e8 times it), the factors
    differ by at most ``e_K``, ``e_Q`` after ``t`` steps, and
    ``W = W_K W_Q^T`` by ``e_K ||W_Q|| + ||W_K|| e_Q + e_K e_Q + 2 γ ||W_K|| ||W_Q||`` (its own product).  The
    loss by ``||∇L|| e_W`` plus its own evaluation, ``(K + OTHER_OPS) u`` of ``|L| + sum_i w_i g max|v|``
    (``g`` :func:`_loss_sensitivity`, ``v`` the logits).  The ``floor`` term is what a fixed tolerance would
    miss: from a small start the safe step is ``~ 1 / ||G||``, and where the samples' gradients nearly cancel
    it multiplies the rounding in ``G`` by up to ``1 / (β F)``, 10^4 at the ``1e-2`` start (a ``K = 2``
    problem drawn here differed by 5e-12 of ``max|W|`` after one step).
    """

    def __init__(self, p, m: int, eta):
        from theory.li2024.losses import gradient_floor, safe_step

        self.p, self.data, self.constant = p, TokenData.from_problem(p), eta is not None
        self.gamma = (3 * max(p.K, p.d, m) + OTHER_OPS) * U
        self.floor = gradient_floor
        self.eK = self.eQ = 0.0
        self.beta = 1.0 / safe_step(p)
        self.expanding = None  # the first step where a constant step exceeded the local safe step

    def step(self, t, WK, WQ, G, s, WK1, WQ1):
        """Adds step ``t``, from ``(WK, WQ)`` (gradient ``G``, size ``s``) to ``(WK1, WQ1)``."""
        if self.constant and self.expanding is None:
            if s * (self.beta * (np.sum(WK * WK) + np.sum(WQ * WQ)) + np.linalg.norm(G)) > 1:
                self.expanding = t
        fl = self.floor(self.p.E @ (WK @ WQ.T) @ self.p.E.T, self.data, self.p.gram)
        g = float(np.linalg.norm(G))
        rho = 0.0 if self.constant else self.gamma + s * (fl + self.gamma * g)
        upd = s * (fl + self.gamma * g) + (rho + self.gamma) * s * g
        self.eK += 2 * (upd * np.linalg.norm(WQ) + U * np.linalg.norm(WK1))
        self.eQ += 2 * (upd * np.linalg.norm(WK) + U * np.linalg.norm(WQ1))

    def w(self, WK, WQ) -> float:
        """The allowed ``||W_numpy - W_compiled||_F`` at the factors ``(WK, WQ)``."""
        nk, nq = float(np.linalg.norm(WK)), float(np.linalg.norm(WQ))
        return self.eK * nq + nk * self.eQ + self.eK * self.eQ + 2 * self.gamma * nk * nq

    def loss(self, W, L, G, eW: float) -> float:
        """The allowed ``|L_numpy - L_compiled|`` at ``W``, whose allowed difference is ``eW``."""
        v = np.abs(self.p.E @ W @ self.p.E.T).max() + np.abs(np.log(self.data.counts[self.data.counts > 0])).max()
        g = _loss_sensitivity(self.p)
        wsum = float(np.sum(self.data.weights))
        return float(np.linalg.norm(G)) * eW + (self.p.K + OTHER_OPS) * U * (abs(L) + wsum * g * v)


def _reference(p, m, seed, scale, steps, eta):
    """The numpy loop to ``steps``: ``(checkpoints, bound)`` with ``checkpoints`` a list of ``(t, W, L, G,
    e_W, e_L, WK, WQ)`` at :func:`_checkpoints` (``e_W``, ``e_L`` the allowed differences), or ``(None,
    None)`` when its loss or factors stop being finite.  A constant step is compared up to the first step
    where it exceeded the local safe step (``bound.expanding``): from there GD may expand a difference
    (seen: a drawn constant step of 6.7 left the engines 1.2 times the sum apart after 16 steps), and
    agreement to rounding is a property of the dynamics, not of the engines."""
    from theory.li2024.factorized import numpy_iterates

    marks = set(_checkpoints(steps))
    bound = EngineBound(p, m, eta)
    out, prev = [], None
    for t, WK, WQ, L, G, s in numpy_iterates(p, m, eta, seed, scale):
        if not (np.isfinite(L) and np.all(np.isfinite(WK)) and np.all(np.isfinite(WQ))):
            return None, None
        if prev is not None:
            bound.step(t - 1, *prev, WK, WQ)
        if t in marks:
            W = WK @ WQ.T
            eW = bound.w(WK, WQ)
            out.append((t, W, float(L), G, eW, bound.loss(W, L, G, eW), WK, WQ))
        if t == steps:
            return out, bound
        prev = (WK, WQ, G, s)


def _compare_engines(p, ref, bound, got) -> float:
    """Asserts that the compiled run ``got = (steps, Ws, losses)`` agrees with the numpy loop's ``ref``
    (:func:`_reference`) at every checkpoint, ``W`` and ``L`` within :class:`EngineBound`; returns the worst
    difference over its bound."""
    steps, Ws, Ls = got
    assert [c[0] for c in ref] == list(steps), (steps, [c[0] for c in ref])
    worst = 0.0
    for (t, W, L, _, eW, eL, _, _), W1, L1 in zip(ref, Ws, Ls):
        if bound.expanding is not None and t > bound.expanding:
            break
        err = float(np.linalg.norm(W - W1))
        assert err <= eW, (f"step {t}: ||W_numpy - W_compiled||_F = {err:.3g} > {eW:.3g} "
                           f"({err / max(float(np.linalg.norm(W)), 1e-300):.3g} of ||W||)\nproblem file: {p.to_json()}")
        assert abs(L - L1) <= eL, f"step {t}: |L_numpy - L_compiled| = {abs(L - L1):.3g} > {eL:.3g}\n{p.to_json()}"
        worst = max(worst, err / eW if eW > 0 else (0.0 if err == 0 else np.inf), abs(L - L1) / eL)
    return worst


def _checkpoints(steps: int) -> list[int]:
    return sorted({0, 1, steps // 10, steps // 3, steps})


@st.composite
def factor_runs(draw):
    """A small problem for the compiled losses (``log`` under a biorthogonal or a general head, ``square``,
    ``exp``), a width ``m`` at or above ``d`` or below it, a start scale, a step rule and a length."""
    loss = draw(st.sampled_from(COMPILED_LOSSES), label="loss")
    K = draw(st.integers(2, 6), label="K")
    d = K + draw(st.integers(0, 2), label="extra dims")
    wide = draw(st.booleans(), label="m >= d")
    m = draw(st.integers(d, d + 2) if wide else st.integers(1, d - 1), label="m")
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    E = rng.standard_normal((K, d))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    n = draw(st.integers(1, 8), label="n")
    seqs = draw(st.lists(st.lists(st.integers(0, K - 1), min_size=2, max_size=6), min_size=n, max_size=n),
                label="sequences")
    # labels in context for -log (Assumption 2); anywhere for the bounded losses
    labels = [draw(st.sampled_from(s) if loss == "log" else st.integers(0, K - 1), label="label") for s in seqs]
    head = draw(st.sampled_from(["biorthogonal", "general"]), label="head")
    C = None
    if head == "general":
        # C E^T = H with H = I + positive off-diagonal mass: not biorthogonal, and u = sum_r a_r h_r > 0
        # on every sample, so -log u stays finite
        H = np.eye(K) + rng.uniform(0.05, 0.5, (K, K))
        C = H @ np.linalg.solve(E @ E.T, E)
    p = Problem.create(E, seqs, labels, loss, head=C)
    assume(p.assumptions()["head_biorthogonal"] == (head == "biorthogonal"))
    seed = draw(st.integers(0, 2**16), label="start seed")
    scale = draw(st.sampled_from([1e-2, 0.1, 0.5]), label="init scale")
    steps = draw(st.integers(1, 1500), label="steps")
    eta = None
    if draw(st.booleans(), label="constant step"):
        # a share of the local safe step at the start: constant steps are the engines' other branch
        from theory.li2024.factorized import init_factors
        from theory.li2024.losses import loss_and_grad, safe_step

        WK, WQ = init_factors(d, m, seed, scale)
        _, G = loss_and_grad(WK @ WQ.T, p)
        bt = (np.sum(WK * WK) + np.sum(WQ * WQ)) / safe_step(p) + np.linalg.norm(G)
        eta = draw(st.floats(0.1, 1.0), label="eta / safe step") / bt
    record_inputs(K=K, d=d, m=m, T=max(map(len, seqs)))
    return p, m, seed, scale, steps, eta


def _loss_sensitivity(p) -> float:
    """A bound on ``sum_r |dl_i/dv_r|`` over a sample's logits ``v`` (attention ``a = softmax(v)``, ``h`` the
    label's head row): ``-log`` under Assumption 1, ``logsumexp(v) - v_y``: 2; ``-log u`` with ``u = sum a_r
    h_r``, ``h > 0``: ``2 max h / min h``; ``(1 - u)^2``: ``4 (1 + max|h|) max|h|``; ``exp(-u)``:
    ``2 e^{max|h|} max|h|``."""
    data = TokenData.from_problem(p)
    h = np.abs(data.H[data.labels])
    if p.loss == "log":
        return 2.0 if data.biorthogonal else 2.0 * float(h.max() / data.H[data.labels].min())
    if p.loss == "square":
        return 4.0 * (1.0 + float(h.max())) * float(h.max())
    return 2.0 * float(np.exp(h.max()) * h.max())


@settings(deadline=None, max_examples=scaled(12))
@given(run=factor_runs())
def test_compiled_factor_engine_matches_numpy(run):
    """``train_factorized(engine="compiled")`` (:mod:`theory.li2024.factor_engine`) gives the numpy loop's
    ``W`` and ``L`` at every checkpoint and its final factors, within the rounding accumulated along the
    loop's trajectory (:class:`EngineBound`): ``log`` under biorthogonal and general heads, ``square``,
    ``exp``; ``m >= d`` and ``m < d``; the local safe step and constant steps.  Where the loop's loss stops
    being finite (a constant step too long for the grown factors), the compiled engine raises
    ``FloatingPointError``."""
    p, m, seed, scale, steps, eta = run
    note(f"loss={p.loss} head biorthogonal={p.assumptions()['head_biorthogonal']} K={p.K} d={p.d} m={m} "
         f"steps={steps} eta={eta} scale={scale}")
    event(f"m {'>=' if m >= p.d else '<'} d")
    event(f"{p.loss}, {'biorthogonal' if p.assumptions()['head_biorthogonal'] else 'general'} head, "
          f"{'local safe' if eta is None else 'constant'} step")
    ref, bound = _reference(p, m, seed, scale, steps, eta)
    if ref is None:
        event("reference diverged")
        with pytest.raises(FloatingPointError):
            train_factorized(p, steps, m, eta, seed, scale, checkpoints=_checkpoints(steps), engine="compiled")
        return
    got = train_factorized(p, steps, m, eta, seed, scale, checkpoints=_checkpoints(steps), engine="compiled")
    worst = _compare_engines(p, ref, bound, ([c.step for c in got.checkpoints], [c.W for c in got.checkpoints],
                                      [c.loss for c in got.checkpoints]))
    if bound.expanding is None:
        assert np.linalg.norm(ref[-1][6] - got.WK) <= bound.eK and np.linalg.norm(ref[-1][7] - got.WQ) <= bound.eQ
    else:
        event("constant step compared up to where it exceeded the local safe step")
    margin("compiled factor engine difference over bound", "valid", worst)


@settings(deadline=None, max_examples=scaled(6))
@given(run=factor_runs(), gscale=st.sampled_from([1.01, 0.99, -1.0]))
def test_engine_comparison_catches_a_planted_gradient_scale(run, gscale):
    """Calibration of the comparison above: the compiled engine with its score gradient scaled by
    ``_gscale`` (1% too long, 1% too short, or the sign flipped: ascent) is told apart from the numpy loop by
    the same check and bound (or raises on a loss that stopped being finite).  Under the local safe step
    ``1 / (β F + ||∇L||)`` a scale of the gradient is undone in the step's ``||∇L||`` term and shows only
    through ``β F`` (``F = ||W_K||² + ||W_Q||²``): at the ``1e-2`` start, about ``1e-6`` of the first step,
    still far above the bound.  Judged where the run moved ``W`` by at least :data:`MOVED` times the bound: a 1% change of
    each update that scales the safe step's ``β F / (β F + ||∇L||)`` (>= 1e-6 at the start) is then at least
    100 times the bound."""
    from theory.li2024.factor_engine import factor_gd_compiled
    from theory.li2024.factorized import init_factors
    from theory.li2024.losses import safe_step

    p, m, seed, scale, steps, eta = run
    ref, bound = _reference(p, m, seed, scale, steps, eta)
    if ref is None:
        not_judged("reference diverged")
    compared = [c for c in ref if bound.expanding is None or c[0] <= bound.expanding]
    if max(float(np.linalg.norm(c[1] - ref[0][1])) / c[4] if c[4] > 0 else 0.0 for c in compared) < MOVED:
        # every sample attends one token, the loss does not see the attention (a label no head row reaches),
        # or a constant step past the safe one from the start: a scaled update is lost in the rounding
        not_judged("W moved less than 1e8 times the rounding bound")
    WK, WQ = init_factors(p.d, m, seed, scale)
    try:
        steps_, Ws, Ls, _, _ = factor_gd_compiled(p.E, WK, WQ, TokenData.from_problem(p), _checkpoints(steps),
                                                  1.0 / safe_step(p), eta, _gscale=gscale)
    except FloatingPointError:
        event("planted: diverged")
        return
    with pytest.raises(AssertionError):
        _compare_engines(p, ref, bound, (steps_.tolist(), Ws, Ls))
    worst = max(float(np.linalg.norm(W1 - c[1])) / c[4] for c, W1 in zip(ref[1:], Ws[1:])
                if bound.expanding is None or c[0] <= bound.expanding)
    margin("compiled factor engine difference over bound", "planted", worst)


@pytest.mark.parametrize("loss", ["ce", "lsq"])
def test_compiled_factor_engine_refuses_losses_it_has_no_kernel_for(loss):
    """``engine="compiled"`` on ``ce``/``lsq`` raises one clear ``ValueError`` naming the loss and the way
    out; ``engine="auto"`` runs them on the numpy loop (the same run as ``engine="numpy"``); an unknown
    engine name is refused."""
    p = Problem.create(np.eye(3), [[0, 1, 2], [1, 2, 0]], [2, 1], loss)
    with pytest.raises(ValueError, match=f"no kernel for the '{loss}' loss.*engine='numpy'"):
        train_factorized(p, 10, 2, engine="compiled")
    a = train_factorized(p, 10, 2, engine="auto")
    b = train_factorized(p, 10, 2, engine="numpy")
    assert all(np.array_equal(x.W, y.W) for x, y in zip(a.checkpoints, b.checkpoints))
    with pytest.raises(ValueError, match="unknown engine"):
        train_factorized(p, 10, 2, engine="fast")
