"""The conic programs stated by hand in Clarabel's form (:mod:`theory.core.conic`) are the programs of docs/theory.md.

The Graph-SVM and the regularization path no longer go through cvxpy (its compile cost ~30 ms per solve,
95% of the solving time); their programs are written in Clarabel's standard form directly.  An error in
that translation (a sign, a cone's argument order, a dropped constant) would give a wrong answer that the
certificates downstream reject, at best, or a different optimum they cannot see (a certificate checks
the program it is given).  Here each program is stated a second time the way a reader writes it, in
cvxpy, and both must have the same minimizer: unique, for the Graph-SVM (strictly convex) and for the
``log``-loss path under Assumptions 1-2 (convex, strictly in the effective coordinates).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from properties.helpers import describe
from properties.judging import not_judged, scaled
from strategies.problems import MAX_CONDITION, drawn_problems, problems, structures_of
from theory.li2024.finite import _Objective
from theory.li2024.losses import TokenData
from theory.li2024.regpath import _Conic, convex_case, effective_basis
from theory.li2024.svm import constraints, graph_svm

pytestmark = pytest.mark.theorem("Reference")

# Both answers come from interior-point iterations stopped at Clarabel's default tolerances (gaps 1e-8,
# absolute and relative), so they are compared by the objective, which those tolerances control: a
# minimizer in a flat direction can move ~sqrt(gap) (measured: 2.9e-5 relative in θ at R = 0.5), its
# objective only ~gap.  A translation error (a sign, a cone's argument order, a dropped term) changes the
# optimal value by O(1).
AGREE = 1e-6


def cvxpy_graph_svm(problem) -> np.ndarray:
    """``argmin ½||W||² s.t. <W, r_e> = 0 (≍), <W, r_b> >= 1 (⇒)``, docs/theory.md's Graph-SVM, in cvxpy."""
    import cvxpy as cp  # here, not at import: every worker imports every test module (conftest)

    cons = constraints(problem)
    w = cp.Variable(problem.d ** 2)
    cs = [cons.dominate @ w >= 1]
    if len(cons.equal):
        cs.append(cons.equal @ w == 0)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w)), cs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        prob.solve(solver=cp.CLARABEL)
    if prob.status != cp.OPTIMAL:
        not_judged(f"cvxpy's statement: status {prob.status}")
    return np.asarray(w.value).reshape(problem.d, problem.d)


@given(p=problems(structures=structures_of(["acyclic", "cyclic", "mixed"]),
                  embedding_kinds=st.sampled_from(["orthonormal", "gaussian"]), max_condition=10.0))
@settings(max_examples=scaled(15))
def test_graph_svm_program_is_the_cvxpy_program(p):
    """The certified ``W^svm`` (direct Clarabel QP on normalized rows, polished) is the minimizer of the
    Graph-SVM as a reader states it in cvxpy, to the solvers' accuracy."""
    sol = graph_svm(p, exact=False)
    if not sol.W.any():
        not_judged("no ⇒ edge: W^svm = 0 without a solver")
    ref = cvxpy_graph_svm(p)
    ours, theirs = float(np.sum(sol.W**2)), float(np.sum(ref**2))
    rel = abs(ours - theirs) / theirs
    note(f"||W^svm||² {ours:.12g}, cvxpy's {theirs:.12g}, relative difference {rel:.2e}")
    assert rel <= AGREE, (f"||W^svm||² = {ours:.12g} but the cvxpy statement's optimum is {theirs:.12g} "
                          f"(relative difference {rel:.2e})\n{describe(p)}")


def cvxpy_path_point(problem, basis, data, R: float) -> np.ndarray:
    """``argmin_{||θ|| <= R} Σ_i w_i (logsumexp_j(s_ij) - s_{i,y_i})`` in cvxpy (scores as in docs/theory.md)."""
    import cvxpy as cp

    E = problem.E
    theta = cp.Variable(basis.dim)
    terms = []
    for c, q, y, w in zip(data.counts, data.queries, data.labels, data.weights):
        idx = np.flatnonzero(c)
        s = np.einsum("ja,rab,b->jr", E[idx], basis.basis, E[q]) @ theta + np.log(c[idx])
        terms.append(w * (cp.log_sum_exp(s) - s[int(np.flatnonzero(idx == y)[0])]))
    prob = cp.Problem(cp.Minimize(cp.sum(cp.hstack(terms))), [cp.norm(theta, 2) <= R])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        prob.solve(solver=cp.CLARABEL)
    if prob.status != cp.OPTIMAL:
        not_judged(f"cvxpy's statement: status {prob.status}")
    return np.asarray(theta.value)


@given(dp=drawn_problems(structures=structures_of(["acyclic", "cyclic", "mixed"]), max_condition=10.0),
       R=st.sampled_from([0.5, 2.0, 8.0]))
@settings(max_examples=scaled(15))
def test_regularization_path_program_is_the_cvxpy_program(dp, R):
    """:class:`theory.li2024.regpath._Conic` (exponential and second-order cones by hand) has the minimizer of the
    norm-constrained ERM as a reader states it in cvxpy, at radii where both are well resolved."""
    p = dp.problem
    if not convex_case(p):
        not_judged("not the convex case (another loss or head): the path uses SLSQP, not this program")
    basis = effective_basis(p)
    if basis.dim == 0:
        not_judged("no effective coordinates")
    data = TokenData.from_problem(p)
    theta, status = _Conic(p, basis, data).solve(R, "problem", raise_on_inaccurate=False)
    if theta is None:
        not_judged(f"Clarabel status {status}")
    ref = cvxpy_path_point(p, basis, data, R)
    f = _Objective(p, basis, data)
    ours, theirs = f(theta)[0], f(ref)[0]
    note(f"R = {R}: loss {ours:.12g} at ||θ|| = {np.linalg.norm(theta):.9g}, cvxpy's {theirs:.12g}")
    assert np.linalg.norm(theta) <= R * (1 + AGREE), f"||θ|| = {np.linalg.norm(theta):.9g} > R = {R}"
    assert abs(ours - theirs) <= AGREE * max(1.0, abs(theirs)), (
        f"at R = {R} the path's program reaches loss {ours:.12g}, the cvxpy statement's {theirs:.12g}"
        f"\n{describe(p)}")
