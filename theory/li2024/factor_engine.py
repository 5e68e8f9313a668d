"""The compiled GD engine for the factors of ``W = W_K W_Q^T`` (numba; issue 38 follow-up).

It runs the iteration of :func:`theory.li2024.factorized.train_factorized`'s numpy loop (the reference it is
tested against, ``properties/li2024/test_factorized.py``) with the same checkpoints: at each step

1. **the scores** (Li et al. 2024, the model of docs/theory.md): ``A[j, k] = e_j^T W_K W_Q^T e_k``, formed as
   ``(E W_K)(E W_Q)^T`` (:func:`_scores`);
2. **the score gradient** ``G = dL/dA`` sample by sample (:func:`_score_gradient`), in the cancellation-free
   forms of :mod:`theory.li2024.losses`: for ``-log`` under Assumption 1, ``a_y - 1`` is written as minus
   the mass on the other tokens; for the ``u``-losses (``log`` with a general head, ``square``, ``exp``) the
   softmax backward is shifted to the most attended token (:func:`theory.li2024.losses.softmax_backward`),
   so nothing computes ``1 - a`` by subtraction where ``a -> 1``;
3. **the chain rule** to the factors, ``∇_{W_K} L = E^T G (E W_Q)`` and ``∇_{W_Q} L = E^T G^T (E W_K)``
   (:func:`_factor_gradients`), and ``||∇_W L||_F = ||E^T G E||_F`` for the step (:func:`_gradient_norm`);
4. **the step**: a constant ``eta``, or the local safe step ``1 / (β (||W_K||_F² + ||W_Q||_F²) + ||∇_W L||_F)``
   of :mod:`theory.li2024.factorized` (:func:`_step_size`), and the simultaneous update of both factors.

The losses ``ce`` and ``lsq`` (a softmax over the head's logits) are not compiled here: ``engine="auto"``
runs them on the numpy loop and ``engine="compiled"`` refuses them.  The loss value (a log per sample) is
evaluated at checkpoints only.  Kernels are cached on disk (``cache=True``).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from theory.li2024.engine import LOG_BIORTH, LOSS_CODES
from theory.li2024.losses import TokenData

__all__ = ["COMPILED_LOSSES", "compiled_supports", "factor_gd_compiled", "score_gradient", "warm_up"]

LOG, SQUARE, EXP = (LOSS_CODES[name] for name in ("log", "square", "exp"))  # the W engine's codes, not copies
COMPILED_LOSSES = ("log", "square", "exp")


def _loss_code(data: TokenData) -> int:
    if data.loss == "log":
        return LOG_BIORTH if data.biorthogonal else LOG
    if data.loss == "square":
        return SQUARE
    if data.loss == "exp":
        return EXP
    raise ValueError(f"the factorized compiled engine has no kernel for the {data.loss!r} loss "
                     f"(compiled: {', '.join(COMPILED_LOSSES)}); use engine='numpy' or 'auto'")


def compiled_supports(data: TokenData) -> bool:
    """True when :func:`factor_gd_compiled` has a kernel for ``data``'s loss."""
    return data.loss in COMPILED_LOSSES


class _Samples:
    """The samples of a :class:`TokenData` as flat arrays over their present tokens (the *entries*)."""

    def __init__(self, data: TokenData):
        counts = np.asarray(data.counts, float)
        n, K = counts.shape
        ptr, tok, logc, h, ylab = [0], [], [], [], []
        for i in range(n):
            present = np.flatnonzero(counts[i] > 0)
            ylab.append(-1)
            for t in present:
                if t == data.labels[i]:
                    ylab[-1] = len(tok)
                tok.append(int(t))
                logc.append(float(np.log(counts[i, t])))  # numpy's log, as the reference's log_counts
                h.append(float(data.H[data.labels[i], t]))
            ptr.append(len(tok))
        self.code = _loss_code(data)
        self.ptr = np.array(ptr, dtype=np.int64)
        self.tok = np.array(tok, dtype=np.int64)
        self.logc = np.array(logc)
        self.h = np.array(h)
        self.ylab = np.array(ylab, dtype=np.int64)
        self.queries = np.asarray(data.queries, dtype=np.int64)
        self.weights = np.asarray(data.weights, dtype=float)
        self.K = K
        self.width = int(np.diff(self.ptr).max()) if n else 0

    def args(self):
        return self.ptr, self.tok, self.logc, self.h, self.ylab, self.queries, self.weights, self.code


