"""The regularization path of the factorized layer ``W = W_K W_Q^T`` (issue 38, part 2).

    (W_K, W_Q)_R ∈ argmin L(W_K W_Q^T)  s.t.  ||W_K||_F² + ||W_Q||_F² <= 2R.

Reduction to ``W``.  ``min {½(||W_K||² + ||W_Q||²) : W_K W_Q^T = W} = ||W||_*`` (balanced factors from the
SVD, ``W_K = U Σ^{1/2}``, ``W_Q = V Σ^{1/2}``, once ``m >= rank W``), so the set of products the factor ball
reaches is exactly the nuclear-norm ball, and the path in ``W`` is

    W̃_R ∈ argmin_{||W||_* <= R} L(W),

which is what this module computes (for ``m >= d``, every product of the ball; for ``m < d`` the factor ball
reaches only the rank-``m`` part of it, a non-convex set this module does not treat).  The nuclear norm is
not orthogonally additive, so unlike :mod:`theory.li2024.regpath` the search cannot be restricted to the
effective subspace: ``W`` is a full ``d x d`` matrix, and only the loss sees its effective coordinates.

Solver (the reason for the choice).  ``L`` is convex for the log loss under Assumptions 1-2
(:func:`theory.li2024.regpath.convex_case`; other cases are refused).  At large ``R`` the loss is
``O(e^{-margin})`` and a first-order method (Frank-Wolfe, projected gradient) advances by the gradient's
size, ~``e^{-margin}``; an exponential-cone program cannot resolve a loss near 0 either (its
epigraph variable sits at ``1e-7`` under feasibility tolerances of ``1e-8``, the reason regpath polishes).
So the solver is **projected Newton**: at the current ``W`` the quadratic model
``<G, V - W> + ½ (V - W)·∇²L·(V - W)`` is minimized over the nuclear ball exactly, as a small quadratic
semidefinite program (Clarabel's PSD cone, the epigraph ``[[P, V], [V^T, Q]] ⪰ 0``, ``tr P + tr Q <= 2R``
of :mod:`theory.li2024.nuclear`), scaled so that its data are O(1) whatever the size of the gradient; then a
backtracking line search on ``L`` along the segment (feasible by convexity).  A Newton model is
scale-free, so the steps do not shrink with the gradient; warm starts along the path (the previous
radius's answer times ``R'/R``).  Only Clarabel's ``optimal`` status is used; an iteration whose
subproblem is not optimal ends the loop, and the certificate decides.

Finishing on the factors.  Where the QP stalls short of the certificate, the answer is finished by
Riemannian Newton on balanced factors ``W = A B^T`` on the sphere ``||A||² + ||B||² = 2R``
(``_FactorObjective`` with its exact Hessian, and :func:`theory.li2024.regpath._polish`, the
Frobenius path's own polish, with its stiff-direction retraction): dense linear algebra resolves the cyclic
directions to float64, which the interior-point QP does not.  Why it was needed: on a rank-k face the gap
vanishes only when the top k singular values of ``-G`` are equal, and they hang on the ``S_fin`` position
(curvature 0.09 against ||G|| = 5e-8, Gaussian problem #7 of ``benchmarks/nuclear_angles.py`` at margin
16) to ~1e-12 absolute: the QP alone stalled at a relative gap of 3.4e-6 there.

Reach, measured (``benchmarks/nuclear_angles.py --claims``: the 29 of its first 30 Gaussian problems with a
⇒ edge, radii ``t ||W^nuc||_*`` for t = 1, 2, ..., 64, each warm-started from the previous): 10 certify
through t = 64; on 18 the radius at t = 32 is at float64's rounding level (the gradient's floor above 1e-3
of its size: a cyclic part keeps the loss O(1) while its saturated part is ~e^{-t}), which raises
:class:`~theory.li2024.regpath.RoundingLevel`; 1 stops at t = 16 (its iterates stay 2e-5 inside the sphere,
which the certificate refuses: no interior minimizer exists).  With the QP alone (before the factor polish), 13 of the first 25 stopped at t = 16.  A radius
that does not certify raises; callers count it as not certifiable, never as an answer.

Certificate (:func:`certify`, from ``W`` and the gradient alone, every quantity relative):

* feasibility ``||W||_* <= R (1 + FEAS_TOL)``;
* the Frank-Wolfe duality gap ``gap = <G, W> + R ||G||_2`` (``G = ∇L(W)``): for convex ``L``,
  ``L(W) - min_{ball} L <= gap``, and ``gap = 0`` exactly at the minimizer on the sphere (``-G`` is then a
  multiple of a subgradient of ``||·||_*`` at ``W``).  Required: ``gap <= KKT_TOL R ||G||_2 + 2 R floor``,
  ``floor`` the float64 resolution of ``G`` (:func:`theory.li2024.regpath.rounding_floor`; ``<G, W>`` and
  ``R ||G||_2`` each move by at most ``R floor`` when ``G`` moves by ``floor``), and a gradient resolved at
  all (``floor <= FLOOR_MAX ||G||_2``, else :class:`theory.li2024.regpath.RoundingLevel`);
* an interior point (``||W||_* < R (1 - FEAS_TOL)``) only where an interior minimizer can exist (no
  outward direction, :func:`theory.li2024.regpath.outward_direction`) and with ``||G|| <= GRAD_TOL``.

``E -> αE`` sends ``W`` to ``W/α²``, ``R`` to ``R/α²`` and ``G`` to ``α² G``: the relative gap is invariant
(checked in ``properties/li2024/test_factorized.py``).  The minimizer need not be unique (``L`` is flat along
directions the loss does not see, and ``||·||_*`` is not strictly convex): the certificate certifies the
value; the returned ``W`` is one minimizer.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from theory.core import conic
from theory.core.problem import Problem
from theory.li2024.finite import _Objective
from theory.li2024.losses import TokenData, loss_and_grad
from theory.li2024.nuclear import _idx, _psd, _triu_colmajor, _w_map, nuclear_norm
from theory.li2024.regpath import (FLOOR_MAX, RoundingLevel, convex_case, effective_basis, outward_direction,
                                   rounding_floor)
from theory.li2024.svm import SolverError

__all__ = ["FEAS_TOL", "KKT_TOL", "NEWTON_STEPS", "NuclearPathPoint", "certify", "fw_gap", "nuclear_path"]

FEAS_TOL = 1e-7  # relative slack on ||W||_* <= R (Clarabel's PSD feasibility is ~1e-8)
KKT_TOL = 1e-6  # relative Frank-Wolfe gap, gap / (R ||G||_2)
GRAD_TOL = 1e-9  # interior stationarity, relative to max(1, ||G(0)||)
# Projected Newton iterations per radius.  Measured on 25 Gaussian problems (benchmarks/nuclear_angles.py),
# margins 1..64: certified radii took 3-6 iterations; where Newton stalls it stalls within 12 (below).
NEWTON_STEPS = 60


@dataclass(frozen=True)
class NuclearPathPoint:
    """A certified point of the factorized path: ``W`` (d x d), its loss, its certificate (``gap``,
    ``relative_gap``, ``norm``, ``floor``, ``branch``, ``newton_steps``)."""

    R: float
    W: np.ndarray
    loss: float
    certificate: dict

    @property
    def norm(self) -> float:
        return nuclear_norm(self.W)


def fw_gap(W: np.ndarray, G: np.ndarray, R: float) -> float:
    """The Frank-Wolfe gap ``<G, W> + R ||G||_2`` of ``W`` in the ball ``||W||_* <= R`` (an upper bound on
    ``L(W) - min L`` for convex ``L``: the Frank-Wolfe duality gap, ``-R u_1 v_1^T`` being the ball's point
    most aligned with ``-G``).

    Parameters
    ----------
    W, G : numpy.ndarray
        The point (``||W||_* <= R``) and the loss gradient there.
    R : float
        The radius.

    Returns
    -------
    float
        The gap (``>= 0`` for a feasible ``W``).
    """
    return float(np.sum(G * W) + R * np.linalg.norm(G, 2))


def certify(W: np.ndarray, problem: Problem, R: float, name: str = "problem", data: TokenData | None = None,
            interior_possible: bool | None = None) -> dict:
    """The certificate of the module docstring for ``W`` in ``min L s.t. ||W||_* <= R``.

    Parameters
    ----------
    W : numpy.ndarray
        The candidate (d x d).
    problem : Problem
        The problem.
    R : float
        The radius.
    name : str
        Named in the error message.
    data : theory.li2024.losses.TokenData, optional
        The problem's token data (computed when omitted).
    interior_possible : bool, optional
        Whether an interior minimizer can exist (default: no outward direction exists).

    Returns
    -------
    dict
        ``R``, ``norm``, ``loss``, ``grad_spectral``, ``gap``, ``relative_gap``, ``floor``, ``tol``,
        ``branch`` (``boundary`` or ``interior``).

    Raises
    ------
    theory.li2024.svm.SolverError
        Naming the failed check (:class:`~theory.li2024.regpath.RoundingLevel` when float64 does not resolve
        the gradient).
    """
    data = data or TokenData.from_problem(problem)
    if interior_possible is None:
        interior_possible = outward_direction(problem) is None
    L, G = loss_and_grad(W, problem, data)
    nuc = nuclear_norm(W)
    g2 = float(np.linalg.norm(G, 2))
    floor = rounding_floor(W, problem, max(float(np.linalg.norm(W)), 1e-300), data)
    gap = fw_gap(W, G, R)
    cert = {"R": R, "norm": nuc, "loss": float(L), "grad_spectral": g2, "gap": gap,
            "relative_gap": gap / (R * g2) if g2 > 0 else 0.0, "floor": floor, "tol": KKT_TOL}
    head = f"factorized regularization path of {name} at R={R:.6g}: certificate failed:"
    if not (np.isfinite(L) and np.isfinite(g2)):
        raise SolverError(f"{head} non-finite loss {L} or gradient {g2}")
    if nuc > R * (1 + FEAS_TOL):
        raise SolverError(f"{head} infeasible, ||W||_*={nuc:.12g} > R (relative tol {FEAS_TOL:g})")
    g0 = float(np.linalg.norm(loss_and_grad(np.zeros_like(W), problem, data)[1]))
    if nuc < R * (1 - FEAS_TOL) and interior_possible and np.linalg.norm(G) <= GRAD_TOL * max(1.0, g0):
        cert["branch"] = "interior"
        return cert
    if nuc < R * (1 - FEAS_TOL) and not interior_possible and floor > FLOOR_MAX * g2:
        raise RoundingLevel(f"{head} gradient at rounding level inside the ball (||W||_*={nuc:.6g}, "
                            f"||G||_2={g2:.2e}, float64 floor {floor:.1e})")
    if nuc < R * (1 - FEAS_TOL):
        raise SolverError(f"{head} interior point (||W||_*={nuc:.6g}) with ||G||={np.linalg.norm(G):.2e}"
                          + ("" if interior_possible else "; the loss falls outward for ever, no interior minimizer"))
    if floor > FLOOR_MAX * g2:
        raise RoundingLevel(f"{head} gradient at rounding level (||G||_2={g2:.2e}, float64 floor {floor:.1e})")
    if not gap <= KKT_TOL * R * g2 + 2 * R * floor:
        raise SolverError(f"{head} Frank-Wolfe gap {gap:.3e} = {cert['relative_gap']:.2e} R||G||_2 "
                          f"(max {KKT_TOL:g} plus 2R x the float64 floor {floor:.1e})")
    cert["branch"] = "boundary"
    return cert


class _NewtonQP:
    """The projected-Newton subproblem in Clarabel's form: variable ``x = svec(Z)/R`` (``Z`` of size 2d,
    ``V = R T x`` its off-diagonal block, :func:`theory.li2024.nuclear._w_map`), constraints
    ``tr Z / 2 <= R`` and ``Z ⪰ 0``."""

    def __init__(self, d: int, basis: np.ndarray):
        self.d = d
        N = 2 * d
        self.nv = N * (N + 1) // 2
        self.T = _w_map(d)
        self.B = basis.reshape(basis.shape[0], d * d).T  # d² x r, orthonormal columns
        iu, ju = _triu_colmajor(N)
        trace = np.where(iu == ju, 0.5, 0.0)
        self.A = sparse.vstack([sparse.csc_matrix(trace[None, :]), -sparse.identity(self.nv, format="csc")]).tocsc()
        self.b = np.concatenate([[1.0], np.zeros(self.nv)])
        self.cones = [conic.nonnegative(1), _psd(N)]

    def step(self, w0: np.ndarray, g: np.ndarray, H: np.ndarray, R: float) -> tuple[np.ndarray | None, str]:
        """Minimizer ``V`` of ``g·θ(V - W) + ½ θ(V - W)·H·θ(V - W)`` over ``||V||_* <= R`` (θ the effective
        coordinates, ``g``/``H`` the θ-gradient and Hessian), or None with Clarabel's status."""
        gn = float(np.linalg.norm(g))
        if gn == 0:
            return None, "zero gradient"
        # scaled: V = R φ, objective / (R ||g||): ĝ·Bᵀφ + ½ (R/||g||) (φ - φ0)ᵀ B H Bᵀ (φ - φ0)
        M = self.B.T @ self.T  # r x nv: θ of V per unit x
        Hs = (R / gn) * (H + H.T) / 2
        P = M.T @ Hs @ M
        phi0 = self.B.T @ (w0 / R)
        q = M.T @ (g / gn) - M.T @ (Hs @ phi0)
        x, status = _qp(P, q, self.A, self.b, self.cones)
        if status != conic.OPTIMAL or x is None:
            return None, status
        return R * (self.T @ x), status


