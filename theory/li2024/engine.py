"""The compiled token-space GD engine (numba), for plain and normalized GD and all five losses.

It runs the same iteration as :func:`theory.li2024.training.gd_numpy` (the reference it is tested against):
``A <- A - s M G M``, ``B <- B + s G`` with ``G = dL/dA`` from :mod:`theory.li2024.losses`, ``s = eta`` or
``eta / ||E^T G E||_F``, and returns ``(B, L)`` at the checkpoints.  What makes a step cheap:

* Only the pairs ``P = {(j, k) : token j occurs in a sample whose query is k}`` matter.  A score
  ``A[j, k]`` outside ``P`` never enters a softmax (its count is 0) and ``G`` is zero outside ``P``,
  so the state is the vector ``A_P`` (and ``B_P``), not a K x K matrix.
* The update restricted to ``P`` is ``(M G M)_P`` with ``G`` supported on ``P``: with ``U`` the tokens
  and ``Q`` the queries, ``Z = M[U, U] G[U, Q]`` costs ``|P| |U|`` and ``(Z M[Q, Q])_P`` costs
  ``|P| |Q|``, instead of the ``2 K^3`` of two dense products.
* ``||E^T G E||_F^2 = tr(G^T M G M) = <G, M G M>`` is a dot product over ``P`` with the update
  just computed, so normalized GD costs ``|P|`` more flops.
* The loss value (logs) is evaluated only at checkpoints; divergence is still detected every step
  (non-finite scores, or ``u <= 0`` for ``-log u`` with a general head), where the reference raises.
* The whole step is one loop body in :func:`_gd_core`: a jitted helper taking arrays, even inlined,
  costs an atomic incref/decref per array per step (about half of a small problem's step).  The dense
  ``(M G M)_P`` is written as axpys (no serial reduction chain), and the packing is compiled too.
  At the paper's setting (P = 21 pairs) a step is ~310 ns: ~90 ns of it the 21 ``exp`` calls.
* Large problems whose pairs fill the U x Q block (``UPDATE_BLOCK``) take the update as two BLAS dgemm
  calls and, for ``-log`` under Assumption 1, run in :func:`_gd_dense_log`: the state lives in the dense
  Q x U block, the gradient is dense rows of a samples x U count matrix (``GRAD_MIN_FILL``) and the exp is
  vectorized (:func:`vector_exp`, within 1 ulp of libm): there the gathers, scatters and libm calls, not
  the arithmetic, were what a step cost.

Compilation is cached on disk (``cache=True``); :func:`warm_up` triggers it once per process.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from theory.li2024.losses import TokenData

LOSS_CODES = {"log": 1, "ce": 2, "square": 3, "exp": 4, "lsq": 5}
LOG_BIORTH = 0  # -log u with C E^T = I: the stable logsumexp form (as in theory.li2024.losses)

OK, DIVERGED, STOPPED = 0, 1, 2


# ------------------------------------------------------------------------------------------------
# Packing: a TokenData problem as two flat arrays (ints, floats) over the pairs P
# ------------------------------------------------------------------------------------------------
NHEAD = 9  # int header: P, m, entries, |U|, |Q|, K, loss code, update mode (UPDATE_*), dense gradient
DENSE_MAX_P = 48  # up to here (M G M)_P is one dense P x P mat-vec: contiguous, vectorized, no gathers
# Update modes.  SPARSE: (M G M)_P by the pair lists (|P| (|U| + |Q|) flops with gathers and a serial
# dot-product chain per pair).  KMAT: the P x P mat-vec above.  BLOCK: when P fills at least
# BLOCK_MIN_FILL of the U x Q block, G is scattered into a dense |U| x |Q| matrix and M[U,U] G M[Q,Q] is
# two BLAS dgemm calls (|U| |Q| (|U| + |Q|) flops near the machine's peak); then Y is gathered on P.
UPDATE_SPARSE, UPDATE_KMAT, UPDATE_BLOCK = 0, 1, 2
BLOCK_MIN_FILL = 0.5
# The -log gradient under Assumption 1 on the dense block too (block mode only): the samples' sums over their
# tokens become dense rows of a samples x U count matrix (contiguous loads, independent partial sums)
# instead of gathers and scatters through the entry lists, when the entries fill at least this share of it.
GRAD_MIN_FILL = 0.25


class Packed:
    """One problem restricted to the pairs ``P`` (see the module docstring), as ``ints`` and ``floats``.

    Built by the compiled :func:`_pack` (a few microseconds; the Python version cost ~120 us, i.e.
    60 ns per step of a 2000-step run at the paper's setting).
    """

    def __init__(self, A0, data: TokenData, M):
        if data.loss == "log" and data.biorthogonal:
            code = LOG_BIORTH
        elif data.loss in LOSS_CODES:
            code = LOSS_CODES[data.loss]
        else:
            raise ValueError(f"unknown loss {data.loss!r}")
        f, i8 = np.float64, np.int64
        c = np.ascontiguousarray  # one compiled specialization of _pack
        self.ints, self.floats, self.pj, self.pk = _pack(
            c(A0, dtype=f), c(data.counts, dtype=f), c(data.queries, dtype=i8), c(data.labels, dtype=i8),
            c(data.weights, dtype=f), c(data.H, dtype=f), c(M, dtype=f), code, DENSE_MAX_P, BLOCK_MIN_FILL,
            GRAD_MIN_FILL)
        self.K = data.H.shape[0]
        self.P = int(self.ints[0])
        # log counts with numpy's log, as the Python packing did (bit-identical packed problems)
        P, m, ne = self.P, int(self.ints[1]), int(self.ints[2])
        o = P + m + ne
        self.floats[o:o + ne] = np.log(self.floats[o - ne:o])

    @property
    def pairs(self):
        return list(zip(self.pj.tolist(), self.pk.tolist()))

    def unpack(self, outB):
        """Per-checkpoint ``B_P`` back to K x K matrices (zero outside P, as in the reference)."""
        B = np.zeros((outB.shape[0], self.K, self.K))
        B[:, self.pj, self.pk] = outB
        return B


@njit(cache=True, nogil=True)
def _pack(A0, counts, queries, labels, weights, H, M, code, dense_max, block_min_fill, grad_min_fill):
    """``(ints, floats, pj, pk)`` of :class:`Packed` (layout: :func:`_gd_core`; log counts left 0)."""
    m, K = counts.shape
    # Q: the queries present, sorted; P grouped by query: the tokens of any sample of that query.
    sup = np.zeros((K, K), dtype=np.bool_)  # sup[k, j]: token j occurs in a sample whose query is k
    isq = np.zeros(K, dtype=np.bool_)
    ne = 0
    for i in range(m):
        k = queries[i]
        isq[k] = True
        for j in range(K):
            if counts[i, j] > 0:
                sup[k, j] = True
                ne += 1
    qidx = np.full(K, -1, dtype=np.int64)
    nq = 0
    for k in range(K):
        if isq[k]:
            qidx[k] = nq
            nq += 1
    P = 0
    isu = np.zeros(K, dtype=np.bool_)
    for k in range(K):
        if isq[k]:
            for j in range(K):
                if sup[k, j]:
                    P += 1
                    isu[j] = True
    uidx = np.full(K, -1, dtype=np.int64)
    nu = 0
    for j in range(K):
        if isu[j]:
            uidx[j] = nu
            nu += 1
    U = np.empty(nu, dtype=np.int64)
    Q = np.empty(nq, dtype=np.int64)
    for j in range(K):
        if isu[j]:
            U[uidx[j]] = j
        if isq[j]:
            Q[qidx[j]] = j
    pidx = np.full((K, K), -1, dtype=np.int64)  # pidx[j, k]
    pj = np.empty(P, dtype=np.int64)
    pk = np.empty(P, dtype=np.int64)
    p = 0
    for k in range(K):
        if isq[k]:
            for j in range(K):
                if sup[k, j]:
                    pidx[j, k] = p
                    pj[p] = j
                    pk[p] = k
                    p += 1
    dense = P <= dense_max
    mode = UPDATE_KMAT if dense else (UPDATE_BLOCK if P >= block_min_fill * nu * nq else UPDATE_SPARSE)
    # ints: header, ptr, ylab, labels, sample query index, entry pair, entry token, pu, pq
    ib = np.empty(NHEAD + (m + 1) + 3 * m + 2 * ne + 2 * P, dtype=np.int64)
    ib[0], ib[1], ib[2], ib[3], ib[4], ib[5], ib[6], ib[7] = P, m, ne, nu, nq, K, code, mode
    ib[8] = mode == UPDATE_BLOCK and code == LOG_BIORTH and ne >= grad_min_fill * m * nu
    o_ptr = NHEAD
    o_ylab = o_ptr + m + 1
    o_y = o_ylab + m
    o_sq = o_y + m
    o_ep = o_sq + m
    o_et = o_ep + ne
    o_pu = o_et + ne
    o_pq = o_pu + P
    # floats: A0 on P, weights, entry counts, log counts, H[y, token], MUt, MQt, HT, KmatT
    fb = np.zeros(P + m + 3 * ne + nu * nu + nq * nq + K * K + (P * P if dense else 0))
    f_w = P
    f_c = f_w + m
    f_h = f_c + 2 * ne
    f_mu = f_h + ne
    f_mq = f_mu + nu * nu
    f_ht = f_mq + nq * nq
    f_km = f_ht + K * K
    e = 0
    ib[o_ptr] = 0
    for i in range(m):
        k = queries[i]
        ib[o_ylab + i] = -1
        ib[o_y + i] = labels[i]
        ib[o_sq + i] = qidx[k]
        fb[f_w + i] = weights[i]
        for j in range(K):
            cnt = counts[i, j]
            if cnt > 0:
                if j == labels[i]:
                    ib[o_ylab + i] = e
                ib[o_ep + e] = pidx[j, k]
                ib[o_et + e] = j
                fb[f_c + e] = cnt
                fb[f_h + e] = H[labels[i], j]
                e += 1
        ib[o_ptr + i + 1] = e
    for p in range(P):
        ib[o_pu + p] = uidx[pj[p]]
        ib[o_pq + p] = qidx[pk[p]]
        fb[p] = A0[pj[p], pk[p]]
    # Transposes, so both halves of M G M read rows: MUt[a, b] = M[U_b, U_a], MQt[a, b] = M[Q_b, Q_a].
    for a in range(nu):
        for b in range(nu):
            fb[f_mu + a * nu + b] = M[U[b], U[a]]
    for a in range(nq):
        for b in range(nq):
            fb[f_mq + a * nq + b] = M[Q[b], Q[a]]
    for a in range(K):
        for b in range(K):
            fb[f_ht + a * K + b] = H[b, a]
    if dense:
        # Kmat[p, p'] = M[j, j'] M[k', k] for p = (j, k), p' = (j', k'): (M G M)_P = Kmat G_P.  Stored
        # transposed (KmatT[p', p] = Kmat[p, p']): the kernel forms Kmat G as axpys over its rows.
        for a in range(P):
            for b in range(P):
                fb[f_km + a * P + b] = M[pj[b], pj[a]] * M[pk[a], pk[b]]
    return ib, fb, pj, pk


# ------------------------------------------------------------------------------------------------
# Kernels
# ------------------------------------------------------------------------------------------------
EPS = 2.220446049250313e-16  # float64 machine epsilon
EXP_FLOOR = -708.0  # exp below this is subnormal (slow on x86) and < 1e-307: taken as 0
# The vectorized exp of the dense-gradient path (see _gd_core)
LOG2E = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01  # ln 2 to 32 bits: k LN2_HI is exact for |k| < 2^20
LN2_LO = 1.90821492927058770002e-10  # ln 2 - LN2_HI
EXP_TAYLOR = np.array([1.0 / math.factorial(i) for i in range(14)])
SHIFTER = 6755399441055744.0  # 1.5 * 2^52: x + SHIFTER rounds x to an integer, held in the low bits
SHIFTER_BITS = int(np.array([SHIFTER]).view(np.int64)[0])


@njit(cache=True, nogil=True, error_model="numpy")
def _exp_reduced(x):
    """``(e^t, k + SHIFTER)`` with ``e^x = e^t 2^k`` for ``x`` clamped below at EXP_FLOOR: Cody-Waite range
    reduction (``x = k ln2 + t``, ``|t| <= ln2 / 2``, ln 2 in two parts) and the Taylor polynomial of degree 13
    (truncation < 4e-18 relative).  Scalar in, scalars out and no branch, so a loop calling it is inlined and
    vectorized by the compiler, where libm's exp is one call per entry.  ``k`` is rounded by adding SHIFTER
    (1.5 2^52: the sum's last place is 1) and handed back as that sum, whose low bits are ``k`` in integer form
    (:func:`_exp_scale`): AVX2 has no packed float64 -> int64 conversion, and with one the loop ran
    scalar (4.2 against 2.5 ns per exp on a Zen 3 core)."""
    x = x if x > EXP_FLOOR else EXP_FLOOR
    kf = x * LOG2E + SHIFTER
    k = kf - SHIFTER  # exact: an integer, |k| <= 1022
    t = (x - k * LN2_HI) - k * LN2_LO
    v = EXP_TAYLOR[13]
    for deg in range(12, -1, -1):
        v = v * t + EXP_TAYLOR[deg]
    return v, kf


@njit(cache=True, nogil=True, error_model="numpy")
def _exp_scale(kbits):
    """In place: the bits of ``k + SHIFTER`` (from :func:`_exp_reduced`) -> the bits of the float64 ``2^k``
    (integer arithmetic only: vectorized)."""
    for r in range(kbits.shape[0]):
        kbits[r] = (kbits[r] - SHIFTER_BITS + 1023) << 52


@njit(cache=True, nogil=True, error_model="numpy")
def vector_exp(x):
    """``exp(x)`` (0 at or below EXP_FLOOR) as the dense-gradient path of :func:`_gd_core` computes it:
    within 1 ulp of libm's (tested); 2^k is written into the exponent bits."""
    n = x.shape[0]
    out = np.empty(n)
    kbits = np.empty(n, dtype=np.int64)
    kscale = kbits.view(np.float64)
    for r in range(n):
        v, kf = _exp_reduced(x[r])
        out[r] = v
        kscale[r] = kf
    _exp_scale(kbits)
    for r in range(n):
        v = out[r] * kscale[r]
        out[r] = v if x[r] > EXP_FLOOR else 0.0
    return out


@njit(cache=True, nogil=True, error_model="numpy")  # no ZeroDivisionError branches (see _gd_core)
def _sample_softmax(A, ptr, ent_p, ent_logc, i, a):
    """Sample i's attention over its support into ``a`` with its own max shift: (top, sum).

    Only for the rare sample whose pair-shifted sum under/overflows: an ordinary call, not inlined.
    """
    s0 = ptr[i]
    n = ptr[i + 1] - s0
    top = -math.inf
    for r in range(n):
        v = A[ent_p[s0 + r]] + ent_logc[s0 + r]
        a[r] = v
        if v > top:
            top = v
    ssum = 0.0
    for r in range(n):
        x = a[r] - top
        x = math.exp(x) if x > EXP_FLOOR else 0.0
        a[r] = x
        ssum += x
    inv = 1.0 / ssum
    for r in range(n):
        a[r] *= inv
    return top, ssum


@njit(cache=True, nogil=True, error_model="numpy")
def _log_sample_fallback(A, ptr, ent_p, ent_logc, i, ey, wi, a, G, Sg):
    """The ``-log`` (Assumption 1) gradient of the rare sample ``i`` whose pair-shifted sum under/overflows,
    from its own max shift (:func:`_sample_softmax`): adds ``w_i a_t`` off the label and ``-w_i sum_{t != y}
    a_t`` at it to ``G`` (and the magnitudes to ``Sg``); returns its loss term, NaN exactly when the
    softmax is not finite (the max shift keeps the term itself from being NaN).  Shared by the pair-list and the dense-row gradients; an ordinary call, not inlined."""
    s0 = ptr[i]
    n = ptr[i + 1] - s0
    top, ssum = _sample_softmax(A, ptr, ent_p, ent_logc, i, a)
    if not math.isfinite(ssum):
        return math.nan
    other = 0.0
    for r in range(n):
        if s0 + r != ey:
            G[ent_p[s0 + r]] += wi * a[r]
            Sg[ent_p[s0 + r]] += wi * a[r]
            other += a[r]
    py = ent_p[ey]
    G[py] -= wi * other
    Sg[py] += wi * other
    return top + math.log(ssum) - (A[py] + ent_logc[ey])


# error_model="numpy": no ZeroDivisionError check (a branch per division, which also blocks vectorizing);
# every divisor here is >= 1, >= 1e-280 or tested > 0 first.
@njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc"})
def _row_dots(Cd, Ex2, sq, out):
    """``out[i] = <Cd[i], Ex2[sq[i]]>``: the dense kernel's per-sample sums over their tokens, with the
    reassociation that lets the compiler keep vector partial sums (a fixed order for a given build; without it
    a dot product runs as one scalar chain, or as scalar partial sums: 4.4 against 2.2 us per step at
    256 x 50).  Its own function so that the flag reaches nothing else, in particular not the exp's range
    reduction, whose two-part subtraction reassociation would undo."""
    for i in range(Cd.shape[0]):
        b = sq[i]
        s = 0.0
        for u in range(Cd.shape[1]):
            s += Cd[i, u] * Ex2[b, u]
        out[i] = s


@njit(cache=True, nogil=True, error_model="numpy")
def _gd_dense_log(A0, w, ptr, ylab, sq, ent_p, ent_c, ent_logc, pu, pq, MUt, MQt, K, eta, normalized, cps, tol,
                  outB, outL):
    """:func:`_gd_core` for ``-log`` under Assumption 1 on the dense block (``Packed.ints[8]``): the whole state
    in the dense ``Q x U`` layout, row ``b`` the query ``Q_b``, column ``u`` the token ``U_u``.

    The pair-list form of the block path moved every quantity between ``P`` and the dense block each step
    (a max and a shift per query block, a scatter of the exps, a gather of ``R``, a scatter of ``G``, a gather
    of ``Y``: ~10 indexed passes over ``P``, half of a step at ``P = 2,429``).  Here ``A``, ``B``, ``G``, ``Y``
    and the exps live in the block itself, and every pass is a contiguous, vectorized loop over it.  Off ``P``
    (3-5% of the block at the benchmark's sizes) ``A`` is ``-inf``, so its exp is 0 and it never wins a row's
    max, ``G`` is 0, and the update is masked so that ``A`` stays ``-inf`` there; ``B`` is gathered on ``P``
    only at checkpoints.  Same arithmetic as the pair-list form, up to the order of ``<G, Y>`` and the
    normalized floor's sums (rounding level, normalized GD only).

    It repeats :func:`_gd_core`'s step structure (the four-chain maxima, checkpoints, early stop, the
    normalized scale) instead of sharing helpers with it: a helper taking arrays costs an atomic
    incref/decref per array per call, which the small problems' ~0.3 us steps cannot afford.  Both kernels
    are checked against the same numpy reference (``properties/li2024/test_engine.py``, every update path forced).
    """
    P = A0.shape[0]
    m = w.shape[0]
    nu = MUt.shape[0]
    nq = MQt.shape[0]
    N = nq * nu
    pd = np.empty(P, dtype=np.int64)  # pair p's place in the block
    for p in range(P):
        pd[p] = pq[p] * nu + pu[p]
    ent_d = np.empty(ent_p.shape[0], dtype=np.int64)
    for r in range(ent_p.shape[0]):
        ent_d[r] = pd[ent_p[r]]
    A = np.full(N, -math.inf)
    mk = np.zeros(N)  # 1 on P: the update's mask
    pnorm = np.zeros(N)  # ||e_j|| ||e_k|| of pair (j, k), 0 off P
    for p in range(P):
        A[pd[p]] = A0[p]
        mk[pd[p]] = 1.0
        pnorm[pd[p]] = math.sqrt(max(MUt[pu[p], pu[p]], 0.0) * max(MQt[pq[p], pq[p]], 0.0))
    # Cd[i, u]: count of token U_u in sample i except its label's; cy / pyl: the label's count and place.
    Cd = np.zeros((m, nu))
    cy = np.zeros(m)
    pyl = np.zeros(m, dtype=np.int64)
    maxn = 1
    for i in range(m):
        maxn = max(maxn, ptr[i + 1] - ptr[i])
        for r in range(ptr[i], ptr[i + 1]):
            if r != ylab[i]:
                Cd[i, pu[ent_p[r]]] = ent_c[r]
        if ylab[i] >= 0:
            cy[i] = ent_c[ylab[i]]
            pyl[i] = ent_d[ylab[i]]
    B = np.zeros(N)
    G = np.zeros(N)
    Y = np.zeros(N)
    Sg = np.zeros(N)  # natural scale of G, for normalized GD's floor
    Ex = np.zeros(N)
    Rd = np.zeros(N)  # R of each pair: sum_i w_i c_ij / S_i over the samples of its query
    xs = np.zeros(N)  # A - its row's max
    kbits = np.zeros(N, dtype=np.int64)  # 2^k of exp's range reduction, as float64 bits
    kscale = kbits.view(np.float64)
    G2 = G.reshape((nq, nu))
    Y2 = Y.reshape((nq, nu))
    A2 = A.reshape((nq, nu))
    Ex2 = Ex.reshape((nq, nu))
    Rd2 = Rd.reshape((nq, nu))
    xs2 = xs.reshape((nq, nu))
    others = np.zeros(m)
    Z = np.zeros((nq, nu))
    qmax = np.zeros(nq)
    a = np.zeros(maxn)
    fulps = 4.0 * (K + 2) * EPS  # theory.li2024.losses.floor_ulps(K) * eps
    ncp = cps.shape[0]
    c = 0
    last = cps[ncp - 1]
    t = 0
    again = False
    while t <= last:
        record = t == cps[c]
        want_loss = record or again
        # ---- 1. exps: each row's max (four independent chains, as _gd_core), the shift, vector_exp's loops
        ok = True
        L = 0.0
        for b in range(nq):
            s = b * nu
            e = s + nu
            m0 = -math.inf
            m1 = -math.inf
            m2 = -math.inf
            m3 = -math.inf
            r = s
            while r + 4 <= e:
                if A[r] > m0:
                    m0 = A[r]
                if A[r + 1] > m1:
                    m1 = A[r + 1]
                if A[r + 2] > m2:
                    m2 = A[r + 2]
                if A[r + 3] > m3:
                    m3 = A[r + 3]
                r += 4
            while r < e:
                if A[r] > m0:
                    m0 = A[r]
                r += 1
            mx = max(max(m0, m1), max(m2, m3))
            if not math.isfinite(mx):
                ok = False
                break
            qmax[b] = mx
            for u in range(nu):
                xs2[b, u] = A2[b, u] - mx
        if ok:
            for r in range(N):
                v, kf = _exp_reduced(xs[r])
                Ex[r] = v
                kscale[r] = kf
            _exp_scale(kbits)
            for r in range(N):
                v = Ex[r] * kscale[r]
                Ex[r] = v if xs[r] > EXP_FLOOR else 0.0
        # ---- 2. the gradient: other_i = <Cd_i, Ex_b> and R_b += f_i Cd_i per sample, then G = label part + Ex R
        if not ok:
            L = math.nan
        else:
            for r in range(N):
                Rd[r] = 0.0
                G[r] = 0.0
                Sg[r] = 0.0
            _row_dots(Cd, Ex2, sq, others)
            for i in range(m):
                ey = ylab[i]
                if ey < 0:
                    L = math.inf  # label absent: -log u = inf
                    ok = False
                    break
                b = sq[i]
                other = others[i]
                py = pyl[i]
                S = other + cy[i] * Ex[py]
                ell = 0.0
                if S >= 1e-280 and S < math.inf:
                    f = w[i] / S
                    for u in range(nu):
                        Rd2[b, u] += f * Cd[i, u]
                    G[py] -= f * other  # w (a_y - 1) = -w (1 - a_y), without the cancellation
                    Sg[py] += f * other
                    if want_loss:
                        ell = qmax[b] + math.log(S) - (A[py] + ent_logc[ey])
                else:
                    ell_i = _log_sample_fallback(A, ptr, ent_d, ent_logc, i, ey, w[i], a, G, Sg)
                    if math.isnan(ell_i):
                        L = math.nan
                        ok = False
                        break
                    if want_loss:
                        ell = ell_i
                L += w[i] * ell
            if ok:
                for r in range(N):
                    v = Ex[r] * Rd[r]
                    G[r] += v
                    Sg[r] += v
        if ok and not math.isfinite(L):
            ok = False
        if again:  # stationary to tolerance: the remaining checkpoints hold the current state
            while c < ncp:
                for p in range(P):
                    outB[c, p] = B[pd[p]]
                outL[c] = L
                c += 1
            return STOPPED, t
        if record:
            for p in range(P):
                outB[c, p] = B[pd[p]]
            outL[c] = L
            c += 1
        if c == ncp:
            return OK, t
        if not ok:
            return DIVERGED, t
        # ---- 3. Y = M[Q,Q]^T (G M[U,U]^T): the transpose of M[U,U] G M[Q,Q] in the same association, by two dgemm
        g0m = 0.0
        g1m = 0.0
        g2m = 0.0
        g3m = 0.0
        r = 0
        while r + 4 <= N:
            if abs(G[r]) > g0m:
                g0m = abs(G[r])
            if abs(G[r + 1]) > g1m:
                g1m = abs(G[r + 1])
            if abs(G[r + 2]) > g2m:
                g2m = abs(G[r + 2])
            if abs(G[r + 3]) > g3m:
                g3m = abs(G[r + 3])
            r += 4
        while r < N:
            if abs(G[r]) > g0m:
                g0m = abs(G[r])
            r += 1
        gmax = max(max(g0m, g1m), max(g2m, g3m))
        ig = 1.0 / gmax if gmax > 0.0 else 1.0
        np.dot(G2, MUt, Z)
        np.dot(MQt, Z, Y2)
        q0 = 0.0
        q1 = 0.0
        q2 = 0.0
        q3 = 0.0
        r = 0
        while r + 4 <= N:  # G is 0 off P: the sum is <G, Y> over P
            q0 += (G[r] * ig) * (Y[r] * ig)
            q1 += (G[r + 1] * ig) * (Y[r + 1] * ig)
            q2 += (G[r + 2] * ig) * (Y[r + 2] * ig)
            q3 += (G[r + 3] * ig) * (Y[r + 3] * ig)
            r += 4
        while r < N:
            q0 += (G[r] * ig) * (Y[r] * ig)
            r += 1
        gn2 = (q0 + q1) + (q2 + q3)
        gn = math.sqrt(gn2) if gn2 > 0.0 else 0.0
        if gmax > 0.0:
            gn *= gmax
        if tol > 0.0 and gn < tol:
            if not record:
                again = True
                continue
            while c < ncp:
                for p in range(P):
                    outB[c, p] = B[pd[p]]
                outL[c] = L
                c += 1
            return STOPPED, t
        s = eta
        if normalized:
            floor = 0.0
            for r in range(N):
                floor += Sg[r] * pnorm[r]
            floor *= fulps
            s = eta / gn if gn > floor else 0.0
        for r in range(N):
            A[r] -= s * (Y[r] * mk[r])  # off P: -inf - 0, A stays -inf
            B[r] += s * G[r]
        t += 1
    return OK, last


@njit(cache=True, nogil=True, error_model="numpy")
def _gd_core(ib, fb, eta, normalized, cps, tol, outB, outL):
    """Token-space GD on P for one packed problem (``Packed.ints``, ``Packed.floats``).

    Writes ``B_P`` and ``L`` at each checkpoint into ``outB`` (checkpoints x P) and ``outL``;
    returns ``(status, last step)``.

    One step, all in this body (an inlined helper taking arrays costs an atomic incref/decref pair
    per array per step, which was ~40% of a small problem's step):

    1. ``ex_p = exp(A_p - max of A over p's query block)`` (False when a score is not finite).
    2. ``G_P = dL/dA`` on P, and ``L`` only when asked (a checkpoint).  The formulas of
       ``theory.li2024.losses._per_sample``: sample i's attention is ``c_e ex_e / S_i``; a sample whose
       ``S_i`` would underflow falls back to its own max shift.  For ``-log`` under Assumption 1 the
       non-label part is ``ex * R`` with ``R_p = sum_i w_i c_ip / S_i``, and the label part
       ``w_i (a_y - 1)`` is computed as ``-w_i sum_{t != y} a_t``: the reference's ``a_y - 1`` keeps
       no relative precision once ``a_y`` rounds near 1 (late normalized GD), this does.
    3. ``Y = (M G M)_P`` and ``||E^T G E||_F^2 = <G, Y>``; ``A -= s Y``, ``B += s G``.
    """
    P, m, ne, nu, nq, K, code, mode = ib[0], ib[1], ib[2], ib[3], ib[4], ib[5], ib[6], ib[7]
    dgrad = ib[8] != 0
    o = NHEAD
    ptr = ib[o:o + m + 1]
    o += m + 1
    ylab = ib[o:o + m]
    o += m
    y = ib[o:o + m]
    o += m
    sq = ib[o:o + m]
    o += m
    ent_p = ib[o:o + ne]
    o += ne
    ent_tok = ib[o:o + ne]
    o += ne
    pu = ib[o:o + P]
    o += P
    pq = ib[o:o + P]
    A = fb[0:P].copy()
    o = P
    w = fb[o:o + m]
    o += m
    ent_c = fb[o:o + ne]
    o += ne
    ent_logc = fb[o:o + ne]
    o += ne
    ent_h = fb[o:o + ne]
    o += ne
    MUt = fb[o:o + nu * nu].reshape((nu, nu))
    o += nu * nu
    MQt = fb[o:o + nq * nq].reshape((nq, nq))
    o += nq * nq
    HT = fb[o:o + K * K].reshape((K, K))
    o += K * K
    KmatT = fb[o:o + P * P].reshape((P, P)) if mode == UPDATE_KMAT else fb[o:o].reshape((0, 0))
    if dgrad:
        return _gd_dense_log(fb[0:P], w, ptr, ylab, sq, ent_p, ent_c, ent_logc, pu, pq, MUt, MQt, K, eta, normalized,
                             cps, tol, outB, outL)
    if mode == UPDATE_BLOCK:
        MU = MUt.T.copy()  # MU[a, b] = M[U_a, U_b]
        MQ = MQt.T.copy()  # MQ[a, b] = M[Q_a, Q_b]
        Gd = np.zeros((nu, nq))
        Zd = np.zeros((nu, nq))
        Yd = np.zeros((nu, nq))
    else:
        MU = np.zeros((0, 0))
        MQ = np.zeros((0, 0))
        Gd = np.zeros((0, 0))
        Zd = np.zeros((0, 0))
        Yd = np.zeros((0, 0))

    maxn = 1
    for i in range(m):
        maxn = max(maxn, ptr[i + 1] - ptr[i])
    B = np.zeros(P)
    G = np.zeros(P)
    Y = np.zeros(P)
    ex = np.zeros(P)
    R = np.zeros(P)
    Sg = np.zeros(P)  # natural scale of G (theory.li2024.losses.loss_grad_and_floor), for normalized GD only
    pnorm = np.zeros(P)  # ||e_j|| ||e_k|| of pair p = (j, k)
    for p in range(P):
        pnorm[p] = math.sqrt(max(MUt[pu[p], pu[p]], 0.0) * max(MQt[pq[p], pq[p]], 0.0))
    fulps = 4.0 * (K + 2) * EPS  # theory.li2024.losses.floor_ulps(K) * eps
    qmax = np.zeros(nq)
    # Query blocks of P (P is grouped by query): block k is pairs bs[k]..bs[k + 1] - 1, of query bq[k].
    nblk = 0
    for p in range(P):
        if p == 0 or pq[p] != pq[p - 1]:
            nblk += 1
    bs = np.zeros(nblk + 1, dtype=np.int64)
    bq = np.zeros(max(nblk, 1), dtype=np.int64)
    k = 0
    for p in range(P):
        if p == 0 or pq[p] != pq[p - 1]:
            bs[k] = p
            bq[k] = pq[p]
            k += 1
    bs[nblk] = P
    Z = np.zeros((nu, nq))
    col = np.zeros(nu)
    a = np.zeros(maxn)
    g = np.zeros(maxn)
    pbuf = np.zeros(K)
    ncp = cps.shape[0]
    c = 0
    last = cps[ncp - 1]
    t = 0
    again = False  # re-evaluate the loss at the current state (early stop between checkpoints)
    while t <= last:
        record = t == cps[c]
        want_loss = record or again
        # ---- 1. exps, one query block at a time (P is grouped by query)
        ok = True
        L = 0.0
        for kb in range(nblk):
            b = bq[kb]
            s = bs[kb]
            p = bs[kb + 1]
            # the block's max in four independent chains (a single compare-select chain is latency-bound:
            # ~3 us per step at P = 2,429); the max is exact, so the order does not change it
            m0 = -math.inf
            m1 = -math.inf
            m2 = -math.inf
            m3 = -math.inf
            r = s
            while r + 4 <= p:
                if A[r] > m0:
                    m0 = A[r]
                if A[r + 1] > m1:
                    m1 = A[r + 1]
                if A[r + 2] > m2:
                    m2 = A[r + 2]
                if A[r + 3] > m3:
                    m3 = A[r + 3]
                r += 4
            while r < p:
                if A[r] > m0:
                    m0 = A[r]
                r += 1
            mx = max(max(m0, m1), max(m2, m3))
            if not math.isfinite(mx):
                ok = False
                break
            qmax[b] = mx
            for r in range(s, p):
                x = A[r] - mx
                ex[r] = math.exp(x) if x > EXP_FLOOR else 0.0
        # ---- 2. the gradient G on P (and L when asked)
        if not ok:
            L = math.nan
        elif code == LOG_BIORTH:
            for p in range(P):
                G[p] = 0.0
                R[p] = 0.0
                Sg[p] = 0.0
            for i in range(m):
                s0 = ptr[i]
                n = ptr[i + 1] - s0
                ey = ylab[i]
                if ey < 0:
                    L = math.inf  # label absent: -log u = inf
                    ok = False
                    break
                S = 0.0
                for r in range(n):
                    S += ent_c[s0 + r] * ex[ent_p[s0 + r]]
                ell = 0.0
                if S >= 1e-280 and S < math.inf:
                    f = w[i] / S
                    other = 0.0
                    for r in range(n):
                        if s0 + r != ey:
                            e = ent_p[s0 + r]
                            R[e] += f * ent_c[s0 + r]
                            other += ent_c[s0 + r] * ex[e]
                    G[ent_p[ey]] -= f * other  # w (a_y - 1) = -w (1 - a_y), without the cancellation
                    Sg[ent_p[ey]] += f * other
                    if want_loss:
                        ell = qmax[sq[i]] + math.log(S) - (A[ent_p[ey]] + ent_logc[ey])
                else:
                    ell_i = _log_sample_fallback(A, ptr, ent_p, ent_logc, i, ey, w[i], a, G, Sg)
                    if math.isnan(ell_i):
                        L = math.nan
                        ok = False
                        break
                    if want_loss:
                        ell = ell_i
                L += w[i] * ell
            if ok:
                for p in range(P):
                    G[p] += ex[p] * R[p]
                    Sg[p] += ex[p] * R[p]
        else:
            for p in range(P):
                G[p] = 0.0
                Sg[p] = 0.0
            for i in range(m):
                s0 = ptr[i]
                n = ptr[i + 1] - s0
                S = 0.0
                for r in range(n):
                    S += ent_c[s0 + r] * ex[ent_p[s0 + r]]
                ell = 0.0
                if S >= 1e-280 and S < math.inf:
                    inv = 1.0 / S
                    for r in range(n):
                        a[r] = ent_c[s0 + r] * ex[ent_p[s0 + r]] * inv
                else:
                    top, ssum = _sample_softmax(A, ptr, ent_p, ent_logc, i, a)
                    if not math.isfinite(ssum):
                        L = math.nan
                        ok = False
                        break
                # the reference token r = argmax a of the cancellation-free softmax backward
                # (theory.li2024.losses.softmax_backward): dl/ds_t = a_t (delta_t - sum_j a_j delta_j) with
                # delta_t = dl/da_t - dl/da_r, each delta formed from head differences.
                rr = 0
                for r in range(1, n):
                    if a[r] > a[rr]:
                        rr = r
                tr = ent_tok[s0 + rr]
                if code == 2 or code == 5:  # ce / lsq over the head logits z = H a
                    for l in range(K):
                        pbuf[l] = 0.0
                    for r in range(n):
                        tk = ent_tok[s0 + r]
                        ar = a[r]
                        for l in range(K):
                            pbuf[l] += ar * HT[tk, l]
                    zmax = -math.inf
                    for l in range(K):
                        if pbuf[l] > zmax:
                            zmax = pbuf[l]
                    zy = pbuf[y[i]]
                    psum = 0.0
                    for l in range(K):
                        x = math.exp(pbuf[l] - zmax)
                        pbuf[l] = x
                        psum += x
                    if want_loss and code == 2:
                        ell = math.log(psum) + zmax - zy
                    other = 0.0
                    for l in range(K):
                        pbuf[l] = pbuf[l] / psum
                        if l != y[i]:
                            other += pbuf[l]
                    py = pbuf[y[i]]
                    pbuf[y[i]] = -other  # p_y - 1 without the cancellation at p_y ~ 1
                    if code == 5:  # (1 - p_y)^2: dl/dz = 2 p_y (1 - p_y) (p - e_y), 1 - p_y = other
                        ell = other * other
                        cf = 2.0 * py * other
                        for l in range(K):
                            pbuf[l] *= cf
                    for r in range(n):
                        tk = ent_tok[s0 + r]
                        acc = 0.0
                        for l in range(K):
                            acc += pbuf[l] * (HT[tk, l] - HT[tr, l])
                        g[r] = acc
                else:
                    # u = h . a; for square 1 - u = sum_r a_r (1 - h_r) instead (the masses sum to 1):
                    # exact when the saturated token's h_r = 1, where 1.0 - u would cancel to noise.
                    # Two loops, not a per-token branch on the loss: this is the training step's inner loop.
                    u = 0.0
                    if code == 3:
                        for r in range(n):
                            u += a[r] * (1.0 - ent_h[s0 + r])
                    else:
                        for r in range(n):
                            u += a[r] * ent_h[s0 + r]
                    if code == 1:
                        if not u > 0.0:
                            L = math.inf  # -log u = inf
                            ok = False
                            break
                        if want_loss:
                            ell = -math.log(u)
                        cc = -1.0 / u
                    elif code == 3:  # u holds 1 - u here
                        ell = u * u
                        cc = -2.0 * u
                    else:
                        ell = math.exp(-u)
                        cc = -ell
                    hr = ent_h[s0 + rr]
                    for r in range(n):
                        g[r] = cc * (ent_h[s0 + r] - hr)
                ag = 0.0
                aag = 0.0
                for r in range(n):
                    ag += a[r] * g[r]
                    aag += a[r] * abs(g[r])
                wi = w[i]
                for r in range(n):
                    e = ent_p[s0 + r]
                    G[e] += wi * (a[r] * (g[r] - ag))
                    if normalized:
                        Sg[e] += wi * (a[r] * (abs(g[r]) + aag))
                L += wi * ell
        if ok and not math.isfinite(L):
            ok = False
        if again:  # stationary to tolerance: the remaining checkpoints hold the current state
            while c < ncp:
                for p in range(P):
                    outB[c, p] = B[p]
                outL[c] = L
                c += 1
            return STOPPED, t
        if record:
            for p in range(P):
                outB[c, p] = B[p]
            outL[c] = L
            c += 1
        if c == ncp:  # as the reference: the last checkpoint is returned even with an infinite loss
            return OK, t
        if not ok:
            return DIVERGED, t
        # ---- 3. Y = (M G M)_P, ||E^T G E||_F^2 = <G, Y>, and the step
        gn2 = 0.0
        g0m = 0.0  # max |G| in four independent chains, as the block max above
        g1m = 0.0
        g2m = 0.0
        g3m = 0.0
        p = 0
        while p + 4 <= P:
            if abs(G[p]) > g0m:
                g0m = abs(G[p])
            if abs(G[p + 1]) > g1m:
                g1m = abs(G[p + 1])
            if abs(G[p + 2]) > g2m:
                g2m = abs(G[p + 2])
            if abs(G[p + 3]) > g3m:
                g3m = abs(G[p + 3])
            p += 4
        while p < P:
            if abs(G[p]) > g0m:
                g0m = abs(G[p])
            p += 1
        gmax = max(max(g0m, g1m), max(g2m, g3m))
        ig = 1.0 / gmax if gmax > 0.0 else 1.0
        if mode == UPDATE_KMAT:
            # Y = Kmat G as axpys over the columns of Kmat (KmatT's rows): each Y[p] sums
            # Kmat[p, q] G[q] in the order q = 0, 1, ... as a dot product would, but the inner loop
            # carries no reduction, so it vectorizes instead of chaining P dependent adds.
            for p in range(P):
                Y[p] = 0.0
            for q in range(P):
                gq = G[q]
                for p in range(P):
                    Y[p] += KmatT[q, p] * gq
            for p in range(P):
                gn2 += (G[p] * ig) * (Y[p] * ig)
        elif mode == UPDATE_BLOCK:
            # Gd = G on the U x Q block (zero off P); Zd = M[U,U] Gd and Yd = Zd M[Q,Q] by BLAS dgemm
            # (np.dot with out=: no allocation); Y = Yd on P.  dgemm is ~5x the vectorized axpy loops at
            # |U| = |Q| = 50 (register blocking); OpenBLAS stays on one thread below m n k = 262144.
            for p in range(P):
                Gd[pu[p], pq[p]] = G[p]
            np.dot(MU, Gd, Zd)
            np.dot(Zd, MQ, Yd)
            # <G, Y> in four partial sums: one chain of dependent adds cost ~3 us per step at P = 2,429
            q0 = 0.0
            q1 = 0.0
            q2 = 0.0
            q3 = 0.0
            p = 0
            while p + 4 <= P:
                y0 = Yd[pu[p], pq[p]]
                y1 = Yd[pu[p + 1], pq[p + 1]]
                y2 = Yd[pu[p + 2], pq[p + 2]]
                y3 = Yd[pu[p + 3], pq[p + 3]]
                Y[p] = y0
                Y[p + 1] = y1
                Y[p + 2] = y2
                Y[p + 3] = y3
                q0 += (G[p] * ig) * (y0 * ig)
                q1 += (G[p + 1] * ig) * (y1 * ig)
                q2 += (G[p + 2] * ig) * (y2 * ig)
                q3 += (G[p + 3] * ig) * (y3 * ig)
                p += 4
            while p < P:
                acc = Yd[pu[p], pq[p]]
                Y[p] = acc
                q0 += (G[p] * ig) * (acc * ig)
                p += 1
            gn2 = (q0 + q1) + (q2 + q3)
        else:
            # Z = M[U,U] G[U,Q], one query column at a time (P is grouped by query).
            p = 0
            while p < P:
                b = pq[p]
                for j in range(nu):
                    col[j] = 0.0
                while p < P and pq[p] == b:
                    gp = G[p]
                    if gp != 0.0:
                        ar = pu[p]
                        for j in range(nu):
                            col[j] += gp * MUt[ar, j]
                    p += 1
                for j in range(nu):
                    Z[j, b] = col[j]
            # Y = (Z M[Q,Q])_P, and ||E^T G E||_F^2 = <G, M G M>.
            for p in range(P):
                j = pu[p]
                k = pq[p]
                acc = 0.0
                for bb in range(nq):
                    acc += Z[j, bb] * MQt[k, bb]
                Y[p] = acc
                gn2 += (G[p] * ig) * (acc * ig)
        gn = math.sqrt(gn2) if gn2 > 0.0 else 0.0
        if gmax > 0.0:
            gn *= gmax  # the quadratic form was taken of G / max|G| (no underflow at saturated attention)
        if tol > 0.0 and gn < tol:
            if not record:
                again = True  # the loss at this state was not evaluated: once more, with it
                continue
            while c < ncp:  # stationary to tolerance: the remaining checkpoints hold the current state
                for p in range(P):
                    outB[c, p] = B[p]
                outL[c] = L
                c += 1
            return STOPPED, t
        s = eta
        if normalized:
            # theory.li2024.training.normalized_scale: no step at or below the gradient's rounding floor
            floor = 0.0
            for p in range(P):
                floor += Sg[p] * pnorm[p]
            floor *= fulps
            s = eta / gn if gn > floor else 0.0
        for p in range(P):
            A[p] -= s * Y[p]
            B[p] += s * G[p]
        t += 1
    return OK, last  # not reached for valid checkpoints (the last one returns above)


@njit(cache=True, nogil=True)
def _batch_one(i, ioff, foff, coff, boff, ib, fb, etas, normalized, cps, tol, outB, outL, status, steps):
    P = ib[ioff[i]]
    ncp = coff[i + 1] - coff[i]
    st, t = _gd_core(ib[ioff[i]:ioff[i + 1]], fb[foff[i]:foff[i + 1]], etas[i], normalized[i],
                     cps[coff[i]:coff[i + 1]], tol, outB[boff[i]:boff[i + 1]].reshape((ncp, P)),
                     outL[coff[i]:coff[i + 1]])
    status[i] = st
    steps[i] = t


@njit(cache=True, parallel=True)
def _batch_parallel(ioff, foff, coff, boff, ib, fb, etas, normalized, cps, tol, outB, outL, status, steps):
    for i in prange(ioff.shape[0] - 1):
        _batch_one(i, ioff, foff, coff, boff, ib, fb, etas, normalized, cps, tol, outB, outL, status, steps)


@njit(cache=True, nogil=True)
def _batch_serial(ioff, foff, coff, boff, ib, fb, etas, normalized, cps, tol, outB, outL, status, steps):
    for i in range(ioff.shape[0] - 1):
        _batch_one(i, ioff, foff, coff, boff, ib, fb, etas, normalized, cps, tol, outB, outL, status, steps)


# ------------------------------------------------------------------------------------------------
# Public API
# ------------------------------------------------------------------------------------------------
def _checkpoints(checkpoints) -> np.ndarray:
    cps = np.asarray(checkpoints, dtype=np.int64).ravel()
    if cps.size == 0 or cps[0] < 0 or np.any(np.diff(cps) <= 0):
        raise ValueError("checkpoints: expected a non-empty, strictly increasing list of non-negative steps")
    return cps


def _raise(step: int, L: float, where: str = ""):
    raise FloatingPointError(f"GD diverged{where} at step {step}: loss {L}")


def gd_compiled(A0, data: TokenData, M, eta: float, checkpoints, normalized: bool = False, tol: float = 0.0,
                return_steps: bool = False):
    """Compiled twin of :func:`theory.li2024.training.gd_numpy`: ``(B, losses)`` at each checkpoint.

    ``tol > 0`` stops early once ``||grad_W L||_F < tol``; the remaining checkpoints then repeat the
    state reached.  ``return_steps`` adds the number of the last step whose gradient was evaluated.
    """
    asked = np.asarray(checkpoints, dtype=np.int64).ravel()
    d = np.diff(asked)
    if asked.size and asked[0] >= 0 and (d > 0).all():  # the usual case: strictly increasing
        cps, where = asked, slice(None)
    elif asked.size and asked[0] >= 0 and (d >= 0).all():  # repeated steps (e.g. [0, 0]) are answered once each
        cps, where = np.unique(asked, return_inverse=True)
    else:
        cps, where = _checkpoints(asked), slice(None)
    pk = Packed(A0, data, M)
    outB = np.zeros((len(cps), pk.P))
    outL = np.zeros(len(cps))
    status, step = _gd_core(pk.ints, pk.floats, float(eta), bool(normalized), cps, float(tol), outB, outL)
    if status == DIVERGED:
        c = int(np.searchsorted(cps, step, side="right")) - 1
        _raise(step, outL[c] if c >= 0 and cps[c] == step else float("nan"))
    out = (pk.unpack(outB)[where], outL[where])
    return out + (int(step),) if return_steps else out


def gd_batch(A0s, datas, Ms, etas, checkpoints, normalized=False, tol: float = 0.0, parallel: bool = True,
             on_diverge: str = "raise"):
    """Many problems at once (any mix of K, losses, step sizes): a list of ``(B, losses)``, one per problem,
    equal to running :func:`gd_compiled` on each.

    ``etas`` and ``normalized`` are scalars or one per problem; ``checkpoints`` is one list for all or one
    per problem.  ``parallel`` spreads problems over numba threads.  A diverged problem raises
    (``on_diverge="raise"``) or yields NaN outputs (``"nan"``).
    """
    nprob = len(datas)
    if not (len(A0s) == len(Ms) == nprob):
        raise ValueError("gd_batch: A0s, datas and Ms must have the same length")
    if on_diverge not in ("raise", "nan"):
        raise ValueError(f"on_diverge: expected 'raise' or 'nan', got {on_diverge!r}")
    etas = np.broadcast_to(np.asarray(etas, dtype=float), (nprob,)).copy()
    norm = np.broadcast_to(np.asarray(normalized, dtype=np.bool_), (nprob,)).copy()
    if not isinstance(checkpoints[0], (list, tuple, np.ndarray)):
        cps_list = [_checkpoints(checkpoints)] * nprob
    else:
        cps_list = [_checkpoints(c) for c in checkpoints]
        if len(cps_list) != nprob:
            raise ValueError("gd_batch: one checkpoint list per problem expected")
    packs = [Packed(A0, d, M) for A0, d, M in zip(A0s, datas, Ms)]
    offsets = lambda sizes: np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)  # noqa: E731
    ioff = offsets([len(p.ints) for p in packs])
    foff = offsets([len(p.floats) for p in packs])
    coff = offsets([len(c) for c in cps_list])
    boff = offsets([len(c) * p.P for p, c in zip(packs, cps_list)])
    outB = np.zeros(boff[-1])
    outL = np.zeros(coff[-1])
    status = np.zeros(nprob, dtype=np.int64)
    steps = np.zeros(nprob, dtype=np.int64)
    run = _batch_parallel if parallel else _batch_serial
    run(ioff, foff, coff, boff, np.concatenate([p.ints for p in packs]), np.concatenate([p.floats for p in packs]),
        etas, norm, np.concatenate(cps_list), float(tol), outB, outL, status, steps)
    out = []
    for i, p in enumerate(packs):
        L = outL[coff[i]:coff[i + 1]].copy()
        if status[i] == DIVERGED:
            if on_diverge == "raise":
                _raise(int(steps[i]), float("nan"), f" (problem {i})")
            out.append((np.full((len(L), p.K, p.K), np.nan), np.full(len(L), np.nan)))
            continue
        out.append((p.unpack(outB[boff[i]:boff[i + 1]].reshape(len(L), p.P)), L))
    return out


def warm_up() -> None:
    """Load (or compile once and cache) the kernels; cheap after the first process has compiled them."""
    from theory.core.problem import Problem

    prob = Problem.create(np.eye(2), [[0, 1], [1, 0]], [1, 0])
    data = TokenData.from_problem(prob)
    gd_compiled(np.zeros((2, 2)), data, prob.gram, 0.1, [0, 1], normalized=True)
    gd_batch([np.zeros((2, 2))], [data], [prob.gram], 0.1, [0, 1], parallel=False)