# ------------------------------------------------------------------------------------------------
# The steps of one GD iteration
# ------------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True, error_model="numpy")
def _scores(E, WK, WQ, EK, EQ, A):
    """Step 1: ``EK = E W_K``, ``EQ = E W_Q`` and the scores ``A = EK EQ^T`` (K x K).

    Here as dot products: the axpy form of :func:`_factor_gradients` measured slower for these two
    products (0.99 µs against 0.53 µs on ``examples/li_cyclic_trial0.json``, K = 6, d = m = 8)."""
    K, d = E.shape
    m = WK.shape[1]
    for j in range(K):
        for r in range(m):
            sk = 0.0
            sq = 0.0
            for c in range(d):
                sk += E[j, c] * WK[c, r]
                sq += E[j, c] * WQ[c, r]
            EK[j, r] = sk
            EQ[j, r] = sq
    for j in range(K):
        for k in range(K):
            s = 0.0
            for r in range(m):
                s += EK[j, r] * EQ[k, r]
            A[j, k] = s


@njit(cache=True, nogil=True, error_model="numpy")
def _score_gradient(A, ptr, tok, logc, h, ylab, queries, weights, code, want_loss, a, G):
    """Step 2: ``G = dL/dA`` (K x K, column ``k`` collecting the samples of query ``k``) and, when
    ``want_loss``, ``L`` (else 0).  Per sample ``i`` over its present tokens ``r``: logits
    ``v_r = A[t_r, q_i] + log c_r``, attention ``a = softmax(v)`` from the max shift, and ``ds = dl/dv``:

    * ``-log`` under Assumption 1: ``ds_r = a_r`` off the label, ``ds_y = -sum_{r != y} a_r`` (exact as
      ``a_y -> 1``); ``l = logsumexp(v) - v_y``.
    * ``u = sum_r a_r h_r`` losses: ``ds_r = a_r (δ_r - sum_j a_j δ_j)`` with ``δ_r = c (h_r - h_top)``, ``c =
      dl/du``, ``top`` the most attended token (:func:`theory.li2024.losses.softmax_backward`); for ``square``
      ``1 - u = sum_r a_r (1 - h_r)``.

    Returns ``(L, ok)``; ``ok`` False when ``-log u`` is infinite (``u <= 0``) or a value is not finite.
    """
    K = G.shape[0]
    for j in range(K):
        for k in range(K):
            G[j, k] = 0.0
    L = 0.0
    for i in range(ptr.shape[0] - 1):
        s0 = ptr[i]
        n = ptr[i + 1] - s0
        q = queries[i]
        top = -math.inf
        rtop = 0
        for r in range(n):
            v = A[tok[s0 + r], q] + logc[s0 + r]
            a[r] = v
            if v > top:
                top = v
                rtop = r
        ssum = 0.0
        for r in range(n):
            x = math.exp(a[r] - top)
            a[r] = x
            ssum += x
        for r in range(n):
            a[r] /= ssum
        w = weights[i]
        if code == LOG_BIORTH:
            ry = ylab[i] - s0
            other = 0.0
            for r in range(n):
                if r != ry:
                    G[tok[s0 + r], q] += w * a[r]
                    other += a[r]
            G[tok[s0 + ry], q] -= w * other
            if want_loss:
                L += w * (top + math.log(ssum) - (A[tok[s0 + ry], q] + logc[s0 + ry]))
            continue
        u = 0.0
        if code == SQUARE:  # u holds 1 - u
            for r in range(n):
                u += a[r] * (1.0 - h[s0 + r])
        else:
            for r in range(n):
                u += a[r] * h[s0 + r]
        if code == LOG:
            if not u > 0.0:
                return math.inf, False
            ell = -math.log(u) if want_loss else 0.0
            c = -1.0 / u
        elif code == SQUARE:
            ell = u * u
            c = -2.0 * u
        else:
            ell = math.exp(-u)
            c = -ell
        htop = h[s0 + rtop]
        mbar = 0.0
        for r in range(n):
            mbar += a[r] * (c * (h[s0 + r] - htop))
        for r in range(n):
            G[tok[s0 + r], q] += w * (a[r] * (c * (h[s0 + r] - htop) - mbar))
        if want_loss:
            L += w * ell
    return L, math.isfinite(L)


