"""The continuation's right-hand side for Section 5's losses, compiled (numba): ``dB_Q/ds`` and ``dD/ds`` with
Grönwall's factor, in one pass over the samples.

The same quantities as ``_Flow.rhs_numpy`` of :mod:`theory.li2024.continuation` for a loss that is not convex
in ``W`` (every loss and head of the suite but the log loss under Assumption 1, which
:mod:`theory.li2024.flow_kernel` computes):

* ``A = A₁ - M B M``, per sample ``a_i = softmax(A[:, q_i] + log c_i)``;
* the loss's ``δ_m = c_m - c_r`` (``c = ∇_a f``, ``r`` the most attended token, head differences formed first)
  and ``F = ∇²_a f`` (:mod:`theory.li2024.curvature`'s table); ``dl/ds_i = a (δ - Σ a δ)``;
* the sample's Hessian in its scores ``J F J + Σ_m a_m (c_m - c̄)(e_m - a)(e_m - a)^T``, the second term
  expanded as ``diag(v) - v a^T - a v^T + (Σ v) a a^T`` with ``v = a ∘ (c - c̄)``;
* ``G[:, k]`` and ``H_k`` summed over the samples of query ``k``;
* ``||H g||`` (``dA = M G M``, ``dG[:, k] = H_k dA[:, k]``) and ``μ = max(0, -λ_min)`` of
  ``Σ_k (T Z)_k^T H_k (T Z)_k`` (``T``, ``Z``: :class:`theory.li2024.curvature.MovementSpace`).

It agrees with the numpy right-hand side within a rounding tolerance (``properties/li2024/test_curvature.py``).
Division follows numpy (``error_model="numpy"``): a state past the loss's domain (``u = 0`` for the log loss
with a broken head) gives a non-finite right-hand side, which the continuation refuses, as the numpy one does.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from theory.li2024.engine import LOSS_CODES
from theory.li2024.flow_kernel import _attention, _grad_norm_scores, _scores

__all__ = ["nonconvex_rhs"]

# The engine's codes, read once at import: numba compiles module globals as constants.
LOG, CE, SQUARE, LSQ = LOSS_CODES["log"], LOSS_CODES["ce"], LOSS_CODES["square"], LOSS_CODES["lsq"]


@njit(cache=True, nogil=True, error_model="numpy")
def _loss_terms(a, r, y, H, code, K, delta, F):
    """``δ`` and ``F`` of one sample into ``delta`` (K) and ``F`` (K x K)."""
    if code == CE or code == LSQ:
        C = H.shape[0]
        z = np.zeros(C)
        for l in range(C):
            for t in range(K):
                z[l] += H[l, t] * a[t]
        zmax = z.max()
        p = np.exp(z - zmax)
        p /= p.sum()
        pe = p.copy()
        pe[y] = 0.0
        pe[y] = -pe.sum()
        Fz = np.empty((C, C))
        for l in range(C):
            for m in range(C):
                Fz[l, m] = (p[l] if l == m else 0.0) - p[l] * p[m]
        dz = pe.copy()
        if code == LSQ:
            py, rest = p[y], -pe[y]
            for l in range(C):
                dz[l] = 2.0 * py * rest * pe[l]
            for l in range(C):
                for m in range(C):
                    Fz[l, m] = 2.0 * py * (rest * Fz[l, m] - (1.0 - 2.0 * py) * pe[l] * pe[m])
        for t in range(K):
            acc = 0.0
            for l in range(C):
                acc += dz[l] * (H[l, t] - H[l, r])
            delta[t] = acc
        HF = H.T @ Fz
        F[:, :] = HF @ H
        return
    u = 0.0
    omu = 0.0
    for t in range(K):
        u += a[t] * H[y, t]
        omu += a[t] * (1.0 - H[y, t])
    if code == LOG:
        coef, curv = -1.0 / u, 1.0 / (u * u)
    elif code == SQUARE:
        coef, curv = -2.0 * omu, 2.0
    else:
        coef = -np.exp(-u)
        curv = -coef
    for t in range(K):
        delta[t] = coef * (H[y, t] - H[y, r])
        for s in range(K):
            F[t, s] = curv * H[y, t] * H[y, s]


@njit(cache=True, nogil=True, error_model="numpy")
def _gradient_and_hessians(A, qidx, queries, log_counts, labels, weights, H, code, K, nq):
    """``G`` (K x K) and ``H_k`` (nq x K x K) at scores ``A``."""
    G = np.zeros((K, K))
    Hq = np.zeros((nq, K, K))
    a = np.empty(K)
    delta = np.empty(K)
    F = np.empty((K, K))
    J = np.empty((K, K))
    for i in range(len(labels)):
        q, w, y = queries[i], weights[i], labels[i]
        r = _attention(A, q, log_counts[i], K, a)
        _loss_terms(a, r, y, H, code, K, delta, F)
        mbar = 0.0
        for t in range(K):
            mbar += a[t] * delta[t]
        rest = 0.0
        for t in range(K):
            if t != r:
                rest += a[t]
        for t in range(K):
            G[t, q] += w * a[t] * (delta[t] - mbar)
            for s in range(K):
                J[t, s] = (a[t] - a[t] * a[t] if t == s else 0.0) - (a[t] * a[s] if t != s else 0.0)
        J[r, r] = a[r] * rest
        JFJ = J @ F @ J
        v = a * (delta - mbar)
        vs = v.sum()
        k = qidx[i]
        for t in range(K):
            for s in range(K):
                second = (v[t] if t == s else 0.0) - v[t] * a[s] - a[t] * v[s] + vs * a[t] * a[s]
                Hq[k, t, s] += w * (JFJ[t, s] + second)
    return G, Hq


@njit(cache=True, nogil=True, error_model="numpy")
def nonconvex_rhs(y, s, A1, M, MQQ, Q, qidx, queries, log_counts, labels, weights, H, code, sign, eta, TZ):
    """``[dB_Q/ds, dD/ds]`` (module docstring); ``TZ`` is ``MovementSpace.T @ MovementSpace.Z``."""
    K, nq = A1.shape[0], len(Q)
    n = K * nq
    A = _scores(y, A1, M, MQQ, Q, K, nq)
    G, Hq = _gradient_and_hessians(A, qidx, queries, log_counts, labels, weights, H, code, K, nq)
    t = np.exp(s)
    out = np.empty(n + 1)
    GQ = np.empty((K, nq))
    for i in range(K):
        for c in range(nq):
            GQ[i, c] = G[i, Q[c]]
            out[i * nq + c] = sign * t * G[i, Q[c]]
    dA = M @ (GQ @ MQQ)
    dG = np.zeros((K, K))
    for c in range(nq):
        dG[:, Q[c]] = Hq[c] @ np.ascontiguousarray(dA[:, c])
    hg = _grad_norm_scores(dG, M, K)
    R = TZ.shape[1]
    S = np.zeros((R, R))
    for c in range(nq):
        rows = np.empty((K, R))
        for i in range(K):
            rows[i, :] = TZ[i * nq + c, :]
        S += rows.T @ (Hq[c] @ rows)
    mu = 0.0
    if np.all(np.isfinite(S)):
        lam = np.linalg.eigvalsh(0.5 * (S + S.T))[0]
        mu = max(0.0, -lam)
    else:
        mu = np.inf
    out[n] = t * (eta * hg + mu * y[n])
    return out
