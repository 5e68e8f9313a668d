"""Theorem 2 (regularization path; docs/theory.md "Theorems"; Li et al. 2024, Algo-RP).

``W̄_R = argmin_{||W||_F <= R} L(W)`` satisfies ``W̄_R/R -> W^svm/||W^svm||`` and ``Π_{S_fin} W̄_R -> W^fin``.

Finite-budget criterion (rate-aware).  The radii are ``R_t = ||W^fin + t W^svm||`` for ``t`` in
:data:`MARGINS` past :func:`margin_offset`: ``t`` is the margin, in score units, that ``t W^svm`` puts on
every ``⇒`` edge, so the loss of the tokens outside each label's SCC is ``O(e^{-(t - offset)})`` whatever
the scale of E.  The offset is ``W^fin``'s own score debt on the ``⇒`` edges (0 unless ``W^fin`` scores some
``⇒`` edge negative; ``W^fin`` lies in ``S_fin`` but the ``⇒`` rows need not be orthogonal to it): without it
the schedule can end before the asymptotic regime begins (stress seed 3993101603: debt 87.7, f and e flat
through t = 64).  The theory gives ``W̄_R = W^fin + ρ(R) W^svm + δ(R)`` with ``δ = O(1)`` (at most
logarithmic in degenerate cases), so

* direction error ``e⊥(R) = ||W̄⊥_R/||W̄⊥_R|| - Ŵ^svm||_F`` of the part ``W̄⊥_R = W̄_R - Π_{S_fin} W̄_R``:
  ``W^svm ⊥ S_fin`` (its equalities span ``S_fin``) and ``Π_{S_fin} W̄_R`` is bounded (it converges to
  ``W^fin``, judged below), so ``W̄_R/R -> Ŵ^svm`` exactly when ``e⊥ -> 0``.  The full error
  ``||W̄_R/R - Ŵ^svm||`` adds a term ``~||W^fin||/R`` that is known geometry, not a rate of the theory, and
  that dominates the budget when ``||W^fin|| >> 16 ||W^svm||`` (the seed above: 125x, e = 0.85 at t <=
  offset + 16 while e⊥ = 3e-15).  ``e⊥`` is asymptotically ``O((log t)/t)`` but, over these radii,
  sometimes as slow as ``t^-0.19`` and sometimes still far (e = 0.26 at margin 16 while on the 1/R
  track), both found by the stress profile: require that ``e⊥`` is still shrinking at the last radius
  and either ``e⊥(R_last) <= DIR_MAX`` or ``||W̄⊥_R|| e⊥`` grew no faster than the (log t)/t track allows
  (:func:`on_track_limit`; ``||W̄⊥_R|| ≈ t ||W^svm||``, which ``R`` is not when ``W^fin`` is long); a wrong
  target plateaus at its gap (``>= MIN_DIR_GAP``), so it fails both -- the track rule only where the
  margin's own growth exceeds the track's limit (t -> 2t; not past a large offset);
* finite error ``f(R) = ||Π_{S_fin} W̄_R - W^fin||_F``: the dropped tokens perturb ``L̃`` by ``O(e^{-t})``,
  so ``f`` falls geometrically: require ``f(R_last) <= FIN_DECAY f(R_prev)`` and
  ``f(R_last) <= FIN_MAX max(1, ||W^fin||)`` (or ``f`` at rounding level).

Calibration (:func:`test_theorem2_criterion_rejects_planted_targets`): the same criterion applied to a
wrong direction (the Graph-SVM of the TPG with one ``⇒`` edge reversed) and to a wrong finite component
(``W^fin`` of the problem with one cyclic sample duplicated -- same graphs, other weights) must fail
whenever the planted error exceeds :data:`MIN_DIR_GAP` / :data:`MIN_FIN_GAP`.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from properties.helpers import describe
from properties.judging import aim, margin, not_judged, scaled
from reports.record import record_metrics
from strategies.problems import drawn_problems
from theory.core.decision import Outcome
from theory.li2024.analysis import analyze
from theory.core.problem import Problem
from theory.li2024.losses import loss_and_grad
from theory.li2024.regpath import (FLOOR_MAX, KKT_TOL, RoundingLevel, certify, convex_case, outward_direction, regularization_path,
                            regularized_solution)
from theory.li2024.svm import SolverError
from theory.li2024.regpath_verdict import (EPS, ESCALATION, EXACT, MARGINS, MIN_DIR_GAP, MIN_FIN_GAP, Theorem2Judge,
                                          direction_errors, direction_verdict, edges, finite_errors, finite_verdict,
                                          margin_offset, margins_for, perp_norms, radii_for)
from properties.li2024.runs import NONZERO_SVM, REGPATH_CONDITION, certified_path
from theory.li2024.plants import duplicated_sample_fins, reversed_edge_svms
from theory.li2024.claims import THEOREM2

# ------------------------------------------------------------------------------------------------
# Theorem 2
# ------------------------------------------------------------------------------------------------

# Judged share of generated examples: the property's own skips are radii float64 cannot certify.  The
# share once counted Hypothesis's overruns too (ci: 81-93%, stress 87%, and 57% after an unrelated edit);
# they are no longer charged (reports.plugin, REJECTED_DRAW); the floor leaves room for the random
# profiles' spread.
JUDGED_FLOOR = 0.6


@pytest.mark.theorem("Theorem 2")
@pytest.mark.judged(floor=JUDGED_FLOOR)
@settings(deadline=None)
@given(dp=drawn_problems(structures=NONZERO_SVM, max_condition=REGPATH_CONDITION,
                         loss=st.sampled_from(THEOREM2.domain.losses)))
@pytest.mark.slow
def test_theorem2_regularization_path_converges(dp):
    """Along R_t (t = offset + 1..16), W̄_R/R -> Ŵ^svm at rate ~(log t)/t and Π_{S_fin} W̄_R -> W^fin (Theorem 2),
    for every loss of u the theorem allows (log, exp, square), each against its own loss's W^fin; where that
    loss's L̃ has no finite minimizer the finite-part conclusion has no target and the direction is judged
    alone."""
    p, an, radii, path = certified_path(dp)
    event(f"S_fin dim>0={an.space.dim > 0}")
    event(f"loss={p.loss}, W^fin {'exists' if an.finite is not None else 'absent'}")
    e = direction_errors(path, an.space, an.svm.W)
    if an.finite is not None:
        f = finite_errors(path, an.space, an.finite.W)
        for label, score in edges(perp_norms(path, an.space), e, f, float(np.linalg.norm(an.finite.W))).items():
            aim(f"theorem2 {label}", score, json.dumps(p.to_json(), separators=(",", ":")))
    judge = Theorem2Judge(p, an, radii, path)
    out_d, why_d = judge.direction(an.svm.W)
    if an.finite is None:
        # No W^fin (a bounded loss's L̃ falls toward infinity along S_fin): the path's S_fin part is unbounded
        # and the direction is judged on the whole W̄_R/R, which need not approach W^svm -- the statement's
        # missing hypothesis, shown independently by properties/li2024/test_oracle.py.  Counted, not judged.
        event(f"no W^fin: whole-direction verdict {out_d.value}")
        not_judged(f"no W^fin for the {p.loss} loss (Theorem 2's direction is not expected; see test_oracle)")
    out_f, why_f = judge.finite(an.finite.W)
    if Outcome.FAILS in (out_d, out_f) and not convex_case(p):
        # As the claim's judge (theory.li2024.claims.judge_theorem2): the path and W^fin of a non-convex loss
        # are certified local optima only, so a failure is not claimed (the oracle settles tiny problems).
        event(f"non-convex loss: direction {out_d.value}, finite part {out_f.value}")
        not_judged("non-convex loss: a failure is not confirmed (path and W^fin certified local optima only)")
    if judge.escalated:
        try:
            _, _, ext = judge.extended()
        except RoundingLevel:
            ext = None
        if ext is not None:
            e = direction_errors(ext, an.space, an.svm.W)
            if e[-1] > EXACT:
                margin("theorem2 e⊥ last-doubling ratio (escalated)", "valid", e[-1] / max(e[-2], 1e-300))
    for out in (out_d, out_f):
        record_metrics(**{f"outcome_{'direction' if out is out_d else 'finite'}": out.value})
    if Outcome.UNDECIDED in (out_d, out_f) and Outcome.FAILS not in (out_d, out_f):
        not_judged("undecided at the escalated margins")
    event(f"margins offset by W^fin's score debt: {judge.margins[0] > MARGINS[0]}")
    event(f"escalated to t = offset + {ESCALATION[-1]:g}" if judge.escalated else f"judged at t <= offset + {MARGINS[-1]:g}")
    assert out_d is Outcome.HOLDS, f"W̄_R/R does not approach W^svm: {why_d}"
    assert out_f is Outcome.HOLDS, f"Π_S W̄_R does not approach W^fin: {why_f}"


# ------------------------------------------------------------------------------------------------
# Calibration: the criterion rejects planted wrong targets
# ------------------------------------------------------------------------------------------------
@pytest.mark.theorem("Theorem 2")
@pytest.mark.judged(floor=JUDGED_FLOOR)
@settings(deadline=None)
@given(dp=drawn_problems(structures=NONZERO_SVM, max_condition=REGPATH_CONDITION))
def test_theorem2_criterion_rejects_planted_targets(dp):
    """Calibration: the Theorem 2 criterion, escalation included (:class:`Theorem2Judge`), rejects a wrong
    W^svm or a wrong W^fin (planted).  A planted target is not settled at t <= 16, so the judge escalates
    it; where the escalated path is not certifiable in float64 (cyclic problems at margin 32: the tail
    gradient e^{-32} sits below the rounding floor of the O(1) cyclic per-sample gradients) the judge
    accepts nothing and the main property does not judge, so no wrong target can pass there; counted."""
    p, an, radii, path = certified_path(dp)
    judge = Theorem2Judge(p, an, radii, path)
    u = an.svm.W / an.svm.norm
    planted, escalated = 0, True
    planted_target: list = []

    def check(kind, gap, verdict):
        nonlocal escalated
        out, why = verdict()
        if out is Outcome.UNDECIDED and "rounding level" in why:
            escalated = False  # the judge accepts nothing here: the main property does not judge it either
            return
        event(f"planted {kind}: {out.value}")
        if kind == "W^svm direction" and judge.escalated:
            e = direction_errors(judge.extended()[2], an.space, planted_target[0])
            margin("theorem2 e⊥ last-doubling ratio (escalated)", "planted", e[-1] / max(e[-2], 1e-300))
        assert out is Outcome.FAILS, f"criterion did not reject a wrong {kind} at distance {gap:.3g}: {why}"

    for V in reversed_edge_svms(p, an):
        gap = float(np.linalg.norm(V / np.linalg.norm(V) - u))
        if gap >= MIN_DIR_GAP:
            planted += 1
            planted_target[:] = [V]
            check("W^svm direction", gap, lambda: judge.direction(V))
    fin_scale = max(1.0, float(np.linalg.norm(an.finite.W)))
    for F in duplicated_sample_fins(p, an):
        gap = float(np.linalg.norm(F - an.finite.W))
        if gap >= MIN_FIN_GAP * fin_scale:
            planted += 1
            check("W^fin", gap, lambda: judge.finite(F))
    if planted:
        event("escalated path certified" if escalated else "escalated path not certifiable (checked at t <= 16)")
    event(f"planted targets checked: {min(planted, 3)}{'+' if planted > 3 else ''}")


# ------------------------------------------------------------------------------------------------
# Unit properties of theory.li2024.regpath
# ------------------------------------------------------------------------------------------------
def direct_loss(W, p):
    """L(W) straight from the model definition: f_W(X) = X^T softmax(X W x_last), u = c_y^T f, ℓ = -log u
    (independent of the token-space code under test)."""
    total = 0.0
    for seq, y in zip(p.sequences, p.labels):
        X = p.E[list(seq)]
        s = X @ W @ X[-1]
        a = np.exp(s - s.max())
        a /= a.sum()
        total += -np.log(p.C[y] @ (X.T @ a))
    return total / p.n


def direct_loss_grad(W, p):
    """``∇_W L`` of :func:`direct_loss`, by the chain rule on the same definition: with ``v_t = c_y·x_t`` and
    ``u = a·v``, ``∂ℓ/∂s_t = -a_t (v_t - u)/u`` and ``∂s_t/∂W = x_t x_last^T`` (checked against central
    differences by ``test_direct_loss_gradient_is_the_derivative``)."""
    G = np.zeros_like(W)
    for seq, y in zip(p.sequences, p.labels):
        X = p.E[list(seq)]
        s = X @ W @ X[-1]
        a = np.exp(s - s.max())
        a /= a.sum()
        v = X @ p.C[y]
        u = a @ v
        G += np.outer(X.T @ (-a * (v - u) / u), X[-1])
    return G / p.n


@given(dp=drawn_problems(structures=NONZERO_SVM, embedding_kinds=st.sampled_from(["orthonormal", "gaussian"])),
       seed=st.integers(0, 2**31 - 1))
@settings(max_examples=scaled(5))
def test_direct_loss_gradient_is_the_derivative(dp, seed):
    """The test's own gradient (what lets SLSQP below use an exact Jacobian instead of d² + 1 loss
    evaluations per iteration) is the derivative of the test's own loss: central differences agree."""
    p = dp.problem
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(p.d, p.d))
    G = direct_loss_grad(W, p)
    h = 1e-6
    num = np.zeros_like(W)
    for idx in np.ndindex(W.shape):
        e = np.zeros_like(W)
        e[idx] = h
        num[idx] = (direct_loss(W + e, p) - direct_loss(W - e, p)) / (2 * h)
    err = float(np.linalg.norm(G - num))
    assert err <= 1e-6 * max(1.0, float(np.linalg.norm(num))), f"gradient off by {err:.2e}\n{describe(p)}"