@njit(cache=True, nogil=True, error_model="numpy")
def _factor_gradients(E, G, EK, EQ, T, GK, GQ):
    """Step 3 (chain rule): ``GK = E^T (G EQ) = ∇_{W_K} L`` and ``GQ = E^T (G^T EK) = ∇_{W_Q} L`` (``T``: K x m
    scratch).

    Written as axpys over a contiguous row (``T[j, :] += G[j, k] EQ[k, :]``), not as a dot product per entry
    with a strided operand: each entry is still summed from 0 in the same order (bit for bit the dot-product
    loop's value, no fast-math reassociation), but a row's entries are independent, so the loop does not
    wait on one serial chain of additions per entry.  Measured on ``examples/li_cyclic_trial0.json`` (K = 6,
    d = m = 8, best of 7): this step 1.0-1.8 µs -> 0.64-0.75 µs, :func:`_gradient_norm` 0.5-1.0 µs -> 0.34 µs;
    a whole step, both engines interleaved, best of 8 runs of 2e5 steps: 2.49 -> 2.12 µs (log), 3.09 -> 2.27
    (exp), 2.59 -> 2.06 (square), the same iterates bit for bit (benchmarks/RESULTS.md)."""
    _score_times(G, EQ, T, False)
    _transpose_times(E, T, GK)
    _score_times(G, EK, T, True)
    _transpose_times(E, T, GQ)


@njit(cache=True, nogil=True, error_model="numpy")
def _score_times(G, X, out, transpose):
    """``out = G X``, or ``G^T X`` when ``transpose`` (K x m), each entry summed over the tokens in order."""
    K = G.shape[0]
    m = X.shape[1]
    for j in range(K):
        for r in range(m):
            out[j, r] = 0.0
        for k in range(K):
            g = G[k, j] if transpose else G[j, k]
            for r in range(m):
                out[j, r] += g * X[k, r]


@njit(cache=True, nogil=True, error_model="numpy")
def _transpose_times(E, T, out):
    """``out = E^T T`` (d x m), each entry summed over the tokens in order."""
    K, d = E.shape
    m = T.shape[1]
    for c in range(d):
        for r in range(m):
            out[c, r] = 0.0
        for j in range(K):
            e = E[j, c]
            for r in range(m):
                out[c, r] += e * T[j, r]


@njit(cache=True, nogil=True, error_model="numpy")
def _gradient_norm(E, G, GE, row):
    """``||E^T G E||_F = ||∇_W L||_F`` (``GE``: K x d, ``row``: d scratch), as the reference's ``np.linalg.norm``
    of the d x d gradient (no rescaling: the gradient is far above float64's underflow in the runs' range);
    axpys as in :func:`_factor_gradients`, the squares summed in the same order."""
    K, d = E.shape
    for j in range(K):
        for c in range(d):
            GE[j, c] = 0.0
        for k in range(K):
            g = G[j, k]
            for c in range(d):
                GE[j, c] += g * E[k, c]
    tot = 0.0
    for b in range(d):
        for c in range(d):
            row[c] = 0.0
        for j in range(K):
            e = E[j, b]
            for c in range(d):
                row[c] += e * GE[j, c]
        for c in range(d):
            tot += row[c] * row[c]
    return math.sqrt(tot)


@njit(cache=True, nogil=True, error_model="numpy")
def _step_size(eta, beta, WK, WQ, gnorm):
    """Step 4's size: ``eta`` when positive, else the local safe step ``1 / (β (||W_K||² + ||W_Q||²) +
    ||∇_W L||)`` (1 when that bound is 0) of :mod:`theory.li2024.factorized`."""
    if eta > 0.0:
        return eta
    f = 0.0
    for c in range(WK.shape[0]):
        for r in range(WK.shape[1]):
            f += WK[c, r] * WK[c, r] + WQ[c, r] * WQ[c, r]
    bt = beta * f + gnorm
    return 1.0 / bt if bt > 0.0 else 1.0


