"""The continuation's right-hand side, compiled (numba): ``dB_Q/ds`` and ``dD/ds`` of
:mod:`theory.li2024.continuation` in one pass over the samples.

The continuation spends most of its time in its right-hand side (a solve to 10^12 steps takes 10^2-10^4
evaluations, each a few small matrix products and one softmax per sample); in numpy every evaluation is
some forty array operations on K x K matrices, each with its Python overhead.  This kernel computes the same
quantities with the same cancellation-free forms (module docstring of :mod:`theory.li2024.continuation`):

* ``A = A₁ - M B M`` on the query columns ``Q`` (``B`` is zero outside them);
* per sample ``a_i = softmax(A[:, q_i] + log c_i)`` and, for ``-log u`` under Assumption 1,
  ``dl/ds_i = a_i - e_{y_i}`` with its label entry written ``-Σ_{j≠y_i} a_ij`` (exact when ``a_iy`` rounds
  to 1);
* ``G[:, k] = Σ_{q_i = k} w_i dl/ds_i``;
* ``P_k = Σ_{q_i = k} w_i (diag a_i - a_i a_i^T)`` with the most attended token's diagonal entry
  ``a_r Σ_{j≠r} a_j``; ``dA = M G M``, ``dG[:, k] = P_k dA[:, k]`` and ``||H g||_F = ||E^T dG E||_F``
  (:func:`theory.li2024.training.grad_norm_scores`, scaled by ``max |dG|`` against underflow).

It agrees with the numpy right-hand side (``_Flow.rhs_numpy``) within a derived rounding bound
(``properties/li2024/test_flow_kernel.py``).  ``_grad_norm_scores`` mirrors
:func:`theory.li2024.training.grad_norm_scores` because compiled code cannot call the numpy one.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["flow_rhs"]


@njit(cache=True, nogil=True)
def _scores(y, A1, M, MQQ, Q, K, nq):
    """``A = A₁ - M B M`` with ``B[:, Q] = y[:K nq]`` (row-major ``K x nq``)."""
    A = A1.copy()
    MBM = M @ (np.ascontiguousarray(y[:K * nq]).reshape((K, nq)) @ MQQ)
    for c in range(nq):
        A[:, Q[c]] -= MBM[:, c]
    return A


@njit(cache=True, nogil=True)
def _attention(A, q, logc, K, a):
    """``a = softmax(A[:, q] + logc)`` into ``a``; returns the most attended token."""
    top, r = -np.inf, 0
    for j in range(K):
        v = A[j, q] + logc[j]
        a[j] = v
        if v > top:
            top, r = v, j
    tot = 0.0
    for j in range(K):
        a[j] = np.exp(a[j] - top)
        tot += a[j]
    for j in range(K):
        a[j] /= tot
    return r


@njit(cache=True, nogil=True)
def _grad_norm_scores(G, M, K):
    """``||E^T G E||_F = sqrt(tr(G^T M G M))``, scaled by ``max |G|`` first."""
    gmax = 0.0
    for i in range(K):
        for j in range(K):
            gmax = max(gmax, abs(G[i, j]))
    if gmax == 0.0 or not np.isfinite(gmax):
        return gmax
    Gs = G / gmax
    T = Gs.T @ M @ Gs
    acc = 0.0
    for i in range(K):
        for j in range(K):
            acc += T[i, j] * M[j, i]
    return gmax * np.sqrt(max(acc, 0.0))


@njit(cache=True, nogil=True)
def flow_rhs(y, s, A1, M, MQQ, Q, qidx, queries, log_counts, labels, weights, sign, eta):
    """``[dB_Q/ds (row-major K x |Q|), dD/ds]`` at log time ``s`` (``t = e^s``) for the log loss under
    Assumption 1.

    Parameters
    ----------
    y : ndarray
        The state: ``B[:, Q]`` row-major, then ``D``.
    s : float
        Log flow time.
    A1, M, MQQ : ndarray
        ``E W₁ E^T``, the Gram matrix ``E E^T`` and its ``Q x Q`` block.
    Q, qidx : ndarray
        The query tokens (sorted) and each sample's index in ``Q`` (int64).
    queries, log_counts, labels, weights : ndarray
        :class:`theory.li2024.losses.TokenData`'s.
    sign, eta : float
        The planted sign of the step (1 for the flow) and GD's step size.

    Returns
    -------
    ndarray
        ``len(y)`` entries.
    """
    K, nq, m = A1.shape[0], Q.shape[0], queries.shape[0]
    n = K * nq
    A = _scores(y, A1, M, MQQ, Q, K, nq)
    G = np.zeros((K, nq))
    P = np.zeros((nq, K, K))
    a = np.empty(K)
    for i in range(m):
        r = _attention(A, queries[i], log_counts[i], K, a)
        w, c, lab = weights[i], qidx[i], labels[i]
        other = 0.0  # Σ_{j≠y} a_j
        for j in range(K):
            if j != lab:
                other += a[j]
                G[j, c] += w * a[j]
        G[lab, c] -= w * other
        rest = 0.0  # Σ_{j≠r} a_j
        for j in range(K):
            if j != r:
                rest += a[j]
        for j in range(K):
            for l in range(K):
                if l != j:
                    P[c, j, l] -= w * (a[j] * a[l])
            P[c, j, j] += w * (a[j] - a[j] * a[j] if j != r else a[r] * rest)
    t = np.exp(s)
    out = np.empty(n + 1)
    for j in range(K):
        for c in range(nq):
            out[j * nq + c] = sign * t * G[j, c]
    # ||H g||: dA = M G M on the query columns, dG[:, k] = P_k dA[:, k]
    GM = G @ MQQ
    dA = M @ GM
    dG = np.zeros((K, K))
    for c in range(nq):
        for j in range(K):
            acc = 0.0
            for l in range(K):
                acc += P[c, j, l] * dA[l, c]
            dG[j, Q[c]] = acc
    out[n] = eta * t * _grad_norm_scores(dG, M, K)
    return out
