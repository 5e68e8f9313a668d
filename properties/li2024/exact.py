"""High-precision evaluations of Li et al.'s loss gradient in the scores, written from the model's definition
with mpmath and sharing no code with ``theory/``: one sample's ``dl/ds`` at 50 digits (the reference of the
saturated-gradient tests) and the whole ``G`` at 40 (the reference the extended-precision right-hand side is
measured against, ``test_extended_precision``).  Not a test module.

The model (Section 2, and Section 5's losses): sample ``i`` with query token ``q`` and token counts ``c`` attends
to token ``t`` with weight ``a_t ∝ c_t exp(A[t, q])``; the head ``H`` maps ``a`` to ``u = H[y] · a`` (the log,
square and exp losses: ``-log u``, ``(1 - u)²``, ``e^{-u}``) or to class logits ``z = H a`` (``ce``:
``-log softmax(z)_y``; ``lsq``: ``(1 - softmax(z)_y)²``).  ``L = (1/n) Σ_i ℓ_i`` and ``G = dL/dA``:
``dℓ/dA[t, q] = a_t (g_t - Σ_u a_u g_u)`` with ``g = dℓ/da``, collected in column ``q``.
"""
from __future__ import annotations

import mpmath
import numpy as np

__all__ = ["mp_sample_gradient", "mp_score_gradient", "score_gradient", "scores"]

DIGITS = 40
SAMPLE_DIGITS = 50  # mp_sample_gradient's, on top of the digits its own definitions cancel


def scores(A1: np.ndarray, M: np.ndarray, Y: np.ndarray, MQQ: np.ndarray, Q) -> list[list]:
    """The scores ``A1 - M B M`` with ``B`` zero outside the query columns ``Q`` (``Y = B[:, Q]``), at
    :data:`DIGITS` digits from the exact values of the float64 inputs (K x K mpmath numbers)."""
    with mpmath.workdps(DIGITS):
        K, nq = len(A1), len(Q)
        A = [[mpmath.mpf(float(v)) for v in row] for row in A1]
        MY = [[mpmath.fsum(mpmath.mpf(float(M[i, k])) * mpmath.mpf(float(Y[k, j])) for k in range(K))
               for j in range(nq)] for i in range(K)]
        for i in range(K):
            for jj, j in enumerate(Q):
                A[i][int(j)] -= mpmath.fsum(MY[i][l] * mpmath.mpf(float(MQQ[l, jj])) for l in range(nq))
        return A


def score_gradient(A, *, H: np.ndarray, queries, labels, counts, loss: str) -> list[list]:
    """``G = dL/dA`` (K x K, mpmath numbers) at scores ``A`` (float64 entries taken as exact, or :func:`scores`):
    :func:`mp_sample_gradient` per sample, summed over the samples at :data:`DIGITS` digits, no rounding
    between (the in-SCC sums cancel to ``O(1/t)`` late).  ``queries``, ``labels``: one per sample;
    ``counts``: n x K."""
    K, n = len(A), len(queries)
    G = [[mpmath.mpf(0) for _ in range(K)] for _ in range(K)]
    with mpmath.workdps(DIGITS):
        for q, y, c in zip(queries, labels, counts):
            q = int(q)
            column = [A[t][q] for t in range(K)]
            for t, v in mp_sample_gradient(column, c, H, int(y), loss).items():
                G[t][q] += v / n
    return G


def mp_sample_gradient(s, counts, H, y, loss) -> dict:
    """dl/ds of one sample (scores ``s``: float64 entries taken as exact, or mpmath numbers), ``{token: mpf}``
    over the tokens present, to 50 significant digits, pairwise form, straight from the definitions.

    The definitions themselves cancel: ``1 - u`` for ``square`` with ``u = a_y ~ 1 - e^{-margin}`` loses
    ``margin / ln 10`` digits (up to 304 at a margin of 700; stress-found: at a fixed 50 digits the
    reference was the inaccurate side).  So the working precision is 50 digits plus those."""
    K = len(s)
    idx = [t for t in range(K) if counts[t] > 0]
    spread = float(max(s[t] for t in idx) - min(s[t] for t in idx)) + float(np.log(max(counts)))
    with mpmath.workdps(SAMPLE_DIGITS + int(spread / np.log(10.0)) + 10):
        logits = {t: _mpf(s[t]) + mpmath.log(mpmath.mpf(float(counts[t]))) for t in idx}
        top = max(logits.values())
        ex = {t: mpmath.exp(logits[t] - top) for t in idx}
        S = mpmath.fsum(ex.values())
        a = {t: ex[t] / S for t in idx}
        Hm = [[mpmath.mpf(float(H[i, j])) for j in range(K)] for i in range(K)]
        if loss in ("ce", "lsq"):
            z = [mpmath.fsum(Hm[lab][t] * a[t] for t in idx) for lab in range(K)]
            zt = max(z)
            pe = [mpmath.exp(v - zt) for v in z]
            ps = mpmath.fsum(pe)
            p = [v / ps for v in pe]
            pme = [p[lab] if lab != y else -mpmath.fsum(p[o] for o in range(K) if o != y) for lab in range(K)]
            if loss == "lsq":  # l = (1 - p_y)^2 = (sum_{o != y} p_o)^2: dl/dz = 2 p_y (1 - p_y) (p - e_y)
                pme = [2 * p[y] * mpmath.fsum(p[o] for o in range(K) if o != y) * v for v in pme]
            g = {t: mpmath.fsum(Hm[lab][t] * pme[lab] for lab in range(K)) for t in idx}
        else:
            u = mpmath.fsum(Hm[y][t] * a[t] for t in idx)
            coef = {"log": -1 / u, "square": -2 * (1 - u), "exp": -mpmath.exp(-u)}[loss]
            g = {t: coef * Hm[y][t] for t in idx}
        return {t: a[t] * mpmath.fsum(a[j] * (g[t] - g[j]) for j in idx) for t in idx}


def mp_score_gradient(s, counts, H, y, loss) -> np.ndarray:
    """:func:`mp_sample_gradient` rounded to float64 (K entries, 0 for the tokens absent)."""
    out = np.zeros(len(s))
    for t, v in mp_sample_gradient(s, counts, H, y, loss).items():
        out[t] = float(v)
    return out


def _mpf(v):
    return v if isinstance(v, mpmath.mpf) else mpmath.mpf(float(v))