@njit(cache=True, nogil=True, error_model="numpy")
def _gd_factors(E, WK, WQ, ptr, tok, logc, h, ylab, queries, weights, code, width, eta, beta, cps, gscale,
                outW, outL):
    """GD on ``(W_K, W_Q)`` (in place) from step 0 to ``cps[-1]``, recording ``W = W_K W_Q^T`` and ``L`` at
    the strictly increasing steps ``cps``.  ``gscale`` multiplies the score gradient: 1 in every call
    but the tests' planted bug.  Returns ``(ok, step)``: False and the step where the loss or the scores
    stopped being finite."""
    K, d = E.shape
    m = WK.shape[1]
    EK = np.empty((K, m))
    EQ = np.empty((K, m))
    A = np.empty((K, K))
    G = np.empty((K, K))
    T = np.empty((K, m))
    GE = np.empty((K, d))
    row = np.empty(d)
    GK = np.empty((d, m))
    GQ = np.empty((d, m))
    a = np.empty(max(width, 1))
    c = 0
    last = cps[cps.shape[0] - 1]
    for t in range(last + 1):
        record = t == cps[c]
        _scores(E, WK, WQ, EK, EQ, A)
        L, ok = _score_gradient(A, ptr, tok, logc, h, ylab, queries, weights, code, record, a, G)
        if record:
            for b in range(d):
                for e in range(d):
                    s = 0.0
                    for r in range(m):
                        s += WK[b, r] * WQ[e, r]
                    outW[c, b, e] = s
            outL[c] = L
            c += 1
        if not ok:
            return False, t
        if t == last:
            break
        if gscale != 1.0:
            for j in range(K):
                for k in range(K):
                    G[j, k] *= gscale
        _factor_gradients(E, G, EK, EQ, T, GK, GQ)
        s = _step_size(eta, beta, WK, WQ, _gradient_norm(E, G, GE, row))
        for b in range(d):
            for r in range(m):
                WK[b, r] -= s * GK[b, r]
                WQ[b, r] -= s * GQ[b, r]
    return True, last


# ------------------------------------------------------------------------------------------------
# Public API
# ------------------------------------------------------------------------------------------------
def factor_gd_compiled(E, WK, WQ, data: TokenData, checkpoints, beta: float, eta: float | None = None,
                       _gscale: float = 1.0):
    """GD on ``(W_K, W_Q)``: the compiled twin of the loop in :func:`theory.li2024.factorized.train_factorized`.

    Parameters
    ----------
    E : numpy.ndarray
        Embeddings (K x d).
    WK, WQ : numpy.ndarray
        The start (d x m each); not modified.
    data : TokenData
        The problem in token space (loss ``log``, ``square`` or ``exp``).
    checkpoints : sequence of int
        Steps at which ``W`` and ``L`` are recorded (sorted, deduplicated here; the last is the run's length).
    beta : float
        The W-space curvature bound (:func:`theory.li2024.losses.smoothness`) of the local safe step.
    eta : float, optional
        A constant step; None for the local safe step.
    _gscale : float
        Multiplies the score gradient: the tests' planted bug, 1 otherwise.

    Returns
    -------
    tuple
        ``(steps, Ws, losses, WK, WQ)``: the checkpoint steps, ``W`` (n x d x d) and ``L`` there, and the
        final factors.

    Raises
    ------
    FloatingPointError
        When the loss or the scores stop being finite (the step where they did is in the message).
    """
    cps = np.unique(np.asarray(checkpoints, dtype=np.int64).ravel())
    if cps.size == 0 or cps[0] < 0:
        raise ValueError("checkpoints: expected a non-empty list of non-negative steps")
    smp = _Samples(data)
    E = np.ascontiguousarray(E, dtype=float)
    WK = np.array(WK, dtype=float, order="C")
    WQ = np.array(WQ, dtype=float, order="C")
    d = E.shape[1]
    outW = np.zeros((cps.size, d, d))
    outL = np.zeros(cps.size)
    ok, step = _gd_factors(E, WK, WQ, smp.ptr, smp.tok, smp.logc, smp.h, smp.ylab, smp.queries, smp.weights,
                           smp.code, smp.width, -1.0 if eta is None else float(eta), float(beta), cps,
                           float(_gscale), outW, outL)
    if not ok:
        raise FloatingPointError(f"factorized GD diverged at step {step}: loss not finite")
    return cps, outW, outL, WK, WQ


def score_gradient(A: np.ndarray, data: TokenData) -> tuple[float, np.ndarray]:
    """``(L, G = dL/dA)`` at the scores ``A`` by the compiled step 2 (for the saturation tests)."""
    smp = _Samples(data)
    G = np.zeros((smp.K, smp.K))
    L, _ = _score_gradient(np.ascontiguousarray(A, dtype=float), *smp.args(), True, np.empty(max(smp.width, 1)), G)
    return L, G


def warm_up() -> None:
    """Load (or compile once and cache) the kernels."""
    from theory.core.problem import Problem
    from theory.li2024.losses import safe_step

    p = Problem.create(np.eye(2), [[0, 1], [1, 0]], [1, 0])
    factor_gd_compiled(p.E, np.full((2, 1), 0.1), np.full((2, 1), 0.1), TokenData.from_problem(p), [0, 1],
                       1.0 / safe_step(p))
