"""Theorem 2 (regularization path; THEORY.md "Theorems"; Li et al. 2024, Algo-RP).

``W̄_R = argmin_{||W||_F <= R} L(W)`` satisfies ``W̄_R/R -> W^svm/||W^svm||`` and ``Π_{S_fin} W̄_R -> W^fin``.

Finite-budget criterion (rate-aware).  The radii are ``R_t = ||W^fin + t W^svm||`` for ``t`` in
:data:`MARGINS`: ``t`` is the margin, in score units, that ``t W^svm`` puts on every ``⇒`` edge, so the
loss of the tokens outside each label's SCC is ``O(e^{-t})`` whatever the scale of E.  The theory gives
``W̄_R = W^fin + ρ(R) W^svm + δ(R)`` with ``δ = O(1)`` (at most logarithmic in degenerate cases), so

* direction error ``e(R) = ||W̄_R/||W̄_R|| - Ŵ^svm||_F``, asymptotically ``O((log R)/R)`` but, over these
  radii, sometimes as slow as ``R^-0.19`` and sometimes still far (e = 0.26 at margin 16 while on the 1/R
  track), both found by the stress profile: require that ``e`` is still shrinking at the last radius and
  either ``e(R_last) <= DIR_MAX`` or ``R e(R)`` grew no faster than the (log t)/t track allows (:func:`on_track_limit`); a
  wrong target plateaus at its gap (``>= MIN_DIR_GAP``), so it fails both;
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

import networkx as nx
import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from properties.judging import aim, not_judged, scaled
from reports.record import record_inputs
from strategies.problems import drawn_problems, structures_of
from theory.analysis import analyze
from theory.graphs import TPG
from theory.regpath import KKT_TOL, certify, regularization_path, regularized_solution
from theory.svm import SolverError, graph_svm

MARGINS = np.geomspace(1.0, 16.0, 5)
# Direction: e(R) = ||W̄_R/R - Ŵ|| must still be shrinking at the last radius and be <= DIR_MAX there.
# The asymptotic rate is ~(log R)/R, but over margins 1..16 a valid problem can be far slower: the stress
# profile found e ∝ R^-0.19 (R e(R) growing 1.76x per doubling), which overlapped the wrong targets'
# 1.75-2x, so the growth of R e(R) is reported, not judged.  Calibration (200 derandomized problems):
# valid e_last <= 0.16; planted wrong directions e_last >= 0.29; planted wrong W^fin: decay >= 0.99
# (valid <= 5e-4).
DIR_MAX = 0.2  # e(R_last) at margin 16
ON_TRACK = 1.1  # wobble allowed on the (log t)/t track of R e(R) (see on_track_limit)
FIN_DECAY = 0.5  # f(R_last) / f(R_prev): geometric decay expected
FIN_MAX = 1e-2
EXACT = 1e-8  # errors below this (relative) count as zero: e.g. W̄_R exactly parallel to W^svm
MIN_DIR_GAP = 0.3
MIN_FIN_GAP = 0.05

NONZERO_SVM = structures_of(("acyclic", "cyclic", "mixed"))


def radii_for(an) -> np.ndarray:
    return np.array([np.linalg.norm(an.finite.W + t * an.svm.W) for t in MARGINS])


def direction_errors(path, target: np.ndarray) -> np.ndarray:
    u = target / np.linalg.norm(target)
    return np.array([np.linalg.norm(s.W / s.norm - u) for s in path])


def finite_errors(path, space, target: np.ndarray) -> np.ndarray:
    return np.array([np.linalg.norm(space.project(s.W) - target) for s in path])


def direction_verdict(radii, e) -> tuple[bool, str]:
    """Rate-aware test of ``W̄_R/R -> target``: see the module docstring."""
    if e[-1] <= EXACT:
        return True, "exact"
    growth = (radii[-1] * e[-1]) / max(radii[-2] * e[-2], 1e-300)
    # Close enough already, or still on the (log R)/R track: a wrong target plateaus at its gap, so
    # R e(R) roughly doubles with R there.
    track = on_track_limit()
    ok = e[-1] < e[-2] and (e[-1] <= DIR_MAX or growth <= track)
    return ok, (f"e={np.array2string(e, precision=4)}: still shrinking {e[-1] < e[-2]}, e_last {e[-1]:.3g} "
                f"(max {DIR_MAX}); R e(R) grew {growth:.3f}x over the last doubling (max {track:.3f})")


def on_track_limit() -> float:
    """Largest growth of ``R e(R)`` over the last doubling of the margin that is still on the theory's
    track ``e ~ c log(t)/t`` (t = the margin, ``R_t ~ t ||W^svm||``): ``ln(t_last)/ln(t_prev)`` (4/3 for
    t = 8 -> 16), times ``ON_TRACK`` for the bounded part's own wobble.

    Was ``ON_TRACK`` alone (the 1/R track, growth 1): the stress profile found a valid path with
    e = 0.369 -> 0.223 between t = 8 and 16 (R e(R) x1.128, e falling like t^-0.73), rejected by 1.1 while
    on the (log t)/t track the theory states; wrong targets grow 1.75-2x (module calibration)."""
    return ON_TRACK * float(np.log(MARGINS[-1]) / np.log(MARGINS[-2]))


def finite_verdict(f, fin_norm) -> tuple[bool, str]:
    scale = max(1.0, fin_norm)
    if f[-1] <= EXACT * scale:
        return True, "exact"
    ratio = f[-1] / max(f[-2], 1e-300)
    ok = ratio <= FIN_DECAY and f[-1] <= FIN_MAX * scale
    return ok, f"f={np.array2string(f, precision=4)} decay {ratio:.3g} (max {FIN_DECAY}), f_last/scale {f[-1] / scale:.3g} (max {FIN_MAX})"


def _record(p, an, radii):
    record_inputs(K=p.K, n=p.n, T=max(len(s) for s in p.sequences), n_sccs=an.n_sccs, dim_sfin=an.space.dim,
                  svm_norm=an.svm.norm)


# ------------------------------------------------------------------------------------------------
# Theorem 2
# ------------------------------------------------------------------------------------------------

# Ill-conditioned embeddings push the radii to 1e4-1e5, where the gradient (~1e-8) sits at float64
# rounding level and no certificate can be met; kappa <= 10 keeps every radius certifiable.
REGPATH_CONDITION = 10.0
# Nearly-collinear Gaussian draws can still push R_16 past this (stress found R = 554, gradient 1e-9 at
# float64 rounding level): those are counted by an event and not judged.
MAX_RADIUS = 300.0

def certified_path(dp):
    """``(problem, analysis, radii, path)``: the certified path along ``radii_for``; problems whose largest
    radius is not certifiable in float64 are counted and skipped (see MAX_RADIUS)."""
    p = dp.problem
    an = analyze(p)
    radii = radii_for(an)
    if radii[-1] > MAX_RADIUS:
        not_judged("largest radius not certifiable in float64 (R > MAX_RADIUS)")
    _record(p, an, radii)
    try:
        return p, an, radii, regularization_path(p, radii)  # certified, else SolverError
    except SolverError as exc:
        if "rounding level" not in str(exc):
            raise
        not_judged("a radius's gradient at float64 rounding level (not certifiable)")


# Judged share of generated examples, ci profile: 81-93% (rejected draws of the problem strategy, and
# radii past MAX_RADIUS); the floor leaves room for the random profiles' spread.
JUDGED_FLOOR = 0.6


def edges(radii, e, f, fin_norm) -> dict[str, float]:
    """The criterion's distance to its thresholds (1 = at the threshold; see ``theory.criteria.theorem1_edges``)."""
    scale = max(1.0, fin_norm)
    growth = (radii[-1] * e[-1]) / max(radii[-2] * e[-2], 1e-300)
    return {"direction": min(e[-1] / DIR_MAX, growth / on_track_limit()) if e[-1] > EXACT else 0.0,
            "finite": max(f[-1] / max(f[-2], 1e-300) / FIN_DECAY, f[-1] / (FIN_MAX * scale)) if f[-1] > EXACT * scale else 0.0}


