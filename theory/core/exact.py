"""Exact certificates for the Graph-SVM, in rational arithmetic (python-flint).

The float answer of :mod:`theory.li2024.svm` is certified to 1e-9 relative.  This module certifies it
*exactly* for the data actually given: the float64 entries of ``E`` are dyadic rationals, so the
Graph-SVM with those entries is a QP with rational data, and its KKT conditions can be checked with no
rounding at all.

Arithmetic.  With ``D`` a power of two such that ``E_int = D E`` is an integer matrix, the Gram matrix
``E_int E_int^T`` is exact in integers (``fmpz_mat``), and so is the Gram matrix of the constraint rows,
``<(e_i - e_j) e_k^T, (e_i' - e_j') e_k'^T> = (e_i - e_j)^T (e_i' - e_j') e_k^T e_k'`` (times ``D^-4``).
Nothing is ever formed in the ``d^2`` space of W except the final ``W^svm`` for the distance report.
Rows of a cycle are therefore *exactly* dependent when they are dependent in theory.
We use python-flint's ``fmpz_mat``/``fmpq_mat`` (FLINT's fraction-free elimination) rather than mpmath
at 50 digits: a 50-digit solve of a system with condition number 1e20 (squared Gram matrices of embeddings
with condition number 1e3 and nearly dependent rows) keeps 30 digits, which is not a certificate; the
rational solve is exact whatever the conditioning, and at K <= 12 it costs milliseconds (measured in
``benchmarks/RESULTS.md``).

KKT (the minimum-norm problem is convex, so these are necessary and sufficient):
``W = sum_b y_b r_b`` over the active rows, every equality row ``r_e . W = 0``, every ``⇒`` row
``r_b . W >= 1`` with equality on the active ones, and ``y_b >= 0`` on the active ``⇒`` rows.
Writing ``y = D^4 z`` with ``Q_B z = rhs_B`` (integer Gram matrix ``Q`` of an independent set ``B`` of
active rows), the margins are ``Q[:, B] z`` exactly.  The active set is read off the float answer and
corrected by an exact active-set loop (add the most violated row, drop the most negative multiplier).

Infeasibility (dependent embeddings): a Farkas certificate ``lambda >= 0`` on the ``⇒`` rows, ``mu`` on the
equality rows, ``sum_b lambda_b r_b + sum_e mu_e r_e = 0`` with ``sum lambda > 0`` -- then
``0 = <sum lambda r + sum mu r, W> >= sum lambda > 0`` for any feasible W, a contradiction.  Found by a
float LP, then made exact in the integer null space of the Gram matrix of its support.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import flint
import numpy as np
from scipy.optimize import linprog

DISTANCE_TOL = 1e-10  # the float answer's distance from the exact one, relative to ||W^svm||


class ExactCertificateError(RuntimeError):
    """The exact KKT (or Farkas) conditions could not be established."""


def _dyadic_scale(E: np.ndarray) -> tuple[int, list[list[int]]]:
    """``(D, E_int)`` with ``E_int = D E`` exactly in integers, ``D`` a power of two."""
    if not np.all(np.isfinite(E)):
        raise ExactCertificateError("embeddings must be finite for an exact certificate")
    ratios = [[Fraction(float(x)) for x in row] for row in E]
    D = max((r.denominator for row in ratios for r in row), default=1)
    return D, [[int(r * D) for r in row] for row in ratios]


@dataclass
class RowGram:
    """Exact integer Gram matrix of constraint rows ``(k, i, j) -> (e_i - e_j) e_k^T`` (scaled by D^4)."""

    rows: list  # [(k, i, j)]
    E_int: list
    D: int

    def __post_init__(self):
        K = len(self.E_int)
        d = len(self.E_int[0]) if K else 0
        Ez = flint.fmpz_mat(K, d, [x for row in self.E_int for x in row])
        self.gram = (Ez * Ez.transpose()) if K else flint.fmpz_mat(0, 0)

    def entry(self, a, b) -> flint.fmpz:
        (k, i, j), (k2, i2, j2) = self.rows[a], self.rows[b]
        g = self.gram
        return (g[i, i2] - g[i, j2] - g[j, i2] + g[j, j2]) * g[k, k2]

    def block(self, ra, rb) -> flint.fmpz_mat:
        return flint.fmpz_mat(len(ra), len(rb), [self.entry(a, b) for a in ra for b in rb])


def _independent(gram: RowGram, order: list[int]) -> list[int]:
    """A maximal independent subset of the rows ``order`` (earlier rows preferred), exactly."""
    if not order:
        return []
    R, _, rank = gram.block(order, order).rref()
    pivots = []
    for r in range(rank):
        for c in range(R.ncols()):
            if R[r, c] != 0:
                pivots.append(order[c])
                break
    return pivots


@dataclass
class ExactSVM:
    W: flint.fmpq_mat  # d x d, exact
    multipliers: dict  # row index -> exact multiplier y_b (>= 0 on ⇒ rows)
    active: list  # ⇒ row indices active at the exact solution
    min_margin: flint.fmpq
    distance: float  # ||W_float - W_exact||_F / ||W_exact||_F for the float answer given
    iterations: int

    def rounded(self) -> np.ndarray:
        """``W_exact`` rounded entry by entry to float64 (correctly rounded)."""
        d = self.W.nrows()
        return np.array([[float(Fraction(int(self.W[a, c].p), int(self.W[a, c].q))) for c in range(d)]
                         for a in range(d)])


def relative_distance(W_exact: flint.fmpq_mat, W_float: np.ndarray) -> float:
    """``||W_float - W_exact||_F / ||W_exact||_F``, computed exactly (then rounded).

    In integers: with ``Q`` the common denominator of ``W_exact`` and ``P`` the largest (power-of-two)
    denominator of the floats, ``P Q (W_float - W_exact)`` and ``Q W_exact`` are integer matrices, so the
    ratio is one fraction of two integer sums of squares (the rational sum entry by entry was 3.4x slower,
    same value on 300 certificates)."""
    d = W_exact.nrows()
    ws = [W_exact[a, c] for a in range(d) for c in range(W_exact.ncols())]
    Q = 1
    for w in ws:
        Q = math.lcm(Q, int(w.q))
    fl = [Fraction(float(x)) for x in np.asarray(W_float, dtype=float).ravel()]
    P = max(f.denominator for f in fl)
    diff2 = norm2 = 0
    for f, w in zip(fl, ws):
        wn = int(w.p) * (Q // int(w.q))
        e = f.numerator * (P // f.denominator) * Q - wn * P
        diff2 += e * e
        norm2 += wn * wn
    ratio = Fraction(diff2, P * P * norm2) if norm2 else Fraction(diff2, P * P * Q * Q)
    return float(np.sqrt(float(ratio)))


def _to_fmpq(x: float) -> flint.fmpq:
    f = Fraction(float(x))
    return flint.fmpq(f.numerator, f.denominator)


def certify_exact(E: np.ndarray, equal_pairs: list, dominate_pairs: list, W_float: np.ndarray,
                  duals: np.ndarray, name: str = "problem", max_iter: int = 50,
                  max_distance: float = DISTANCE_TOL) -> ExactSVM:
    """Exact KKT certificate of the Graph-SVM for the float data ``E`` (see the module docstring).

    ``duals`` are the float multipliers of the ``⇒`` rows (their support seeds the active set).
    Raises :class:`ExactCertificateError` when the exact conditions fail or the float answer is more than
    ``max_distance`` (relative) away from the exact one.
    """
    D, E_int = _dyadic_scale(E)
    neq, nin = len(equal_pairs), len(dominate_pairs)
    gram = RowGram(list(equal_pairs) + list(dominate_pairs), E_int, D)
    eq_rows = list(range(neq))
    dom_rows = list(range(neq, neq + nin))
    lam = np.asarray(duals, dtype=float)
    scale = lam.max(initial=0.0)
    priority = sorted((b for b in range(nin) if lam[b] > 0), key=lambda b: -lam[b])
    active = [neq + b for b in priority]
    if not active:
        raise ExactCertificateError(f"Graph-SVM of {name}: exact certificate: no positive float multiplier "
                                    "to seed the active set")
    all_rows = eq_rows + dom_rows
    for it in range(1, max_iter + 1):
        basis = _independent(gram, eq_rows + active)
        Qb = gram.block(basis, basis)
        rhs = flint.fmpq_mat(len(basis), 1, [0 if r < neq else 1 for r in basis])
        z = flint.fmpq_mat(Qb).solve(rhs)
        zs = {r: z[t, 0] for t, r in enumerate(basis)}
        margins = flint.fmpq_mat(gram.block(all_rows, basis)) * z
        bad_eq = [r for r in eq_rows if margins[r, 0] != 0]
        if bad_eq:  # cannot happen when the equalities are consistent (W = 0 meets them); checked anyway
            raise ExactCertificateError(f"Graph-SVM of {name}: exact certificate: equality row {bad_eq[0]} "
                                        "violated")
        neg = [r for r in basis if r >= neq and zs[r] < 0]
        viol = [r for r in dom_rows if margins[r, 0] < 1]
        if not neg and not viol:
            break
        if neg:  # drop the most negative multiplier
            worst = min(neg, key=lambda r: zs[r])
            active.remove(worst)
        else:  # add the most violated ⇒ row, first in line for the basis
            worst = min(viol, key=lambda r: margins[r, 0])
            active.insert(0, worst)
    else:
        raise ExactCertificateError(f"Graph-SVM of {name}: exact active-set loop did not settle in {max_iter} steps")
    # W = D^2 sum_b z_b (E_int_i - E_int_j) E_int_k^T, exactly
    # as one product U V in C (the entry-by-entry sum in Python was most of this function's time)
    d = E.shape[1]
    support = [(r, zb) for r, zb in zs.items() if zb != 0]
    U = flint.fmpq_mat(d, max(1, len(support)))
    V = flint.fmpq_mat(max(1, len(support)), d)
    for t, (r, zb) in enumerate(support):
        k, i, j = gram.rows[r]
        for a in range(d):
            U[a, t] = zb * (E_int[i][a] - E_int[j][a])
            V[t, a] = E_int[k][a]
    Wq = (U * V) * flint.fmpq(D * D, 1)
    distance = relative_distance(Wq, W_float)
    min_margin = min((margins[r, 0] for r in dom_rows), default=flint.fmpq(1))
    if distance > max_distance:
        raise ExactCertificateError(f"Graph-SVM of {name}: float answer {distance:.2e} (relative) from the exact "
                                    f"one (allowed {max_distance:g})")
    multipliers = {r: zs[r] * flint.fmpq(D**4, 1) for r in zs}
    return ExactSVM(Wq, multipliers, [r - neq for r in basis if r >= neq], min_margin, distance, it)


@dataclass
class ExactFarkas:
    lam: dict  # ⇒ row index -> exact lambda >= 0 (scaled so that sum lambda = 1)
    mu: dict  # equality row index -> exact mu


def certify_infeasible_exact(E: np.ndarray, equal_pairs: list, dominate_pairs: list,
                             name: str = "problem") -> ExactFarkas:
    """An exact Farkas certificate that no W meets the Graph-SVM constraints (module docstring)."""
    neq, nin = len(equal_pairs), len(dominate_pairs)
    Ed = E
    rows_f = [np.outer(Ed[i] - Ed[j], Ed[k]).ravel() for k, i, j in list(equal_pairs) + list(dominate_pairs)]
    R = np.array(rows_f).reshape(neq + nin, -1)
    # LP: find lam >= 0, mu free with R^T [mu; lam] = 0 and sum lam = 1.
    n_var = neq + nin
    A_eq = np.vstack([R.T, np.concatenate([np.zeros(neq), np.ones(nin)])[None, :]])
    b_eq = np.concatenate([np.zeros(R.shape[1]), [1.0]])
    bounds = [(None, None)] * neq + [(0, None)] * nin
    res = linprog(np.zeros(n_var), A_eq=A_eq, b_eq=b_eq, bounds=bounds, method="highs")
    if res.status != 0:
        raise ExactCertificateError(f"Graph-SVM of {name}: no Farkas certificate found by the LP "
                                    f"(status {res.status}: {res.message})")
    x = res.x
    lam_f = x[neq:]
    support = [neq + b for b in range(nin) if lam_f[b] > 1e-9 * max(1.0, lam_f.max())]
    rows = list(range(neq)) + support
    D, E_int = _dyadic_scale(E)
    gram = RowGram(list(equal_pairs) + list(dominate_pairs), E_int, D)
    # R^T v = 0  <=>  (R R^T) v = 0 for the rows in play: the integer null space of their Gram matrix.
    N, nullity = gram.block(rows, rows).nullspace()
    if nullity == 0:
        raise ExactCertificateError(f"Graph-SVM of {name}: the LP's Farkas support has no exact null vector")
    basis = [[N[r, c] for r in range(len(rows))] for c in range(nullity)]
    target = [_to_fmpq(x[r]) for r in rows]
    # Project the float certificate onto the exact null space (normal equations, exact).
    Bm = flint.fmpq_mat(len(rows), nullity, [basis[c][r] for r in range(len(rows)) for c in range(nullity)])
    t = flint.fmpq_mat(len(rows), 1, target)
    coef = (Bm.transpose() * Bm).solve(Bm.transpose() * t)
    v = Bm * coef
    lam = {r - neq: v[p, 0] for p, r in enumerate(rows) if r >= neq}
    mu = {r: v[p, 0] for p, r in enumerate(rows) if r < neq}
    total = sum(lam.values(), flint.fmpq(0))
    if total <= 0 or any(val < 0 for val in lam.values()):
        raise ExactCertificateError(f"Graph-SVM of {name}: the exact Farkas vector has a negative lambda or sum <= 0")
    # Re-check R^T v = 0 exactly through the Gram matrix: v^T (R R^T) v = ||R^T v||^2 = 0.
    vv = flint.fmpq_mat(len(rows), 1, [v[p, 0] for p in range(len(rows))])
    if (vv.transpose() * flint.fmpq_mat(gram.block(rows, rows)) * vv)[0, 0] != 0:
        raise ExactCertificateError(f"Graph-SVM of {name}: the exact Farkas combination is not zero")
    return ExactFarkas({b: val / total for b, val in lam.items()}, {e: val / total for e, val in mu.items()})


# ------------------------------------------------------------------------------------------------
# Extended precision: the gradient of the loss in token space at 40 digits (mpmath)
# ------------------------------------------------------------------------------------------------
def mp_score_gradient(A, data, digits: int = 40):
    """``G = dL/dA`` (K x K nested lists of mpf) at ``digits`` digits, from float scores ``A`` taken as exact.

    Written from the definitions in the pairwise form ``ds_t = a_t sum_j a_j (g_t - g_j)`` (no
    difference of two nearly equal numbers), for every loss and head of :mod:`theory.li2024.losses`.
    """
    import mpmath

    with mpmath.workdps(digits):
        K = data.H.shape[0]
        if data.loss == "log" and data.biorthogonal:
            # The model the float path implements (theory.li2024.losses): Assumption 1 exactly, u = a_y.  The float
            # product C E^T is I only to ~eps cond(E)^2; taking it as exact evaluated another loss (stress-
            # found: cond(E) = 3.3e3 gave a 40-digit gradient 6e-12 at a W^fin whose float gradient was 2e-17).
            H = [[mpmath.mpf(int(a == b)) for b in range(K)] for a in range(K)]
        else:
            H = [[mpmath.mpf(float(x)) for x in row] for row in data.H]
        G = [[mpmath.mpf(0) for _ in range(K)] for _ in range(K)]
        for i in range(len(data.labels)):
            q, y, w = int(data.queries[i]), int(data.labels[i]), mpmath.mpf(float(data.weights[i]))
            idx = [t for t in range(K) if data.counts[i, t] > 0]
            logit = {t: mpmath.mpf(A[t][q]) + mpmath.log(mpmath.mpf(float(data.counts[i, t]))) for t in idx}
            top = max(logit.values())
            ex = {t: mpmath.exp(logit[t] - top) for t in idx}
            S = mpmath.fsum(ex.values())
            a = {t: ex[t] / S for t in idx}
            if data.loss in ("ce", "lsq"):
                z = [mpmath.fsum(H[lab][t] * a[t] for t in idx) for lab in range(K)]
                zt = max(z)
                pe = [mpmath.exp(v - zt) for v in z]
                ps = mpmath.fsum(pe)
                pme = [pe[lab] / ps if lab != y else -mpmath.fsum(pe[o] for o in range(K) if o != y) / ps
                       for lab in range(K)]
                if data.loss == "lsq":  # d(1 - p_y)^2/dz = 2 p_y (1 - p_y) (p - e_y)
                    rest = -pme[y]
                    pme = [2 * (pe[y] / ps) * rest * v for v in pme]
                g = {t: mpmath.fsum(H[lab][t] * pme[lab] for lab in range(K)) for t in idx}
            else:
                u = mpmath.fsum(H[y][t] * a[t] for t in idx)
                coef = {"log": lambda: -1 / u, "square": lambda: -2 * (1 - u), "exp": lambda: -mpmath.exp(-u)}[data.loss]()
                g = {t: coef * H[y][t] for t in idx}
            for t in idx:
                G[t][q] += w * a[t] * mpmath.fsum(a[j] * (g[t] - g[j]) for j in idx)
        return G


def mp_subspace_gradient(E, basis, theta, data, digits: int = 40) -> tuple[np.ndarray, float]:
    """``(grad_θ L(Σ θ_r Q_r), its norm)`` evaluated at ``digits`` digits (float inputs taken as exact); the
    components are rounded to float64 once, the norm is taken before rounding."""
    import mpmath

    with mpmath.workdps(digits):
        Em = mpmath.matrix(E.tolist())
        r, d, _ = basis.shape
        W = mpmath.matrix(d, d)
        for k in range(r):
            tk = mpmath.mpf(float(theta[k]))
            for a in range(d):
                for c in range(d):
                    W[a, c] += tk * mpmath.mpf(float(basis[k, a, c]))
        A = Em * W * Em.T
        K = E.shape[0]
        Al = [[A[j, k] for k in range(K)] for j in range(K)]
        G = mpmath.matrix(mp_score_gradient(Al, data, digits))
        gW = Em.T * G * Em  # grad_W L
        comps = [mpmath.fsum(mpmath.mpf(float(basis[k, a, c])) * gW[a, c] for a in range(d) for c in range(d))
                 for k in range(r)]
        return np.array([float(c) for c in comps]), float(mpmath.sqrt(mpmath.fsum(c * c for c in comps)))


def mp_subspace_gradient_norm(E, basis, theta, data, digits: int = 40) -> float:
    """``||grad_θ L(Σ θ_r Q_r)||`` evaluated at ``digits`` digits (float inputs taken as exact)."""
    return mp_subspace_gradient(E, basis, theta, data, digits)[1]


def gd_extended(A0: np.ndarray, data, M: np.ndarray, eta: float, checkpoints, normalized: bool = False,
                digits: int = 50, progress=None):
    """Token-space GD (the iteration of :func:`theory.li2024.training.gd_numpy`) with every quantity -- scores,
    gradient, step -- held at ``digits`` digits: the replay that tells a property of the theory from an
    artefact of float64.  Returns ``(B, losses)`` at the checkpoints as floats (losses are NaN: not
    evaluated).  Slow (~1 ms per step at K = 3): for replaying single counterexamples.
    """
    import mpmath

    cps = [int(c) for c in checkpoints]
    K = A0.shape[0]
    with mpmath.workdps(digits):
        A = mpmath.matrix(A0.tolist())
        B = mpmath.zeros(K, K)
        Mm = mpmath.matrix(M.tolist())
        eta_m = mpmath.mpf(float(eta))
        out = []
        c = 0
        for t in range(cps[-1] + 1):
            if t == cps[c]:
                out.append(np.array([[float(B[i, j]) for j in range(K)] for i in range(K)]))
                c += 1
                if c == len(cps):
                    break
            Al = [[A[i, j] for j in range(K)] for i in range(K)]
            G = mpmath.matrix(mp_score_gradient(Al, data, digits))
            Y = Mm * G * Mm
            s = eta_m
            if normalized:
                gn = mpmath.sqrt(mpmath.fsum(G[i, j] * Y[i, j] for i in range(K) for j in range(K)))
                s = eta_m / gn if gn > 0 else mpmath.mpf(0)
            A -= s * Y
            B += s * G
            if progress is not None and t % 1000 == 0:
                progress(t)
    return np.array(out), np.full(len(out), np.nan)