@pytest.mark.theorem("Theorem 2")
def test_large_radius_is_certified_and_on_track():
    """Stress-found (seed 4233619287): a cyclic problem whose W̄_R at R=140 (margin 16) took Newton on the
    sphere 38-56 steps from each start, past the old polish budget of 30; the path raised SolverError
    (KKT residual 0.99).  Every radius must certify on the boundary and Theorem 2's criterion hold."""
    p = Problem.load("examples/regpath_large_radius.json")
    an = analyze(p)
    radii = radii_for(p, an)
    assert radii[-1] > 100, f"the case is about a large radius; R_16 = {radii[-1]:.1f}"
    path = regularization_path(p, radii)
    assert [s.certificate["branch"] for s in path] == ["boundary"] * len(radii)
    ok_d, why_d = direction_verdict(path, an.space, an.svm.W, margins_for(p, an))
    assert ok_d, why_d
    ok_f, why_f = finite_verdict(finite_errors(path, an.space, an.finite.W), np.linalg.norm(an.finite.W))
    assert ok_f, why_f


@pytest.mark.theorem("Theorem 2")
def test_slow_transient_is_judged_after_escalation():
    """Stress-found (see :class:`Theorem2Judge`): a degenerate Graph-SVM whose path is still in transit at
    t = 16 (e = 0.231, R e(R) x1.67).  The verdict at t <= 16 fails, the escalated one passes, and a
    planted wrong direction still fails after escalation."""
    p = Problem.load("examples/regpath_slow_direction.json")
    an = analyze(p)
    radii = radii_for(p, an)
    path = regularization_path(p, radii)
    assert not direction_verdict(path, an.space, an.svm.W, margins_for(p, an))[0], "the case is about a slow transient"
    judge = Theorem2Judge(p, an, radii, path)
    out, why = judge.direction(an.svm.W)
    assert out is Outcome.HOLDS, why
    wrong = [V for V in reversed_edge_svms(p, an)
             if np.linalg.norm(V / np.linalg.norm(V) - an.svm.W / an.svm.norm) >= MIN_DIR_GAP]
    assert wrong, "no planted wrong direction at the calibration gap"
    for V in wrong:
        out, why = judge.direction(V)
        assert out is Outcome.FAILS, f"escalation did not reject a wrong direction: {why}"