@pytest.mark.theorem("Theorem 2")
@pytest.mark.judged(floor=JUDGED_FLOOR)
@settings(deadline=None)
@given(dp=drawn_problems(structures=NONZERO_SVM, max_condition=REGPATH_CONDITION))
def test_theorem2_regularization_path_converges(dp):
    """Along R_t (t = 1..16), W̄_R/R -> Ŵ^svm at rate ~1/R and Π_{S_fin} W̄_R -> W^fin (Theorem 2)."""
    p, an, radii, path = certified_path(dp)
    event(f"S_fin dim>0={an.space.dim > 0}")
    e = direction_errors(path, an.svm.W)
    f = finite_errors(path, an.space, an.finite.W)
    for label, score in edges(radii, e, f, float(np.linalg.norm(an.finite.W))).items():
        aim(f"theorem2 {label}", score, json.dumps(p.to_json(), separators=(",", ":")))
    ok_d, why_d = direction_verdict(radii, e)
    assert ok_d, f"W̄_R/R does not approach W^svm: {why_d}"
    ok_f, why_f = finite_verdict(f, np.linalg.norm(an.finite.W))
    assert ok_f, f"Π_S W̄_R does not approach W^fin: {why_f}"


# ------------------------------------------------------------------------------------------------
# Calibration: the criterion rejects planted wrong targets
# ------------------------------------------------------------------------------------------------
def reversed_edge_svms(p, an):
    """Graph-SVMs of the TPGs with one ``⇒`` edge ``i -> j`` replaced by ``j -> i`` (a wrong priority)."""
    out = []
    for k, g in an.graphs.items():
        for i, j in g.dominates()[:3]:
            h = nx.DiGraph(g.graph)
            h.remove_edge(i, j)
            h.add_edge(j, i)
            graphs = dict(an.graphs)
            graphs[k] = TPG(k, h)
            try:
                W = graph_svm(p, graphs).W
            except SolverError:
                continue
            if np.linalg.norm(W) > 0:
                out.append(W)
    return out