# The Newton model's minimizer must be resolved below the certificate's 1e-6: at Clarabel's default 1e-8 the
# step stalled at a relative Frank-Wolfe gap of 1.6e-6 on examples/scc_above_token.json (R = 8; the scaled
# model mixes curvatures ~R/||g|| along the cyclic directions with O(1) along the saturated ones).
# Tried in turn until one is 'optimal': Clarabel does not always reach 1e-12 (then the next, looser one).
QP_SETTINGS = ({"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12, "tol_ktratio": 1e-10,
                "max_iter": 400},
               {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10, "max_iter": 400},
               {})


def _qp(P, q, A, b, cones):
    for options in QP_SETTINGS:
        x, status = _qp_once(P, q, A, b, cones, options)
        if status == conic.OPTIMAL:
            break
    return x, status


def _qp_once(P, q, A, b, cones, options):
    import clarabel

    settings = clarabel.DefaultSettings()
    settings.verbose = False
    for k, v in options.items():
        setattr(settings, k, v)
    n = len(q)
    Pt = sparse.triu(sparse.csc_matrix(P)).tocsc()
    sol = clarabel.DefaultSolver(Pt, np.asarray(q, float), A, b, cones, settings).solve()
    status = conic.STATUS.get(str(sol.status), conic.SOLVER_ERROR)
    x = np.asarray(sol.x, float) if sol.x is not None else None
    if x is not None and (len(x) != n or not np.all(np.isfinite(x))):
        x = None
    return x, status


