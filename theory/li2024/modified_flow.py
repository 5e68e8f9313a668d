"""GD's modified equation: the flow discrete GD follows to second order in the step (issue 37).

Why.  The continuation's bound on a non-convex loss (:mod:`theory.li2024.continuation`, Section 5) is Grönwall's,
``dD/dt = μ D + η ||H g||``: the local error of one GD step against the gradient flow, ``η² H g / 2`` to leading
order, integrated and amplified by ``e^{∫ μ}``.  Through a late change of selection (a saddle) that factor
reaches 10^3-10^5 and ``D`` jumps from 1e-4 to 3-70 in Frobenius units of ``W``, then stays there: every
attention within the bound then straddles the selection's thresholds and the draw is undecided at every later
budget (benchmarks/RESULTS.md, "Section 5 at the horizon").  Discrete GD itself did not leave the flow by
that much: on the ce draw of that table (``examples/section5_ambiguous_after_late_transit.json``), GD run to
2e8 steps was within 6.9e-5 of the flow where ``D`` = 69.  Its error is not an arbitrary vector that the
saddle amplifies: it is the leading local error ``-(η²/2) H g`` transported by the flow, which the saddle
turns into a time shift.  Integrating that leading term removes it from what Grönwall has to bound.

The modified equation.  Explicit Euler ``x_{k+1} = x_k + η f(x_k)`` is, to second order, the exact flow of
``f̃ = f - (η/2) (Df) f``: that flow moves ``x`` in time ``η`` to ``x + η f̃ + (η²/2) (Df̃) f̃ + O(η³)
= x + η f + O(η³)``, one Euler step.  With ``f = -g``, ``Df = -H``:

    dW/dt = f̃(W) = -g - (η/2) H g.

In the continuation's variables (``W = W₁ - E^T B E``, ``dB/dt = G`` for the flow) this is
``dB/dt = G + (η/2) dG`` with ``dG = H g`` in the scores (``dA = M G M``, ``dG[:, k] = P_k dA[:, k]``), since the
map from ``B`` to ``W`` is linear.  On that same ce draw GD was within 1.3e-9 of this flow at 2e8 steps (a solve at
rtol 1e-12; at the continuation's own tolerances 9.5e-6, its integration error and tolerance floor).

Its bound (a derivation, not a fit).  Let ``ψ`` be the modified flow from GD's state ``W₁`` at ``t₁ = η τ₁`` and
``ℓ̃_k = ψ(t_k + η) - ψ(t_k) + η g(ψ(t_k))`` the local error of one GD step from ``ψ(t_k)``.  With
``d/dv g(ψ(t_k + v)) = H ψ' = -(H g + (η/2) H² g)``:

    ℓ̃_k = ∫_0^η (η/2 - v) H g(t_k + v) dv + (η/2) ∫_0^η (η - v) H² g(t_k + v) dv.

The first weight integrates to zero, so ``H g(t_k + v)`` may be replaced by ``H g(t_k + v) - H g(t_k)``, whose
norm is at most ``∫_{t_k}^{t_k + η} ||d(H g)/dt||``; with ``∫_0^η |η/2 - v| dv = η²/4``,

    ||ℓ̃_k|| <= η² ∫_{t_k}^{t_k + η} [ ||d(H g)/dt|| / 4 + ||H² g|| / 2 ] dt,

and the error ``e_k = W_k - ψ(t_k)`` obeys ``e_{k+1} = (I - η H̄_k) e_k - ℓ̃_k`` as in the first-order case:

    dD̃/dt = μ D̃ + η² ( ||d(H g)/dt|| / 4 + ||H² g|| / 2 ),     ||W_GD(τ) - ψ(η τ)||_F <= D̃(τ),

first order in ``D̃`` as ``D`` is (``μ`` at the flow point), and forced by the right-hand side's own rounding
as ``D`` is (``theory.li2024.continuation._Flow.rounding_forcing``).  The forcing is ``η (H g)' / (4 H g)`` times the
first-order one: ``~1/(4τ)`` where the flow moves in log time, ``~η λ`` where the finite part relaxes at rate
``λ`` (``η λ <= 1``).  Measured on the five draws the first-order bound left undecided at 2e12: ``D̃`` = 1e-4 to
2e-3 where ``D`` = 2.6 to 69 (benchmarks/RESULTS.md).

``d(H g)/dt`` is the derivative of ``dG`` along the flow's own velocity, a central difference in ``B`` with a
step that moves the scores by ``FD_SCORE_STEP`` (its error, ``O(step²)`` relative, is far below the 1%
``D̃`` is needed to); ``H² g`` is ``H`` applied to ``H g`` in the scores (:func:`hessian_apply`).  Both are in
Frobenius units of ``W``.  The bound is measured against GD on drawn problems of Section 5's whole domain,
with planted defects of the correction it must catch (``properties/li2024/test_modified_flow.py``).
"""
from __future__ import annotations

import numpy as np

from theory.li2024.curvature import query_hessians
from theory.li2024.losses import loss_and_grad_scores
from theory.li2024.training import grad_norm_scores

__all__ = ["FD_SCORE_STEP", "CORRECTION", "hessian_apply", "modified_field", "forcing_terms", "forcing", "modified_rhs",
           "modified_jacobian"]