@pytest.mark.theorem("Theorem 2")
def test_margins_start_past_the_finite_components_score_debt():
    """Stress seed 3993101603 (see :func:`margin_offset`): W^fin scores -87.7 on both ``⇒`` edges and is
    125x longer than W^svm.  From t = 0 the schedule never left the transient, even escalated to t = 64
    (f = 17.3 -> 5.5, e = 0.88 flat); offset by the debt, both verdicts hold at t <= offset + 16, and
    planted wrong targets (W^fin with a ring sample duplicated, 1.1 W^fin, directions 0.3 off) fail there."""
    p = Problem.load("examples/regpath_fin_score_debt.json")
    an = analyze(p)
    offset = margin_offset(p, an)
    assert offset > 50, f"the case is about a large score debt; offset = {offset:.3g}"
    fin_scale = float(np.linalg.norm(an.finite.W))
    plain = np.array([np.linalg.norm(an.finite.W + t * an.svm.W) for t in MARGINS])
    f_plain = finite_errors(regularization_path(p, plain), an.space, an.finite.W)
    assert not finite_verdict(f_plain, fin_scale)[0], f"the case is about the transient: f = {f_plain}"
    path = regularization_path(p, radii_for(p, an))
    judge = Theorem2Judge(p, an, radii_for(p, an), path)
    for out, why in (judge.direction(an.svm.W), judge.finite(an.finite.W)):
        assert out is Outcome.HOLDS, why
    assert not judge.escalated, "offset by the debt, the verdicts hold without escalation"
    # Planted targets fail at t <= offset + 16 (the escalation past it is not certifiable here, cyclic
    # margins >= 32, so the judge would accept nothing there).
    planted = duplicated_sample_fins(p, an) + [1.1 * an.finite.W]
    assert len(planted) >= 2, "no planted wrong W^fin from a duplicated sample"
    for F in planted:
        assert np.linalg.norm(F - an.finite.W) >= MIN_FIN_GAP * fin_scale
        ok, why = finite_verdict(finite_errors(path, an.space, F), np.linalg.norm(F))
        assert not ok, f"accepted a wrong W^fin at distance {np.linalg.norm(F - an.finite.W):.3g}: {why}"
    rng = np.random.default_rng(0)
    for _ in range(3):  # directions at the calibration gap from Ŵ^svm
        V = an.svm.W / an.svm.norm + MIN_DIR_GAP * (D := rng.normal(size=an.svm.W.shape)) / np.linalg.norm(D)
        ok, why = direction_verdict(path, an.space, V, judge.margins)
        assert not ok, f"accepted a wrong direction: {why}"


