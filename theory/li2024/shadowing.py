"""GD's distance from the gradient flow's *path*: Grönwall's bound on the path's normal space and a time shift.

Why.  The continuation's bound ``D`` (:mod:`theory.li2024.continuation`) compares GD's iterate with the flow at
the same time, and grows at Grönwall's rate ``μ = max(0, -λ_min(∇²L))``.  Where GD's selection changes late,
the flow leaves one pseudo-TPG's basin along a direction of negative curvature, and ``D`` grows by the whole
factor of that escape: measured on ``examples/section5_ambiguous_transit.json`` (a tied-head ``ce`` draw of a
fresh stress seed), ``D`` goes from 5.8e-4 at 2e10 steps-equivalent to 3.9e3 at 2e11 through the change, and
every later budget is undecided (an ambiguous token within the bound).  But the escape runs *along* the flow:
``t μ`` peaks at 180 there while the least curvature on the directions normal to the flow's velocity stays
at or below 0 (``t μ⊥`` < 1e-13).  A perturbation along the velocity is a delay, not a departure: GD follows
the same path a little earlier or later.

The bound.  With ``v = -∇L`` at the flow point and ``J = -∇²L`` (symmetric), compare GD's state ``x`` with the
flow at a shifted time, ``e = x - φ(θ)``, ``θ`` chosen so that ``e ⊥ v(θ)`` (the nearest point of the path).
For GD written as ``x' = -∇L(x) + ℓ`` (``ℓ`` its local error, the same forcing ``η ||H g||`` as ``D``'s)::

    e' = J e - v (θ' - 1) + ℓ + O(||∇³L|| ||e||²),
    d/dt ||e||²/2 = <e, J e> + <e, ℓ> <= μ⊥ ||e||² + ||e|| ||ℓ||      (<e, v> = 0),

so ``D⊥`` with ``dD⊥/dt = μ⊥ D⊥ + η ||H g||``, ``μ⊥ = max(0, -λ_min(∇²L on v⊥))``, bounds ``||e||`` to first order
(as ``D`` is, with ``μ`` at the flow point).  Keeping ``<v, e> = 0`` fixes the shift
``θ' - 1 = (2 <J v, e> + <v, ℓ>) / (||v||² - <J v, e>)``, so ``σ = θ - t`` obeys
``|σ'| <= (2 ||J v|| D⊥ + ||v|| ||ℓ||) / (||v||² - ||J v|| D⊥)`` while the denominator is positive (past that the
nearest point is not defined and the bound is not available).  GD's state is then within ``D⊥`` of ``φ(t + σ)``,
which is within ``|σ| V`` of ``φ(t)``, ``V`` the flow's largest speed ``||v||`` over ``[t - |σ|, t + |σ|]``::

    ||W_GD(t) - φ(t)|| <= D⊥(t) + |σ(t)| V(t).

Where the flow slows down (it settles, ``||v||`` falls faster than ``D⊥`` does) the shift's rate blows up and
the path bound is lost.  But a bound at any time restarts Grönwall's: from ``C(t₀)`` at ``t₀``, the distance obeys
``dC/dt = μ C + η ||H g||`` with the full ``μ`` after it.  So the bound ``C`` carried along the accepted states is
the smaller of the path bound and Grönwall's step from ``C`` at the state before (measured on
``examples/section5_converging_past_horizon.json``: the shift is lost past 2e8 steps-equivalent, where ``μ`` is 0,
and ``C`` is 0.33 at 2e12 against ``D`` = 57.7).  Both ``C`` and ``D`` bound the same distance, so the smaller
holds: the continuation reports ``min(D, C)`` (``ContinuationCheckpoint.gd_deviation_bound``; both are kept, as
``gronwall_bound`` and ``shadowing_bound``).  Where the flow is not escaping, ``μ⊥ ~ μ`` and the shift's term makes
the path bound the larger; through an escape it is the smaller by orders of magnitude.

The quadrature.  ``D⊥`` and ``σ`` are integrated in ``s = ln t`` over the accepted states of the continuation's
own solve (its dense output's nodes: a step through a fast escape is short there), by the trapezoidal rule of
:func:`theory.li2024.continuation._bound`, with the difference against the same rule over pairs of steps added
(an estimate of the quadrature's error, as there); an output point takes the value at the first node at or
after it (each node's ``C`` bounds the interval that ends there: ``D⊥`` and ``σ`` do not fall, and Grönwall's step
covers the interval).  The rates are the numpy curvature of
:mod:`theory.li2024.curvature` at each node: ``S = (T Z)^T blockdiag(H_k) (T Z)`` is ``∇²L`` in coordinates where
``||ΔW||_F`` is the Euclidean norm, and ``v = (T Z)^T g`` the gradient there.  First order only: the modified
equation's field (order 2) has another Jacobian.

Through an escape from a saddle.  Where the flow approaches a stationary point and then leaves it, the unstable
direction is normal to the velocity during the approach, and ``μ⊥`` takes the escape's whole rate.  A third bound
keeps ``e`` normal to that direction instead, marched in the flow's own time: :mod:`theory.li2024.escape`.  It is
entered from ``C`` and its bound is one more candidate of the smallest; ``C`` restarts Grönwall's from it.

Measured against discrete GD through a change of selection (``examples/section5_counterexample.json``, from
GD's state at 2e5 to 1e7 steps, ``properties/li2024/test_shadowing.py``): GD stays within 0.40 of ``C`` at every
checkpoint, 0.056 in the middle of the change (0.051 without the escape's march), where it is 1.4e-4 from the
flow; ``C`` is 1.2e-3 after the change against ``D`` = 4.5e-3.
"""
from __future__ import annotations

