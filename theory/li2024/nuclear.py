"""The nuclear-norm Graph-SVM (issue 38; Tarzanagh, Li, Thrampoulidis, Oymak 2023 for single-token selection).

    W^nuc ∈ argmin ||W||_*  s.t.  <W, (e_i - e_j) e_k^T> = 0  for (i ≍ j) ∈ G^(k),
                                  <W, (e_i - e_j) e_k^T> >= 1  for (i ⇒ j) ∈ G^(k),

the same constraints as the Frobenius Graph-SVM of :mod:`theory.li2024.svm` (reused:
:func:`theory.li2024.svm.constraints`), with the norm the factorized parameterization ``W = W_K W_Q^T``
favours (``min ½(||W_K||² + ||W_Q||²)`` over the factorizations of ``W`` is ``||W||_*``).

**The SDP.**  ``||W||_* <= t`` iff there are symmetric ``P, Q`` with ``Z = [[P, W], [W^T, Q]] ⪰ 0`` and
``(tr P + tr Q)/2 <= t``.  The variable is ``x = svec(Z)`` (``Z`` of size ``2d``), in Clarabel's
``PSDTriangleConeT`` vectorization: the upper triangle stacked column by column, off-diagonal entries times
√2 (:func:`svec`; checked against an eigenvalue in the tests).  ``W[a, b] = Z[a, d + b] = x[idx(a, d+b)]/√2``.
The program Clarabel sees is scale-free as in :mod:`theory.li2024.svm`: unit rows ``u = r/||r||``, margins
``c/||r_b||`` for ``V = c W``, with ``c`` chosen so that ``||V||_F`` is about 1.

**The certificate** (:func:`certify`), computed from ``W`` and the multipliers alone, every quantity relative:

* status: only Clarabel's ``optimal`` is accepted;
* primal feasibility re-verified on the returned ``W``: ``(r_b . W - 1)/(||r_b|| ||W||_F) >= -tol`` and
  ``|r_e . W|/(||r_e|| ||W||_F) <= tol``;
* dual feasibility: the multipliers ``λ_b`` of the ``⇒`` rows are ``>= 0`` (as shares of ``Σ λ_b ||r_b||``,
  to ``-tol``); those of the ``≍`` rows, ``μ_e``, are free;
* a dual bound: with ``Y = Σ λ⁺_b R_b - Σ μ_e R_e`` (``R`` the rows as d x d matrices), every feasible ``W``
  has ``Σ λ⁺_b <= <Y, W> <= ||Y||_2 ||W||_*``, so ``lower = Σ λ⁺_b / ||Y||_2`` bounds the optimum from below;
* the gap: ``|‖W‖_* - lower| / ‖W‖_* <= tol`` (``W`` is feasible to the relative ``tol`` above; a margin
  ``1 - 2e-4`` of a row with ``||r_b|| ||W||_F = 3e5`` is a relative slack of ``-8e-10``, so the gap is taken
  between ``||W||_*`` itself and the dual bound, as interior-point solvers do).  The strict upper bound
  ``||W||_* / min(1, min_b r_b . W)`` (``W`` rescaled to meet every margin) is reported as ``upper_bound``
  with its gap ``strict_gap``, not required (examples/rotation_large_svm.json: gap 7e-8, strict gap 2e-4).

A failed check raises :class:`theory.li2024.svm.SolverError` with a one-line message.  ``E -> αE`` sends
the rows to ``α² r``, ``W`` to ``W/α²``, ``λ`` to ``λ/α²``: every check is invariant.

The certificate certifies the *value* ``||W^nuc||_*`` and that the returned ``W`` attains it (to ``tol``).
The nuclear norm is not strictly convex: the minimizer need not be unique, and the angle to ``W^svm``
(:func:`angle_degrees`) is that of the returned minimizer.  No exact (rational) certificate here: the
Frobenius one is exact (:mod:`theory.core.exact`), this one is float to ``tol``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from theory.core import conic
from theory.core.problem import Problem
from theory.li2024.graphs import TPG
from theory.li2024.svm import Constraints, SolverError, _confirm_infeasible, constraints

__all__ = ["TOL", "NuclearSolution", "angle_degrees", "certify", "nuclear_norm", "nuclear_summary",
           "nuclear_svm", "svec"]

TOL = 1e-6  # relative tolerance of feasibility, dual sign and the duality gap (Clarabel stops at 1e-8)
SOLUTION_SCALE = 10.0  # re-solve when ||V||_F leaves [1/10, 10]


@dataclass(frozen=True)
class NuclearSolution:
    """A certified nuclear-norm Graph-SVM solution (:func:`nuclear_svm`).

    ``W`` (d x d), ``margins`` (``r_b . W`` per ``⇒`` row), the multipliers ``lam`` (``⇒`` rows, ``>= 0``)
    and ``mu`` (``≍`` rows, free), and ``certificate`` (what was checked, see :func:`certify`)."""

    W: np.ndarray
    margins: np.ndarray
    lam: np.ndarray
    mu: np.ndarray
    certificate: dict

    @property
    def norm(self) -> float:
        """``||W^nuc||_*``."""
        return nuclear_norm(self.W)


def nuclear_norm(W: np.ndarray) -> float:
    return float(np.linalg.svd(np.asarray(W, float), compute_uv=False).sum())


def svec(M: np.ndarray) -> np.ndarray:
    """Clarabel's ``PSDTriangleConeT`` vectorization: upper triangle by columns, off-diagonals times √2."""
    n = len(M)
    iu, ju = _triu_colmajor(n)
    return M[iu, ju] * np.where(iu == ju, 1.0, np.sqrt(2.0))