@pytest.mark.theorem("Theorem 2")
@pytest.mark.judged(floor=JUDGED_FLOOR)
@settings(deadline=None, max_examples=scaled(8))
@given(dp=drawn_problems(structures=NONZERO_SVM, max_condition=REGPATH_CONDITION))
def test_resumed_path_is_the_one_path(dp):
    """The escalation extends a certified path with ``resume=`` instead of solving it again from t = 1:
    the later radii come out as in one call over every margin, within the two answers' certified
    accuracy (``certificate["error_bound"]``: residual plus float64 floor over the smallest curvature).
    Not to a fixed 1e-9: the convex solver's answer at the first new radius is not bit-reproducible
    across calls, and where the tangent curvature is tiny float64 resolves the optimum only to
    floor / curvature (stress seed 696913561: mu = 1e-11 at R = 6666, both answers at the floor, 1.45e-5
    apart, bounds 1.1e-3 and 1.4e-3).  Where the curvature allows it the bound is far tighter than 1e-9
    relative (seed 2512207974: bound 2e-10 at R = 45, where the old polish, stopping at 1% of KKT_TOL,
    left the answers 6.5e-8 apart with bounds of 3.9e-7).  Split at t = 4 of the margins t <= 16, where the path
    certifies (beyond, cyclic problems reach float64's rounding level in half the draws)."""
    check_resumed_path(dp.problem)


