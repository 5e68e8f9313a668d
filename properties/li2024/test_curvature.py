"""The Hessian of the loss in the scores (:mod:`theory.li2024.curvature`), every loss and head of the suite.

Two checks that share no formula with the module: central differences of the gradient
(:func:`theory.li2024.losses.loss_and_grad_scores`, its own code path), with the difference's error bounded by
the step's truncation and rounding; and the known convexity of the log loss under Assumption 1 (Theorem 1's
setting), whose least eigenvalue on W's movement space must be nonnegative up to rounding, while the other
losses and heads must show negative curvature somewhere (else Grönwall's factor would be dead code).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from properties.helpers import describe, note_problem
from properties.judging import scaled
from strategies import trainable_problems
from strategies.domains import problems_for
from theory.li2024.claims import SECTION5
from theory.li2024.curvature import MovementSpace, query_hessians
from theory.li2024.losses import EPS, TokenData, loss_and_grad_scores

H_FD = 1e-5


def _scores(draw, K: int) -> np.ndarray:
    scale = draw(st.sampled_from([0.1, 1.0, 3.0]), label="score_scale")
    seed = draw(st.integers(0, 2**16), label="score_seed")
    return scale * np.random.default_rng(seed).normal(size=(K, K))


@st.composite
def problems_and_scores(draw, problems):
    p = draw(problems, label="problem")
    return p, _scores(draw, p.K)


def _queries(data):
    return np.array(sorted(set(data.queries.tolist())), dtype=np.int64)


@pytest.mark.theorem("Section 5")
@settings(max_examples=scaled(30), deadline=None)
@given(case=problems_and_scores(problems_for(SECTION5)))
def test_hessian_matches_central_differences_of_the_gradient(case):
    p, A = case
    note_problem(p)
    data = TokenData.from_problem(p)
    Q = _queries(data)
    Hq = query_hessians(A, data, Q)
    # The difference quotient's error: h^2/6 |third derivative| (the loss's derivatives in the scores are O(1) and
    # its third below 10 for every loss here at these scales) plus the gradient's rounding over 2h.
    _, G0 = loss_and_grad_scores(A, data)
    for kq, k in enumerate(Q):
        for j in range(p.K):
            Ap, Am = A.copy(), A.copy()
            Ap[j, k] += H_FD
            Am[j, k] -= H_FD
            fd = (loss_and_grad_scores(Ap, data)[1][:, k] - loss_and_grad_scores(Am, data)[1][:, k]) / (2 * H_FD)
            tol = 10 * H_FD**2 + 64 * EPS * (1 + np.abs(G0).max()) / H_FD
            err = float(np.abs(fd - Hq[kq][:, j]).max())
            assert err <= tol, f"∂G[:, {k}]/∂A[{j}, {k}]: |Δ| {err:.3g} > {tol:.3g} ({p.loss})\n{describe(p)}"
    event(f"{p.loss} loss, head biorthogonal={p.assumptions()['head_biorthogonal']}")


@pytest.mark.theorem("Theorem 1")
@settings(max_examples=scaled(30), deadline=None)
@given(case=problems_and_scores(trainable_problems().map(lambda dp: dp.problem)))
def test_the_log_loss_under_assumption_1_is_convex(case):
    p, A = case
    note_problem(p)
    data = TokenData.from_problem(p)
    Q = _queries(data)
    Hq = query_hessians(A, data, Q)
    lam = MovementSpace(p.gram, Q).least_eigenvalue(Hq)
    scale = float(np.abs(MovementSpace(p.gram, Q).hessian_y(Hq)).max())
    assert lam >= -64 * EPS * max(scale, 1.0), f"λ_min = {lam:.3g} on a convex loss\n{describe(p)}"


def test_the_other_losses_have_negative_curvature():
    """Across Section 5's domain some draw has ``λ_min < 0`` for each loss: the curvature term is live."""
    from hypothesis import find

    for loss in ("ce", "square", "exp", "lsq", "log"):
        def negative(case):
            p, A = case
            if p.loss != loss:
                return False
            data = TokenData.from_problem(p)
            Q = _queries(data)
            return MovementSpace(p.gram, Q).least_eigenvalue(query_hessians(A, data, Q)) < -1e-6

        find(problems_and_scores(problems_for(SECTION5)), negative,
             settings=settings(max_examples=500, database=None, derandomize=True))
