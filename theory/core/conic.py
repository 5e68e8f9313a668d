"""Clarabel called directly on a conic program in its own standard form.

    minimize ½ xᵀPx + qᵀx  s.t.  Ax + s = b,  s ∈ K  (K a product of zero, nonnegative, second-order and
    exponential cones; the dual z ∈ K* with Px + q + Aᵀz = 0).

The Graph-SVM and the regularization path used to state their programs in cvxpy, which compiles the
problem on every call: measured on the Theorem 2 planted-target property, cvxpy's ``get_problem_data``
took 9.8 s of 11.5 s of solving (335 solves), Clarabel itself 0.2 s.  The programs are small and fixed in
shape, so they are written here in Clarabel's form once; nothing is trusted for that: every answer is
re-verified by the caller's own certificate (:func:`theory.li2024.svm.certify`, the regularization path's KKT
check), exactly as before.  Statuses are cvxpy's names (``"optimal"``, ``"infeasible"``, ``"user_limit"``,
...) with cvxpy's map from Clarabel's, so messages and branches read the same.
"""
from __future__ import annotations

import numpy as np
from scipy import sparse

OPTIMAL = "optimal"
OPTIMAL_INACCURATE = "optimal_inaccurate"
INFEASIBLE = "infeasible"
INFEASIBLE_INACCURATE = "infeasible_inaccurate"
SOLVER_ERROR = "solver_error"

# cvxpy's CLARABEL.STATUS_MAP (cvxpy/reductions/solvers/conic_solvers/clarabel_conif.py)
STATUS = {"Solved": OPTIMAL, "PrimalInfeasible": INFEASIBLE, "DualInfeasible": "unbounded",
          "AlmostSolved": OPTIMAL_INACCURATE, "AlmostPrimalInfeasible": INFEASIBLE_INACCURATE,
          "AlmostDualInfeasible": "unbounded_inaccurate", "MaxIterations": "user_limit",
          "MaxTime": "user_limit", "NumericalError": SOLVER_ERROR, "InsufficientProgress": SOLVER_ERROR,
          "Unsolved": SOLVER_ERROR}


def zero(n: int):
    import clarabel
    return clarabel.ZeroConeT(n)


def nonnegative(n: int):
    import clarabel
    return clarabel.NonnegativeConeT(n)


def second_order(n: int):
    import clarabel
    return clarabel.SecondOrderConeT(n)


def exponential():
    import clarabel
    return clarabel.ExponentialConeT()


def solve(P, q: np.ndarray, A, b: np.ndarray, cones: list) -> tuple[np.ndarray | None, np.ndarray | None, str]:
    """``(x, z, status)`` of the program above with Clarabel's default settings (cvxpy's too); ``x`` and
    ``z`` are None when Clarabel returns none.  ``P`` may be None (a linear objective)."""
    import clarabel

    n = len(q)
    P = sparse.csc_matrix((n, n)) if P is None else sparse.triu(sparse.csc_matrix(P)).tocsc()
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    sol = clarabel.DefaultSolver(P, np.asarray(q, dtype=float), sparse.csc_matrix(A),
                                 np.asarray(b, dtype=float), cones, settings).solve()
    status = STATUS.get(str(sol.status), SOLVER_ERROR)
    x = np.asarray(sol.x, dtype=float) if sol.x is not None else None
    z = np.asarray(sol.z, dtype=float) if sol.z is not None else None
    if x is not None and (len(x) != n or not np.all(np.isfinite(x))):
        x = None
    return x, z, status