class _FactorObjective:
    """``x = (vec A, vec B) -> L(A B^T)`` with its gradient and exact Hessian, for :func:`theory.li2024.regpath._polish`
    on the sphere ``||x||² = 2R`` (``||A B^T||_* <= ½(||A||² + ||B||²)``, with equality for balanced factors).

    Hessian: ``Jᵀ H_W J + C``: ``H_W = B_eff H_θ B_effᵀ`` (the loss sees ``W`` only through its effective
    coordinates; ``H_θ`` the covariance form of :class:`theory.li2024.finite._Objective`, exact when
    saturated), ``J`` the Jacobian of ``vec(A Bᵀ)``, ``C`` the bilinear term ``∂²<G, A Bᵀ>/∂A_la ∂B_mb = G_lm δ_ab``."""

    def __init__(self, problem, basis, f, data, d: int, k: int):
        self.problem, self.basis, self.f, self.data, self.d, self.k = problem, basis, f, data, d, k
        self.Beff = basis.basis.reshape(basis.dim, d * d).T

    def split(self, x):
        n = self.d * self.k
        return x[:n].reshape(self.d, self.k), x[n:].reshape(self.d, self.k)

    def __call__(self, x):
        A, B = self.split(x)
        L, G = loss_and_grad(A @ B.T, self.problem, self.data)
        return L, np.concatenate([(G @ B).ravel(), (G.T @ A).ravel()])

    def hessian(self, x):
        d, k = self.d, self.k
        A, B = self.split(x)
        W = A @ B.T
        Hw = self.Beff @ self.f.hessian(self.basis.coordinates(W)) @ self.Beff.T
        I = np.eye(d)
        JA = np.einsum("il,ja->ijla", I, B).reshape(d * d, d * k)
        JB = np.einsum("ia,jl->ijla", A, I).reshape(d * d, d * k)
        J = np.hstack([JA, JB])
        _, G = loss_and_grad(W, self.problem, self.data)
        C = np.kron(G, np.eye(k))  # rows (l, a) of A, columns (m, b) of B
        H = J.T @ Hw @ J
        H[:d * k, d * k:] += C
        H[d * k:, :d * k] += C.T
        return (H + H.T) / 2