@pytest.mark.theorem("Theorem 2")
@pytest.mark.parametrize("name", ["regpath_resume_polish_stop", "regpath_resume_flat_sphere"])
def test_resumed_path_regressions(name):
    """The two stress draws of :func:`test_resumed_path_is_the_one_path`'s docstring (both failed the
    former fixed 1e-9 relative agreement)."""
    check_resumed_path(Problem.load(f"examples/{name}.json"))


@pytest.mark.theorem("Theorem 2")
def test_path_points_are_polished_to_the_float64_floor():
    """On the sphere the polish runs Newton to the gradient's float64 floor, not to 1% of KKT_TOL: the
    certificate only needs 1e-6, but the position of the answer is known to (residual + floor) /
    curvature, and the residual is free to drive down (Newton's next step; stress seed 2512207974 stopped
    at a relative residual of 8e-9 at R = 45, i.e. within 3.9e-7 of the optimum instead of 2e-10)."""
    p = Problem.load("examples/regpath_resume_polish_stop.json")
    for s in regularization_path(p, radii_for(p, analyze(p))):
        c = s.certificate
        assert c["branch"] == "boundary" and c["kkt_residual"] <= c["rounding_floor"], \
            f"R = {s.R:.4g}: KKT residual {c['kkt_residual']:.2e} above the float64 floor {c['rounding_floor']:.2e}"


def check_resumed_path(p):
    an = analyze(p)
    radii = radii_for(p, an)
    try:
        whole = regularization_path(p, radii)
        first = regularization_path(p, radii[:3])
        more = regularization_path(p, radii[3:], resume=first[-1])
    except RoundingLevel:
        not_judged("a radius's gradient at float64 rounding level (not certifiable)")
    for a, b in zip(whole[3:], more):
        gap = float(np.linalg.norm(a.W - b.W))
        if not np.isfinite(a.certificate["error_bound"] + b.certificate["error_bound"]):
            not_judged("no positive curvature at a radius (the optimum's position is not resolved)")
        # W itself is rounded to a few eps ||W||: the bounds cover the optimum, not the last bit of W.
        allowed = a.certificate["error_bound"] + b.certificate["error_bound"] + 8 * EPS * a.norm
        assert gap <= allowed, (f"R = {a.R:.4g}: resumed path differs by {gap:.3g}, more than the two answers' "
                                f"certified error bounds allow ({allowed:.3g}; ||W|| = {a.norm:.3g})")
    with pytest.raises(ValueError):
        regularization_path(p, radii[:2], resume=first[-1])


@pytest.mark.theorem("Theorem 2")
@given(dp=drawn_problems())
def test_outward_direction_exists_exactly_with_a_dominance_edge(dp):
    """``outward_direction`` (an LP on the data: every label gains on every other token of its sample, one
    strictly) finds a direction exactly when the Graph-SVM is nonzero (some ``⇒`` edge), and the direction
    it returns verifies: L falls strictly along it from a random point."""
    p = dp.problem
    an = analyze(p, finite=False)
    D = outward_direction(p)
    assert (D is not None) == (an.svm.norm > 0), \
        f"outward direction {'found' if D is not None else 'not found'} but ||W^svm|| = {an.svm.norm:.3g}"
    if D is not None:
        W = np.random.default_rng(0).normal(size=D.shape)
        Ls = [loss_and_grad(W + s * D / np.linalg.norm(D), p)[0] for s in (0.0, 1.0, 2.0)]
        assert Ls[0] > Ls[1] > Ls[2], f"loss along the outward direction: {Ls}"