def _triu_colmajor(n: int):
    cols = [(i, j) for j in range(n) for i in range(j + 1)]
    return np.array([c[0] for c in cols], dtype=int), np.array([c[1] for c in cols], dtype=int)


def _idx(i: int, j: int) -> int:
    """Position of ``Z[i, j]`` (``i <= j``) in :func:`svec`."""
    return j * (j + 1) // 2 + i


def _w_map(d: int) -> sparse.csc_matrix:
    """``T`` with ``vec(W) = T x`` (row-major ``vec``, as :func:`theory.li2024.svm.constraints`)."""
    nv = (2 * d) * (2 * d + 1) // 2
    rows = np.arange(d * d)
    cols = np.array([_idx(a, d + b) for a in range(d) for b in range(d)])
    return sparse.csc_matrix((np.full(d * d, 1 / np.sqrt(2.0)), (rows, cols)), shape=(d * d, nv))


# Clarabel settings tried in turn while the status is not 'optimal' (only 'optimal' is accepted).  A drawn
# problem with two embeddings 0.003 apart (⇒ rows of norm 1.41 and 0.003, ||W^svm|| = 332) came back
# 'optimal_inaccurate' (AlmostSolved) at the defaults, also with max_iter 500, tighter tolerances, presolve off
# or more iterative refinement; 'Solved' (gap 6e-10) with static regularization 1e-7 (default 1e-8) and
# 'Solved' (gap 8e-9) without equilibration.
RETRY_SETTINGS = ({}, {"static_regularization_constant": 1e-7}, {"equilibrate_enable": False})


def _clarabel(q, A, b, cones, options: dict):
    """:func:`theory.core.conic.solve` (a linear objective) with Clarabel settings ``options``."""
    import clarabel

    settings = clarabel.DefaultSettings()
    settings.verbose = False
    for k, v in options.items():
        setattr(settings, k, v)
    n = len(q)
    sol = clarabel.DefaultSolver(sparse.csc_matrix((n, n)), np.asarray(q, float), sparse.csc_matrix(A),
                                 np.asarray(b, float), cones, settings).solve()
    status = conic.STATUS.get(str(sol.status), conic.SOLVER_ERROR)
    x = np.asarray(sol.x, float) if sol.x is not None else None
    z = np.asarray(sol.z, float) if sol.z is not None else None
    if x is not None and (len(x) != n or not np.all(np.isfinite(x))):
        x = None
    return x, z, status