def duplicated_sample_fins(p, an):
    """``W^fin`` of the problem with one cyclic sample duplicated: same TPGs (so same W^svm, S_fin), other weights."""
    out = []
    for i, (seq, y) in enumerate(zip(p.sequences, p.labels)):
        comp = an.graphs[seq[-1]].component
        if sum(comp[t] == comp[y] for t in set(seq)) < 2:
            continue  # the sample's label SCC holds one token: it does not enter L̃
        q = p.replace(sequences=list(p.sequences) + [seq] * 3, labels=list(p.labels) + [y] * 3)
        out.append(analyze(q).finite.W)
        if len(out) == 3:
            break
    return out


@pytest.mark.theorem("Theorem 2")
@pytest.mark.judged(floor=JUDGED_FLOOR)
@settings(deadline=None)
@given(dp=drawn_problems(structures=NONZERO_SVM, max_condition=REGPATH_CONDITION))
def test_theorem2_criterion_rejects_planted_targets(dp):
    """Calibration: the Theorem 2 criterion fails against a wrong W^svm or a wrong W^fin (planted)."""
    p, an, radii, path = certified_path(dp)
    u = an.svm.W / an.svm.norm
    planted = 0
    for V in reversed_edge_svms(p, an):
        gap = float(np.linalg.norm(V / np.linalg.norm(V) - u))
        if gap >= MIN_DIR_GAP:
            planted += 1
            ok, why = direction_verdict(radii, direction_errors(path, V))
            assert not ok, f"criterion accepted a wrong W^svm direction at distance {gap:.3f}: {why}"
    fin_scale = max(1.0, float(np.linalg.norm(an.finite.W)))
    for F in duplicated_sample_fins(p, an):
        gap = float(np.linalg.norm(F - an.finite.W))
        if gap >= MIN_FIN_GAP * fin_scale:
            planted += 1
            ok, why = finite_verdict(finite_errors(path, an.space, F), np.linalg.norm(F))
            assert not ok, f"criterion accepted a wrong W^fin at distance {gap:.3g}: {why}"
    event(f"planted targets checked: {min(planted, 3)}{'+' if planted > 3 else ''}")


# ------------------------------------------------------------------------------------------------
# Unit properties of theory.regpath
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
                   constraints=[{"type": "ineq", "fun": lambda w: R**2 - w @ w}],
                   options={"maxiter": 1000, "ftol": 1e-13})
    ref = res.x.reshape(d, d)
    assert np.linalg.norm(ref) <= R * (1 + 1e-6)
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
    sol = regularized_solution(p, R)
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


@pytest.mark.theorem("Theorem 2")
@settings(deadline=None, max_examples=scaled(6))
@given(dp=drawn_problems(structures=NONZERO_SVM, loss=st.sampled_from(["ce", "square", "exp"]),
                         embedding_kinds=st.sampled_from(["orthonormal", "gaussian"])))
def test_local_path_is_certified_and_monotone(dp):
    """Other losses: a local KKT point per radius (first-order certificate to KKT_TOL), and L(W̄_R) is
    non-increasing in R up to rounding (each warm start is feasible for the next, larger ball)."""
    p = dp.problem
    radii = np.geomspace(0.5, 8.0, 4)
    path = regularization_path(p, radii)
    for s in path:
        assert s.certificate["branch"] == "interior" or s.certificate["relative_kkt_residual"] <= KKT_TOL
    losses = [s.loss for s in path]
    assert all(b <= a + 1e-10 for a, b in zip(losses, losses[1:])), f"loss increased along the path: {losses}"
