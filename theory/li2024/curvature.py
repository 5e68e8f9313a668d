"""The Hessian of Li et al.'s loss in the attention scores, for every loss of the suite, and its least
eigenvalue on the directions GD moves ``W`` in.

Why.  The continuation's bound on ``||W_GD - φ||`` (:mod:`theory.li2024.continuation`) grows along the flow
by ``μ = max(0, -λ_min(∇²L))`` per unit of time (Grönwall): ``μ = 0`` for a convex loss (Theorem 1's setting),
``μ > 0`` for the losses and heads of Section 5.  The same Hessian is the flow's Jacobian.

Per sample (scores ``x = A[:, q] + log c``, attention ``a = softmax(x)``, loss ``f(a)``, ``c = ∇_a f``,
``F = ∇²_a f``, ``J = diag(a) - a a^T``), since ``∇²_x a_m = a_m [(e_m - a)(e_m - a)^T - J]`` and
``J = Σ_m a_m (e_m - a)(e_m - a)^T``::

    ∇²_x ℓ = J F J + Σ_m a_m (c_m - c̄) (e_m - a)(e_m - a)^T,        c̄ = Σ_m a_m c_m.

For ``-log a_y`` (Assumption 1) the two terms add up to ``J`` (the continuation's ``P_k``).  ``c_m - c̄`` is
formed from differences against the most attended token ``r`` (``δ_m = c_m - c_r``, as
:func:`theory.li2024.losses.softmax_backward` does), and ``J``'s top diagonal entry as ``a_r Σ_{j≠r} a_j``, so
the entries that involve a barely attended token keep their relative precision late in training.

Per loss (``h = H[y]`` the label's head row, ``u = a·h``; ``z = H a``, ``p = softmax(z)``, ``S_p = diag p - p p^T``):
``log``: ``c = -h/u``, ``F = h h^T/u²``; ``square`` ``(1-u)²``: ``c = -2(1-u) h``, ``F = 2 h h^T``; ``exp``
``e^{-u}``: ``c = -e^{-u} h``, ``F = e^{-u} h h^T``; ``ce`` ``-log p_y``: ``c = H^T (p - e_y)``,
``F = H^T S_p H``; ``lsq`` ``(1-p_y)²``: ``c = H^T 2 p_y (1-p_y)(p - e_y)``,
``F = H^T 2 p_y [(1-p_y) S_p - (1 - 2 p_y)(p - e_y)(p - e_y)^T] H``.

Checked against central differences of :func:`theory.li2024.losses.loss_and_grad_scores` for every loss
(``properties/li2024/test_curvature.py``).
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from theory.li2024.losses import TokenData, attention

__all__ = ["sample_hessians", "query_hessians", "MovementSpace"]


def _softmax_jacobian(a: np.ndarray) -> np.ndarray:
    """``diag(a_i) - a_i a_i^T`` per row, the top diagonal entry ``a_r Σ_{j≠r} a_j`` (exact when ``a_r`` rounds to 1)."""
    m = np.arange(len(a))
    r = a.argmax(axis=1)
    J = -a[:, :, None] * a[:, None, :]
    d = a - a * a
    rest = a.copy()
    rest[m, r] = 0.0
    d[m, r] = a[m, r] * rest.sum(axis=1)
    K = a.shape[1]
    J[:, np.arange(K), np.arange(K)] = d
    return J


def _loss_derivatives(a: np.ndarray, data: TokenData) -> tuple[np.ndarray, np.ndarray]:
    """``(δ, F)``: ``δ_m = c_m - c_r`` (``c = ∇_a f``, ``r`` the most attended token) and ``F = ∇²_a f`` per sample."""
    m = np.arange(len(a))
    y = data.labels
    r = a.argmax(axis=1)
    if data.loss in ("ce", "lsq"):
        z = a @ data.H.T
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        pe = p.copy()  # p - e_y, with p_y - 1 as minus the other classes' mass
        pe[m, y] = 0.0
        pe[m, y] = -pe.sum(axis=1)
        Sp = np.einsum("ij,jk->ijk", p, np.eye(p.shape[1])) - p[:, :, None] * p[:, None, :]
        if data.loss == "ce":
            dz, Fz = pe, Sp
        else:
            py, rest = p[m, y], -pe[m, y]
            dz = (2.0 * py * rest)[:, None] * pe
            Fz = 2.0 * py[:, None, None] * (rest[:, None, None] * Sp
                                            - (1.0 - 2.0 * py)[:, None, None] * pe[:, :, None] * pe[:, None, :])
        Hd = data.H[None, :, :] - data.H.T[r][:, :, None]  # head columns' differences against token r
        delta = np.einsum("il,ilt->it", dz, Hd)
        F = np.einsum("lt,ilk,ks->its", data.H, Fz, data.H)
        return delta, F
    h = data.H[y]
    u = (a * h).sum(axis=1)
    if data.loss == "log":
        coef, curv = -1.0 / u, 1.0 / u**2
    elif data.loss == "square":
        omu = (a * (1.0 - h)).sum(axis=1)
        coef, curv = -2.0 * omu, np.full_like(u, 2.0)
    elif data.loss == "exp":
        coef = -np.exp(-u)
        curv = -coef
    else:  # pragma: no cover - Problem validates the name
        raise ValueError(f"unknown loss {data.loss!r}")
    delta = coef[:, None] * (h - h[m, r][:, None])
    F = curv[:, None, None] * h[:, :, None] * h[:, None, :]
    return delta, F


def sample_hessians(A: np.ndarray, data: TokenData) -> np.ndarray:
    """``∇²_x ℓ_i`` per (collapsed) sample of ``data`` at scores ``A``: m x K x K (module docstring)."""
    a = attention(A, data)
    J = _softmax_jacobian(a)
    if data.loss == "log" and data.biorthogonal:
        return J
    delta, F = _loss_derivatives(a, data)
    centred = delta - (a * delta).sum(axis=1, keepdims=True)  # c_m - c̄
    K = a.shape[1]
    D = np.eye(K)[None, :, :] - a[:, None, :]  # row m: e_m - a
    second = np.einsum("im,imj,imk->ijk", a * centred, D, D)
    return J @ F @ J + second


def query_hessians(A: np.ndarray, data: TokenData, Q: np.ndarray) -> np.ndarray:
    """``H_k = Σ_{q_i = k} w_i ∇²_x ℓ_i`` for each query ``k`` in ``Q`` (``|Q| x K x K``): the Hessian of ``L`` in
    the column ``A[:, k]`` (``L`` does not couple two columns)."""
    Hs = data.weights[:, None, None] * sample_hessians(A, data)
    out = np.zeros((len(Q), Hs.shape[1], Hs.shape[2]))
    np.add.at(out, np.searchsorted(Q, data.queries), Hs)
    return out


class MovementSpace:
    """GD moves ``W`` only along ``E^T X E`` with ``X`` zero outside the query columns ``Q``; coordinates
    ``y = X[:, Q].ravel()`` (as :mod:`theory.li2024.continuation`'s state).

    ``T`` maps ``y`` to the score change ``dA[:, Q] = M X M[:, Q]`` (flattened the same way); ``N`` is the metric
    ``||E^T X E||_F² = y^T N y``; ``Z`` whitens ``N`` on its range (``M`` may be singular when ``d < K``: ``N``'s
    null directions do not move ``W``, and ``T`` vanishes on them too)."""

    def __init__(self, M: np.ndarray, Q: np.ndarray):
        self.M, self.Q = M, Q
        K, nq = M.shape[0], len(Q)
        MQQ = M[np.ix_(Q, Q)]
        self.T = np.einsum("ia,jk->ikaj", M, MQQ).reshape(K * nq, K * nq)
        self.N = np.einsum("ab,jl->ajbl", M, MQQ).reshape(K * nq, K * nq)

    @cached_property
    def Z(self) -> np.ndarray:
        nu, U = np.linalg.eigh(self.N)
        keep = nu > 1e-12 * max(float(nu.max()), 1e-300)
        return U[:, keep] / np.sqrt(nu[keep])

    def block(self, Hq: np.ndarray) -> np.ndarray:
        """``blockdiag(H_k)`` in the flattened ``dA[:, Q]`` order (row ``i * |Q| + k``)."""
        nq, K = Hq.shape[0], Hq.shape[1]
        B = np.zeros((K, nq, K, nq))
        for k in range(nq):
            B[:, k, :, k] = Hq[k]
        return B.reshape(K * nq, K * nq)

    @cached_property
    def TZ(self) -> np.ndarray:
        """``T Z``: the score change per whitened coordinate."""
        return self.T @ self.Z

    def least_eigenvalue(self, Hq: np.ndarray) -> float:
        """``λ_min`` of ``∇²_W L`` on the directions ``E^T X E`` (the generalized problem ``(T^T H T, N)``), as
        ``λ_min((T Z)^T blockdiag(H_k) (T Z))``.

        In that order, not ``Z^T (T^T H T) Z``: ``T`` and ``Z`` can each be ill-conditioned where their product is
        not, and forming ``T^T H T`` first rounds at ``eps ||T||² ||H||``, then amplified by ``||Z||²``
        (a main-job seed, K = 12: ``||T||² ||Z||²`` = 2.1e9 against ``||T Z||²`` = 2.86, and the convex log
        loss's ``λ_min`` came out -6.5e-10, 15 times its rounding bound in ``||T Z||²``).  The compiled
        right-hand side (:mod:`theory.li2024.curvature_kernel`) already sums ``(T Z)_c^T H_c (T Z)_c``."""
        K, nq = Hq.shape[1], Hq.shape[0]
        TZ = self.TZ.reshape(K, nq, -1)
        S = np.einsum("icr,cij,jcs->rs", TZ, Hq, TZ)
        return float(np.linalg.eigvalsh((S + S.T) / 2)[0])
