"""Graph-SVM (THEORY.md, "Graph-SVM"; Li et al. 2024, eq. Graph-SVM).

    W^svm = argmin ||W||_F  s.t.  <W, (e_i - e_j) e_k^T> = 0  for (i ≍ j) ∈ G^(k),
                                  <W, (e_i - e_j) e_k^T> >= 1  for (i ⇒ j) ∈ G^(k).

Solved in the d x d space of W with cvxpy and the Clarabel solver (objective ½||W||², a QP).  Every
solution is re-verified independently of the solver (:func:`certify`): equality residual, smallest
slack of the ``>= 1`` constraints, stationarity ``W = Σ λ_a A_a - Σ μ_b B_b`` with ``λ >= 0`` from the
solver's duals, and complementary slackness.  A non-optimal status or a failed check raises
:class:`SolverError` naming the problem.  Infeasibility (possible only with dependent embeddings) is
confirmed by an independent LP (scipy HiGHS) before :class:`GraphSVMInfeasible` is raised.
"""
from __future__ import annotations

from dataclasses import dataclass

import cvxpy as cp
import numpy as np
from scipy.optimize import linprog

from theory.graphs import TPG, token_priority_graphs
from theory.problem import Problem

TOL = 1e-9  # certificate tolerance, relative to the constraint scale (after the active-set polish)
RAW_TOL = 1e-6  # the interior-point answer itself, before the polish


class SolverError(RuntimeError):
    """A numerical answer that could not be certified."""


class GraphSVMInfeasible(SolverError):
    """The Graph-SVM constraints admit no W (certified by an independent LP)."""


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
    W: np.ndarray
    margins: np.ndarray  # (e_i - e_j)^T W e_k for each (i ⇒ j)
    duals: np.ndarray  # λ for the >= 1 constraints
    certificate: dict

    @property
    def norm(self) -> float:
        return float(np.linalg.norm(self.W))


def certify(w, lam, mu, cons: Constraints, name: str, rel_tol: float = TOL) -> dict:
    """Check a Graph-SVM primal-dual pair; raise :class:`SolverError` with the failing quantity."""
    scale = max(1.0, float(np.abs(cons.dominate).max(initial=0)), float(np.abs(cons.equal).max(initial=0)))
    tol = rel_tol * scale * max(1.0, float(np.linalg.norm(w)))
    eq_res = float(np.abs(cons.equal @ w).max(initial=0.0))
    slack = cons.dominate @ w - 1.0
    min_slack = float(slack.min(initial=np.inf))
    stat = w - cons.dominate.T @ lam + cons.equal.T @ mu
    stat_res = float(np.linalg.norm(stat))
    comp = float(np.abs(lam * slack).max(initial=0.0))
    cert = {"equality_residual": eq_res, "min_slack": min_slack, "stationarity": stat_res,
            "complementarity": comp, "min_dual": float(lam.min(initial=0.0)), "tol": tol}
    failures = [f"equality residual {eq_res:.2e}" if eq_res > tol else None,
                f"smallest slack {min_slack:.2e} < 0" if min_slack < -tol else None,
                f"stationarity residual {stat_res:.2e}" if stat_res > 10 * tol else None,
                f"complementary slackness {comp:.2e}" if comp > 10 * tol else None,
                f"negative dual {lam.min():.2e}" if lam.size and lam.min() < -tol else None]
    failures = [f for f in failures if f]
    if failures:
        raise SolverError(f"Graph-SVM of {name}: certificate failed: {'; '.join(failures)} (tol {tol:.1e})")
    return cert