def _solve_sdp(Cn: np.ndarray, Dn: np.ndarray, margins: np.ndarray, d: int):
    """Clarabel on ``min tr(Z)/2  s.t.  Cn vec(W) = 0, Dn vec(W) >= margins, Z ⪰ 0``, with the settings of
    :data:`RETRY_SETTINGS` in turn until one is 'optimal'.  Returns ``(V, z_eq, z_in, status)`` (``V`` d x d
    or None)."""
    N = 2 * d
    nv = N * (N + 1) // 2
    T = _w_map(d)
    iu, ju = _triu_colmajor(N)
    q = np.where(iu == ju, 0.5, 0.0)
    m_eq, m_in = len(Cn), len(Dn)
    blocks = ([sparse.csc_matrix(Cn) @ T] if m_eq else []) + [-(sparse.csc_matrix(Dn) @ T),
                                                              -sparse.identity(nv, format="csc")]
    A = sparse.vstack(blocks).tocsc()
    b = np.concatenate([np.zeros(m_eq), -margins, np.zeros(nv)])
    for options in RETRY_SETTINGS:
        cones = ([conic.zero(m_eq)] if m_eq else []) + [conic.nonnegative(m_in), _psd(N)]
        x, z, status = _clarabel(q, A, b, cones, options)
        if status == conic.OPTIMAL or status in (conic.INFEASIBLE, conic.INFEASIBLE_INACCURATE):
            break
    if x is None or z is None:
        return None, None, None, status
    return (T @ x).reshape(d, d), z[:m_eq], z[m_eq:m_eq + m_in], status


def _psd(n: int):
    import clarabel
    return clarabel.PSDTriangleConeT(n)


def certify(W: np.ndarray, lam: np.ndarray, mu: np.ndarray, cons: Constraints, name: str = "problem",
            rel_tol: float = TOL) -> dict:
    """Check a nuclear-norm Graph-SVM primal-dual pair (see the module docstring); raise
    :class:`~theory.li2024.svm.SolverError` naming the failed checks, else return the certificate dict."""
    W = np.asarray(W, float)
    d = W.shape[0]
    w = W.ravel()
    wf = float(np.linalg.norm(w)) or 1.0
    tiny = np.finfo(float).tiny
    an = np.linalg.norm(cons.dominate, axis=1)
    cn = np.linalg.norm(cons.equal, axis=1) if len(cons.equal) else np.zeros(0)
    margins = cons.dominate @ w
    eq_res = float((np.abs(cons.equal @ w) / np.maximum(cn * wf, tiny)).max(initial=0.0)) if len(cn) else 0.0
    min_slack = float(((margins - 1.0) / np.maximum(an * wf, tiny)).min(initial=np.inf))
    lam = np.asarray(lam, float)
    mu = np.asarray(mu, float)
    share = lam * an / max(float(np.abs(lam) @ an), tiny)
    min_dual = float(share.min(initial=0.0))
    lp = np.maximum(lam, 0.0)
    Y = (cons.dominate.T @ lp - (cons.equal.T @ mu if len(mu) else 0.0)).reshape(d, d)
    spec = float(np.linalg.norm(Y, 2))
    lower = float(lp.sum()) / spec if spec > 0 else 0.0
    nuc = nuclear_norm(W)
    mmin = float(margins.min(initial=np.inf))
    upper = nuc / min(1.0, mmin) if mmin > 0 else np.inf
    strict_gap = (upper - lower) / upper if np.isfinite(upper) and upper > 0 else np.inf
    gap = abs(nuc - lower) / nuc if nuc > 0 else np.inf
    cert = {"norm": nuc, "lower_bound": lower, "upper_bound": upper, "gap": gap, "strict_gap": strict_gap,
            "equality_residual": eq_res,
            "min_slack": min_slack, "min_dual": min_dual, "dual_spectral_norm": spec, "tol": rel_tol,
            "relative": True}
    failures = [f"equality residual {eq_res:.2e}" if eq_res > rel_tol else None,
                f"smallest slack {min_slack:.2e} < 0" if min_slack < -rel_tol else None,
                f"negative dual {min_dual:.2e}" if min_dual < -rel_tol else None,
                f"duality gap {gap:.2e} (||W||_* {nuc:.6g}, dual bound {lower:.6g})" if not gap <= rel_tol else None]
    failures = [f for f in failures if f]
    if failures:
        raise SolverError(f"nuclear Graph-SVM of {name}: certificate failed: {'; '.join(failures)} "
                          f"(relative tol {rel_tol:.1e})")
    return cert