# The central difference for d(H g)/dt moves every score by at most this much: small against the O(1) score
# scale on which the softmax's third derivatives vary (truncation ~1e-12 relative), large against the rounding
# of dG (eps of its O(1) terms, divided by the step: ~1e-10 of them).
FD_SCORE_STEP = 1e-6
# The modified equation's coefficient, f̃ = f - CORRECTION η (Df) f: 1/2 for explicit Euler.  A planted defect
# of the property changes it (0: the plain flow under the second-order bound; -1/2: the wrong sign).
CORRECTION = 0.5


def hessian_apply(Hq: np.ndarray, X: np.ndarray, M: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """``H (E^T X E)`` as ``E^T Y E``: ``Y[:, k] = H_k (M X M)[:, k]`` for each query ``k`` in ``Q`` (zero elsewhere),
    ``H_k`` the Hessian of ``L`` in the score column ``k`` (:func:`theory.li2024.curvature.query_hessians`)."""
    dA = M @ X @ M
    Y = np.zeros_like(X)
    Y[:, Q] = np.einsum("kij,jk->ik", Hq, dA[:, Q])
    return Y


def _gradient_parts(flow, y: np.ndarray):
    """``(G, dG, Hq)`` at the state ``y``: the score gradient, ``H g`` in the scores and the query Hessians."""
    A = flow.scores(y)
    _, G = loss_and_grad_scores(A, flow.data)
    Hq = query_hessians(A, flow.data, flow.Q)
    return G, hessian_apply(Hq, G, flow.M, flow.Q), Hq


def modified_field(flow, y: np.ndarray, correction: float = CORRECTION):
    """``(dB/dt, G, dG, Hq)`` at the state ``y`` of the continuation's flow (``theory.li2024.continuation``):
    the modified equation's ``G + c η dG`` on the query columns (``c = correction``, 1/2), the score gradient
    ``G``, ``dG = H g`` in the scores and the query Hessians."""
    G, dG, Hq = _gradient_parts(flow, y)
    return G[:, flow.Q] + correction * flow.eta * dG[:, flow.Q], G, dG, Hq


def forcing_terms(flow, y: np.ndarray, F: np.ndarray, dG: np.ndarray, Hq: np.ndarray) -> tuple[float, float]:
    """``(||d(H g)/dt||, ||H² g||)`` at ``y`` in Frobenius units of ``W`` (module docstring), ``F`` the state's
    velocity ``dB/dt`` on the query columns, ``dG`` and ``Hq`` as :func:`modified_field` returns them."""
    M, n = flow.M, flow.n
    H2g = grad_norm_scores(hessian_apply(Hq, dG, M, flow.Q), M)
    v = np.zeros(n + 1)
    v[:n] = F.ravel()
    # The score velocity M (dB/dt) M; the step moves no score by more than FD_SCORE_STEP.
    speed = float(np.max(np.abs(M @ flow.full_B(v) @ M)))
    dHg = 0.0
    if speed > 0 and np.isfinite(speed):
        h = FD_SCORE_STEP / speed
        dHg = grad_norm_scores((_gradient_parts(flow, y + h * v)[1] - _gradient_parts(flow, y - h * v)[1]) / (2 * h), M)
    return dHg, H2g


def forcing(flow, y: np.ndarray, F: np.ndarray, dG: np.ndarray, Hq: np.ndarray) -> float:
    """``η² (||d(H g)/dt|| / 4 + ||H² g|| / 2)`` at ``y`` (module docstring; :func:`forcing_terms`)."""
    dHg, H2g = forcing_terms(flow, y, F, dG, Hq)
    return flow.eta ** 2 * (0.25 * dHg + 0.5 * H2g)


def modified_rhs(flow, s: float, y: np.ndarray, correction: float = CORRECTION) -> np.ndarray:
    """``d(B_Q, D̃)/ds`` in log time ``s = ln t``: ``e^s`` times the modified field and ``μ D̃ +`` the forcing."""
    t = np.exp(s)
    out = np.empty(flow.n + 1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # past the loss's domain: refused
        F, _, dG, Hq = modified_field(flow, y, correction)
        out[:flow.n] = flow.sign * t * F.ravel()
        out[flow.n] = t * (flow.mu(Hq) * y[flow.n] + forcing(flow, y, F, dG, Hq))
    return out


def modified_jacobian(flow, s: float, y: np.ndarray, correction: float = CORRECTION) -> np.ndarray:
    """The modified field's Jacobian in ``(B_Q, D̃)``, to first order: ``J - c η J²`` with ``J = ∂G_Q/∂B_Q``
    (the flow's; the neglected ``c η (DJ)[F]`` is of the size of ``g``, small where the solve is stiff), and
    ``μ`` on ``D̃``'s diagonal.  An implicit solver needs it only for its Newton iteration."""
    A = flow.scores(y)
    Hq = query_hessians(A, flow.data, flow.Q)
    J = -flow.space.block(Hq) @ flow.space.T
    out = np.zeros((flow.n + 1, flow.n + 1))
    out[:flow.n, :flow.n] = flow.sign * np.exp(s) * (J - correction * flow.eta * J @ J)
    out[flow.n, flow.n] = np.exp(s) * flow.mu(Hq)
    return out