def _factor_polish(problem, basis, f, data, W: np.ndarray, R: float) -> np.ndarray | None:
    """Riemannian Newton (:func:`theory.li2024.regpath._polish`, the Frobenius path's own polish) on the balanced
    factors of ``W``, on the sphere ``||A||² + ||B||² = 2R``; None when it fails.  Its answer is judged by the
    Frank-Wolfe certificate like any other."""
    from theory.li2024.regpath import _polish

    d = problem.d
    U, s, Vt = np.linalg.svd(W)
    if not s[0] > 0:
        return None
    F = _FactorObjective(problem, basis, f, data, d, d)
    x = np.concatenate([(U * np.sqrt(s)).ravel(), (Vt.T * np.sqrt(s)).ravel()])
    x *= np.sqrt(2 * R) / np.linalg.norm(x)  # ||x||² = 2 ||W||_*: onto the sphere

    def floor(x):
        A, B = F.split(x)
        Wx = A @ B.T
        return rounding_floor(Wx, problem, max(float(np.linalg.norm(Wx)), 1e-300), data) * (
            np.linalg.norm(A, 2) + np.linalg.norm(B, 2))

    try:
        with np.errstate(all="ignore"):
            x, _ = _polish(F, x, float(np.sqrt(2 * R)), floor=floor)
    except (np.linalg.LinAlgError, ValueError, FloatingPointError):
        return None
    A, B = F.split(x)
    V = A @ B.T
    return V if np.all(np.isfinite(V)) else None


