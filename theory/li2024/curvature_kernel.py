"""The continuation's right-hand side and Jacobian for Section 5's losses, compiled (numba): ``dB_Q/ds`` and
``dD/ds`` with Grönwall's factor, in one pass over the samples.

The same quantities as ``_Flow.rhs_numpy`` and ``_Flow.jac`` of :mod:`theory.li2024.continuation` for a loss
that is not convex in ``W`` (every loss and head of the suite but the log loss under Assumption 1, which
:mod:`theory.li2024.flow_kernel` computes):

* ``A = A₁ - M B M``, per sample ``a_i = softmax(A[:, q_i] + log c_i)``;
* the loss's ``δ_m = c_m - c_r`` (``c = ∇_a f``, ``r`` the most attended token, head differences formed first)
  and ``F = ∇²_a f`` (:mod:`theory.li2024.curvature`'s table); ``dl/ds_i = a (δ - Σ a δ)``;
* the sample's Hessian in its scores ``J F J + Σ_m a_m (c_m - c̄)(e_m - a)(e_m - a)^T``, the second term
  expanded as ``diag(v) - v a^T - a v^T + (Σ v) a a^T`` with ``v = a ∘ (c - c̄)``;
* ``G[:, k]`` and ``H_k`` summed over the samples of query ``k``;
* ``||H g||`` (``dA = M G M``, ``dG[:, k] = H_k dA[:, k]``) and ``μ = max(0, -λ_min)`` of
  ``S = Σ_k (T Z)_k^T H_k (T Z)_k`` (``T``, ``Z``: :class:`theory.li2024.curvature.MovementSpace`);
* the Jacobian ``-sign e^s blockdiag(H_k) T`` in ``B`` and ``e^s μ`` in ``D``.

Why loops, not matrix products.  The problems are small (K <= 12, a handful of samples): numba's ``@`` calls
BLAS with a new array per product, and on Section 5's example files those calls and allocations were most of a
call (20-45 µs a call before on the states of 12 example files, 10-20 µs after, the dispatch included;
``benchmarks/bench_curvature_kernel.py`` against numpy).  The products are the same sums in another order, so the
two differ by rounding only.  Except the scores ``A``: they stay :mod:`theory.li2024.flow_kernel`'s (BLAS), so
``B``'s right-hand side is bitwise the one before this rewrite.  Its difference from numpy is the continuation's
reading of its rounding noise (``_Flow.rounding_noise``), and the tolerance floors built on that reading do not move
with the Hessians' arithmetic.

``μ`` skips the eigenvalue problem where ``S`` is positive definite: its Cholesky factorization succeeding in
floating point says ``λ_min(S) > -c R eps ||S||`` (``R`` its order), the accuracy ``eigvalsh`` itself has
for ``λ_min``, so ``μ = 0`` there is ``eigvalsh``'s answer to within its own rounding.  Elsewhere ``eigvalsh``
decides, as before.

It agrees with the numpy right-hand side and Jacobian within a rounding tolerance
(``properties/li2024/test_curvature.py``).  Division follows numpy (``error_model="numpy"``): a state past the
loss's domain (``u = 0`` for the log loss with a broken head) gives a non-finite right-hand side, which the
continuation refuses, as the numpy one does.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from theory.li2024.engine import LOSS_CODES
from theory.li2024.flow_kernel import _attention, _scores

__all__ = ["nonconvex_jac", "nonconvex_rhs"]

# The engine's codes, read once at import: numba compiles module globals as constants.
LOG, CE, SQUARE, LSQ = LOSS_CODES["log"], LOSS_CODES["ce"], LOSS_CODES["square"], LOSS_CODES["lsq"]


@njit(cache=True, nogil=True, error_model="numpy")
def _product_into(X, Y, out):
    """``out = X @ Y``, each entry summed in index order: no BLAS call and no new array (module docstring)."""
    for i in range(X.shape[0]):
        for j in range(Y.shape[1]):
            acc = 0.0
            for l in range(X.shape[1]):
                acc += X[i, l] * Y[l, j]
            out[i, j] = acc


@njit(cache=True, nogil=True, error_model="numpy")
def _loss_terms(a, r, y, H, code, K, delta, F, z, p, dz, Fz, HF):
    """``δ`` and ``F`` of one sample into ``delta`` (K) and ``F`` (K x K); ``z``, ``p``, ``dz`` (C), ``Fz``
    (C x C) and ``HF`` (K x C) are scratch for the head's logits (ce, lsq: ``F = H^T F_z H``)."""
    if code == CE or code == LSQ:
        C = H.shape[0]
        zmax = -np.inf
        for l in range(C):
            acc = 0.0
            for t in range(K):
                acc += H[l, t] * a[t]
            z[l] = acc
            zmax = max(zmax, acc)
        tot = 0.0
        for l in range(C):
            p[l] = np.exp(z[l] - zmax)
            tot += p[l]
        for l in range(C):
            p[l] /= tot
        rest = 0.0
        for l in range(C):
            if l != y:
                dz[l] = p[l]
                rest += p[l]
        dz[y] = -rest
        for l in range(C):
            for m in range(C):
                Fz[l, m] = (p[l] if l == m else 0.0) - p[l] * p[m]
        if code == LSQ:
            py = p[y]
            for l in range(C):
                for m in range(C):
                    Fz[l, m] = 2.0 * py * (rest * Fz[l, m] - (1.0 - 2.0 * py) * dz[l] * dz[m])
            for l in range(C):
                dz[l] = 2.0 * py * rest * dz[l]
        for t in range(K):
            acc = 0.0
            for l in range(C):
                acc += dz[l] * (H[l, t] - H[l, r])
            delta[t] = acc
        _product_into(H.T, Fz, HF)
        _product_into(HF, H, F)
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
    C = H.shape[0]
    a = np.empty(K)
    delta = np.empty(K)
    F = np.empty((K, K))
    J = np.empty((K, K))
    JF = np.empty((K, K))
    JFJ = np.empty((K, K))
    v = np.empty(K)
    z = np.empty(C)
    p = np.empty(C)
    dz = np.empty(C)
    Fz = np.empty((C, C))
    HF = np.empty((K, C))
    for i in range(len(labels)):
        q, w, y = queries[i], weights[i], labels[i]
        r = _attention(A, q, log_counts[i], K, a)
        _loss_terms(a, r, y, H, code, K, delta, F, z, p, dz, Fz, HF)
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
        _product_into(J, F, JF)
        _product_into(JF, J, JFJ)
        vs = 0.0
        for t in range(K):
            v[t] = a[t] * (delta[t] - mbar)
            vs += v[t]
        k = qidx[i]
        for t in range(K):
            for s in range(K):
                second = (v[t] if t == s else 0.0) - v[t] * a[s] - a[t] * v[s] + vs * a[t] * a[s]
                Hq[k, t, s] += w * (JFJ[t, s] + second)
    return G, Hq