import numpy as np

from theory.li2024 import escape
from theory.li2024.curvature import query_hessians
from theory.li2024.losses import loss_and_grad_scores

__all__ = ["normal_curvature", "node_rates", "shadow"]


def normal_curvature(S: np.ndarray, v: np.ndarray) -> float:
    """``μ⊥ = max(0, -λ_min(S))`` on the complement of ``v`` (``S`` symmetric): the Householder reflection that
    maps ``v`` to the first axis leaves ``S``'s restriction to ``v⊥`` as the trailing block."""
    n = len(v)
    nv = float(np.linalg.norm(v))
    if n == 1 or not nv > 0:
        return max(0.0, -float(np.linalg.eigvalsh(S)[0]))
    u = v / nv
    w = u.copy()
    w[0] += 1.0 if u[0] >= 0 else -1.0
    w /= np.linalg.norm(w)
    R = S - 2.0 * np.outer(w, w @ S)
    R = R - 2.0 * np.outer(R @ w, w)
    return max(0.0, -float(np.linalg.eigvalsh(0.5 * (R[1:, 1:] + R[1:, 1:].T))[0]))


def node_rates(flow, s: float, y: np.ndarray) -> tuple[tuple[float, ...], np.ndarray]:
    """``((t μ⊥, ||v||, ||J v||, β, t μ, t μ₂, |<u, v>|, ||P_u⊥ v||), u)`` at the state ``y`` of ``flow`` (a first-order
    :class:`theory.li2024.continuation._Flow`) at ``s = ln t``: ``β`` is ``dD/ds``'s forcing (``t η ||H g||`` and
    the right-hand side's rounding) and ``t μ`` Grönwall's full rate, both
    :meth:`~theory.li2024.continuation._Flow.bound_rates`'; ``u``, ``μ₂`` and ``v``'s parts as
    :func:`theory.li2024.escape.unstable_direction` gives them (the escape's march); ``v`` and ``J v`` per unit of ``t``."""
    A = flow.scores(y)
    Hq = query_hessians(A, flow.data, flow.Q)
    _, G = loss_and_grad_scores(A, flow.data)
    K, nq = Hq.shape[1], Hq.shape[0]
    TZ = flow.space.TZ.reshape(K, nq, -1)
    S = np.einsum("icr,cij,jcs->rs", TZ, Hq, TZ)
    S = 0.5 * (S + S.T)
    v = np.einsum("icr,ic->r", TZ, G[:, flow.Q])
    t = float(np.exp(s))
    alpha, beta = flow.bound_rates(s, y)
    if not (np.all(np.isfinite(S)) and np.all(np.isfinite(v)) and np.isfinite(beta) and np.isfinite(alpha)):
        inf = float("inf")
        return (inf, float("nan"), inf, inf, inf, inf, 0.0, inf), np.full(len(v), np.nan)
    u, mu2, along, across = escape.unstable_direction(S, v)
    return (t * normal_curvature(S, v), float(np.linalg.norm(v)), float(np.linalg.norm(S @ v)), beta, alpha,
            t * mu2, along, across), u