def _merit(W, problem, R, data) -> float:
    """The relative Frank-Wolfe gap at ``W``."""
    _, G = loss_and_grad(W, problem, data)
    g2 = float(np.linalg.norm(G, 2))
    return fw_gap(W, G, R) / (R * g2) if g2 > 0 else 0.0


def nuclear_path(problem: Problem, radii, name: str = "problem",
                 resume: NuclearPathPoint | None = None) -> list[NuclearPathPoint]:
    """Certified ``W̃_R = argmin_{||W||_* <= R} L(W)`` for each ``R`` in ``radii`` (sorted; warm-started).

    Parameters
    ----------
    problem : Problem
        Log loss under Assumptions 1-2 (the convex case).
    radii : sequence of float
        Positive radii.
    name : str
        Named in error messages.
    resume : theory.li2024.kq_path.NuclearPathPoint, optional
        The last point of an earlier path of the same problem, below every new radius.

    Returns
    -------
    list of theory.li2024.kq_path.NuclearPathPoint
        One per radius, in increasing order, each with its certificate (plus ``newton_steps``).

    Raises
    ------
    ValueError
        Outside the convex case, or a radius <= 0.
    theory.li2024.svm.SolverError
        A radius that does not certify (:class:`~theory.li2024.regpath.RoundingLevel` when float64 cannot
        resolve its gradient).

    Examples
    --------
    >>> p = Problem.load("examples/scc_above_token.json")
    >>> pts = nuclear_path(p, [1.0, 4.0])
    >>> [round(pt.norm, 6) for pt in pts], pts[-1].certificate["branch"]
    ([1.0, 4.0], 'boundary')
    """
    if not convex_case(problem):
        raise ValueError("the factorized path is computed for the log loss under Assumptions 1-2 only "
                         "(the convex case); got loss " + repr(problem.loss))
    radii = sorted(float(R) for R in radii)
    if any(R <= 0 for R in radii):
        raise ValueError("radii must be positive")
    d = problem.d
    data = TokenData.from_problem(problem)
    basis = effective_basis(problem)
    f = _Objective(problem, basis, data)
    qp = _NewtonQP(d, basis.basis) if basis.dim else None
    interior = outward_direction(problem, basis) is None
    W = np.zeros((d, d)) if resume is None else resume.W
    prev = None if resume is None else resume.R
    out = []
    for R in radii:
        if prev is not None and W.any():
            W = W * (R / prev)
        used = 0
        cert = best = None
        stop = "iterations"

        for used in range(NEWTON_STEPS + 1):
            try:
                cert = certify(W, problem, R, name, data, interior)
                if best is None or cert["relative_gap"] < best[1]["relative_gap"]:
                    best = (W, cert)
                if cert["relative_gap"] <= 1e-2 * KKT_TOL or cert["branch"] == "interior":
                    break  # well inside the tolerance: stop before Newton runs into rounding
            except RoundingLevel:
                raise
            except SolverError:
                cert = None
            if used == NEWTON_STEPS or qp is None:
                break
            th = basis.coordinates(W)
            L, g = f(th)
            V, status = qp.step(W.ravel(), g, f.hessian(th), R)
            if V is None:
                stop = f"subproblem status {status!r}"
                break
            V = V.reshape(d, d)
            t, moved = 1.0, False
            merit = _merit(W, problem, R, data)
            for _ in range(40):
                cand = W + t * (V - W)
                Lc = f(basis.coordinates(cand))[0]
                # Near the optimum the subproblem's own feasibility slack (||V||_* = R (1 - 1e-9)) costs more
                # loss than the step gains (+1.9e-12 on examples/scc_above_token.json at R = 8, while the gap
                # fell from 1.6e-6 to 1e-9): a step that lowers the gap is progress too (regpath's merit rule).
                if Lc < L or _merit(cand, problem, R, data) < merit:
                    W, moved = cand, True
                    break
                t /= 2
            if not moved:
                stop = "no step lowers the loss or the gap"
                break
        if cert is None and best is not None:  # a later step lost the certificate an earlier iterate had
            W, cert = best
        if cert is None and basis.dim:
            # The QP stalled short of the certificate: finish with Newton on the factors (module docstring).
            Wf = _factor_polish(problem, basis, f, data, W, R)
            if Wf is not None and _merit(Wf, problem, R, data) < _merit(W, problem, R, data):
                W, stop = Wf, stop + "; then Newton on the factors"
        if cert is None:
            try:
                cert = certify(W, problem, R, name, data, interior)  # raises with the failed check
            except SolverError as exc:
                raise type(exc)(f"{exc} [projected Newton stopped after {used} steps: {stop}]") from None
        cert["newton_steps"] = used
        out.append(NuclearPathPoint(R, W.copy(), cert["loss"], cert))
        prev = R
    return out