def _confirm_infeasible(cons: Constraints, name: str) -> None:
    n = cons.dominate.shape[1]
    res = linprog(np.zeros(n), A_ub=-cons.dominate, b_ub=-np.ones(len(cons.dominate)),
                  A_eq=cons.equal if len(cons.equal) else None,
                  b_eq=np.zeros(len(cons.equal)) if len(cons.equal) else None,
                  bounds=(None, None), method="highs")
    if res.status != 2:
        raise SolverError(f"Graph-SVM of {name}: Clarabel reports infeasible but the LP check "
                          f"finds the constraints feasible (status {res.status}: {res.message})")
    raise GraphSVMInfeasible(f"Graph-SVM of {name}: infeasible (no W meets the >= 1 margins with the "
                             "equalities; the embeddings are dependent)")


def graph_svm(problem: Problem, graphs: dict[int, TPG] | None = None, reachability: bool = False,
              name: str = "problem") -> SVMSolution:
    """Solve and certify the Graph-SVM.  ``W^svm = 0`` is recognised without a solver when no ``⇒`` exists."""
    cons = constraints(problem, graphs, reachability)
    d = problem.d
    if len(cons.dominate) == 0:
        return SVMSolution(np.zeros((d, d)), np.zeros(0), np.zeros(0), {"solver": "none: no ⇒ edge"})
    w = cp.Variable(d * d)
    cs = [cons.dominate @ w >= 1]
    if len(cons.equal):
        cs.append(cons.equal @ w == 0)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w)), cs)
    try:
        prob.solve(solver=cp.CLARABEL)
    except cp.SolverError as exc:
        raise SolverError(f"Graph-SVM of {name}: Clarabel failed ({exc})") from None
    if prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        _confirm_infeasible(cons, name)
    if prob.status != cp.OPTIMAL:
        raise SolverError(f"Graph-SVM of {name}: Clarabel status {prob.status!r}, not optimal")
    wv = np.asarray(w.value)
    lam = np.asarray(cs[0].dual_value).ravel()
    mu = np.asarray(cs[1].dual_value).ravel() if len(cons.equal) else np.zeros(0)
    cert = certify(wv, lam, mu, cons, name, rel_tol=RAW_TOL)
    cert["solver"] = "clarabel"
    polished = _polish(wv, lam, cons)
    if polished is not None:
        wv, lam, mu = polished
        cert = certify(wv, lam, mu, cons, name)
        cert["solver"] = "clarabel + active-set polish"
    return SVMSolution(wv.reshape(d, d), cons.dominate @ wv, lam, cert)


def _polish(w, lam, cons: Constraints, max_iter: int = 20):
    """Interior-point answers are accurate only to about sqrt(duality gap).  Starting from the active set
    read off the solver's answer, a primal-dual active-set iteration (drop the most negative multiplier,
    add the most violated constraint) finds the exact minimum-norm point with one least-squares solve per
    step.  The result is kept only if it is a KKT point to 1e-9 (and is re-certified by the caller);
    otherwise the solver's own (certified) answer stands."""
    A, Aeq = cons.dominate, cons.equal
    tol = 1e-9 * max(1.0, float(np.linalg.norm(w)))
    active = (A @ w - 1.0 < 1e-6 * max(1.0, float(np.linalg.norm(w)))) | (lam > 1e-6 * max(1.0, lam.max()))
    for _ in range(max_iter):
        k = int(active.sum())
        M = np.vstack([A[active], Aeq])
        rhs = np.concatenate([np.ones(k), np.zeros(len(Aeq))])
        wp = np.linalg.lstsq(M, rhs, rcond=None)[0]
        y = np.linalg.lstsq(M.T, wp, rcond=None)[0]
        lam_p = np.zeros_like(lam)
        lam_p[active] = y[:k]
        slack = A @ wp - 1.0
        if np.abs(M @ wp - rhs).max(initial=0) > tol:
            return None
        worst_dual = int(np.argmin(np.where(active, lam_p, np.inf))) if k else -1
        worst_slack = int(np.argmin(np.where(active, np.inf, slack)))
        if k and lam_p[worst_dual] < -tol:
            active[worst_dual] = False
        elif not active[worst_slack] and slack[worst_slack] < -tol:
            active[worst_slack] = True
        else:
            return wp, lam_p, -y[k:]
    return None