@njit(cache=True, nogil=True, error_model="numpy")
def _grad_norm_scores(G, M, K):
    """``||E^T G E||_F = sqrt(tr(G^T M G M))``, ``G`` scaled by ``max |G|`` first: the flow kernel's norm in loops.
    Not shared with it: the convex flow's rounding stays as Theorem 1's measurements found it, and this one's as
    Section 5's were measured with it."""
    gmax = 0.0
    for i in range(K):
        for j in range(K):
            gmax = max(gmax, abs(G[i, j]))
    if gmax == 0.0 or not np.isfinite(gmax):
        return gmax
    MG = np.empty((K, K))
    for i in range(K):
        for j in range(K):
            acc = 0.0
            for l in range(K):
                acc += M[i, l] * G[l, j] / gmax
            MG[i, j] = acc
    acc = 0.0
    for i in range(K):
        for j in range(K):
            t = 0.0
            for l in range(K):
                t += G[l, i] / gmax * MG[l, j]
            acc += t * M[j, i]
    return gmax * np.sqrt(max(acc, 0.0))


@njit(cache=True, nogil=True, error_model="numpy")
def _query_block_into(Hq, X, c, nq, out):
    """``out = H_c X_c``: ``X_c`` the rows ``(j, c)`` of ``X`` (the score change of token ``j`` in query column ``c``,
    :class:`theory.li2024.curvature.MovementSpace`'s order ``j |Q| + c``)."""
    K = Hq.shape[1]
    for i in range(K):
        for b in range(X.shape[1]):
            acc = 0.0
            for j in range(K):
                acc += Hq[c, i, j] * X[j * nq + c, b]
            out[i, b] = acc