@pytest.mark.theorem("Theorem 2")
def test_interior_point_at_rounding_level_is_not_certified():
    """Stress-found: cond(E) = 21, a cyclic part, margins >= 32.  Clarabel stops inside the ball where
    ||g|| = 1.7e-15 is below the float64 floor (4.7e-14); the certificate used to call that "interior"
    (W̄_R/R then froze at e = 0.138 for t = 32..256).  A loss that falls for ever along an outward
    direction has no interior minimizer: the path must say "rounding level", not certify."""
    p = Problem.load("examples/regpath_interior_at_rounding.json")
    an = analyze(p)
    assert outward_direction(p) is not None
    radii = np.array([np.linalg.norm(an.finite.W + t * an.svm.W) for t in (16.0, 32.0)])
    assert regularization_path(p, radii[:1])[0].certificate["branch"] == "boundary"
    with pytest.raises(RoundingLevel, match="rounding level"):
        regularization_path(p, radii)


@pytest.mark.theorem("Theorem 2")
def test_saturated_square_loss_path_is_certified():
    """Stress-found: square loss, one sample, R=8: ||g|| = 2.5e-13 (exact: the gradient is computed without
    cancellation) was called "at rounding level" because the floor used the global curvature bound
    (floor 1.5e-13).  Near W the curvature is O(off-attention mass) (theory.li2024.losses.local_smoothness), the
    floor is ~1e-19, and the certificate must resolve the KKT residual far below KKT_TOL."""
    p = Problem.load("examples/regpath_saturated_square.json")
    path = regularization_path(p, np.geomspace(0.5, 8.0, 4))
    last = path[-1].certificate
    assert last["grad_norm"] < 1e-12, f"the case is about a saturated gradient; ||g|| = {last['grad_norm']:.2e}"
    assert last["rounding_floor"] < 1e-6 * last["grad_norm"], last
    assert last["branch"] == "boundary" and last["relative_kkt_residual"] <= KKT_TOL, last


@pytest.mark.theorem("Theorem 2")
def test_a_radius_no_capped_start_certifies_is_solved_again_at_full_effort(monkeypatch):
    """The capped SLSQP only finds basins (``regpath.SLSQP_MAXITER``); where no start of a non-convex path's
    radius certifies, the same seeds are solved again at ``SLSQP_FULL`` before the path gives up (measured:
    1 drawn square-loss path of 60 needed it, benchmarks/slsqp_cap.py).  Planted here on the exp-loss example:
    the certificate refuses every capped start of the first radius.  The path must still certify, through
    solves at full effort from the same number of seeds; without the second pass it would fall to the
    last-resort single start, and with neither it would raise."""
    import theory.li2024.regpath as rp

    p = Problem.load("examples/theorem2_exp_loss.json")
    assert not convex_case(p), "the case is about a non-convex path"
    seeds = 1 + rp.RANDOM_STARTS  # the first radius has no warm start: the descent start and the random ones
    calls, refused = [], []
    real_slsqp, real_certify = rp._slsqp, rp.certify

    def slsqp(f, theta0, R, maxiter=None):
        calls.append(maxiter)
        return real_slsqp(f, theta0, R, maxiter)

    def certify_(W, *args, **kw):
        # every capped start, and the last-resort start too: only the full-effort pass can certify
        if len(refused) <= seeds and rp.SLSQP_FULL not in calls:
            refused.append(W)
            raise SolverError("planted: the capped starts do not certify")
        return real_certify(W, *args, **kw)

    monkeypatch.setattr(rp, "_slsqp", slsqp)
    monkeypatch.setattr(rp, "certify", certify_)
    path = regularization_path(p, [1.0, 2.0])
    assert len(path) == 2 and path[0].certificate["solver"].startswith("slsqp (local"), path[0].certificate
    assert calls.count(rp.SLSQP_FULL) == len(refused) == seeds, (calls, len(refused))


@pytest.mark.theorem("Theorem 2")
@settings(deadline=None, max_examples=scaled(6))
@given(dp=drawn_problems(structures=NONZERO_SVM, embedding_kinds=st.sampled_from(["orthonormal", "gaussian"]),
                         d_extra=st.integers(0, 1)), scale=st.floats(0.2, 1.0))
