"""Compiled (numba) long-sequence-limit dynamics of :mod:`theory.tian2023.model`: the RK4 log-time integrator.

:func:`rk4_logtime` runs the same iteration as the numpy reference ``theory.tian2023.model._rk4_logtime`` with the
right-hand side of ``theory.tian2023.model._rhs_factory`` (population gradients of Lemma 1 with ``c_n`` of Lemma 2,
free or tied decoder): same step plan (step counts, step sizes and the start of every segment are computed
in Python by :func:`theory.tian2023.model._rk4_plan` and shared by both paths), same RK4 stages, same order of the
element-wise operations.  Only the reductions (sums over tokens and classes, ``exp``/``log`` of libm
instead of numpy's vectorized ones) round differently, so the two paths agree to ~1e-13 relative (a
property checks 1e-10 relative to max(1, |x|) against the numpy path on random classes).

Why it pays: the models are tiny (``M`` ~ 2-20 tokens, ``K`` <= 5 classes), so a numpy right-hand side is
~40 numpy calls of pure dispatch overhead (~60 us) for ~1e3 flops; here one evaluation is ~1 us.

Compilation is cached on disk (``cache=True``).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, error_model="numpy")
def _rhs(logw, mask, query, target, w, tied, eta_y, eta_z, scale, D, Z, outD, outZ, H, F, nrm, Y, V, G):
    """``outD, outZ = scale * (-eta_y dL/dD, -eta_z dL/dZ)`` at ``(D, Z)`` (population loss, class rows)."""
    K, M = logw.shape
    # attention c_n (Lemma 2): softmax over the class's support of log P + z_{psi(n)}
    for b in range(K):
        q = query[b]
        mx = -np.inf
        for l in range(M):
            if mask[b, l]:
                a = logw[b, l] + Z[q, l]
                H[b, l] = a
                if a > mx:
                    mx = a
        s = 0.0
        for l in range(M):
            if mask[b, l]:
                e = math.exp(H[b, l] - mx)
                H[b, l] = e
                s += e
            else:
                H[b, l] = 0.0
        ss = 0.0
        for l in range(M):
            H[b, l] = H[b, l] / s
            ss += H[b, l] * H[b, l]
        nb = math.sqrt(ss)
        nrm[b] = nb
        for l in range(M):
            F[b, l] = H[b, l] / nb
    # the decoder: Y (free) or Y = F^T W (tied, Lemma 3)
    if tied:
        for i in range(M):
            for j in range(M):
                Y[i, j] = 0.0
        for b in range(K):
            for i in range(M):
                fbi = F[b, i]
                if fbi != 0.0:
                    for j in range(M):
                        Y[i, j] += fbi * D[b, j]
    else:
        for i in range(M):
            for j in range(M):
                Y[i, j] = D[i, j]
    # logits Y^T f_b, softmax alpha_b, wV_b = w_b (e_{n_b} - alpha_b)
    for b in range(K):
        for j in range(M):
            V[b, j] = 0.0
        for i in range(M):
            fbi = F[b, i]
            if fbi != 0.0:
                for j in range(M):
                    V[b, j] += fbi * Y[i, j]
        mx = -np.inf
        for j in range(M):
            if V[b, j] > mx:
                mx = V[b, j]
        s = 0.0
        for j in range(M):
            e = math.exp(V[b, j] - mx)
            V[b, j] = e
            s += e
        for j in range(M):
            V[b, j] = -(V[b, j] / s)
        V[b, target[b]] += 1.0
        for j in range(M):
            V[b, j] = V[b, j] * w[b]
    # decoder derivative: tied dW = -wV (descent +wV); free dY = -F^T wV
    if tied:
        for b in range(K):
            for j in range(M):
                outD[b, j] = scale * (-eta_y * (-V[b, j]))
    else:
        for i in range(M):
            for j in range(M):
                outD[i, j] = 0.0
        for b in range(K):
            for i in range(M):
                fbi = F[b, i]
                if fbi != 0.0:
                    for j in range(M):
                        outD[i, j] += fbi * V[b, j]
        for i in range(M):
            for j in range(M):
                outD[i, j] = scale * (-eta_y * (-outD[i, j]))
    # attention derivative (Eqn. 10): dL/dz_{q_b} = -h_b * P^perp_{f_b} (Y wV_b) / ||h_b||, rows summed per query
    for i in range(M):
        for j in range(M):
            outZ[i, j] = 0.0
    for b in range(K):
        q = query[b]
        fg = 0.0                                   # f_b . G_b with G_b = Y wV_b (on the support)
        for l in range(M):
            if mask[b, l]:
                g = 0.0
                for j in range(M):
                    g += V[b, j] * Y[l, j]
                G[l] = g
                fg += F[b, l] * g
        for l in range(M):
            if mask[b, l]:
                pg = G[l] - F[b, l] * fg
                outZ[q, l] += -H[b, l] * pg / nrm[b]
    for i in range(M):
        for j in range(M):
            outZ[i, j] = scale * (-eta_z * outZ[i, j])


@njit(cache=True, nogil=True, error_model="numpy")
def _run(logw, mask, query, target, w, tied, eta_y, eta_z, tau, D0, Z0, seg_n, seg_h, seg_s, outD, outZ):
    """RK4 in log-time over the segments of the plan; ``outD[k], outZ[k]`` is the state after segment ``k``
    (``seg_n[k] = 0``: no step, the current state is recorded)."""
    D = D0.copy()
    Z = Z0.copy()
    K, M = logw.shape
    H = np.empty((K, M))
    F = np.empty((K, M))
    nrm = np.empty(K)
    Y = np.empty((M, M))
    V = np.empty((K, M))
    G = np.empty(M)
    k1D = np.empty_like(D); k2D = np.empty_like(D); k3D = np.empty_like(D); k4D = np.empty_like(D)
    k1Z = np.empty_like(Z); k2Z = np.empty_like(Z); k3Z = np.empty_like(Z); k4Z = np.empty_like(Z)
    tD = np.empty_like(D)
    tZ = np.empty_like(Z)
    for k in range(seg_n.shape[0]):
        h = seg_h[k]
        s = seg_s[k]
        for _ in range(seg_n[k]):
            _rhs(logw, mask, query, target, w, tied, eta_y, eta_z, tau * math.exp(s), D, Z, k1D, k1Z,
                 H, F, nrm, Y, V, G)
            for i in range(D.shape[0]):
                for j in range(M):
                    tD[i, j] = D[i, j] + h / 2 * k1D[i, j]
            for i in range(M):
                for j in range(M):
                    tZ[i, j] = Z[i, j] + h / 2 * k1Z[i, j]
            _rhs(logw, mask, query, target, w, tied, eta_y, eta_z, tau * math.exp(s + h / 2), tD, tZ, k2D, k2Z,
                 H, F, nrm, Y, V, G)
            for i in range(D.shape[0]):
                for j in range(M):
                    tD[i, j] = D[i, j] + h / 2 * k2D[i, j]
            for i in range(M):
                for j in range(M):
                    tZ[i, j] = Z[i, j] + h / 2 * k2Z[i, j]
            _rhs(logw, mask, query, target, w, tied, eta_y, eta_z, tau * math.exp(s + h / 2), tD, tZ, k3D, k3Z,
                 H, F, nrm, Y, V, G)
            for i in range(D.shape[0]):
                for j in range(M):
                    tD[i, j] = D[i, j] + h * k3D[i, j]
            for i in range(M):
                for j in range(M):
                    tZ[i, j] = Z[i, j] + h * k3Z[i, j]
            _rhs(logw, mask, query, target, w, tied, eta_y, eta_z, tau * math.exp(s + h), tD, tZ, k4D, k4Z,
                 H, F, nrm, Y, V, G)
            for i in range(D.shape[0]):
                for j in range(M):
                    D[i, j] = D[i, j] + h / 6 * (k1D[i, j] + 2 * k2D[i, j] + 2 * k3D[i, j] + k4D[i, j])
            for i in range(M):
                for j in range(M):
                    Z[i, j] = Z[i, j] + h / 6 * (k1Z[i, j] + 2 * k2Z[i, j] + 2 * k3Z[i, j] + k4Z[i, j])
            s += h
        outD[k] = D
        outZ[k] = Z


def rk4_logtime(classes, decoder, eta_y, eta_z, D0, Z0, plan, tau):
    """Run the plan ``(seg_n, seg_h, seg_s)`` (see ``theory.tian2023.model._rk4_plan``); returns
    ``(D (nout, ...), Z (nout, M, M), steps)`` like ``theory.tian2023.model._rk4_logtime``."""
    seg_n, seg_h, seg_s = plan
    D0 = np.ascontiguousarray(D0, dtype=np.float64)
    Z0 = np.ascontiguousarray(Z0, dtype=np.float64)
    nout = len(seg_n)
    outD = np.empty((nout,) + D0.shape)
    outZ = np.empty((nout,) + Z0.shape)
    _run(*_class_arrays(classes), decoder == "tied", float(eta_y), float(eta_z),
         float(tau), D0, Z0, np.asarray(seg_n, np.int64), np.asarray(seg_h, np.float64), np.asarray(seg_s, np.float64),
         outD, outZ)
    return outD, outZ, int(np.sum(seg_n))


@njit(cache=True, nogil=True, error_model="numpy")
def _population_gd(logw, mask, query, target, w, steps, eta_y, eta_z, momentum, Y, Z):
    """``theory.tian2023.model.population_gd`` (free decoder): heavy-ball GD on the population loss, in place."""
    K, M = logw.shape
    H = np.empty((K, M)); F = np.empty((K, M)); nrm = np.empty(K); Yw = np.empty((M, M)); V = np.empty((K, M))
    G = np.empty(M)
    dY = np.empty_like(Y); dZ = np.empty_like(Z)
    bY = np.zeros_like(Y); bZ = np.zeros_like(Z)
    for _ in range(steps):
        # eta = -1, scale = 1: the kernel returns the gradients themselves (multiplications by +-1 are exact)
        _rhs(logw, mask, query, target, w, False, -1.0, -1.0, 1.0, Y, Z, dY, dZ, H, F, nrm, Yw, V, G)
        for i in range(M):
            for j in range(M):
                bY[i, j] = momentum * bY[i, j] + dY[i, j]
                bZ[i, j] = momentum * bZ[i, j] + dZ[i, j]
                Y[i, j] = Y[i, j] - eta_y * bY[i, j]
                Z[i, j] = Z[i, j] - eta_z * bZ[i, j]


def _class_arrays(classes):
    P = classes.P
    mask = P > 0
    logw = np.where(mask, np.log(np.where(mask, P, 1.0)), 0.0)
    return (logw, mask, classes.query.astype(np.int64), classes.next_token.astype(np.int64),
            np.ascontiguousarray(classes.weights, dtype=np.float64))


def population_gd(classes, steps, eta_y, eta_z, momentum, Y, Z):
    """Compiled ``theory.tian2023.model.population_gd``; ``Y``, ``Z`` (``M x M`` float arrays) are updated in place."""
    _population_gd(*_class_arrays(classes), int(steps), float(eta_y), float(eta_z), float(momentum), Y, Z)
    return Y, Z
