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


@st.composite
def flow_states(draw):
    """A Section 5 problem, a start ``W₁``, a state ``y = (B_Q, D)`` and a log time ``s``."""
    from theory.li2024.continuation import _Flow

    p = draw(problems_for(SECTION5), label="problem")
    seed = draw(st.integers(0, 2**16), label="state_seed")
    scale = draw(st.sampled_from([0.1, 0.5, 1.0]), label="state_scale")
    rng = np.random.default_rng(seed)
    flow = _Flow(p, scale * rng.normal(size=(p.d, p.d)), 0.5)
    y = np.concatenate([scale * rng.normal(size=flow.n), [rng.uniform(0.0, 1e-3)]])
    return p, flow, y, draw(st.floats(0.0, 25.0), label="s")


@pytest.mark.theorem("Section 5")
@settings(max_examples=scaled(30), deadline=None)
@given(state=flow_states())
def test_the_compiled_nonconvex_rhs_agrees_with_numpy(state):
    """:mod:`theory.li2024.curvature_kernel` against ``_Flow.rhs_numpy`` (the same formulas in numpy).  ``dB/ds``:
    each entry within ``floor_ulps(K) eps e^s S[j, k]``, ``S`` the natural scale of the gradient's entry (the
    sum of the absolute terms that make it up, :func:`theory.li2024.losses.loss_grad_and_floor`'s).  ``dD/ds``:
    within 1e-8 of itself (an eigenvalue and a norm of O(1) matrices at these states: measured agreement
    1e-15 relative).  A planted step off by 1e-6 in either part must be caught."""
    from theory.li2024.losses import _per_sample, floor_ulps

    p, flow, y, s = state
    note_problem(p)
    with np.errstate(all="ignore"):
        got, ref = flow.rhs(s, y), flow.rhs_numpy(s, y)
        A = flow.scores(y)
        _, _, sigma = _per_sample(A, flow.data, scale=True)
    if not np.all(np.isfinite(ref)):
        event("state outside the loss's domain (non-finite reference)")
        return
    S = (flow.data.weights[:, None] * sigma).T @ flow.data.query_onehot
    tol = floor_ulps(p.K) * EPS * np.exp(s) * S[:, flow.Q].ravel()
    n = flow.n
    assert np.all(np.abs(got[:n] - ref[:n]) <= tol), (np.max(np.abs(got[:n] - ref[:n]) / np.maximum(tol, 1e-300)),
                                                      describe(p))
    assert abs(got[n] - ref[n]) <= 1e-8 * abs(ref[n]), (got[n], ref[n], describe(p))
    planted = ref.copy()
    big = int(np.argmax(np.abs(ref[:n]) / np.maximum(tol, 1e-300)))
    planted[big] *= 1 + 1e-6
    planted[n] *= 1 + 1e-6
    resolved = abs(ref[big]) * 1e-6 > 2 * tol[big]
    event(f"step plant resolved={resolved}")
    if resolved:
        assert abs(planted[big] - got[big]) > tol[big]
    assert ref[n] == 0 or abs(planted[n] - got[n]) > 1e-8 * abs(ref[n])