def nuclear_svm(problem: Problem, graphs: dict[int, TPG] | None = None, name: str = "problem",
                rel_tol: float = TOL) -> NuclearSolution:
    """Solve the nuclear-norm Graph-SVM as an SDP (Clarabel) and certify it (:func:`certify`).

    ``W = 0`` without a solver when no ``⇒`` edge exists.  Raises
    :class:`theory.li2024.svm.GraphSVMInfeasible` when the constraints are infeasible (confirmed by the
    independent LP of :mod:`theory.li2024.svm`) and :class:`~theory.li2024.svm.SolverError` when Clarabel's status is not
    ``optimal`` or the certificate fails.

    Examples
    --------
    >>> sol = nuclear_svm(Problem.load("examples/scc_above_token.json"))
    >>> round(sol.norm, 6), sol.certificate["gap"] < 1e-6
    (1.0, True)
    """
    cons = constraints(problem, graphs)
    d = problem.d
    if len(cons.dominate) == 0:
        z = np.zeros(0)
        return NuclearSolution(np.zeros((d, d)), z, z, np.zeros(len(cons.equal)),
                               {"solver": "none: no ⇒ edge", "norm": 0.0, "gap": 0.0})
    an = np.linalg.norm(cons.dominate, axis=1)
    if not an.all():
        _confirm_infeasible(cons, name)
        raise SolverError(f"nuclear Graph-SVM of {name}: a ⇒ row is zero, yet the LP finds the constraints "
                          "feasible")
    cn = np.linalg.norm(cons.equal, axis=1) if len(cons.equal) else np.zeros(0)
    keep = cn > 0
    Dn = cons.dominate / an[:, None]
    Cn = cons.equal[keep] / cn[keep, None] if keep.any() else np.zeros((0, d * d))
    c = float(an.min())
    V, z_eq, z_in, status = _solve_sdp(Cn, Dn, c / an, d)
    if status in (conic.INFEASIBLE, conic.INFEASIBLE_INACCURATE):
        w0 = _confirm_infeasible(cons, name)  # raises GraphSVMInfeasible when confirmed
        c = 1.0 / float(np.linalg.norm(w0))
        V, z_eq, z_in, status = _solve_sdp(Cn, Dn, c / an, d)
    if status == conic.OPTIMAL and V is not None:
        vn = float(np.linalg.norm(V))
        if vn > 0 and not (1 / SOLUTION_SCALE <= vn <= SOLUTION_SCALE):
            V2, z_eq2, z_in2, status2 = _solve_sdp(Cn, Dn, (c / vn) / an, d)
            if status2 == conic.OPTIMAL and V2 is not None:
                V, z_eq, z_in, c = V2, z_eq2, z_in2, c / vn
    if status != conic.OPTIMAL or V is None:
        raise SolverError(f"nuclear Graph-SVM of {name}: Clarabel status {status!r}, not optimal")
    # back to the original rows: W = V/c, λ_b = z_b/||r_b||, μ_e = z_e/||r_e|| (Y is unchanged)
    W = V / c
    lam = z_in / an
    mu = np.zeros(len(cons.equal))
    if keep.any():
        mu[keep] = z_eq / cn[keep]
    cert = certify(W, lam, mu, cons, name, rel_tol)
    cert["solver"] = "clarabel (PSD cone)"
    return NuclearSolution(W, cons.dominate @ W.ravel(), lam, mu, cert)


def angle_degrees(A: np.ndarray, B: np.ndarray) -> float | None:
    """The angle between two matrices in the Frobenius inner product, in degrees (None if one is 0)."""
    na, nb = float(np.linalg.norm(A)), float(np.linalg.norm(B))
    if na == 0 or nb == 0:
        return None
    return float(np.degrees(np.arccos(np.clip(np.sum(A * B) / (na * nb), -1.0, 1.0))))


def nuclear_summary(problem: Problem, name: str = "problem", frobenius=None) -> dict:
    """For ``analyze``: the certified ``W^nuc``, its nuclear norm, its certificate, and the angle (degrees)
    to the Frobenius ``W^svm`` (``frobenius``: an :class:`theory.li2024.svm.SVMSolution`, solved when omitted)
    with the two norms of each (each solution is optimal for its own norm)."""
    from theory.li2024.svm import graph_svm

    sol = nuclear_svm(problem, name=name)
    fro = frobenius if frobenius is not None else graph_svm(problem, name=name)
    return {"W": sol.W.tolist(), "norm": sol.norm, "certificate": sol.certificate,
            "angle_to_frobenius_degrees": angle_degrees(sol.W, fro.W),
            "frobenius_norms": {"nuclear": nuclear_norm(fro.W), "frobenius": float(np.linalg.norm(fro.W))},
            "nuclear_norms": {"nuclear": sol.norm, "frobenius": float(np.linalg.norm(sol.W))}}