def test_small_radius_matches_direct_minimization(dp, scale):
    """For a small R (below 1 in score units) W̄_R equals scipy's SLSQP minimum of the direct loss over the
    ball: same loss value, and the same point (the ball problem is convex with a binding constraint)."""
    p = dp.problem
    R = scale
    ours = regularized_solution(p, R)
    d = p.d
    res = minimize(lambda w: direct_loss(w.reshape(d, d), p), np.zeros(d * d), method="SLSQP",
                   jac=lambda w: direct_loss_grad(w.reshape(d, d), p).ravel(),
                   constraints=[{"type": "ineq", "fun": lambda w: R**2 - w @ w, "jac": lambda w: -2 * w}],
                   options={"maxiter": 1000, "ftol": 1e-13})
    ref = res.x.reshape(d, d)
    assert np.linalg.norm(ref) <= R * (1 + 1e-6)
    # SLSQP may end just outside the ball (up to 1e-6 R), where the loss is lower than anywhere inside
    # (stress: E = I, one sample, R = 0.53: scipy 1.9e-9 below the closed form log(1 + e^{-R sqrt 2}), which
    # ours matched to the last digit).  Its answer competes as the feasible point it rounds to.
    ref = ref * min(1.0, R / np.linalg.norm(ref))
    L_ours, L_ref = direct_loss(ours.W, p), direct_loss(ref, p)
    assert L_ours <= L_ref + 1e-9, f"regpath loss {L_ours:.12g} above scipy's {L_ref:.12g}"
    assert np.linalg.norm(ours.W - ref) <= 1e-3 * max(R, 1.0), \
        f"W̄_R differs from scipy's by {np.linalg.norm(ours.W - ref):.2e}"


@pytest.mark.theorem("Theorem 2")
@settings(deadline=None, max_examples=scaled(8))
@given(dp=drawn_problems(structures=NONZERO_SVM, max_condition=REGPATH_CONDITION), t=st.sampled_from([1.0, 4.0, 16.0]),
       angle=st.floats(1e-3, 0.5), seed=st.integers(0, 2**31 - 1))
def test_certificate_rejects_perturbed_answer(dp, t, angle, seed):
    """A certified W̄_R rotated on the sphere by a small angle (still feasible) fails the KKT certificate."""
    p = dp.problem
    an = analyze(p, finite=False)
    R = float(t * an.svm.norm)
    try:
        sol = regularized_solution(p, R)
    except RoundingLevel:
        not_judged("gradient at float64 rounding level (not certifiable)")  # stress: kappa 10, R = 1269
    certify(sol.W, p, R)  # the answer itself passes
    rng = np.random.default_rng(seed)
    D = rng.normal(size=sol.W.shape)
    E = p.E
    D = E.T @ (E @ D @ E.T) @ E  # a direction the loss sees (outside it the loss is flat)
    D -= (np.sum(D * sol.W) / R**2) * sol.W  # tangent to the sphere
    D /= np.linalg.norm(D)
    W_bad = np.cos(angle) * sol.W + np.sin(angle) * R * D
    with pytest.raises(SolverError, match=r"at R=.*certificate failed"):
        certify(W_bad, p, R)
    with pytest.raises(SolverError, match="infeasible"):
        certify(sol.W * (1 + 1e-6), p, R)


def _mp_kkt_residual(W, p, R):
    """``(||g||, ||g + μ W||)`` with ``g = E^T (dL/dA) E`` at 40 digits (:func:`theory.core.exact.mp_score_gradient`)
    and ``μ = -<g, W>/R²``, the float ``W`` taken as exact."""
    import mpmath

    from theory.core.exact import mp_score_gradient
    from theory.li2024.losses import TokenData

    with mpmath.workdps(40):
        Em, Wm = mpmath.matrix(p.E.tolist()), mpmath.matrix(W.tolist())
        A = Em * Wm * Em.T
        G = mpmath.matrix(mp_score_gradient([[A[i, j] for j in range(p.K)] for i in range(p.K)],
                                            TokenData.from_problem(p)))
        g = Em.T * G * Em
        mu = -mpmath.fsum(g[i, j] * Wm[i, j] for i in range(p.d) for j in range(p.d)) / mpmath.mpf(R) ** 2
        return float(mpmath.mnorm(g, "f")), float(mpmath.mnorm(g + mu * Wm, "f"))


