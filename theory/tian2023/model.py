"""The 1-layer transformer of Tian et al. 2023, "Scan and Snap" (docs/theory.md, "Scan and Snap"), and its training.

Model (Sec. 3, reparameterized as in Sec. 3.1).  Tokens ``[M]``.  A *sequence class* (Sec. 3.2) is a next
token ``n`` with its query ``psi(n)`` and the contextual-token law ``P(l | n)``.  A sequence has ``T - 1``
contextual tokens drawn i.i.d. from ``P(.|n)`` followed by the query ``x_T = psi(n)`` (``T`` is the
sequence length in the paper's notation, the query included).  With attention logits ``Z`` (row = query)
and decoder ``Y`` (both ``M x M``):

* attention over the contextual tokens only (the query is masked): ``b_t ∝ exp(Z[psi(n), x_t])``;
* ``f = LN(X^T b)``, ``LN(v) = v / ||v||_2``;  output logits ``Y^T f`` over the whole vocabulary ``[M]``;
* loss: cross-entropy of the next token (Eqn. 2); rates ``eta_Y`` (decoder) and ``eta_Z`` (attention).

No positional encoding: a sequence matters only through its token counts ``k_l``, and
``X^T b = h`` with ``h_l = k_l e^{z_l} / sum_l' k_l' e^{z_l'}``.  When ``T -> inf``, ``k_l / (T-1) -> P(l|n)``
and ``h -> c_n`` with ``c_{l|n} = P(l|n) e^{z_{ml}} / sum_l' P(l'|n) e^{z_{ml'}}`` (Lemma 2).  The same
gradient formula (Lemma 1) therefore serves both training methods:

* :func:`train_sgd` -- SGD (optionally with momentum, PyTorch convention) on sampled sequences, as in the
  paper's experiments (Sec. 8);
* :func:`integrate` -- the long-sequence limit: gradient flow of the population loss, deterministic, in
  time units of SGD steps (``dY/dt = -eta_Y dL/dY``, ``dZ/dt = -eta_Z dL/dZ``), integrated by classical
  RK4 in logarithmic time with a step-halving error check (an inaccurate run raises
  :class:`IntegrationError`).  :func:`population_gd` is the discrete-time counterpart (the exact
  ``B, T -> inf`` limit of the SGD iteration with the same step and momentum).

Two decoders for the deterministic dynamics:

* ``decoder="free"``: ``Y`` is a free ``M x M`` matrix -- the true gradient flow of the model above.
* ``decoder="tied"``: the paper's analysis (Lemma 3, Eqn. 26, Theorem 1) writes the decoder in the span of the
  current attention outputs, ``Y = F(t) W`` with ``F = [f_1 ... f_K]`` (``M x K``) and ``W`` (``K x M``).
  The free flow is ``dY/dt = eta_Y sum_n pi_n f_n (e_n - alpha_n)^T = F dW/dt`` with
  ``dW_n/dt = eta_Y pi_n (e_n - alpha_n)`` (row ``n`` of ``W`` is driven by class ``n`` only, Lemma 3); the
  tied decoder keeps that ``W`` but pairs it with the *current* ``F(t)`` instead of the history of ``F`` --
  the two coincide while ``Z`` is frozen, i.e. in the two-timescale limit ``eta_Z / eta_Y -> 0`` of
  Assumption 1(c).  ``Z`` follows the backpropagated gradient through ``f`` (Eqn. 10).  In this form the backpropagated gradient of a distinct token of
  class ``n`` is proportional to ``f_{nl}`` with a factor common to all of ``n``'s distinct tokens, which is
  exactly what Theorem 3's closed form (Eqn. 11) needs; see :func:`relative_gain`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

DECODERS = ("free", "tied")


class ScanSnapError(ValueError):
    """Invalid parameters for the Scan-and-Snap model; the message is one line."""


class IntegrationError(RuntimeError):
    """The deterministic integration failed its step-halving accuracy check."""


# --------------------------------------------------------------------------------------------------
# Sequence classes (Sec. 3.2)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SequenceClasses:
    """``K`` sequence classes over ``M`` tokens.

    ``P``: ``K x M`` rows ``P(. | n)`` (normalized on construction); ``query[n] = psi(n)``;
    ``next_token[n]``: the output index (in ``[M]``) the class predicts; ``weights``: class sampling law.
    """

    P: np.ndarray
    query: np.ndarray
    next_token: np.ndarray
    weights: np.ndarray

    @property
    def K(self) -> int:
        return self.P.shape[0]

    @property
    def M(self) -> int:
        return self.P.shape[1]

    @cached_property
    def omega_size(self) -> np.ndarray:
        """``|Omega(l)|``: how many next tokens co-occur with contextual token ``l`` (Sec. 3.2)."""
        return (self.P > 0).sum(axis=0)

    @cached_property
    def distinct_mask(self) -> np.ndarray:
        """``K x M``: ``l`` is a distinct token of class ``n`` (``Omega(l) = {n}``)."""
        return (self.P > 0) & (self.omega_size == 1)[None, :]

    @cached_property
    def common_tokens(self) -> np.ndarray:
        """Global common tokens (``|Omega(l)| > 1``)."""
        return np.flatnonzero(self.omega_size > 1)

    def distinct_tokens(self, n: int) -> np.ndarray:
        """Class ``n``'s distinct tokens, in order of increasing ``P(l|n)`` (ties by token id)."""
        toks = np.flatnonzero(self.distinct_mask[n])
        return toks[np.argsort(self.P[n, toks], kind="stable")]

    def overlaps(self, n: int) -> bool:
        """Class ``n`` shares a contextual token with another class (``f_n . f_n' > 0``)."""
        return bool(((self.P[n] > 0) & (self.omega_size > 1)).any())

    def to_dict(self) -> dict:
        return {"P": self.P.tolist(), "query": self.query.tolist(), "next_token": self.next_token.tolist(),
                "weights": self.weights.tolist()}