@njit(cache=True, nogil=True, error_model="numpy")
def _positive_definite(S, R):
    """Whether ``S``'s Cholesky factorization succeeds (every pivot positive)."""
    L = np.zeros((R, R))
    for j in range(R):
        d = S[j, j]
        for k in range(j):
            d -= L[j, k] * L[j, k]
        if not d > 0.0:
            return False
        L[j, j] = np.sqrt(d)
        for i in range(j + 1, R):
            acc = S[i, j]
            for k in range(j):
                acc -= L[i, k] * L[j, k]
            L[i, j] = acc / L[j, j]
    return True


@njit(cache=True, nogil=True, error_model="numpy")
def _least_curvature(Hq, TZ, K, nq):
    """``μ = max(0, -λ_min(S))``, ``S = Σ_k (T Z)_k^T H_k (T Z)_k`` (module docstring; ``inf`` if ``S`` is not finite)."""
    R = TZ.shape[1]
    S = np.zeros((R, R))
    HR = np.empty((K, R))
    for c in range(nq):
        _query_block_into(Hq, TZ, c, nq, HR)
        for a in range(R):
            for b in range(R):
                acc = 0.0
                for j in range(K):
                    acc += TZ[j * nq + c, a] * HR[j, b]
                S[a, b] += acc
    if not np.all(np.isfinite(S)):
        return np.inf
    for a in range(R):
        for b in range(a + 1, R):
            m = 0.5 * (S[a, b] + S[b, a])
            S[a, b] = m
            S[b, a] = m
    if _positive_definite(S, R):
        return 0.0
    return max(0.0, -np.linalg.eigvalsh(S)[0])


@njit(cache=True, nogil=True, error_model="numpy")
def nonconvex_rhs(y, s, A1, M, MQQ, Q, qidx, queries, log_counts, labels, weights, H, code, sign, eta, TZ):
    """``[dB_Q/ds, dD/ds]`` (module docstring); ``TZ`` is ``MovementSpace.T @ MovementSpace.Z``."""
    K, nq = A1.shape[0], len(Q)
    n = K * nq
    A = _scores(y, A1, M, MQQ, Q, K, nq)
    G, Hq = _gradient_and_hessians(A, qidx, queries, log_counts, labels, weights, H, code, K, nq)
    t = np.exp(s)
    out = np.empty(n + 1)
    for i in range(K):
        for c in range(nq):
            out[i * nq + c] = sign * t * G[i, Q[c]]
    # ||H g||: dA = M G M on the query columns, dG[:, k] = H_k dA[:, k]
    GM = np.empty((K, nq))
    for i in range(K):
        for c in range(nq):
            acc = 0.0
            for d in range(nq):
                acc += G[i, Q[d]] * MQQ[d, c]
            GM[i, c] = acc
    dG = np.zeros((K, K))
    dA = np.empty(K)
    for c in range(nq):
        for j in range(K):
            acc = 0.0
            for i in range(K):
                acc += M[j, i] * GM[i, c]
            dA[j] = acc
        for j in range(K):
            acc = 0.0
            for i in range(K):
                acc += Hq[c, j, i] * dA[i]
            dG[j, Q[c]] = acc
    hg = _grad_norm_scores(dG, M, K)
    out[n] = t * (eta * hg + _least_curvature(Hq, TZ, K, nq) * y[n])
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def nonconvex_jac(y, s, A1, M, MQQ, Q, qidx, queries, log_counts, labels, weights, H, code, sign, T, TZ):
    """The Jacobian of :func:`nonconvex_rhs` in ``(B_Q, D)``: ``-sign e^s blockdiag(H_k) T`` and ``e^s μ``
    (``D``'s row has no ``∂/∂B``, as ``_Flow.jac``'s); ``T`` is ``MovementSpace.T``."""
    K, nq = A1.shape[0], len(Q)
    n = K * nq
    A = _scores(y, A1, M, MQQ, Q, K, nq)
    _, Hq = _gradient_and_hessians(A, qidx, queries, log_counts, labels, weights, H, code, K, nq)
    t = np.exp(s)
    J = np.zeros((n + 1, n + 1))
    HT = np.empty((K, n))
    for c in range(nq):
        _query_block_into(Hq, T, c, nq, HT)
        for i in range(K):
            for col in range(n):
                J[i * nq + c, col] = -sign * t * HT[i, col]
    J[n, n] = t * _least_curvature(Hq, TZ, K, nq)
    return J