def test_mp_kkt_check_rejects_a_rotated_answer():
    """Calibration of the 40-digit KKT check above: on the stress seed 2311001416 problem (square loss), each
    certified W̄_R passes it and the same W rotated 1e-4 rad along the sphere fails it at every radius."""
    E = [[0.0744952, -0.20598548, -0.16276489, -0.96204368], [0.78525189, 0.49922472, -0.14198914, 0.33762882],
         [0.2345147, -0.46185871, 0.81523912, -0.2589876], [-0.33693224, -0.81167999, 0.4661767, -0.10164414]]
    C = [[0.53956143, -0.52914013, -0.69840116, -0.76621769], [1.70898992, -1.41738371, -1.09718516, 0.62144293],
         [-0.17399546, 1.14687128, 1.75007235, -0.55512136], [1.01319426, -2.62208051, -1.4934058, 0.8925402]]
    p = Problem.create(E, ((2, 2, 0), (2, 0), (1, 0), (1, 0)), (2, 0, 1, 1), "square", C)
    rng = np.random.default_rng(0)
    for s in regularization_path(p, np.geomspace(0.5, 8.0, 4)):
        R, floor = s.certificate["R"], s.certificate["rounding_floor"]
        ng, resid = _mp_kkt_residual(s.W, p, R)
        assert resid <= KKT_TOL * ng + 2 * floor, f"R = {R:.3g}: certified answer refused ({resid:.2e})"
        D = rng.normal(size=s.W.shape)
        D -= np.sum(D * s.W) / R**2 * s.W
        W_bad = np.cos(1e-4) * s.W + np.sin(1e-4) * R * D / np.linalg.norm(D)
        ng, resid = _mp_kkt_residual(W_bad, p, R)
        assert resid > KKT_TOL * ng + 2 * floor, f"R = {R:.3g}: a W 1e-4 rad off passed ({resid / ng:.2e})"


@pytest.mark.theorem("Theorem 2")
# Not judged: Hypothesis's overruns (stress seed 1945900688: 14 of 62; not charged now) and, rarely, a radius
# whose gradient float64 cannot resolve (stress seed 2311001416: a square-loss problem at R = 8, ||g|| = 4.8e-11
# within 1.6e3 x of its floor 7.7e-14, W's own rounding at eps R; 0 of 300 further draws).  The floor is the
# other Theorem 2 properties' (their measured shares: ci 81-93%, stress 87%).
@pytest.mark.judged(floor=JUDGED_FLOOR)
@settings(deadline=None, max_examples=scaled(6))
@given(dp=drawn_problems(structures=NONZERO_SVM, loss=st.sampled_from(["ce", "square", "exp"]),
                         embedding_kinds=st.sampled_from(["orthonormal", "gaussian"])))
def test_local_path_is_certified_and_monotone(dp):
    """Other losses: a local KKT point per radius (the first-order certificate of :func:`certify`, re-run
    here on each returned W), and L(W̄_R) is non-increasing in R up to rounding (each warm start is feasible
    for the next, larger ball)."""
    p = dp.problem
    radii = np.geomspace(0.5, 8.0, 4)
    try:
        path = regularization_path(p, radii)
    except RoundingLevel:
        not_judged("a radius's gradient at float64 rounding level (not certifiable)")
    for s in path:
        c = certify(s.W, p, s.certificate["R"])  # raises unless the returned W is a certified KKT point
        if c["branch"] == "interior":
            continue
        # Independently of the float gradient code: the KKT residual with the 40-digit gradient of this W.
        # Bound: the certified float residual (<= KKT_TOL ||g|| + floor) plus the float gradient's own error,
        # which the floor covers (ROUNDING eps Γ).  The floor is not slack: W itself is rounded to eps R,
        # which moves g by up to β eps R, and no float W attains less (stress seed 2311001416: ||g|| = 1e-10
        # at R = 8, residual 2e-16 = 2e-6 relative against a floor of 6e-14).
        ng, resid = _mp_kkt_residual(s.W, p, c["R"])
        assert c["rounding_floor"] <= FLOOR_MAX * ng and resid <= KKT_TOL * ng + 2 * c["rounding_floor"], (
            f"R = {c['R']:.3g}: 40-digit ||g|| = {ng:.3e}, ||g + μW|| = {resid:.3e}; float certificate {c}\n"
            f"{describe(p)}")
    losses = [s.loss for s in path]
    assert all(b <= a + 1e-10 for a, b in zip(losses, losses[1:])), f"loss increased along the path: {losses}"


@pytest.mark.theorem("Theorem 2")
def test_outward_direction_survives_the_lp_tolerance():
    """Stress seed 1769151185: a cyclic SCC {1, 5, 3} forces three rows to gain exactly 0; HiGHS left one at
    -1.1e-11 (inside its 1e-7 tolerance) and the rounding-level check refused the answer: "no outward
    direction" while ||W^svm|| = 1.22.  The direction must be found, and L must fall along it."""
    p = Problem.load("examples/outward_lp_tolerance.json")
    assert analyze(p, finite=False).svm.norm > 0
    D = outward_direction(p)
    assert D is not None, "no outward direction, but the Graph-SVM is nonzero"
    W = np.random.default_rng(0).normal(size=D.shape)
    Ls = [loss_and_grad(W + s * D / np.linalg.norm(D), p)[0] for s in (0.0, 1.0, 2.0, 4.0)]
    assert all(a > b for a, b in zip(Ls, Ls[1:])), f"loss along the outward direction: {Ls}"
