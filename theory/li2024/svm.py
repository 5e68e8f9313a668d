"""Graph-SVM (docs/theory.md, "Graph-SVM"; Li et al. 2024, eq. Graph-SVM).

    W^svm = argmin ||W||_F  s.t.  <W, (e_i - e_j) e_k^T> = 0  for (i ≍ j) ∈ G^(k),
                                  <W, (e_i - e_j) e_k^T> >= 1  for (i ⇒ j) ∈ G^(k).

Solved in the d x d space of W by Clarabel, called directly (:mod:`theory.core.conic`; objective ½||W||², a QP).  Every
solution is re-verified independently of the solver (:func:`certify`): equality residual, smallest
slack of the ``>= 1`` constraints, stationarity ``W = Σ λ_a A_a - Σ μ_b B_b`` with ``λ >= 0`` from the
solver's duals, and complementary slackness.  A non-optimal status or a failed check raises
:class:`SolverError` naming the problem.  Infeasibility (possible only with dependent embeddings) is
confirmed by an independent LP (scipy HiGHS) before :class:`GraphSVMInfeasible` is raised.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from theory.core import conic
from theory.core.exact import (DISTANCE_TOL, ExactCertificateError, certify_exact, certify_infeasible_exact,
                          relative_distance)
from theory.li2024.graphs import TPG, token_priority_graphs
from theory.core.problem import Problem

__all__ = ["GraphSVMInfeasible", "SVMSolution", "SolverError", "graph_svm"]

TOL = 1e-9  # certificate tolerance, relative to the constraint scale (after the active-set polish)
RAW_TOL = 1e-6  # the interior-point answer itself, before the polish


class SolverError(RuntimeError):
    """A numerical answer that could not be certified (its message names the problem and the check that failed).

    :class:`GraphSVMInfeasible` and :class:`theory.li2024.finite.NoFiniteMinimizer` are answers, not
    failures, and subclass it so that one ``except SolverError`` catches every "no certified number"."""


class GraphSVMInfeasible(SolverError):
    """The Graph-SVM constraints admit no ``W`` (possible only with dependent embeddings).

    Confirmed by an independent LP (scipy HiGHS) and, with ``exact``, by an exact Farkas certificate
    (attribute ``farkas``)."""


@dataclass(frozen=True)
class Constraints:
    """Rows are vec((e_i - e_j) e_k^T), i.e. the linear functionals W -> (e_i - e_j)^T W e_k."""

    equal: np.ndarray  # m_eq x d^2, from (i ≍ j)
    dominate: np.ndarray  # m_in x d^2, from (i ⇒ j)
    equal_pairs: list  # [(k, i, j)]
    dominate_pairs: list


def _row(E, k, i, j):
    return np.outer(E[i] - E[j], E[k]).ravel()


def constraints(problem: Problem, graphs: dict[int, TPG] | None = None, reachability: bool = False) -> Constraints:
    """Constraint matrices of the Graph-SVM; ``reachability=True`` uses ``i ⇒* j`` instead of edges."""
    graphs = graphs or token_priority_graphs(problem)
    E, d = problem.E, problem.d
    eq, ineq = [], []
    for k, g in graphs.items():
        # Chaining each SCC to its first member spans the same equalities as all pairs.
        eq += [(k, comp[0], t) for comp in g.sccs for t in comp[1:]]
        ineq += [(k, i, j) for i, j in (g.dominates_by_reachability() if reachability else g.dominates())]
    A_eq = np.array([_row(E, *p) for p in eq]).reshape(len(eq), d * d)
    A_in = np.array([_row(E, *p) for p in ineq]).reshape(len(ineq), d * d)
    return Constraints(A_eq, A_in, eq, ineq)


@dataclass(frozen=True)
class SVMSolution:
    """A certified Graph-SVM solution (:func:`graph_svm`).

    Attributes
    ----------
    W : numpy.ndarray
        ``W^svm``, d x d (zero when no ``⇒`` edge exists).
    margins : numpy.ndarray
        ``(e_i - e_j)^T W e_k`` for each ``(i ⇒ j)`` edge of each graph ``G^(k)`` (>= 1).
    duals : numpy.ndarray
        The multipliers ``λ >= 0`` of the ``>= 1`` constraints.
    certificate : dict
        What was checked: ``certificate`` is ``"exact"`` (rational arithmetic) or ``"float"``, with the
        residuals of feasibility, stationarity and complementary slackness.
    """

    W: np.ndarray
    margins: np.ndarray  # (e_i - e_j)^T W e_k for each (i ⇒ j)
    duals: np.ndarray  # λ for the >= 1 constraints
    certificate: dict

    @property
    def norm(self) -> float:
        """``||W^svm||_F``."""
        return float(np.linalg.norm(self.W))


def _relative(w, lam, mu, cons: Constraints):
    """The scale-free quantities of a primal-dual pair (see :func:`certify`)."""
    wn = float(np.linalg.norm(w))
    an = np.linalg.norm(cons.dominate, axis=1)
    cn = np.linalg.norm(cons.equal, axis=1) if len(cons.equal) else np.zeros(0)
    wn_ = wn if wn > 0 else 1.0
    eq_rel = np.abs(cons.equal @ w) / np.maximum(cn * wn_, np.finfo(float).tiny) if len(cons.equal) else np.zeros(0)
    slack = cons.dominate @ w - 1.0
    slack_rel = slack / np.maximum(an * wn_, np.finfo(float).tiny)
    size = wn + float(np.abs(lam) @ an) + (float(np.abs(mu) @ cn) if len(mu) else 0.0)
    size = size if size > 0 else 1.0
    nu = lam * an / size  # each multiplier's share of the stationarity sum
    return eq_rel, slack, slack_rel, nu, size


def certify(w, lam, mu, cons: Constraints, name: str, rel_tol: float = TOL) -> dict:
    """Check a Graph-SVM primal-dual pair; raise :class:`SolverError` with the failing quantity.

    Every check is invariant to rescaling the problem (``E -> αE`` sends rows to ``α² r``, ``W`` to
    ``W/α²`` and multipliers to ``λ/α⁴``), so an ill-conditioned problem with ``||W^svm|| = 7e3`` and
    multipliers ``2e7`` is judged exactly like a well-scaled one:

    * equality residual ``|r_e . W| / (||r_e|| ||W||)`` (the relative accuracy of a computed dot product);
    * feasibility ``(r_b . W - 1) / (||r_b|| ||W||) >= -tol``;
    * stationarity ``||W - Σ λ_b r_b + Σ μ_e r_e|| / (||W|| + Σ |λ_b| ||r_b|| + Σ |μ_e| ||r_e||)``;
    * complementarity ``max_b ν_b |σ_b|`` with ``ν_b = λ_b ||r_b|| / (that same sum)`` (the multiplier's
      share, in [0, 1]) and ``σ_b`` the relative slack above;
    * dual feasibility ``ν_b >= -tol``.
    """
    eq_rel, slack, slack_rel, nu, size = _relative(w, lam, mu, cons)
    tol = rel_tol
    eq_res = float(eq_rel.max(initial=0.0))
    min_slack = float(slack_rel.min(initial=np.inf))
    stat = w - cons.dominate.T @ lam + (cons.equal.T @ mu if len(cons.equal) else 0.0)
    stat_res = float(np.linalg.norm(stat)) / size
    comp = float(np.abs(nu * slack_rel).max(initial=0.0))
    min_dual = float(nu.min(initial=0.0))
    cert = {"equality_residual": eq_res, "min_slack": min_slack, "stationarity": stat_res,
            "complementarity": comp, "min_dual": min_dual, "tol": tol, "relative": True}
    failures = [f"equality residual {eq_res:.2e}" if eq_res > tol else None,
                f"smallest slack {min_slack:.2e} < 0" if min_slack < -tol else None,
                f"stationarity residual {stat_res:.2e}" if stat_res > tol else None,
                f"complementary slackness {comp:.2e}" if comp > tol else None,
                f"negative dual {min_dual:.2e}" if min_dual < -tol else None]
    failures = [f for f in failures if f]
    if failures:
        raise SolverError(f"Graph-SVM of {name}: certificate failed: {'; '.join(failures)} "
                          f"(relative tol {tol:.1e})")
    return cert


def _confirm_infeasible(cons: Constraints, name: str, E: np.ndarray | None = None) -> np.ndarray:
    """Raise :class:`GraphSVMInfeasible` if an independent LP (and, with ``E``, an exact Farkas
    certificate) confirms infeasibility; otherwise return the LP's feasible point, so that the caller can
    solve the QP by the active-set iteration instead of trusting a wrong 'infeasible'."""
    n = cons.dominate.shape[1]
    # rows scaled to unit norm (zero rows kept as they are) and margins scaled alike: the LP's verdict
    # must not depend on the scale of E
    an = np.linalg.norm(cons.dominate, axis=1)
    s = float(an.max()) if an.max() > 0 else 1.0
    an_ = np.where(an > 0, an, s)
    cn = np.linalg.norm(cons.equal, axis=1) if len(cons.equal) else np.zeros(0)
    res = linprog(np.zeros(n), A_ub=-cons.dominate / an_[:, None], b_ub=-s / an_,
                  A_eq=cons.equal / np.where(cn > 0, cn, 1.0)[:, None] if len(cons.equal) else None,
                  b_eq=np.zeros(len(cons.equal)) if len(cons.equal) else None,
                  bounds=(None, None), method="highs")
    if res.status == 0:
        return np.asarray(res.x, dtype=float) / s
    if res.status != 2:
        raise SolverError(f"Graph-SVM of {name}: Clarabel reports infeasible and the LP check could not "
                          f"decide (status {res.status}: {res.message})")
    farkas = None
    if E is not None:
        try:
            farkas = certify_infeasible_exact(E, cons.equal_pairs, cons.dominate_pairs, name)
        except ExactCertificateError as exc:
            raise SolverError(str(exc)) from None
    err = GraphSVMInfeasible(f"Graph-SVM of {name}: infeasible (no W meets the >= 1 margins with the "
                             "equalities; the embeddings are dependent"
                             + ("; exact Farkas certificate)" if farkas is not None else ")"))
    err.farkas = farkas
    raise err


def graph_svm(problem: Problem, graphs: dict[int, TPG] | None = None, reachability: bool = False,
              name: str = "problem", exact: bool = True) -> SVMSolution:
    """Solve and certify the Graph-SVM: the min-norm ``W`` separating each graph's priority orders.

    ``W^svm = 0`` is recognised without a solver when no ``⇒`` exists.  With ``exact`` (the default) the
    answer is also certified in rational arithmetic from the float64 data (:mod:`theory.core.exact`):
    ``certificate["certificate"] == "exact"``, with the float answer's relative distance from the exact
    one; infeasibility carries an exact Farkas certificate.

    Parameters
    ----------
    problem : Problem
        The problem (:class:`theory.core.problem.Problem`).
    graphs : dict, optional
        Its token-priority graphs by query (:func:`theory.li2024.graphs.token_priority_graphs`), computed
        when omitted.
    reachability : bool, default False
        Use ``i ⇒* j`` (reachability) instead of the graphs' edges as the ``>= 1`` constraints.
    name : str, default "problem"
        Named in error messages.
    exact : bool, default True
        Also certify the answer in exact rational arithmetic.

    Returns
    -------
    SVMSolution

    Raises
    ------
    GraphSVMInfeasible
        When no ``W`` meets the constraints (certified).
    SolverError
        When the solver's answer fails its certificate.

    Examples
    --------
    >>> from theory.core.problem import Problem
    >>> sol = graph_svm(Problem.load("examples/scc_above_token.json"))
    >>> sol.certificate["certificate"], round(sol.norm, 6), bool(sol.margins.min() >= 1 - 1e-9)
    ('exact', 1.0, True)
    """
    cons = constraints(problem, graphs, reachability)
    d = problem.d
    if len(cons.dominate) == 0:
        return SVMSolution(np.zeros((d, d)), np.zeros(0), np.zeros(0),
                           {"solver": "none: no ⇒ edge", "certificate": "exact" if exact else "float"})
    an = np.linalg.norm(cons.dominate, axis=1)
    if not an.all():  # a ⇒ row (e_i - e_j) e_k^T = 0 (e_i = e_j or e_k = 0): 0 >= 1 is infeasible
        _confirm_infeasible(cons, name, problem.E if exact else None)
        raise SolverError(f"Graph-SVM of {name}: a ⇒ constraint row is zero, yet the LP check finds the "
                          "constraints feasible")
    # The solver sees a scale-free problem with a solution of norm ~1: unit rows u_b = a_b/||a_b||, margins
    # c/||a_b||, variable x = c w (same minimizer: ||w||² = ||x||²/c²); see :func:`_clarabel_scaled` for c.
    cn = np.linalg.norm(cons.equal, axis=1) if len(cons.equal) else np.zeros(0)
    keep = cn > 0  # a zero equality row is 0 = 0
    Dn = cons.dominate / an[:, None]
    Cn = cons.equal[keep] / cn[keep, None] if keep.any() else np.zeros((0, d * d))
    m_eq = len(Cn)
    x, z, status, c, w0 = _clarabel_scaled(Cn, Dn, an, cons, name, problem.E if exact else None)
    if status != conic.OPTIMAL or x is None or z is None:
        # Clarabel stopped short of optimality (stress: 'user_limit' even at 2000 iterations on a 9-variable
        # problem with cond(E) = 23) or wrongly reported infeasibility.  The primal-dual active-set
        # iteration solves the same QP exactly from its last iterate (or from every ⇒ row active); only a
        # certified KKT point is accepted.
        if w0 is None:
            w0 = x / c if x is not None else np.zeros(d * d)
        polished = _polish(w0, np.zeros(len(cons.dominate)), cons, max_iter=50)
        solver = f"active set (Clarabel {status!r})"
        if polished is None and exact:
            polished = _exact_active_set(problem.E, cons, w0, name)
            solver = f"exact active set (Clarabel {status!r})"
        if polished is None:
            raise SolverError(f"Graph-SVM of {name}: Clarabel status {status!r}, not optimal, and the "
                              "active-set iteration found no KKT point")
        wv, lam, mu = polished
        cert = certify(wv, lam, mu, cons, name)
        cert["solver"] = solver
    else:
        # back to the original rows: w = x/c, λ_b = ẑ_b/(c ||a_b||), μ_e = ẑ_e/(c ||c_e||)
        wv = x / c
        lam = z[m_eq:] / (c * an)
        mu = np.zeros(len(cons.equal))
        if keep.any():
            mu[keep] = z[:m_eq] / (c * cn[keep])
        cert = certify(wv, lam, mu, cons, name, rel_tol=RAW_TOL)
        cert["solver"] = "clarabel"
        polished = _polish(wv, lam, cons)
        if polished is not None:
            wv, lam, mu = polished
            cert = certify(wv, lam, mu, cons, name)
            cert["solver"] = "clarabel + active-set polish"
    cert["certificate"] = "float"
    if exact:
        seed = lam if polished is not None else np.where(_relative(wv, lam, mu, cons)[3] > 1e-6, lam, 0.0)
        try:
            ex = certify_exact(problem.E, cons.equal_pairs, cons.dominate_pairs, wv.reshape(d, d), seed, name,
                               max_distance=np.inf)
        except ExactCertificateError as exc:
            raise SolverError(str(exc)) from None
        # The answer is the exact W^svm rounded to float64.  The float solve is only as accurate as its KKT
        # system is conditioned: stress seed 3711556386 (two embeddings 0.003 apart) left it 1.27e-10 from
        # the exact answer, and token scores E W E^T, O(1) while ||W|| is large, lost 1.5e-6 to the
        # cancellation.  The solver's own distance is kept as ``solver_distance``.
        rounded = ex.rounded()
        distance = relative_distance(ex.W, rounded)
        if distance > DISTANCE_TOL:
            raise SolverError(f"Graph-SVM of {name}: the exact answer rounded to float64 is {distance:.2e} "
                              f"(relative) from it (allowed {DISTANCE_TOL:g})")
        wv = rounded.ravel()
        lam, _ = _exact_multipliers(ex, cons)
        cert.update(certificate="exact", exact_distance=distance, solver_distance=ex.distance,
                    exact_min_margin=float(ex.min_margin), exact_active=len(ex.active),
                    exact_iterations=ex.iterations)
    return SVMSolution(wv.reshape(d, d), cons.dominate @ wv, lam, cert)


# Accept Clarabel's answer when its solution norm is within this factor of 1 (the scale it is solved at).
SOLUTION_SCALE = 10.0


def _clarabel_scaled(Cn, Dn, an, cons: Constraints, name: str, E):
    """Clarabel on ``min ½||x||²  s.t.  Cn x = 0,  Dn x >= c/||a_b||`` (unit rows; ``x = c w``), with ``c`` chosen
    so that ``||x*|| = c ||W^svm||`` is about 1.  Returns ``(x, z, status, c, w0)``; ``w0`` is the LP's feasible
    point when one was computed (else None).  Raises :class:`GraphSVMInfeasible` when Clarabel's
    'infeasible' is confirmed by the independent LP and the exact Farkas certificate.

    Why the scale matters.  Clarabel (0.11, ``info.rs``) declares primal infeasibility once ``κ/τ > 1e9`` and
    ``||Aᵀz|| / max(1, ||z||) < tol_infeas_rel |bᵀz|`` (1e-8): a test that is not homogeneous in ``z``.  This QP's
    optimal pair has ``Aᵀz* = -x*`` and ``bᵀz* = -||x*||²``, so the optimum itself passes the test as soon as
    ``||x*|| max(1, ||z*||) > 1e8``, and only the ``κ/τ`` guard stands between a program with a large solution
    and an 'infeasible'.  Two embeddings at cosine 1 - 5e-6 (cond(E) = 633, rows ``(e_i - e_j) e_k^T`` of norm
    3e-3 next to 1.4, ``||W^svm|| = 1.0e5``; examples/svm_near_collinear.json): the former scaling
    ``x = max_b ||a_b|| w`` gave ``||x*|| = 1.4e5``, ``||z*|| = 6.4e7``, the test's ratio at the optimum 1.1e-13,
    and Clarabel said 'infeasible' after 5 iterations.  At ``||x*|| = 1`` (``||z*|| = 454``) the ratio at the
    optimum is 2.2e-3 and Clarabel solves the same program in 20 iterations.  Of 4000 drawn problems with a
    pair of unit rows at cosine 1 - 10^-k (K = d = 4, k in 3..6.5) 4.9% came back 'infeasible' and 8 then
    failed outright (neither active-set iteration of :func:`graph_svm` settled); at k in 6..10 (``||W^svm||``
    up to 1e10), 15% and 4 of 1000.

    The scale ``c``: every ``⇒`` row alone needs ``||w|| >= 1/||a_b||``, so ``c = min_b ||a_b||`` gives
    ``||x*|| >= 1`` without a solve; an answer with ``||x|| <= SOLUTION_SCALE`` is kept.  A larger one is solved
    again at ``c / ||x||`` (the program is homogeneous in ``c``: the solution scales by exactly that factor).
    If Clarabel says 'infeasible', the scale-free LP decides; its feasible point ``w_f`` bounds ``||W^svm||``
    from above, so ``c = 1/||w_f||`` gives ``||x*|| <= 1``, and a small answer is rescaled the same way.
    Every choice is a ratio of the data's own norms, so ``E -> αE`` leaves the program Clarabel sees unchanged
    (unnormalized, ``E -> 2^-12 E`` -- rows 6e-8, ``||W|| = 2e7`` -- was called infeasible too).  Measured after
    the change: none of the same 5000 problems came back 'infeasible' or failed (4 at k in 6..10 came back
    'optimal_inaccurate' and were solved by the active set); an 'infeasible' that does come (none seen) is
    still met by the LP and the active-set iterations of :func:`graph_svm`.
    """
    d2 = Dn.shape[1]
    m_eq = len(Cn)
    P = sparse.identity(d2, format="csc")
    A = sparse.vstack([sparse.csc_matrix(Cn), sparse.csc_matrix(-Dn)]).tocsc()
    cones = ([conic.zero(m_eq)] if m_eq else []) + [conic.nonnegative(len(Dn))]

    def solve(c):
        return conic.solve(P, np.zeros(d2), A, np.concatenate([np.zeros(m_eq), -c / an]), cones)

    c = float(an.min())
    x, z, status = solve(c)
    w0 = None
    if status in (conic.INFEASIBLE, conic.INFEASIBLE_INACCURATE):
        w0 = _confirm_infeasible(cons, name, E)  # raises unless the LP finds a feasible point
        c = 1.0 / float(np.linalg.norm(w0))
        x, z, status = solve(c)
    for _ in range(2):
        if status != conic.OPTIMAL or x is None or z is None:
            break
        xn = float(np.linalg.norm(x))
        if 1.0 / SOLUTION_SCALE <= xn <= SOLUTION_SCALE or xn == 0.0:
            break
        x2, z2, status2 = solve(c / xn)
        if status2 != conic.OPTIMAL or x2 is None or z2 is None:
            break  # keep the optimal answer at the former scale; the certificate judges it
        x, z, status, c = x2, z2, status2, c / xn
    return x, z, status, c, w0


def _exact_multipliers(ex, cons: Constraints) -> tuple[np.ndarray, np.ndarray]:
    """(λ on the ⇒ rows, μ on the equality rows) of an exact answer, in :func:`certify`'s signs."""
    lam, mu = np.zeros(len(cons.dominate)), np.zeros(len(cons.equal))
    for r, y in ex.multipliers.items():
        v = float(Fraction(int(y.p), int(y.q)))
        if r >= len(cons.equal):
            lam[r - len(cons.equal)] = v
        else:
            mu[r] = -v  # W = Σ y r over both kinds; certify writes W = Σ λ r_b - Σ μ r_e
    return lam, mu


