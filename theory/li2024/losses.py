"""Losses and their analytic gradients, computed in token space.

Without positional encoding, sample i enters only through its query ``q_i``, label ``y_i`` and token
counts ``c_i`` (docs/theory.md, "The model"), and ``W`` enters only through the K x K score matrix
``A = E W E^T``: the score of token j under query k is ``A[j, k] = e_j^T W e_k``.  So

    a_i = softmax(A[:, q_i] + log c_i)        (attention mass per token, copies pooled)
    u_i = h_{y_i}^T a_i,  H = C E^T            (= a_i[y_i] under Assumption 1)
    L(W) = (1/n) sum_i w_i l_i,                 grad_W L = E^T G E,  G = dL/dA.

Losses (``l`` as a function of the attention vector ``a``):
  ``log``     -log u
  ``ce``      softmax cross-entropy over the K head logits ``C f_W(X) = H a`` (paper Section 5)
  ``lsq``     least squares on the softmax output, ``(1 - softmax(H a)_y)^2`` (paper Section 5)
  ``square``  (1 - u)^2
  ``exp``     exp(-u)
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from theory.core.problem import Problem


@dataclass(frozen=True, eq=False)
class TokenData:
    """A problem in token space.  Equal samples collapse into one row with a weight."""

    counts: np.ndarray  # m x K
    queries: np.ndarray  # m
    labels: np.ndarray  # m
    weights: np.ndarray  # m, sums to 1 (the 1/n average with multiplicities)
    H: np.ndarray  # K x K head in token space
    loss: str
    biorthogonal: bool

    @classmethod
    def from_problem(cls, problem: Problem, counts: np.ndarray | None = None, loss: str | None = None) -> "TokenData":
        counts = problem.counts if counts is None else counts
        key = np.column_stack([problem.queries, problem.label_array, counts])
        uniq, inverse, mult = np.unique(key, axis=0, return_inverse=True, return_counts=True)
        return cls(counts=uniq[:, 2:].astype(float), queries=uniq[:, 0].astype(np.int64),
                   labels=uniq[:, 1].astype(np.int64), weights=mult / problem.n, H=problem.H,
                   loss=loss or problem.loss, biorthogonal=problem.assumptions()["head_biorthogonal"])

    @cached_property
    def log_counts(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.counts)

    @cached_property
    def query_onehot(self) -> np.ndarray:
        Q = np.zeros((len(self.queries), self.H.shape[0]))
        Q[np.arange(len(self.queries)), self.queries] = 1.0
        return Q


def attention(A: np.ndarray, data: TokenData) -> np.ndarray:
    """m x K attention mass per token (copies pooled)."""
    logits = A[:, data.queries].T + data.log_counts
    logits -= logits.max(axis=1, keepdims=True)
    a = np.exp(logits)
    return a / a.sum(axis=1, keepdims=True)


def sample_attention(A: np.ndarray, problem: Problem) -> np.ndarray:
    """n x K attention of every sample of ``problem`` (not collapsed; copies pooled) under scores ``A``."""
    c = problem.counts
    logits = np.where(c > 0, A[:, problem.queries].T + np.log(np.where(c > 0, c, 1.0)), -np.inf)
    a = np.exp(logits - logits.max(axis=1, keepdims=True))
    return a / a.sum(axis=1, keepdims=True)


EPS = float(np.finfo(float).eps)


def softmax_backward(a: np.ndarray, g: np.ndarray, delta: np.ndarray | None = None):
    """``ds = a * (g - <a, g>)`` (the softmax Jacobian applied to ``g = dl/da``), row by row, without
    cancellation, and its natural scale ``sigma`` (m x K).

    The textbook form subtracts ``<a, g>`` from ``g_t``: once one token's attention ``a_r`` rounds to 1,
    ``g_r - <a, g>`` is a difference of two equal floats and comes out 0 (or rounding noise) while its
    true value is ``-sum_{j != r} a_j (g_r - g_j)``, tiny but exact.  Shifting by the reference entry
    ``r = argmax a`` removes the cancellation: with ``delta_t = g_t - g_r`` (so ``delta_r = 0``) and
    ``mbar = sum_j a_j delta_j``, ``ds_t = a_t (delta_t - mbar)`` is the same number in exact arithmetic,
    and every factor is now computed to a few ulps of itself.  ``delta`` may be passed precomputed
    (e.g. as ``(h_t - h_r) c`` straight from the head) when that is more accurate than ``g_t - g_r``.

    ``sigma_t = a_t (|delta_t| + sum_j a_j |delta_j|)`` bounds the size of the terms that make up
    ``ds_t``: the rounding error of ``ds_t`` is at most a small multiple of ``eps * sigma_t`` (see
    :func:`gradient_floor`).
    """
    rows = np.arange(a.shape[0])
    if delta is None:
        r = a.argmax(axis=1)
        delta = g - g[rows, r][:, None]
    mbar = (a * delta).sum(axis=1, keepdims=True)
    ds = a * (delta - mbar)
    sigma = a * (np.abs(delta) + (a * np.abs(delta)).sum(axis=1, keepdims=True))
    return ds, sigma


def _per_sample(A: np.ndarray, data: TokenData, scale: bool = False):
    """Per-sample losses and dl_i/ds_i (m x K), s_i = A[:, q_i]; with ``scale`` also the natural scale
    ``sigma`` of each entry of dl_i/ds_i (see :func:`softmax_backward`)."""
    a = attention(A, data)
    m = np.arange(len(data.labels))
    y = data.labels
    if data.loss == "log" and data.biorthogonal:
        # l = logsumexp(s + log c) - s_y - log c_y: stable even when a_y underflows.
        logits = A[:, data.queries].T + data.log_counts
        top = logits.max(axis=1)
        lse = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
        ell = lse - logits[m, y]
        # a_y - 1 as minus the mass on the other tokens: a_y rounds to 1 late in training, and the
        # difference would then keep no significant digits.
        ds = a.copy()
        ds[m, y] = 0.0
        ds[m, y] = -ds.sum(axis=1)
        return (ell, ds, np.abs(ds)) if scale else (ell, ds)
    r = a.argmax(axis=1)  # the reference token of the cancellation-free softmax backward
    if data.loss in ("ce", "lsq"):
        z = a @ data.H.T  # head logits H a
        zmax = z.max(axis=1, keepdims=True)
        p = np.exp(z - zmax)
        psum = p.sum(axis=1, keepdims=True)
        ell = np.log(psum[:, 0]) + zmax[:, 0] - z[m, y]
        p /= psum
        # p - e_y with p_y - 1 written as minus the mass on the other classes (no cancellation at p_y ~ 1)
        py = p[m, y].copy()
        p[m, y] = 0.0
        p[m, y] = -p.sum(axis=1)
        if data.loss == "lsq":
            # l = (1 - p_y)^2 and dl/dz = -2 (1 - p_y) dp_y/dz = 2 p_y (1 - p_y) (p - e_y): the ce gradient
            # times 2 p_y (1 - p_y), with 1 - p_y the mass on the other classes (exact at p_y ~ 1).
            rest = -p[m, y]
            ell = rest**2
            p *= (2.0 * py * rest)[:, None]
        # dl/da_t - dl/da_r = (H[:, t] - H[:, r])^T (p - e_y): the head difference is formed first, so
        # tokens with nearly equal head columns (a tied head, close embeddings) lose nothing.
        Hd = data.H[None, :, :] - data.H.T[r][:, :, None]  # m x K(classes) x K(tokens)
        delta = np.einsum("il,ilt->it", p, Hd)
        g = None
    else:
        h = data.H[y]  # m x K
        u = (a * h).sum(axis=1)
        if data.loss == "log":
            with np.errstate(divide="ignore", invalid="ignore"):
                ell = np.where(u > 0, -np.log(np.where(u > 0, u, 1.0)), np.inf)
                coef = -1.0 / u
        elif data.loss == "square":
            # 1 - u = sum_t a_t (1 - h_t) since the masses sum to 1: no cancellation when the saturated
            # token is the label of a biorthogonal head (h_y = 1), where 1.0 - u keeps no digits.
            omu = (a * (1.0 - h)).sum(axis=1)
            ell = omu**2
            coef = -2.0 * omu
        elif data.loss == "exp":
            ell = np.exp(-u)
            coef = -ell
        else:  # pragma: no cover - Problem validates the name
            raise ValueError(f"unknown loss {data.loss!r}")
        # dl/da = coef h, so dl/da_t - dl/da_r = coef (h_t - h_r), the head difference formed first.
        with np.errstate(invalid="ignore"):
            delta = coef[:, None] * (h - h[m, r][:, None])
    ds, sigma = softmax_backward(a, None, delta)
    return (ell, ds, sigma) if scale else (ell, ds)


def loss_grad_and_floor(A: np.ndarray, data: TokenData, M: np.ndarray) -> tuple[float, np.ndarray, float]:
    """``L``, ``G = dL/dA`` and the rounding floor of ``||grad_W L||_F``: below it the computed
    gradient's direction is noise.

    ``grad_W L = sum_{(j,k)} G[j,k] e_j e_k^T`` with ``G[j,k] = sum_i w_i ds_i[j]`` over the samples of
    query ``k``.  Each ``ds_i[j]`` is exact to ``c eps sigma_ij`` (:func:`softmax_backward`, c ~ the
    number of tokens of a sample), and ``||e_j e_k^T||_F = ||e_j|| ||e_k||``, so the computed gradient
    is within ``floor = floor_ulps(K) * eps * sum_{j,k} S[j,k] ||e_j|| ||e_k||`` of the true one, with
    ``S[j,k] = sum_i w_i sigma_ij``; ``floor_ulps(K) = 4 (K + 2)`` covers the per-entry rounding and
    the sum over samples.  :mod:`theory.li2024.engine` computes the same number.
    """
    ell, ds, sigma = _per_sample(A, data, scale=True)
    G = (data.weights[:, None] * ds).T @ data.query_onehot
    S = (data.weights[:, None] * np.nan_to_num(sigma)).T @ data.query_onehot
    norms = np.sqrt(np.clip(np.diag(M), 0.0, None))
    return float(data.weights @ ell), G, floor_ulps(data.H.shape[0]) * EPS * float(norms @ S @ norms)


def gradient_floor(A: np.ndarray, data: TokenData, M: np.ndarray) -> float:
    """The rounding floor of ``||grad_W L||_F`` at scores ``A`` (see :func:`loss_grad_and_floor`)."""
    return loss_grad_and_floor(A, data, M)[2]


def floor_ulps(K: int) -> float:
    return 4.0 * (K + 2)


def loss_scores(A: np.ndarray, data: TokenData) -> float:
    ell, _ = _per_sample(A, data)
    return float(data.weights @ ell)


def loss_and_grad_scores(A: np.ndarray, data: TokenData) -> tuple[float, np.ndarray]:
    """L and G = dL/dA (K x K; column k collects the samples whose query is k)."""
    ell, ds = _per_sample(A, data)
    G = (data.weights[:, None] * ds).T @ data.query_onehot
    return float(data.weights @ ell), G


def loss_and_grad(W: np.ndarray, problem: Problem, data: TokenData | None = None) -> tuple[float, np.ndarray]:
    """L(W) and grad_W L = E^T G E."""
    data = data or TokenData.from_problem(problem)
    E = problem.E
    L, G = loss_and_grad_scores(E @ W @ E.T, data)
    return L, E.T @ G @ E


def loss(W: np.ndarray, problem: Problem, data: TokenData | None = None) -> float:
    data = data or TokenData.from_problem(problem)
    return loss_scores(problem.E @ W @ problem.E.T, data)


def smoothness(problem: Problem, loss_name: str | None = None, *, u_floor: float | None = None) -> float:
    """An upper bound beta on the curvature of L along any unit Frobenius direction of W.

    Derivation.  Along ``W + t D`` the scores of sample i move by ``v_j = e_j^T D e_k``, whose spread
    is ``m = max_j v_j - min_j v_j <= Delta ||D||_F`` with ``Delta = max_{j,j',k} ||e_j - e_j'|| ||e_k||``
    over the tokens present.  Writing ``l(a(s))``: ``da_j = a_j (v_j - vbar)`` with ``sum_j |da_j| <= m/2``
    and ``d2a_j = a_j ((v_j - vbar)^2 - Var_a v)`` with ``sum_j |d2a_j| <= m^2/2``.  Hence
    ``d2l <= q m^2/4 + g m^2/2`` with ``g = sup ||dl/da||_inf`` and ``q = sup max|d2l/da2|`` over the
    reachable ``a``.  For ``log`` under Assumption 1 the exact form ``d2l = Var_a(v) <= m^2/4`` gives
    ``beta = Delta^2/4``.  GD with a constant step ``eta < 2/beta`` decreases L monotonically (descent
    lemma); :func:`safe_step` returns ``1/beta``.

    For ``log`` with a head that breaks Assumption 1, ``u = h_y^T a`` is bounded below by the larger of the
    least label-row entry (when positive: ``u`` averages them) and :func:`log_sublevel_floor` (the sublevel
    set GD from ``W(0) = 0`` never leaves).  ``u_floor`` replaces that bound by a caller's floor: the bound
    then holds only on the region ``{W : u_i(W) >= u_floor}``, and the caller must check that its run stays
    there (:func:`theory.li2024.local_convergence.section5_step`).
    """
    loss_name = loss_name or problem.loss
    E = problem.E
    tokens = sorted({t for s in problem.sequences for t in s} | set(problem.labels))
    Et = E[tokens]
    diff = np.linalg.norm(Et[:, None, :] - Et[None, :, :], axis=2).max()
    Delta = diff * np.linalg.norm(E[sorted(set(problem.queries.tolist()))], axis=1).max()
    H = problem.H
    hmax = float(np.abs(H).max())
    biorth = problem.assumptions()["head_biorthogonal"]
    if loss_name == "log" and biorth:
        return Delta**2 / 4
    if loss_name == "ce":
        g, q = 2 * hmax, hmax**2  # ||H^T(p - e_y)||_inf <= 2 max|H|; |h_i^T (diag p - pp^T) h_j| <= max|H|^2
    elif loss_name == "lsq":
        # l(z) = (1 - p_y)^2, p = softmax(z): dl/dz = 2 p_y (1 - p_y)(p - e_y) has l1 norm
        # 4 p_y (1 - p_y)^2 <= 16/27 < 1, so g <= max|H|.  d2l/dz2 = 2 ∇p_y ∇p_y^T - 2 (1 - p_y) ∇²p_y with
        # ∇p_y = p_y (e_y - p) (l1 norm <= 1/2) and ∇²p_y = p_y ((e_y - p)(e_y - p)^T - diag p + p p^T)
        # (entries' absolute sum <= p_y (4 (1 - p_y)^2 + 2)), so the entries of d2l/dz2 sum in absolute
        # value to <= 1/2 + 2 * (1/4) * 6 = 3.5 and |h_i^T (d2l/dz2) h_j| <= 3.5 max|H|^2.
        g, q = hmax, 3.5 * hmax**2
    else:
        rows = H[problem.label_array]
        lo, hi = float(rows.min()), float(rows.max())  # u = h_y . a ranges over [lo, hi]
        if loss_name == "log":
            # u can approach 0 or the least entry: bound it on the sublevel set GD from W(0) = 0 never leaves.
            # The larger bound holds; comparing lo with 0 instead read a computed head's 1e-17 for a 0 as a
            # floor, a curvature bound 1e32 too large (steps 1e-30 times the valid problem's).
            lo = log_sublevel_floor(problem) if u_floor is None else float(u_floor)
            return Delta**2 * _log_curvature(problem, lo)
        elif loss_name == "square":
            g, q = 2 * max(abs(1 - lo), abs(1 - hi)) * hmax, 2 * hmax**2
        elif loss_name == "exp":
            g, q = np.exp(-lo) * hmax, np.exp(-lo) * hmax**2
        else:
            raise ValueError(f"unknown loss {loss_name!r}")
    return Delta**2 * (q / 4 + g / 2)


def _log_curvature(problem: Problem, lo: float) -> float:
    """``max_i (s_i^2 / (16 lo^2) + s_i / (4 lo))``: the log loss's curvature per unit squared score spread
    where every ``u_i >= lo``, ``s_i`` the spread of sample i's label row over its present tokens.

    Derivation (notation of :func:`smoothness`).  ``u = sum_t h_t a_t`` and ``sum_t da_t = 0``, so
    ``du = sum_t (h_t - c) da_t`` with ``c`` the midpoint of the entries: ``|du| <= (s/2) sum|da| <= s m/4``,
    and likewise ``|d2u| <= (s/2) m^2/2``.  ``d2(-log u) = (du/u)^2 - d2u/u <= m^2 (s^2/(16 lo^2) + s/(4 lo))``.
    With ``s <= 2 max|H|`` this is never above the generic ``q/4 + g/2`` with ``g = max|H|/lo``,
    ``q = max|H|^2/lo^2``, and it is 3-4x below it on tied and mixed heads (entries of one sign)."""
    data = TokenData.from_problem(problem, loss="log")
    present = data.counts > 0
    rows = data.H[data.labels]
    spread = (np.where(present, rows, -np.inf).max(axis=1) - np.where(present, rows, np.inf).min(axis=1)).max()
    # A spread at the rounding of H = C E^T is a constant row computed inexactly: the loss is flat, and a step
    # of 1/spread (seen: 1e15 times the valid problem's) would move W by rounding noise times 1e15.
    if spread <= 64 * np.finfo(float).eps * max(1.0, float(np.linalg.norm(problem.C, 2) * np.linalg.norm(problem.E, 2))):
        return 0.0
    return float(spread**2 / (16 * lo**2) + spread / (4 * lo))


class LossUndefined(ValueError):
    """The log loss is infinite where GD starts (some sample has u <= 0 under uniform attention)."""


def log_loss_defined(problem: Problem) -> bool:
    """Every sample's ``u = h_y^T a`` is positive at ``W = 0`` (uniform attention over its tokens), so the
    log loss is finite where the suite's GD starts.  Positive means above the rounding of ``H = C E^T``
    (``ASSUMPTION_TOL`` times its scale, as for Assumption 1): with a computed biorthogonal head an absent
    label's ``u`` is 1e-17, not 0, and ``-log u = 39`` would pass for a finite loss."""
    from theory.core.problem import ASSUMPTION_TOL

    a = problem.counts / problem.counts.sum(axis=1, keepdims=True)
    u = (a * problem.H[problem.label_array]).sum(axis=1)
    scale = max(1.0, float(np.linalg.norm(problem.C, 2) * np.linalg.norm(problem.E, 2)))
    return bool((u > ASSUMPTION_TOL * scale).all())


def log_sublevel_floor(problem: Problem) -> float:
    """A lower bound on every sample's ``u`` over the sublevel set ``{W : L(W) <= L(0)}`` of the log loss,
    for a head that breaks Assumption 1 (where ``u`` is not bounded away from 0 globally).

    Derivation.  Each term ``l_i = -log u_i`` is at least ``m_i = -log max_t h_{y_i t}`` over the tokens t of
    sample i (``u_i`` is an average of those entries).  On the sublevel set ``sum_j w_j l_j <= L(0)``, so
    ``w_i l_i <= L(0) - sum_{j != i} w_j m_j`` and ``u_i >= exp(-(L(0) - sum_{j != i} w_j m_j) / w_i)``.
    GD at a step ``1/beta``, with ``beta`` the curvature bound on that set, never leaves it: along the
    segment of a step, while it stays in the set, the descent lemma gives ``L <= L(W) - s eta ||g||^2/2 <
    L(0)`` for ``s`` in (0, 1], so each ``u_i`` stays strictly above its floor and the segment cannot reach
    the set's boundary.  So :func:`safe_step` is safe for GD from ``W(0) = 0`` (the suite's start) or from any
    ``W`` with ``L(W) <= L(0)``.  A sample whose present tokens all have positive head entries has
    ``u_i >= min_t h_{y_i t}`` everywhere; the larger of the two bounds is used per sample.  Raises
    :class:`LossUndefined` when ``L(0)`` is infinite."""
    if not log_loss_defined(problem):
        raise LossUndefined("log loss: some sample has u = c_y^T f <= 0 under uniform attention (W = 0), so "
                            "-log u is infinite where GD starts")
    data = TokenData.from_problem(problem, loss="log")
    present = data.counts > 0
    rows = np.where(present, data.H[data.labels], -np.inf)
    with np.errstate(divide="ignore"):
        m = -np.log(np.maximum(rows.max(axis=1), 0.0))
    a0 = data.counts / data.counts.sum(axis=1, keepdims=True)
    L0 = float(data.weights @ -np.log((a0 * data.H[data.labels]).sum(axis=1)))
    rest = data.weights @ m - data.weights * m
    sublevel = np.exp(-(L0 - rest) / data.weights)
    # A sample whose present tokens all have positive head weight never gets u below the least of them
    # (u is their average under the attention), whatever W: the better of the two bounds holds.
    present_min = np.where(present, data.H[data.labels], np.inf).min(axis=1)
    return float(np.maximum(sublevel, present_min).min())


def local_smoothness(problem: Problem, A: np.ndarray, data: TokenData, loss_name: str | None = None,
                     beta: float | None = None) -> float:
    """An upper bound on the curvature of L along any unit direction of W *near* scores ``A``: the
    global :func:`smoothness` times ``sum_i w_i min(1, 4 rho_i)``, ``rho_i = 1 - max_j a_ij`` the mass
    off sample i's most attended token.

    Derivation (notation of :func:`smoothness`, ``r`` the most attended token): ``|v_r - vbar| =
    |sum_j a_j (v_r - v_j)| <= rho m`` and ``sum_{j != r} a_j |v_j - vbar| <= rho m``, so
    ``sum_j |da_j| <= min(m/2, 2 rho m)``; ``Var_a v <= sum_j a_j (v_j - v_r)^2 <= rho m^2``, so
    ``sum_j |d2a_j| <= 2 Var_a v <= min(m^2/2, 2 rho m^2)``.  Each term of the per-sample bound
    ``q (sum|da|)^2 + g sum|d2a|`` therefore shrinks by ``min(1, 16 rho^2) <= min(1, 4 rho)`` resp.
    ``min(1, 4 rho)`` (for ``log`` under Assumption 1, ``Var_a v <= min(m^2/4, rho m^2)`` directly).
    ``rho`` is computed as the sum of the other masses (exact when the top mass rounds to 1).  Used for
    the float64 resolution of the gradient: rounding W moves the scores by ~eps, which changes ``rho``
    by a factor ``1 + O(eps)``, so the bound holds on that neighbourhood.  A saturated attention has
    curvature ``O(rho)``, where the global bound would claim O(1) and call an exact gradient noise.
    ``beta`` is the global bound when the caller already has it (it depends on the problem only).  For the
    log loss with a broken head :func:`smoothness` bounds the curvature on a region ``{u >= floor}`` only (by
    default the sublevel set ``{L <= L(0)}``), and so does this bound: the regularization path's points
    minimize ``L`` over a ball holding ``W = 0``, so they lie in that set.
    """
    a = attention(A, data)
    m = np.arange(len(a))
    off = a.copy()
    off[m, a.argmax(axis=1)] = 0.0
    rho = off.sum(axis=1)
    beta = smoothness(problem, loss_name) if beta is None else beta
    return beta * float(data.weights @ np.minimum(1.0, 4.0 * rho))


def safe_step(problem: Problem, loss_name: str | None = None) -> float:
    """A constant GD step size below which GD is safe: ``1/beta`` (see :func:`smoothness`).

    ``beta = 0`` means no sample can move its attention (every sample holds one distinct token, or the
    tokens present share one embedding): ``L`` is constant in ``W`` and every step is safe; 1 is returned
    so that GD runs (and stays at ``W(0)``, a minimizer) instead of failing on an infinite step."""
    beta = smoothness(problem, loss_name)
    return 1.0 if beta == 0 else 1.0 / beta