def make_classes(P, query=None, next_token=None, weights=None) -> SequenceClasses:
    """Validate and normalize. ``P`` may be unnormalized (rows are scaled to sum to 1).

    Defaults: one shared query token ``0``; next tokens ``0..K-1``; uniform class weights.
    Raises :class:`ScanSnapError` (a ``ValueError``) with a one-line message on invalid input.
    """
    P = np.asarray(P, dtype=float)
    if P.ndim != 2 or P.shape[0] < 1 or P.shape[1] < 1:
        raise ScanSnapError(f"P: expected a K x M matrix, got shape {P.shape}")
    K, M = P.shape
    if not np.all(np.isfinite(P)) or (P < 0).any():
        raise ScanSnapError("P: entries must be finite and non-negative")
    rows = P.sum(axis=1)
    if (rows <= 0).any():
        raise ScanSnapError(f"P[{int(np.flatnonzero(rows <= 0)[0])}]: class has no contextual token")
    P = P / rows[:, None]
    query = np.zeros(K, dtype=int) if query is None else np.asarray(query)
    next_token = np.arange(K) if next_token is None else np.asarray(next_token)
    for name, v in (("query", query), ("next_token", next_token)):
        if v.shape != (K,) or not np.issubdtype(v.dtype, np.integer):
            raise ScanSnapError(f"{name}: expected {K} integer token ids, got {v.tolist()!r}")
        if (v < 0).any() or (v >= M).any():
            raise ScanSnapError(f"{name}: token ids must lie in [0, {M})")
    if len(set(next_token.tolist())) != K:
        raise ScanSnapError("next_token: the K next tokens must be different (one class per next token)")
    weights = np.full(K, 1.0 / K) if weights is None else np.asarray(weights, dtype=float)
    if weights.shape != (K,) or not np.all(np.isfinite(weights)) or (weights <= 0).any():
        raise ScanSnapError("weights: expected K positive class probabilities")
    weights = weights / weights.sum()
    return SequenceClasses(P=P, query=query.astype(int), next_token=next_token.astype(int), weights=weights)


def syn_layout(n_queries: int = 1, per_query: int = 2, n_common: int = 10, n_distinct: int = 10,
               common_weight: float = 1.0, distinct_low: float = 0.1, distinct_high: float = 1.0) -> SequenceClasses:
    """The paper's synthetic layout (Sec. 8): tokens ``0..n_common-1`` are common to every class (unnormalized
    probability ``common_weight``); each class then owns ``n_distinct`` tokens with unnormalized probabilities
    ``linspace(distinct_low, distinct_high, n_distinct)`` (increasing token id = increasing probability).
    ``n_queries`` query tokens with ``per_query`` next tokens each; query ``j`` is token ``j`` and the
    next tokens are ``0..K-1`` (both masked / output indices, so their overlap with contextual ids is harmless).
    """
    for name, v in (("n_queries", n_queries), ("per_query", per_query), ("n_distinct", n_distinct)):
        if int(v) != v or v < 1:
            raise ScanSnapError(f"{name}: expected a positive integer, got {v!r}")
    if int(n_common) != n_common or n_common < 0:
        raise ScanSnapError(f"n_common: expected a non-negative integer, got {n_common!r}")
    if not (0 < distinct_low <= distinct_high) or common_weight < 0:
        raise ScanSnapError("syn_layout: need 0 < distinct_low <= distinct_high and common_weight >= 0")
    K = n_queries * per_query
    M = max(n_common + K * n_distinct, K, n_queries)
    P = np.zeros((K, M))
    P[:, :n_common] = common_weight
    probs = np.linspace(distinct_low, distinct_high, n_distinct)
    for n in range(K):
        P[n, n_common + n * n_distinct: n_common + (n + 1) * n_distinct] = probs
    query = np.repeat(np.arange(n_queries), per_query)
    return make_classes(P, query=query)