def _exact_active_set(E, cons: Constraints, w0, name: str):
    """The exact active-set loop of :func:`theory.core.exact.certify_exact` started from every ``⇒`` row, for when
    the float active-set iteration finds no KKT point (stress seed 3711556386: Clarabel called a feasible
    problem with two embeddings 0.003 apart infeasible, and the float iteration from the LP's feasible
    point stalled on the ill-conditioned rows).  ``(w, λ, μ)`` from the exact answer rounded, or None."""
    if not len(cons.dominate):
        return None
    d = E.shape[1]
    try:
        ex = certify_exact(E, cons.equal_pairs, cons.dominate_pairs, np.asarray(w0, float).reshape(d, d),
                           np.ones(len(cons.dominate)), name, max_iter=50 + 4 * len(cons.dominate),
                           max_distance=np.inf)
    except ExactCertificateError:
        return None
    lam, mu = _exact_multipliers(ex, cons)
    return ex.rounded().ravel(), lam, mu


def _polish(w, lam, cons: Constraints, max_iter: int = 20):
    """Interior-point answers are accurate only to about sqrt(duality gap).  Starting from the active set
    read off the solver's answer, a primal-dual active-set iteration (drop the most negative multiplier,
    add the most violated constraint) finds the exact minimum-norm point with one least-squares solve per
    step.  The result is kept only if it is a KKT point to 1e-9 (and is re-certified by the caller);
    otherwise the solver's own (certified) answer stands."""
    A, Aeq = cons.dominate, cons.equal
    _, _, slack_rel, nu, _ = _relative(w, lam, np.zeros(len(Aeq)), cons)
    active = (slack_rel < 1e-6) | (nu > 1e-6)
    an = np.linalg.norm(A, axis=1)
    rn = np.concatenate([an, np.linalg.norm(Aeq, axis=1) if len(Aeq) else np.zeros(0)])
    for _ in range(max_iter):
        k = int(active.sum())
        M = np.vstack([A[active], Aeq])
        rhs = np.concatenate([np.ones(k), np.zeros(len(Aeq))])
        wp = np.linalg.lstsq(M, rhs, rcond=None)[0]
        y = np.linalg.lstsq(M.T, wp, rcond=None)[0]
        lam_p = np.zeros_like(lam)
        lam_p[active] = y[:k]
        wn = max(float(np.linalg.norm(wp)), np.finfo(float).tiny)
        tol = 1e-9
        # relative: residuals over ||row|| ||W||, multipliers as their share of the stationarity sum
        slack = (A @ wp - 1.0) / np.maximum(an * wn, np.finfo(float).tiny)
        Mn = np.concatenate([rn[:len(A)][active], rn[len(A):]])
        if (np.abs(M @ wp - rhs) / np.maximum(Mn * wn, np.finfo(float).tiny)).max(initial=0) > tol:
            return None
        share = lam_p * an / (wn + float(np.abs(lam_p) @ an))
        worst_dual = int(np.argmin(np.where(active, share, np.inf))) if k else -1
        worst_slack = int(np.argmin(np.where(active, np.inf, slack)))
        if k and share[worst_dual] < -tol:
            active[worst_dual] = False
        elif not active[worst_slack] and slack[worst_slack] < -tol:
            active[worst_slack] = True
        else:
            return wp, lam_p, -y[k:]
    return None
