"""The regularization path (docs/theory.md, "The claims"; Li et al. 2024, Algo-RP).

    W̄_R = argmin_{||W||_F <= R} L(W).

Reduction.  ``L`` depends on W only through the score differences ``(e_j - e_k)^T W e_q`` of the tokens
j, k present in one sample whose query is q (softmax is shift-invariant), i.e. through the Frobenius inner
products with ``vec((e_j - e_k) e_q^T)``.  Let ``B`` be an orthonormal basis of their span (the *effective
subspace*, :func:`effective_basis`) and ``W = Σ θ_r B_r``: any component of W
outside that span leaves L unchanged and only spends norm, so the ball problem is the same problem in
``θ`` with ``||θ||_2 <= R`` (and every minimizer of the original problem whose constraint binds lies in
the span).  The certificate below is checked on the full d x d matrix, so it would catch a faulty reduction.

Solvers.
* ``log`` loss under Assumptions 1-2 (convex: ``l = logsumexp(s + log c) - s_y - log c_y``): an
  exponential-cone program solved by Clarabel (global; stated directly in Clarabel's form, :class:`_Conic`).  Clarabel's answer is then *polished* by at
  most :data:`POLISH_STEPS` Riemannian Newton steps on the sphere ``||θ|| = R`` (or damped Newton
  inside the ball when the constraint is slack): at large R the loss is ``O(e^{-margin})`` and the
  solver's absolute tolerances no longer resolve the direction of the gradient, which the KKT
  certificate needs to 1e-6.  The polish goes on to the gradient's float64 floor (usually one more
  Newton step), so that ``certificate["error_bound"]`` (:func:`position_error_bound`: how far the
  answer can be from the exact ``W̄_R``) is as small as float64 allows.  By convexity a certified KKT
  point is the global minimizer.
  Clarabel's answer is used only when its status is ``optimal``.  Otherwise (``optimal_inaccurate``
  happens at large R with ill-conditioned embeddings) it is discarded and the previous radius's
  certified point, rescaled to the new sphere, is polished instead (SLSQP from ``-R g(0)/||g(0)||`` at
  the first radius); ``certificate["clarabel_status"]`` and ``["solver"]`` say which happened, and the
  acceptance test is the same certificate.
* other losses (``ce``, ``square``, ``exp``, or ``log`` without the assumptions): scipy SLSQP in θ with
  the analytic gradient from the previous radius's point, the steepest-descent start and
  :data:`RANDOM_STARTS` seeded random points of the sphere, each polished and certified; the certified
  point of least loss is kept.  This is a *local* answer (the best KKT point of these starts; the loss is
  not convex, so no certificate of global optimality exists), certified the same way.

Certificate (:func:`certify`, independent of the solver; uses :func:`theory.li2024.losses.loss_and_grad`):
* feasibility ``||W||_F <= R (1 + FEAS_TOL)``;
* KKT, one of
  - boundary: ``||W|| >= R (1 - FEAS_TOL)``, ``μ = -<g, W>/R^2 >= 0`` and
    ``||g + μ W|| <= KKT_TOL ||g|| + floor`` (the gradient points straight into the ball), where
    ``floor = ROUNDING * eps * (Γ + β R)`` is the float64 resolution of the gradient: ``Γ = Σ_i w_i ||∇ℓ_i||``
    (per-sample gradients cancel in the sum; each carries a relative rounding error ~eps) and ``β R``
    (rounding W to eps·R moves g by at most β eps R, β = :func:`theory.li2024.losses.local_smoothness`, the
    curvature bound near W).  At large R
    ``||g||`` is ``O(e^{-margin})`` and this floor, not KKT_TOL, is what an exact answer attains.  The
    floor may never exceed ``FLOOR_MAX ||g||``: a gradient at rounding level cannot be certified and
    raises ("gradient at rounding level");
  - interior: ``||W|| < R (1 - FEAS_TOL)``, ``||g|| <= GRAD_TOL max(1, ||g(0)||)``, and unless ``-g``
    points into the ball (``μ <= 0``),
    ``||g|| <= INTERIOR_ROUNDING · floor``: a resolved gradient along which the loss falls outward is no
    interior optimum (the absolute test alone certified such points when no minimizer exists).
A failure raises :class:`theory.li2024.svm.SolverError` with a one-line message naming the problem, the
radius and the failing quantity.  The tolerances are module constants and are never relaxed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from theory.core import conic
from theory.li2024.finite import _Objective
from theory.li2024.losses import TokenData, _per_sample, local_smoothness, loss_and_grad, smoothness
from theory.core.problem import Problem
from theory.li2024.subspace import CyclicSubspace
from theory.li2024.svm import SolverError


class RoundingLevel(SolverError):
    """The certificate cannot be met because float64 does not resolve the gradient there ("gradient at
    rounding level"): not a solver failure, and callers count it as not certifiable."""

FEAS_TOL = 1e-9  # relative slack allowed on ||W|| <= R
KKT_TOL = 1e-6  # relative residual ||g + μW|| / ||g|| on the boundary
GRAD_TOL = 1e-9  # interior stationarity, relative to max(1, ||grad L(0)||)
ROUNDING = 16  # safety factor on the float64 rounding floor of the gradient
FLOOR_MAX = 1e-3  # the rounding floor may be at most this fraction of ||g||
INTERIOR_ROUNDING = 10  # an interior point's outward-pointing -g must be within this many floors of 0
# Newton on the sphere at large R works on a sum of exponentials e^{-margin}: outside its quadratic basin
# it advances a bounded distance per step (linear phase), and the warm start (the previous radius's point
# scaled to the new sphere) lies O(log R) away in the flat directions.  Measured steps to certify, one
# stress run of properties/li2024/test_theorem2.py (2,400 polishes): 94% <= 5, 99.7% <= 35, max 121; the stress
# failure at R=140 needed 38-56 from each of its three starts and failed at the old budget of 30.
POLISH_STEPS = 200
RANK_TOL = 1e-10
STIFF = 1e6  # curvature ratio to mu above which a direction keeps its coordinate when retracting


@dataclass(frozen=True)
class RegPathSolution:
    R: float
    W: np.ndarray
    loss: float
    certificate: dict  # norm, mu, residuals, branch ("boundary"/"interior"), solver, polish steps
    theta: np.ndarray | None = None  # coordinates in effective_basis: where a resumed path continues from

    @property
    def norm(self) -> float:
        return float(np.linalg.norm(self.W))


def effective_basis(problem: Problem) -> CyclicSubspace:
    """Orthonormal basis (Frobenius) of span{(e_j - e_k) e_q^T : tokens j, k occur in one sample with query q}.

    Softmax attention sees a sample's scores only up to a common shift, so L depends on W only through
    these differences; directions that shift all the scores of a sample equally are flat for L, and the
    minimizer on the sphere has no component along them (removing it keeps L and frees norm that lowers L
    when the constraint binds).  Keeping them (the span of the ``e_j e_q^T`` themselves) left Newton on
    the sphere with tangent curvature ``mu ~ 1e-14`` along them, and at R = 75 the retraction's rescaling
    of a step there moved the cyclic part: the polish stalled at a KKT residual of 1 (stress-found)."""
    d, E = problem.d, problem.E
    gens = []
    for i, q in enumerate(problem.queries):
        present = np.flatnonzero(problem.counts[i])
        gens += [np.outer(E[j] - E[present[0]], E[q]).ravel() for j in present[1:]]
    if not gens:  # every sample holds one distinct token: L is constant
        return CyclicSubspace(np.zeros((0, d, d)))
    gens = np.unique(np.array(gens), axis=0)
    U, s, _ = np.linalg.svd(gens.T, full_matrices=False)
    r = int((s > RANK_TOL * max(1.0, s[0])).sum())
    return CyclicSubspace(U[:, :r].T.reshape(r, d, d))


def convex_case(problem: Problem) -> bool:
    """``log`` loss with Assumptions 1-2: the ERM loss is convex and the exponential-cone program applies."""
    a = problem.assumptions()
    return problem.loss == "log" and a["head_biorthogonal"] and a["labels_in_sequences"]


# ------------------------------------------------------------------------------------------------
# Certificate
# ------------------------------------------------------------------------------------------------
def global_smoothness(problem: Problem) -> float:
    """:func:`theory.li2024.losses.smoothness`, or 0 when there is no bound (log loss with a head that can zero u)."""
    try:
        return smoothness(problem)
    except ValueError:
        return 0.0


def rounding_floor(W: np.ndarray, problem: Problem, R: float, data: TokenData, beta: float | None = None) -> float:
    """``ROUNDING * eps * (Γ + β R)``: how well float64 resolves grad L at W (see the module docstring).
    β is the curvature bound near W (:func:`theory.li2024.losses.local_smoothness`): the global bound made a
    saturated, exactly computed gradient look like noise (stress: square loss, R=8, ||g||=2.5e-13
    against a global floor of 1.5e-13).  ``beta`` is the global bound (:func:`global_smoothness`, computed
    here when not given): it depends on the problem only, and the polish asks for the floor at every trial
    step."""
    E = problem.E
    A = E @ W @ E.T
    _, ds = _per_sample(A, data)
    gamma = float(np.sum(data.weights * np.linalg.norm(ds @ E, axis=1) * np.linalg.norm(E[data.queries], axis=1)))
    beta = global_smoothness(problem) if beta is None else beta
    return ROUNDING * np.finfo(float).eps * (gamma + local_smoothness(problem, A, data, beta=beta) * R)


def outward_direction(problem: Problem, basis: CyclicSubspace | None = None) -> np.ndarray | None:
    """A direction D along which the loss falls for ever, or None: ``log`` loss under Assumptions 1-2, every
    sample's label score gains on every other token of the sample, ``(e_y - e_j)^T D e_q >= 0``, strictly
    for at least one.  Then L(W + s D) decreases strictly in s for every W, so no minimizer lies inside any
    ball and the constraint binds at every R.  Found by an LP (scipy's HiGHS) and re-verified on the rows:
    an answer that does not verify counts as none.  (Such a D exists exactly when some TPG has a ``⇒``
    edge, but it is checked here from the data, not from the theory under test.)"""
    if not convex_case(problem):
        return None
    from scipy.optimize import linprog
    basis = basis or effective_basis(problem)
    if basis.dim == 0:
        return None
    E = problem.E
    rows = []
    for i, (q, y) in enumerate(zip(problem.queries, problem.labels)):
        for j in np.flatnonzero(problem.counts[i]):
            if j != y:
                rows.append(np.einsum("a,rab,b->r", E[y] - E[j], basis.basis, E[q]))
    if not rows:
        return None
    A = np.array(rows)
    scale = np.linalg.norm(A, axis=1).max()
    res = linprog(-A.sum(axis=0), A_ub=-A, b_ub=np.zeros(len(A)), bounds=[(-1, 1)] * basis.dim, method="highs")
    if res.status != 0:
        return None
    x = res.x
    gains = A @ x
    # HiGHS's vertex meets its rows to its feasibility tolerance (1e-7), not to rounding: the rows of a
    # cycle are forced to gain exactly 0, and it left one at -1.1e-11 (stress seed 1769151185), which the
    # rounding-level check below refused although a D exists.  Project x onto the null space of the rows
    # the LP left at its tolerance: they gain 0 to rounding, the others keep their gains up to ~1e-7.
    tight = gains <= 1e-7 * scale
    if tight.any() and not tight.all():
        At = A[tight]
        x = x - np.linalg.lstsq(At, At @ x, rcond=None)[0]
        gains = A @ x
    if gains.min() < -1e-12 * scale or gains.max() <= 1e-9 * scale:
        return None
    return basis.compose(x)


def certify(W: np.ndarray, problem: Problem, R: float, name: str = "problem", data: TokenData | None = None,
            g0_norm: float | None = None, interior_possible: bool | None = None) -> dict:
    """First-order KKT certificate of ``W`` for ``min L s.t. ||W||_F <= R`` (tolerances: module docstring).
    ``interior_possible`` (default: no :func:`outward_direction` exists) says whether an interior minimizer
    can exist at all; when it cannot, an interior point is never certified (see below)."""
    data = data or TokenData.from_problem(problem)
    if interior_possible is None:
        interior_possible = outward_direction(problem) is None
    L, g = loss_and_grad(W, problem, data)
    if g0_norm is None:
        g0_norm = float(np.linalg.norm(loss_and_grad(np.zeros_like(W), problem, data)[1]))
    nW, ng = float(np.linalg.norm(W)), float(np.linalg.norm(g))
    mu = -float(np.sum(g * W)) / R**2
    resid = float(np.linalg.norm(g + mu * W))
    floor = rounding_floor(W, problem, R, data)
    cert = {"R": R, "norm": nW, "loss": L, "grad_norm": ng, "mu": mu, "kkt_residual": resid,
            "relative_kkt_residual": resid / ng if ng > 0 else 0.0, "rounding_floor": floor}
    head = f"regularization path of {name} at R={R:.6g}: certificate failed:"
    if not (np.isfinite(L) and np.isfinite(ng)):
        raise SolverError(f"{head} non-finite loss {L} or gradient norm {ng}")
    if nW > R * (1 + FEAS_TOL):
        raise SolverError(f"{head} infeasible, ||W||={nW:.12g} > R (relative tol {FEAS_TOL:g})")
    # Interior needs g = 0.  A small gradient that float64 still resolves (> INTERIOR_ROUNDING x the
    # floor) and that points into the ball (mu > 0: the loss falls outward) is not stationarity but a
    # point the solver stopped at: stress-found at R = 46-182 on a problem with W^svm != 0 (no interior
    # minimizer exists), ||g|| = 7e-12 = 120x the floor, certified "interior" by the absolute test alone.
    # On the sphere itself a gradient at rounding level says nothing about where the minimizer is: that
    # goes to the boundary checks, which refuse it ("gradient at rounding level").
    # With a direction along which L falls for ever there is no interior minimizer: a small gradient inside
    # the ball is then float64 running out, not stationarity (stress: cond(E) = 21, margins 32-256, points
    # stuck at ||g|| ~ 1e-15 < the floor 5e-14 were certified "interior", and W̄_R/R froze at e = 0.138).
    if (interior_possible and ng <= GRAD_TOL * max(1.0, g0_norm) and nW < R * (1 - FEAS_TOL)
            and not (mu > 0 and ng > INTERIOR_ROUNDING * floor)):
        cert["branch"] = "interior"
        return cert
    if nW < R * (1 - FEAS_TOL) and not interior_possible and floor > FLOOR_MAX * ng:
        raise RoundingLevel(f"{head} gradient at rounding level inside the ball (||W||={nW:.6g}, ||g||={ng:.2e}, "
                          f"float64 floor {floor:.1e}; the loss falls outward for ever, so no interior minimizer)")
    if nW < R * (1 - FEAS_TOL):
        if ng <= GRAD_TOL * max(1.0, g0_norm):
            raise SolverError(f"{head} interior point (||W||={nW:.6g}) where the loss still falls outward "
                              f"(||g||={ng:.2e} = {ng / max(floor, 1e-300):.0f}x the float64 floor, mu={mu:.2e} > 0)")
        raise SolverError(f"{head} interior point (||W||={nW:.6g}) with gradient norm {ng:.2e} > "
                          f"{GRAD_TOL:g} max(1, ||g(0)||={g0_norm:.2e})")
    # The rounding test comes first: with the gradient at float64's floor the sign of mu = -<g, W>/R² is
    # noise too (Theorem 2 on exp-loss problems: mu = -3.6e-20 and -6.5e-18 on gradients at the floor were
    # refused as "negative multiplier" instead of being reported as not certifiable).
    if floor > FLOOR_MAX * ng:
        raise RoundingLevel(f"{head} gradient at rounding level (||g||={ng:.2e}, float64 floor {floor:.1e})")
    if mu < 0:
        raise SolverError(f"{head} negative multiplier mu={mu:.2e} (the loss decreases inward)")
    if resid > KKT_TOL * ng + floor:
        raise SolverError(f"{head} relative KKT residual ||g + mu W||/||g|| = {resid / ng:.2e} > {KKT_TOL:g} "
                          f"(+ rounding floor {floor / ng:.1e})")
    cert["branch"] = "boundary"
    return cert


# ------------------------------------------------------------------------------------------------
# Solvers in the effective coordinates θ
# ------------------------------------------------------------------------------------------------
class _Conic:
    """The convex program in Clarabel's standard form (:mod:`theory.core.conic`), built once per path.

    Variables ``x = (θ, t, u)``: per sample ``i`` an epigraph ``t_i >= logsumexp_j(s_ij)`` written as
    ``u_ij >= exp(s_ij - t_i)`` (exponential cones ``(s_ij - t_i, 1, u_ij)``) and ``Σ_j u_ij <= 1``; the
    radius as the second-order cone ``(R, θ)``; objective ``Σ_i w_i (t_i - s_{i,y_i})`` without its constant
    ``-Σ_i w_i log c_{i,y_i}``.  Scores ``s_ij = e_j^T (Σ_r θ_r B_r) e_q + log c_ij``.  This is the program
    cvxpy's ``log_sum_exp`` canonicalization produces, without cvxpy's compile on every call
    (``properties/core/test_conic.py`` checks both reach the same optimum).  Only ``b``'s radius entry
    changes with R.
    """

    def __init__(self, problem: Problem, basis: CyclicSubspace, data: TokenData):
        from scipy import sparse

        E = problem.E
        r, m = basis.dim, len(data.counts)
        rows_exp, b_exp, label_rows = [], [], []
        self.tokens = 0
        for c, q, y in zip(data.counts, data.queries, data.labels):
            idx = np.flatnonzero(c)
            M = np.einsum("ja,rab,b->jr", E[idx], basis.basis, E[q])  # scores as linear maps of θ
            rows_exp.append(M)
            b_exp.append(np.log(c[idx]))
            label_rows.append(M[int(np.flatnonzero(idx == y)[0])])
            self.tokens += len(idx)
        nu = self.tokens
        n = r + m + nu
        self.q = np.zeros(n)
        self.q[r:r + m] = data.weights
        self.q[:r] = -np.asarray(data.weights) @ np.array(label_rows).reshape(m, r)
        # Σ_j u_ij <= 1: s = 1 - Σ_j u_ij >= 0
        A_sum = sparse.lil_matrix((m, n))
        A_exp = sparse.lil_matrix((3 * nu, n))
        bx = np.zeros(3 * nu)
        k = 0
        for i, (M, lc) in enumerate(zip(rows_exp, b_exp)):
            for j in range(len(lc)):
                # s = (M_j θ + log c_j - t_i, 1, u_ij) = b - A x
                A_exp[3 * k, :r] = -M[j]
                A_exp[3 * k, r + i] = 1.0
                bx[3 * k] = lc[j]
                bx[3 * k + 1] = 1.0
                A_exp[3 * k + 2, r + m + k] = -1.0
                A_sum[i, r + m + k] = 1.0
                k += 1
        A_soc = sparse.hstack([sparse.vstack([sparse.csc_matrix((1, r)), -sparse.identity(r)]),
                               sparse.csc_matrix((r + 1, m + nu))])
        self.A = sparse.vstack([A_sum.tocsc(), A_exp.tocsc(), A_soc]).tocsc()
        self.b = np.concatenate([np.ones(m), bx, np.zeros(r + 1)])
        self.radius_row = m + 3 * nu
        self.r = r
        self.cones = ([conic.nonnegative(m)] + [conic.exponential() for _ in range(nu)]
                      + [conic.second_order(r + 1)])

    def solve(self, R: float, name: str, raise_on_inaccurate: bool = True):
        """(θ, status); θ is None when the status is not optimal and ``raise_on_inaccurate`` is False."""
        b = self.b.copy()
        b[self.radius_row] = R
        x, _, status = conic.solve(None, self.q, self.A, b, self.cones)
        if status != conic.OPTIMAL or x is None:
            if raise_on_inaccurate:
                raise SolverError(f"regularization path of {name} at R={R:.6g}: Clarabel status "
                                  f"{status!r}, not optimal")
            return None, status
        return x[:self.r].copy(), status


def _distinct(values, rel: float = 1e-9) -> int:
    """How many of ``values`` differ from each other by more than ``rel`` relative (sorted sweep)."""
    vs = sorted(values)
    return sum(1 for i, v in enumerate(vs) if i == 0 or v - vs[i - 1] > rel * max(abs(v), 1e-300))


# Seeded random starts per radius for a non-convex loss (besides the warm and steepest-descent starts).
RANDOM_STARTS = 4


# SLSQP only finds the basin: every start is then polished by Newton (:func:`_polish`) and certified.  With
# 500 iterations, 90 of the 517 solves of the Theorem 2 property's ci draws ran to the cap on a loss flat to
# 1e-10 (a saturated exp or square loss), and spent 71% of its 5e5 evaluations there.  Measured on 60 drawn
# exp/square-loss paths (benchmarks/slsqp_cap.py, seed 12345, the property's radii): at 100 iterations 58
# certified the same points (W within the two certified position errors at every radius; identical on 23),
# 1 was at float64's rounding level both ways, and 1 square-loss path certified at 500 but not at 100.  So a
# radius where no start certifies is solved again from the same seeds at SLSQP_FULL (the former effort)
# before anything is concluded; with that, 60 of 60 have the former outcome and points, in 67 s, not 187 s.
# (That path sits at float64's edge at its last radius: its copy rounded to 8 digits is at the rounding level
# at either effort; the second pass is tested on a planted refusal, properties/li2024/test_theorem2.py.)
SLSQP_MAXITER, SLSQP_FULL = 100, 500


def _slsqp(f: _Objective, theta0: np.ndarray, R: float, maxiter: int | None = None) -> np.ndarray:
    """Local minimizer of L(θ) on ||θ||^2 <= R^2 from ``theta0`` (analytic gradient), in at most ``maxiter``
    iterations (default :data:`SLSQP_MAXITER`)."""
    res = minimize(lambda th: f(th), theta0, jac=True, method="SLSQP",
                   constraints=[{"type": "ineq", "fun": lambda th: R**2 - th @ th, "jac": lambda th: -2 * th}],
                   options={"maxiter": maxiter or SLSQP_MAXITER, "ftol": 1e-14})
    th = np.asarray(res.x, dtype=float)
    n = np.linalg.norm(th)
    return th * (R / n) if n > R else th


def _descent_start(f: _Objective, R: float) -> np.ndarray:
    """``-R g(0)/||g(0)||``: a nonzero start (at 0 the constraint's gradient vanishes, which SLSQP dislikes)."""
    _, g = f(np.zeros(f.T.shape[0]))
    n = np.linalg.norm(g)
    return -g * (R / n) if n > 0 else np.zeros_like(g)


def _tangent_solve(Hm: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Newton direction ``-Hm^+ g`` with curvature floored (positive definite; tiny eigenvalues cut)."""
    lam, U = np.linalg.eigh((Hm + Hm.T) / 2)
    top = max(float(np.abs(lam).max(initial=0.0)), 1e-300)
    lam = np.maximum(np.abs(lam), 1e-13 * top)  # |λ|: a descent direction even off convexity
    return -U @ ((U.T @ g) / lam)


def _stiff_projector(H: np.ndarray, mu: float, theta: np.ndarray, R: float) -> np.ndarray | None:
    """Projector on the directions whose curvature exceeds ``STIFF * mu`` (None when there are none or
    they hold too much of θ to retract without them).

    At large R the loss on the sphere mixes curvatures 1e13 apart: O(0.1) along the cyclic part, ~mu
    (1e-14) along the saturated directions.  Rescaling the whole θ back onto the sphere after a step
    moves the cyclic part by ~|v|^2/(2R^2) of itself, which costs more loss than the step gains (stress,
    R = 75: loss +1.3e-13 for a predicted -2e-16; the polish stalled at a KKT residual of 1)."""
    if mu <= 0:
        return None
    lam, U = np.linalg.eigh((H + H.T) / 2)
    Us = U[:, lam > STIFF * mu]
    if Us.shape[1] == 0:
        return None
    P = Us @ Us.T
    if np.linalg.norm(P @ theta) > 0.5 * R:
        return None
    return P


def _retract(cand: np.ndarray, R: float, stiff: np.ndarray | None) -> np.ndarray:
    """Back onto the sphere ``||θ|| = R``: scale the soft part only (the stiff part kept) when a stiff
    projector is given, else all of θ; both agree with the step to first order (a retraction)."""
    if stiff is not None:
        hard = stiff @ cand
        soft = cand - hard
        room = R**2 - hard @ hard
        if room > 0 and np.linalg.norm(soft) > 0:
            return hard + soft * np.sqrt(room / (soft @ soft))
    return cand * (R / np.linalg.norm(cand))


def _polish(f: _Objective, theta: np.ndarray, R: float, steps: int = POLISH_STEPS,
            floor=lambda theta: 0.0) -> tuple[np.ndarray, int]:
    """At most ``steps`` Newton steps from ``theta`` (Clarabel's or SLSQP's answer).

    Boundary mode (``||θ|| = R``): Riemannian Newton on the sphere, Hessian ``P (H + μI) P`` on the
    tangent space, retraction ``θ -> Rθ/||θ||``, merit = Riemannian gradient ``||g + μθ||``.  Interior
    mode (a Newton step that stays in the ball): damped Newton on ``||g||``.  A step (halved up to 30
    times) is taken when it lowers the merit or the loss; the loop stops at 1% of the certificate's
    tolerance, at the gradient's float64 rounding floor (``floor(θ)``, :func:`rounding_floor`), or when no
    step helps -- the certificate, not this loop, decides.  Returns (θ, steps used).

    The floor stop matters once the gradient is a few floors large: Newton steps are then driven by
    rounding noise, and through curvatures ~1e-16 a noisy gradient becomes a long step that a noisy merit
    may accept (stress: a cyclic problem at margin 32 wandered from ||g|| = 1e-13 to 1e-10 in 200 steps).
    """
    boundary = np.linalg.norm(theta) >= R * (1 - 1e-6)
    L, g = f(theta)

    def merit(th, gg):
        if not boundary:
            return float(np.linalg.norm(gg))
        return float(np.linalg.norm(gg - (gg @ th) * th / R**2))

    if boundary:
        theta = theta * (R / np.linalg.norm(theta))
        L, g = f(theta)
    for it in range(steps):
        m = merit(theta, g)
        # Inside the ball a small gradient along which the loss still falls outward (mu > 0) is no stopping
        # point: the certificate refuses it, and with no interior minimizer Newton must walk to the sphere.
        # On the sphere, polish to float64's resolution, not to the certificate's tolerance: two calls that
        # stopped anywhere below 1% of KKT_TOL differed by 1.4e-9 relative where Newton's next step reaches
        # the floor (stress seed 2512207974: relative residuals 8e-9 and 1e-13 at R = 45, mu = 4e-7).
        if boundary and m <= floor(theta) \
                or not boundary and m <= 1e-2 * GRAD_TOL and g @ theta >= 0:
            return theta, it
        if not boundary:
            v = _tangent_solve(f.hessian(theta), g)
            if np.linalg.norm(theta + v) > R:  # the unconstrained step leaves the ball: the constraint binds
                boundary = True
                theta = theta * (R / np.linalg.norm(theta)) if np.linalg.norm(theta) > 0 else v * (R / np.linalg.norm(v))
                L, g = f(theta)
                continue
        else:
            mu = -(g @ theta) / R**2
            Q = np.linalg.svd(theta[:, None], full_matrices=True)[0][:, 1:]  # tangent basis
            H = f.hessian(theta)
            Hm = Q.T @ (H + mu * np.eye(len(theta))) @ Q
            v = Q @ _tangent_solve(Hm, Q.T @ g)
            stiff = _stiff_projector(H, mu, theta, R)
        t = 1.0
        for _ in range(30):
            cand = theta + t * v
            if boundary:
                cand = _retract(cand, R, stiff)
            L_new, g_new = f(cand)
            # A merit decrease within the rounding floor is noise, not progress.
            if np.isfinite(L_new) and (merit(cand, g_new) < m - floor(cand) or L_new < L - 1e-15 * abs(L)):
                break
            t /= 2
        else:
            return theta, it
        theta, L, g = cand, L_new, g_new
    return theta, steps


def position_error_bound(f: _Objective, theta: np.ndarray, cert: dict) -> float:
    """A-posteriori bound on ``||W - W̄_R||_F`` for a certified point: its first-order residual plus the
    gradient's float64 floor, divided by the smallest curvature of the problem at the point.

    Boundary: the residual is the Riemannian gradient ``g + μθ`` on the sphere ``||θ|| = R`` and the
    curvature is the smallest eigenvalue of the Riemannian Hessian ``Qᵀ(H + μI)Q`` (``Q`` a basis of the
    tangent space); interior: ``||g||`` and ``λ_min(H)``.  For a function strongly convex with modulus
    ``λ`` near the optimum, ``dist <= ||grad|| / λ`` (first order, as :func:`theory.li2024.finite.error_bound`);
    the floor enters because the float64 gradient can be off by that much, so a point whose gradient is
    at the floor is only known to within ``floor / λ`` of the optimum.  ``inf`` without positive
    curvature (a saddle or a flat direction: the position is not resolved)."""
    H = f.hessian(theta)
    floor = cert["rounding_floor"]
    if cert["branch"] == "boundary":
        Q = np.linalg.svd(theta[:, None], full_matrices=True)[0][:, 1:]
        lam = float(np.linalg.eigvalsh(Q.T @ (H + cert["mu"] * np.eye(len(theta))) @ Q).min(initial=np.inf))
        resid = cert["kkt_residual"]
    else:
        lam = float(np.linalg.eigvalsh(H).min(initial=np.inf))
        resid = cert["grad_norm"]
    return (resid + floor) / lam if lam > 0 else float("inf")


def _best_start(f: _Objective, basis, starts, R: float, floor, certify_at, convex: bool, first: str | None):
    """``(chosen, rounding, certified_losses, failures)`` over the ``starts`` of radius ``R``, each polished
    (:func:`_polish`) and certified (``certify_at(W)``): for a convex loss the first that certifies, else the
    certified one of least loss; ``chosen = (θ, polish steps, certificate, W, solver)`` or None, ``rounding``
    the first :class:`RoundingLevel` met (raised at once when convex), ``failures`` the other refusals.
    ``first``: the solver that produced ``starts[0]`` when it is not the warm start (``"clarabel"``)."""
    failures, chosen, rounding, certified_losses = [], None, None, []
    for i, th in enumerate(starts):
        th, used = _polish(f, th, R, floor=floor)
        W = basis.compose(th)
        try:
            cert = certify_at(W)
        except RoundingLevel as exc:
            # Polished down to the float64 floor: the optimum is not certifiable in float64 whichever start
            # reaches it.  Say so now (the caller counts it as not certifiable) rather than spend the polish
            # budget of every other start on the same verdict.  (A non-convex loss's other starts may reach
            # other points: they are still tried.)
            if convex:
                raise
            rounding = rounding or exc
            continue
        except SolverError as exc:
            failures.append(str(exc))
            continue
        solver = (first if i == 0 and first else "newton continuation from the previous radius" if convex else
                  f"slsqp (local, least loss of {len(starts)} starts)")
        if chosen is None or cert["loss"] < chosen[2]["loss"]:
            chosen = (th, used, cert, W, solver)
        if convex:
            break
        certified_losses.append(cert["loss"])
    return chosen, rounding, certified_losses, failures


def regularization_path(problem: Problem, radii, name: str = "problem",
                        resume: RegPathSolution | None = None) -> list[RegPathSolution]:
    """Certified ``W̄_R`` for each R in ``radii`` (sorted increasing; warm-started along the path).

    ``resume``: the last solution of an earlier path of the same problem, below every R in ``radii``; the
    path continues from it exactly as one call over both sets of radii would (the continuation's state
    is the previous radius's coordinates), without solving the earlier radii again."""
    radii = sorted(float(R) for R in radii)
    if any(R <= 0 for R in radii):
        raise ValueError("radii must be positive")
    if resume is not None and (resume.theta is None or not resume.R < radii[0]):
        raise ValueError("resume: a solution of this module's path with R below every new radius")
    data = TokenData.from_problem(problem)
    basis = effective_basis(problem)
    f = _Objective(problem, basis, data)
    d = problem.d
    g0 = float(np.linalg.norm(loss_and_grad(np.zeros((d, d)), problem, data)[1]))
    convex = convex_case(problem)
    cvx = _Conic(problem, basis, data) if convex else None
    interior = outward_direction(problem, basis) is None
    beta = global_smoothness(problem)
    theta, prev_R = (np.zeros(basis.dim), None) if resume is None else (resume.theta, resume.R)
    out = []
    for R in radii:
        starts, note = [], {}
        if prev_R is not None and theta.any():
            starts.append(theta * (R / prev_R) if np.linalg.norm(theta) >= prev_R * (1 - 1e-6) else theta)
        if convex:
            th, status = cvx.solve(R, name, raise_on_inaccurate=False)
            note["clarabel_status"] = status
            if th is not None:
                starts.insert(0, th)
            elif not starts:  # first radius and Clarabel not optimal: a local start, judged by the certificate
                starts.append(_slsqp(f, _descent_start(f, R), R))
        else:
            # A non-convex loss has local minimizers on the sphere (and boundary points where the loss
            # falls inward): solve from the warm start, the steepest-descent start and RANDOM_STARTS seeded
            # directions, and keep the certified point of least loss.  Measured: an exp-loss path whose
            # single warm-started SLSQP point had mu < 0 (the loss falling inward, R = 362) certifies from
            # another start.  The answer is still a certified KKT point, the best of these starts, not a
            # certified global minimizer.
            rng = np.random.default_rng(len(out))
            seeds = starts[:1] + [_descent_start(f, R)]
            for _ in range(RANDOM_STARTS):
                v = rng.normal(size=basis.dim)
                seeds.append(v * (R / max(np.linalg.norm(v), 1e-300)))
            starts = [_slsqp(f, th0, R) for th0 in seeds]
        # Polish every start; keep the first one that certifies (Clarabel's answer first), or, for a
        # non-convex loss, the certified one of least loss.
        def floor(th, R=R):
            return rounding_floor(basis.compose(th), problem, R, data, beta)

        def certify_at(W, R=R):
            return certify(W, problem, R, name, data, g0, interior)

        first = "clarabel" if convex and note["clarabel_status"] == conic.OPTIMAL else None
        chosen, rounding, certified_losses, failures = _best_start(f, basis, starts, R, floor, certify_at, convex,
                                                                   first)
        if chosen is None and not convex:
            # The capped SLSQP left no start certifiable (1 path of 60 measured): the same seeds at full effort.
            chosen, rounding, certified_losses, failures = _best_start(
                f, basis, [_slsqp(f, th0, R, maxiter=SLSQP_FULL) for th0 in seeds], R, floor, certify_at, convex,
                first)
        if chosen is None:
            if rounding is not None:
                raise rounding
            # Last resort, still judged by the certificate: a fresh local solve from the steepest-descent
            # start (a warm start or an inaccurate solver answer can leave Newton stuck far away).
            th, used = _polish(f, _slsqp(f, _descent_start(f, R), R), R, floor=floor)
            W = basis.compose(th)
            try:
                cert = certify_at(W)
            except RoundingLevel:
                raise
            except SolverError:
                raise SolverError(failures[0]) from None  # the best start's failure (Clarabel's, when convex)
            chosen = (th, used, cert, W, "slsqp from the descent start (fallback)")
        th, used, cert, W, solver = chosen
        cert.update(solver=solver, polish_steps=used, error_bound=position_error_bound(f, th, cert), **note)
        if not convex:  # distinct certified KKT values among the starts: > 1 means several local minima
            cert["local_minima"] = _distinct(certified_losses)
        theta, prev_R = th, R
        out.append(RegPathSolution(R, W, cert["loss"], cert, th))
    return out


def regularized_solution(problem: Problem, R: float, name: str = "problem") -> RegPathSolution:
    return regularization_path(problem, [R], name)[0]