def _march(ts, rates, U, idx, start):
    """``(D⊥, σ, C, escape)`` at the nodes ``idx`` by the trapezoidal rule from ``start`` (module docstring): ``C`` is
    the bound at each node, the smallest of the path bound ``D⊥ + |σ| V``, the escape's bound
    (:class:`theory.li2024.escape.EscapeMarch`, entered from ``C``) and Grönwall's step (full ``μ``) from ``C`` at the
    node before; each value bounds the distance over the interval that ends at its node.  ``escape`` is the
    escape's march at the last node (an :class:`~theory.li2024.escape.Pair` or ``None``)."""
    alpha, speed, jv, beta, full = rates[:5]
    D, sig, C = np.empty(len(idx)), np.empty(len(idx)), np.empty(len(idx))
    D[0], sig[0], C[0] = start[:3]
    march = escape.EscapeMarch(ts, rates, U, idx, start[3] if len(start) > 3 else None)

    def shift_rate(k, d):  # |dσ/ds| at node k with D⊥ = d
        return escape.velocity_shift_rate(float(np.exp(ts[k])), speed[k], jv[k], beta[k], d)

    for j in range(1, len(idx)):
        i, k = idx[j - 1], idx[j]
        h = ts[k] - ts[i]
        g = np.exp(0.5 * h * (alpha[i] + alpha[k]))
        D[j] = D[j - 1] * g + 0.5 * h * (beta[i] * g + beta[k])
        sig[j] = sig[j - 1] + 0.5 * h * (shift_rate(i, D[j - 1]) + shift_rate(k, D[j]))
        if march.may_enter(j - 1):
            march.enter(j - 1, C[j - 1])
        with np.errstate(over="ignore", invalid="ignore"):
            gf = np.exp(0.5 * h * (full[i] + full[k]))
            gronwall = C[j - 1] * gf + 0.5 * h * (beta[i] * gf + beta[k])
            path = escape.shifted_bound(D[j], sig[j], ts, speed, float(np.exp(ts[k])))
            escaped = march.bound(j)
        C[j] = min(x for x in (path, escaped, gronwall) if x == x) if gronwall == gronwall else np.inf
    return D, sig, C, march.end()


def shadow(flow, ts, Y, start: tuple, at: np.ndarray):
    """``(bound, end)``: the bound at the points ``at`` of one decade whose accepted states are ``Y[:, k]`` at
    ``s = ts[k]``, from ``start = (D⊥, σ, C[, escape])`` at ``ts[0]``; ``end`` is the same at the decade's last
    node (the next decade's start).  A point takes the value of the first node at or after it (module docstring)."""
    ts = np.asarray(ts, dtype=float)
    at_nodes = [node_rates(flow, float(s), Y[:, k]) for k, s in enumerate(ts)]
    rates = np.array([r for r, _ in at_nodes]).T
    U = np.array([u for _, u in at_nodes])
    m = len(ts) - 1
    every = np.arange(m + 1)
    coarse = np.r_[np.arange(0, m - 1, 2), m] if m >= 2 else every
    fine = _march(ts, rates, U, every, start)
    rough = _march(ts, rates, U, coarse, start)
    eps = 1e-12 * np.maximum(1.0, np.abs(at))

    def at_points(values, nodes):
        j = np.minimum(np.searchsorted(ts[nodes], at - eps), len(nodes) - 1)
        return values[j]

    def widened(f, r):  # the rule's error over pairs of steps, added (as in continuation._bound)
        return max(f, r) + abs(f - r) if np.isfinite(f) and np.isfinite(r) else float("inf")

    with np.errstate(invalid="ignore"):
        a, b = at_points(fine[2], every), at_points(rough[2], coarse)
        bound = np.maximum(a, b) + np.abs(a - b)
    bound[~np.isfinite(bound)] = np.inf
    end = [widened(x[-1], y[-1]) for x, y in zip(fine[:3], rough[:3])]
    ef, er = fine[3], rough[3]
    last = None  # the escape's march goes on only where both rules end in the same mode
    if ef is not None and er is not None and ef.mode == er.mode:
        last = escape.Pair(ef.mode, widened(ef.D, er.D), widened(ef.sigma, er.sigma))
    return bound, (*end, last)