# --------------------------------------------------------------------------------------------------
# Forward pass and gradients (Lemma 1), batched over models ``S`` and samples ``B``
# --------------------------------------------------------------------------------------------------


ENGINE = "compiled"      # default engine of integrate / population_gd: "compiled" (numba) or "numpy"
ENGINES = ("compiled", "numpy")


def _engine(engine):
    engine = ENGINE if engine is None else engine
    if engine not in ENGINES:
        raise ScanSnapError(f"engine: expected one of {ENGINES}, got {engine!r}")
    return engine


def _check_rates(eta_y, eta_z):
    for name, v in (("eta_y", eta_y), ("eta_z", eta_z)):
        if not isinstance(v, (int, float, np.floating, np.integer)) or not math.isfinite(v) or v < 0:
            raise ScanSnapError(f"{name}: expected a finite non-negative learning rate, got {v!r}")


def attention(Z: np.ndarray, weights: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``h = X^T b`` for token counts (or probabilities) ``weights`` (``..., B, M``): row ``b`` is
    ``weights_l e^{Z[query_b, l]}`` normalized.  With ``weights = P`` this is ``c_n`` (Lemma 2).
    ``Z`` is ``(M, M)`` or ``(S, M, M)``; the result is ``(B, M)`` or ``(S, B, M)``."""
    zq = Z[..., query, :]
    with np.errstate(divide="ignore"):
        logw = np.where(weights > 0, np.log(np.where(weights > 0, weights, 1.0)), -np.inf)
    a = logw + zq
    a = a - a.max(axis=-1, keepdims=True)
    e = np.exp(a)
    return e / e.sum(axis=-1, keepdims=True)


def c_limit(Z: np.ndarray, classes: SequenceClasses) -> np.ndarray:
    """Lemma 2: ``c_n`` for every class (``K x M``)."""
    return attention(Z, classes.P, classes.query)


def _softmax(a):
    a = a - a.max(axis=-1, keepdims=True)
    e = np.exp(a)
    return e / e.sum(axis=-1, keepdims=True)


def forward_grads(Y, Z, weights, query, target, w, *, W=None, want_loss=False):
    """Loss ``sum_b w_b CE_b`` and its gradients (Lemma 1).  Leading model axis optional.

    ``weights``: ``(B, M)`` or ``(S, B, M)`` counts / probabilities; ``query``, ``target``: ``(B,)``;
    ``w``: ``(B,)`` sample weights.  Returns ``(loss, dY, dZ)`` -- gradients of the loss (descent goes
    against them).  With ``W`` given (tied decoder, ``Y = F W``), ``Y`` is ignored, ``dY`` is replaced by
    the descent direction's negative for ``W`` (Lemma 3: ``-pi_n (e_n - alpha_n)`` for row ``n``) and ``F``
    is the matrix of the rows of ``weights`` normalized (one row per class, in class order).
    """
    h = attention(Z, weights, query)                       # (.., B, M)
    norm = np.linalg.norm(h, axis=-1, keepdims=True)
    f = h / norm
    if W is not None:
        Y = np.swapaxes(f, -1, -2) @ W                     # Y = F W, (.., M, M)
    logits = f @ Y                                         # row b: (Y^T f_b)
    alpha = _softmax(logits)
    V = -alpha
    idx = np.arange(len(target))
    V[..., idx, target] += 1.0                             # v_b = e_{n_b} - alpha_b
    wV = V * w[:, None]
    if W is not None:
        dYW = -wV                                          # Lemma 3: row n of W is driven by class n only
    else:
        dYW = -(np.swapaxes(f, -1, -2) @ wV)               # dL/dY = -sum_b w_b f_b v_b^T
    G = wV @ np.swapaxes(Y, -1, -2)                        # w_b g_b, g_b = Y v_b
    PG = G - f * (f * G).sum(axis=-1, keepdims=True)       # P^perp_{f_b} g_b
    contrib = -h * PG / norm                               # dL/dz_{q_b} = -diag(h) P^perp g / ||h||
    dZ = np.zeros_like(Z)
    for q in np.unique(query):                             # rows of Z are updated per query (Eqn. 4)
        dZ[..., q, :] = contrib[..., query == q, :].sum(axis=-2)
    loss = None
    if want_loss:
        la = np.log(np.maximum(alpha[..., idx, target], 1e-300))
        loss = -(la * w).sum(axis=-1)
    return loss, dYW, dZ


def forward_grads_by_class(Y, Z, counts, labels, classes: SequenceClasses, w):
    """:func:`forward_grads` for samples of known classes, restricted to each class's support.

    A sample of class ``n`` only contains tokens with ``P(l|n) > 0``, so ``h``, ``f`` and the attention
    gradient vanish elsewhere and only those rows of ``Y`` enter the logits: computing per class on its
    support gives the same numbers (checked against the dense path in the properties) at a fraction of the
    cost when classes are sparse (Syn-Medium: 20 of up to 210 tokens).  Leading model axis optional.
    """
    Y = np.asarray(Y)
    dY = np.zeros_like(Y)
    dZ = np.zeros_like(Z)
    loss = np.zeros(Y.shape[:-2])
    for n in np.unique(labels):
        rows = np.flatnonzero(labels == n)
        sup = np.flatnonzero(classes.P[n] > 0)
        q, tgt = classes.query[n], classes.next_token[n]
        h = attention(Z[..., [q], :][..., sup], counts[rows][:, sup], np.zeros(len(rows), dtype=int))
        norm = np.linalg.norm(h, axis=-1, keepdims=True)
        f = h / norm                                           # (.., b, s)
        Ys = Y[..., sup, :]                                    # (.., s, M)
        alpha = _softmax(f @ Ys)                               # (.., b, M)
        V = -alpha
        V[..., tgt] += 1.0
        wV = V * w[rows][:, None]
        dY[..., sup, :] -= np.swapaxes(f, -1, -2) @ wV
        G = wV @ np.swapaxes(Ys, -1, -2)                       # (.., b, s): w_b (Y v_b) on the support
        PG = G - f * (f * G).sum(axis=-1, keepdims=True)
        dZ[..., q, sup] -= (h * PG / norm).sum(axis=-2)
        loss = loss - (np.log(np.maximum(alpha[..., tgt], 1e-300)) * w[rows]).sum(axis=-1)
    return loss, dY, dZ


def population_loss_grads(Y, Z, classes: SequenceClasses, *, decoder="free", W=None):
    """Long-sequence-limit loss ``sum_n pi_n CE_n`` and gradients (free decoder) or ``dW`` (tied)."""
    return forward_grads(Y, Z, classes.P, classes.query, classes.next_token, classes.weights,
                         W=W if decoder == "tied" else None, want_loss=True)


# --------------------------------------------------------------------------------------------------
# (a) SGD on sampled sequences
# --------------------------------------------------------------------------------------------------


def sample_counts(rng: np.random.Generator, classes: SequenceClasses, batch: int, T: float,
                  count_rng: np.random.Generator | None = None):
    """A batch of sequences as token counts: classes ~ ``weights``, ``T-1`` contextual tokens each.
    Returns ``(labels (B,), counts (B, M))``.  ``T = math.inf`` is the long-sequence limit of each sampled
    sequence: counts ``P(.|n)`` (attention depends on counts only through frequencies).  Tokens are drawn
    from ``count_rng`` (default ``rng``), so that runs at different ``T`` can share their labels."""
    labels = rng.choice(classes.K, size=batch, p=classes.weights)
    if math.isinf(T):
        return labels, classes.P[labels].astype(float)
    counts = (rng if count_rng is None else count_rng).multinomial(T - 1, classes.P[labels])
    return labels, counts.astype(float)


def _init(rng, S, M, init_scale):
    if init_scale == 0:
        return np.zeros((S, M, M)), np.zeros((S, M, M))
    return rng.normal(0, init_scale, (S, M, M)), rng.normal(0, init_scale, (S, M, M))


@dataclass
class SGDResult:
    Y: np.ndarray            # (S, M, M) final decoders
    Z: np.ndarray            # (S, M, M) final attention logits
    steps: np.ndarray        # recorded step numbers
    Z_hist: np.ndarray       # (len(steps), S, M, M)
    loss: np.ndarray         # (len(steps), S) minibatch loss at the recorded steps


def train_sgd(classes: SequenceClasses, *, steps: int, eta_y, eta_z, batch: int = 128, T: int = 128,
              momentum: float = 0.0, init_scale: float = 0.0, seed: int = 0, record_every: int = 0,
              Y0=None, Z0=None, shared_data: bool = True) -> SGDResult:
    """SGD (PyTorch convention ``v <- mu v + g``, ``p <- p - eta v``) on sampled sequences.

    ``T = math.inf`` trains on the long-sequence limit of each sampled sequence (the batch's classes are
    still sampled).  Classes and tokens come from separate streams of ``seed``, so runs that differ only in
    ``T`` see the same classes in every batch: their difference is the finite-``T`` effect alone.

    ``eta_y``, ``eta_z`` may be arrays of shape ``(S,)``: ``S`` models (a learning-rate grid, or seeds) are
    trained at once.  With ``shared_data`` every model sees the same batches (common random numbers, which
    make grid comparisons less noisy); otherwise each model draws its own.  ``init_scale > 0``: entries of
    ``Y(0)``, ``Z(0)`` are i.i.d. ``N(0, init_scale^2)`` (the paper's "random init"); ``0``: ``Y = Z = 0``.
    """
    eta_y = np.atleast_1d(np.asarray(eta_y, dtype=float))
    eta_z = np.atleast_1d(np.asarray(eta_z, dtype=float))
    S = max(len(eta_y), len(eta_z))
    if len(eta_y) not in (1, S) or len(eta_z) not in (1, S):
        raise ScanSnapError("eta_y, eta_z: arrays of learning rates must have the same length")
    for v in np.concatenate([eta_y, eta_z]):
        _check_rates(float(v), 0.0)
    for name, v, lo in (("steps", steps, 0), ("batch", batch, 1), ("T", T, 2)):
        if name == "T" and v == math.inf:
            continue
        if not isinstance(v, (int, np.integer, float)) or not math.isfinite(v) or int(v) != v or v < lo:
            raise ScanSnapError(f"{name}: expected an integer >= {lo}, got {v!r}")
    if not (0 <= momentum < 1):
        raise ScanSnapError(f"momentum: expected a value in [0, 1), got {momentum!r}")
    if not (init_scale >= 0 and math.isfinite(init_scale)):
        raise ScanSnapError(f"init_scale: expected a finite value >= 0, got {init_scale!r}")
    eta_y = np.broadcast_to(eta_y, (S,))[:, None, None]
    eta_z = np.broadcast_to(eta_z, (S,))[:, None, None]
    rng = np.random.default_rng(seed)
    count_rng = rng.spawn(1)[0]  # its own stream; does not advance rng
    M = classes.M
    Y, Z = _init(rng, S, M, init_scale)
    if Y0 is not None:
        Y = np.broadcast_to(np.asarray(Y0, float), (S, M, M)).copy()
    if Z0 is not None:
        Z = np.broadcast_to(np.asarray(Z0, float), (S, M, M)).copy()
    bufY = np.zeros_like(Y)
    bufZ = np.zeros_like(Z)
    w = np.full(batch, 1.0 / batch)
    rec_steps, hist, losses = [], [], []
    for k in range(steps + 1):
        if shared_data:
            labels, counts = sample_counts(rng, classes, batch, T, count_rng)
            loss, dY, dZ = forward_grads_by_class(Y, Z, counts, labels, classes, w)
        else:   # independent streams: per-model batches, processed one model at a time
            loss, dY, dZ = np.empty(S), np.empty_like(Y), np.empty_like(Z)
            for s in range(S):
                labels, counts = sample_counts(rng, classes, batch, T, count_rng)
                loss[s], dY[s], dZ[s] = forward_grads_by_class(Y[s], Z[s], counts, labels, classes, w)
        if record_every and k % record_every == 0 or k == steps:
            rec_steps.append(k)
            hist.append(Z.copy())
            losses.append(np.broadcast_to(loss, (S,)).copy())
        if k == steps:
            break
        if momentum:
            bufY = momentum * bufY + dY
            bufZ = momentum * bufZ + dZ
            Y = Y - eta_y * bufY
            Z = Z - eta_z * bufZ
        else:
            Y = Y - eta_y * dY
            Z = Z - eta_z * dZ
    return SGDResult(Y=Y, Z=Z, steps=np.array(rec_steps), Z_hist=np.array(hist), loss=np.array(losses))


# --------------------------------------------------------------------------------------------------
# (b) the long-sequence limit: deterministic dynamics
# --------------------------------------------------------------------------------------------------


def population_gd(classes: SequenceClasses, *, steps: int, eta_y, eta_z, momentum: float = 0.0,
                  Y0=None, Z0=None, engine: str | None = None):
    """Discrete gradient descent on the population loss with ``c_n`` (Lemma 2): the ``B, T -> inf`` limit of
    :func:`train_sgd` at the same step and momentum.  Returns ``(Y, Z)`` after ``steps`` steps.
    ``engine``: as in :func:`integrate`."""
    _check_rates(eta_y, eta_z)
    engine = _engine(engine)
    M = classes.M
    Y = np.zeros((M, M)) if Y0 is None else np.array(Y0, float)
    Z = np.zeros((M, M)) if Z0 is None else np.array(Z0, float)
    if engine == "compiled":
        from theory.tian2023.kernels import population_gd as compiled
        return compiled(classes, steps, eta_y, eta_z, momentum, Y, Z)
    bY, bZ = np.zeros_like(Y), np.zeros_like(Z)
    for _ in range(int(steps)):
        _, dY, dZ = population_loss_grads(Y, Z, classes)
        bY = momentum * bY + dY
        bZ = momentum * bZ + dZ
        Y = Y - eta_y * bY
        Z = Z - eta_z * bZ
    return Y, Z


@dataclass
class Trajectory:
    """Deterministic dynamics sampled at times ``t``; ``D`` is ``Y`` (free) or ``W`` (tied)."""

    classes: SequenceClasses
    decoder: str
    eta_y: float
    eta_z: float
    t: np.ndarray
    D: np.ndarray             # (nt, M, M) or (nt, K, M)
    Z: np.ndarray             # (nt, M, M)
    error_estimate: float     # step-halving estimate, in units of the tolerance (<= 1 accepted)
    steps: int                # RK4 steps of the accepted run

    def c(self, i: int = -1) -> np.ndarray:
        """``c_n`` (``K x M``) at sample ``i``."""
        return c_limit(self.Z[i], self.classes)

    def z(self, n: int, l) -> np.ndarray:
        """``z_{psi(n), l}(t)`` along the trajectory."""
        return self.Z[:, self.classes.query[n], l]

    def Y(self, i: int = -1) -> np.ndarray:
        if self.decoder == "free":
            return self.D[i]
        f = self.c(i)
        f = f / np.linalg.norm(f, axis=1, keepdims=True)
        return f.T @ self.D[i]


def _rhs_factory(classes, decoder, eta_y, eta_z):
    def rhs(t, D, Z):
        ey, ez = eta_y, eta_z
        if decoder == "free":
            _, dD, dZ = forward_grads(D, Z, classes.P, classes.query, classes.next_token, classes.weights)
        else:
            _, dD, dZ = forward_grads(None, Z, classes.P, classes.query, classes.next_token, classes.weights, W=D)
        return -ey * dD, -ez * dZ
    return rhs


def _rk4_plan(t_eval, steps_per_unit, tau):
    """The step plan of :func:`_rk4_logtime`, one segment per recorded state: ``(n, h, s_start)`` arrays --
    ``n`` RK4 steps of size ``h`` in ``s = ln(1 + t/tau)`` starting at ``s_start`` (``n = 0``: the current
    state is recorded again).  Shared by the numpy and the compiled integrators, so both take exactly the
    same steps."""
    seg_n, seg_h, seg_s = [], [], []
    s_prev = 0.0
    if t_eval[0] == 0:
        seg_n.append(0); seg_h.append(0.0); seg_s.append(0.0)
    for t_target in t_eval:
        s_target = math.log1p(t_target / tau)
        if s_target <= s_prev:
            if t_target != 0:
                seg_n.append(0); seg_h.append(0.0); seg_s.append(s_prev)
            continue
        n = max(1, math.ceil((s_target - s_prev) * steps_per_unit))
        seg_n.append(n); seg_h.append((s_target - s_prev) / n); seg_s.append(s_prev)
        s_prev = s_target
    return np.array(seg_n, dtype=np.int64), np.array(seg_h), np.array(seg_s)


def _rk4_logtime(rhs, D0, Z0, t_eval, steps_per_unit, tau):
    """Classical RK4 in ``s = ln(1 + t/tau)`` (``dx/ds = (tau + t) dx/dt``): the late dynamics slow down like
    ``1/t`` (Theorem 1(b), Theorem 4), so uniform steps in ``s`` keep the local error roughly uniform while
    the step in ``t`` grows geometrically.  The numpy reference of the compiled
    :func:`theory.tian2023.kernels.rk4_logtime` (same plan, :func:`_rk4_plan`)."""
    D, Z = D0.copy(), Z0.copy()
    out_D, out_Z = [], []

    def f(s, D, Z):
        scale = tau * math.exp(s)          # dt/ds = tau + t
        a, b = rhs(scale - tau, D, Z)
        return scale * a, scale * b
    seg_n, seg_h, seg_s = _rk4_plan(t_eval, steps_per_unit, tau)
    for n, h, s in zip(seg_n.tolist(), seg_h.tolist(), seg_s.tolist()):
        for _ in range(n):
            k1 = f(s, D, Z)
            k2 = f(s + h / 2, D + h / 2 * k1[0], Z + h / 2 * k1[1])
            k3 = f(s + h / 2, D + h / 2 * k2[0], Z + h / 2 * k2[1])
            k4 = f(s + h, D + h * k3[0], Z + h * k3[1])
            D = D + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
            Z = Z + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
            s += h
        out_D.append(D.copy()); out_Z.append(Z.copy())
    return np.array(out_D), np.array(out_Z), int(seg_n.sum())


def integrate(classes: SequenceClasses, t_end: float, *, eta_y: float, eta_z: float, decoder: str = "free",
              n_eval: int = 64, t_eval=None, Y0=None, Z0=None, W0=None, steps_per_unit: int = 64,
              tau: float | None = None, rtol: float = 1e-6, atol: float = 1e-8, max_halvings: int = 4,
              engine: str | None = None) -> Trajectory:
    """Integrate the long-sequence-limit dynamics from ``t = 0`` to ``t_end`` (SGD-step units).

    Output times: ``t_eval`` if given, else ``0`` and ``n_eval`` log-spaced times up to ``t_end``.
    Accuracy: RK4 with ``h`` and with ``h/2`` (``h = 1/steps_per_unit`` in log-time); the Richardson estimate
    of the finer run's error, ``max |x_h - x_{h/2}| / 15``, must be ``<= atol + rtol |x|`` at every output
    time, for ``Z`` and the decoder.  Otherwise the step is halved again, up to ``max_halvings`` times, and
    then :class:`IntegrationError` is raised.  The accepted (finer) run is returned.

    ``engine``: ``"compiled"`` (numba, :mod:`theory.tian2023.kernels`) or ``"numpy"`` (the reference
    :func:`_rk4_logtime`); both take the same steps and agree to rounding (~1e-13 relative).  ``None``:
    the module default :data:`ENGINE` (``"compiled"``; ``benchmarks/bench_scansnap.py`` switches it).
    """
    _check_rates(eta_y, eta_z)
    if decoder not in DECODERS:
        raise ScanSnapError(f"decoder: expected one of {DECODERS}, got {decoder!r}")
    engine = _engine(engine)
    if not (isinstance(t_end, (int, float, np.floating, np.integer)) and math.isfinite(t_end) and t_end > 0):
        raise ScanSnapError(f"t_end: expected a finite positive time, got {t_end!r}")
    M, K = classes.M, classes.K
    if t_eval is None:
        t_eval = np.concatenate([[0.0], np.geomspace(min(1.0, t_end), t_end, n_eval)])
    t_eval = np.asarray(t_eval, float)
    if (np.diff(t_eval) < 0).any() or t_eval[0] < 0 or abs(t_eval[-1] - t_end) > 1e-12 * t_end:
        raise ScanSnapError("t_eval: expected non-decreasing times in [0, t_end] ending at t_end")
    if tau is None:
        # the fastest early time scale: the decoder's, 1/eta_Y (Theorem 1: ~2K ln M / eta_Y to the snap)
        tau = 1.0 / max(eta_y, eta_z, 1e-12)
    Z0 = np.zeros((M, M)) if Z0 is None else np.array(Z0, float)
    if decoder == "free":
        D0 = np.zeros((M, M)) if Y0 is None else np.array(Y0, float)
    else:
        D0 = np.zeros((K, M)) if W0 is None else np.array(W0, float)
    if engine == "numpy":
        rhs = _rhs_factory(classes, decoder, float(eta_y), float(eta_z))

        def run(spu):
            return _rk4_logtime(rhs, D0, Z0, t_eval, spu, tau)
    else:
        from theory.tian2023.kernels import rk4_logtime

        def run(spu):
            return rk4_logtime(classes, decoder, eta_y, eta_z, D0, Z0, _rk4_plan(t_eval, spu, tau), tau)
    coarse = run(steps_per_unit)
    spu = steps_per_unit
    worst = np.inf
    for _ in range(max_halvings + 1):
        spu *= 2
        fine = run(spu)
        worst = 0.0
        for a, b in ((coarse[0], fine[0]), (coarse[1], fine[1])):
            if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
                worst = np.inf
                break
            est = np.abs(a - b) / 15.0
            worst = max(worst, float(np.max(est / (atol + rtol * np.abs(b)))))
        if worst <= 1.0:
            return Trajectory(classes=classes, decoder=decoder, eta_y=float(eta_y), eta_z=float(eta_z),
                              t=t_eval, D=fine[0], Z=fine[1], error_estimate=worst, steps=fine[2])
        coarse = fine
    raise IntegrationError(
        f"RK4 step-halving error estimate is {worst:.3g} x the tolerance (rtol={rtol:g}, atol={atol:g}) after "
        f"{max_halvings} halvings ({coarse[2]} log-time steps up to t={t_end:g}); raise steps_per_unit or loosen rtol")


# --------------------------------------------------------------------------------------------------
# Quantities the theorems talk about
# --------------------------------------------------------------------------------------------------


def relative_gain(c: np.ndarray, l: int, lp: int) -> np.ndarray:
    """Theorem 3: ``r_{l/l'|n} = c~^2_{l|n} / c~^2_{l'|n} - 1`` for rows ``c`` of ``c_n`` over time (``(nt, M)``
    or ``(M,)``); ``c~ = c / ||c||`` but the norm cancels in the ratio."""
    c = np.asarray(c)
    return (c[..., l] / c[..., lp]) ** 2 - 1.0


def gain_identity_residual(traj: Trajectory, n: int, l: int, lp: int) -> np.ndarray:
    """Theorem 3, Eqn. 11, in the form that holds exactly along the tied dynamics:
    ``r(t) = r(0) exp(2 (z_l(t) - z_l(0)))`` for two distinct tokens ``l, l'`` of class ``n`` (any ``Z(0)``;
    derived from ``dz_l / c~_l^2 = dz_l' / c~_l'^2``, Eqn. 108).  Returns the relative residual
    ``|r(t) - r(0) e^{2 dz_l}| / max(|r(t)|, |r(0) e^{2 dz_l}|)`` over time."""
    C = np.array([traj.c(i)[n] for i in range(len(traj.t))])
    r = relative_gain(C, l, lp)
    pred = r[0] * np.exp(2.0 * (traj.z(n, l) - traj.z(n, l)[0]))
    den = np.maximum(np.maximum(np.abs(r), np.abs(pred)), 1e-300)
    return np.abs(r - pred) / den


def distinct_share(c_row: np.ndarray, classes: SequenceClasses, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens, q)``: class ``n``'s distinct tokens with positive attention and ``c_n`` on them renormalized
    (empty when there are none)."""
    toks = classes.distinct_tokens(n)
    p = c_row[toks]
    keep = p > 0
    if not keep.any():
        return toks[:0], p[:0]
    return toks[keep], p[keep] / p[keep].sum()


def distinct_entropy(c_row: np.ndarray, classes: SequenceClasses, n: int) -> float:
    """Entropy (nats) of ``c_n`` restricted to class ``n``'s distinct tokens and renormalized (Sec. 8)."""
    _, q = distinct_share(c_row, classes, n)
    return float(-(q * np.log(q)).sum()) if len(q) else 0.0


def mean_distinct_entropy(C: np.ndarray, classes: SequenceClasses) -> float:
    """Average over classes with at least one distinct token of :func:`distinct_entropy`."""
    vals = [distinct_entropy(C[n], classes, n) for n in range(classes.K) if classes.distinct_mask[n].any()]
    return float(np.mean(vals)) if vals else 0.0


def mean_distinct_entropy_error(Z: np.ndarray, classes: SequenceClasses, *, rtol: float, atol: float) -> float:
    """Bound on the error of ``mean_distinct_entropy(c_limit(Z))`` when every entry of ``Z`` may be off by
    ``atol + rtol |Z|`` (the accuracy :func:`integrate` accepts, by its step-halving estimate), plus the
    float64 rounding of the entropy itself.

    Over class ``n``'s distinct tokens the renormalized attention is ``q_l ∝ P(l|n) e^{z_{ml}}`` (the common
    tokens cancel) and ``dH/dz_l = -q_l (ln q_l + H)``.  Mean value theorem along the perturbation ``δ``
    (``|δ_l| <= ε_l <= ε``): ``|ΔH| <= Σ_l q_l(ξ) |ln q_l(ξ) + H(ξ)| ε_l`` at some ``ξ`` on the segment, where
    ``q(ξ) <= e^{2ε} q``, ``|ln q(ξ) - ln q| <= 2ε`` and ``|H(ξ) - H| <= D``; the same inequality bounds ``D``,
    so with ``F = Σ q_l |ln q_l + H| ε_l`` and ``ē = Σ q_l ε_l``:
    ``|ΔH| <= D <= e^{2ε} (F + 2ε ē) / (1 - e^{2ε} ē)`` (``inf`` unless ``e^{2ε} ē < 1/2``).  The ``2ε ē``
    term matters where ``F`` vanishes: at uniform attention the entropy is at its maximum and moves only to
    second order (a layout with equal distinct probabilities: the first-order term alone gave a bound of 0,
    and two runs differing by rounding passed as "denser").  Rounding: ``c_limit`` and the renormalization
    give each ``q_l`` a relative error ``<= (M + 2|D_n| + 8) u`` (``u`` the unit roundoff), which moves ``H`` by at
    most that times ``(2 + max |ln q| + H)``; added per class."""
    u = np.finfo(float).eps / 2
    C = c_limit(Z, classes)
    out = []
    for n in range(classes.K):
        if not classes.distinct_mask[n].any():
            continue
        toks, q = distinct_share(C[n], classes, n)
        if len(q) == 0:
            out.append(0.0)
            continue
        eps_l = atol + rtol * np.abs(Z[classes.query[n], toks])
        eps = float(eps_l.max())
        lnq = np.log(q)
        H = float(-(q * lnq).sum())
        F = float((q * np.abs(lnq + H) * eps_l).sum())
        ebar = float((q * eps_l).sum())
        grow = math.exp(2 * eps)
        if not grow * ebar < 0.5:
            return math.inf
        rounding = (classes.M + 2 * len(q) + 8) * u * (2 + float(np.abs(lnq).max()) + H)
        out.append(grow * (F + 2 * eps * ebar) / (1 - grow * ebar) + rounding)
    return float(np.mean(out)) if out else 0.0


def snap_time_estimate(classes: SequenceClasses, eta_y: float) -> float:
    """The paper's order-of-magnitude transition time ``t_0 ≈ 2 K ln M / eta_Y`` (Theorem 1(b), Theorem 4)."""
    return 2.0 * classes.K * math.log(classes.M) / eta_y
