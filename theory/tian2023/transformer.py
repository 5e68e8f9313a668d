"""A causal transformer language model in numpy, with hand-derived gradients and plain SGD.

This is the model of the Scan and Snap real-data experiments (Tian et al. 2023, Sec. 8 "Real-world
Dataset", Fig. 7, and Appendix G, Fig. 10): the ordinary parametrization (token embedding, then
self-attention blocks, then a linear decoder to the vocabulary) trained with one learning rate for
every parameter, instead of the reparametrized one-layer model that the theory analyses.

Architecture (the authors' experiment: a PyTorch-style post-norm encoder layer with one head and a
causal mask; dropout is left out so that a run is a deterministic function of its seed)::

    x0  = sqrt(d) * E[token] + P[position]                     (P: fixed sinusoids)
    per layer:
      A   = softmax_causal((x Wq' + bq)(x Wk' + bk)' / sqrt(d))  (one head; row i sees keys 0..i)
      x1  = LN(x + (A (x Wv' + bv)) Wo' + bo)
      x   = LN(x1 + W2 relu(W1 x1 + b1) + b2)
    logits = x Wd' + bd ;  loss = mean cross-entropy of the next token

The attention map ``A`` of each layer is what the experiments watch: its row entropy
``-sum_j A_ij log A_ij`` averaged over the query positions of held-out text is the sparsity measure of
the paper's Fig. 10, and its movement between checkpoints is the "freezing" of Fig. 7.

Gradients are derived by hand (checked against central finite differences in float64 by the
property tests); training runs in float32, which measured faster (see the reproduction page).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LN_EPS = 1e-5


@dataclass(frozen=True)
class ModelConfig:
    vocab: int
    d: int = 200
    d_hid: int = 200
    layers: int = 1
    positional: bool = True
    # "uniform" replaces every attention row by the uniform causal row (logits held at their
    # initial value 0): the control in which attention cannot learn anything.
    attention: str = "learned"


def _sinusoids(t: int, d: int) -> np.ndarray:
    pos = np.arange(t)[:, None]
    div = np.exp(np.arange(0, d, 2) * (-np.log(10000.0) / d))
    pe = np.zeros((t, d))
    pe[:, 0::2] = np.sin(pos * div)
    pe[:, 1::2] = np.cos(pos * div[: d // 2])
    return pe


def init_params(cfg: ModelConfig, rng: np.random.Generator, dtype=np.float32) -> dict[str, np.ndarray]:
    """The authors' initialization: embedding and decoder uniform in [-0.1, 0.1], decoder bias 0;
    the query/key/value projections Xavier-uniform over the stacked (3d, d) matrix with zero biases;
    the output projection and feed-forward layers uniform in +-1/sqrt(fan_in) (output-projection bias
    0); layer-norm gains 1 and biases 0."""
    d, h, V = cfg.d, cfg.d_hid, cfg.vocab
    u = lambda shape, b: rng.uniform(-b, b, size=shape)
    p = {"E": u((V, d), 0.1), "Wd": u((V, d), 0.1), "bd": np.zeros(V)}
    xav = np.sqrt(6.0 / (3 * d + d))
    for l in range(cfg.layers):
        p.update({
            f"Wq{l}": u((d, d), xav), f"Wk{l}": u((d, d), xav), f"Wv{l}": u((d, d), xav),
            f"bq{l}": np.zeros(d), f"bk{l}": np.zeros(d), f"bv{l}": np.zeros(d),
            f"Wo{l}": u((d, d), 1 / np.sqrt(d)), f"bo{l}": np.zeros(d),
            f"g1{l}": np.ones(d), f"c1{l}": np.zeros(d),
            f"W1{l}": u((h, d), 1 / np.sqrt(d)), f"b1{l}": u((h,), 1 / np.sqrt(d)),
            f"W2{l}": u((d, h), 1 / np.sqrt(h)), f"b2{l}": u((d,), 1 / np.sqrt(h)),
            f"g2{l}": np.ones(d), f"c2{l}": np.zeros(d),
        })
    return {k: v.astype(dtype) for k, v in p.items()}


def _ln(y, g, c):
    mu = y.mean(-1, keepdims=True)
    yc = y - mu
    inv = 1.0 / np.sqrt((yc * yc).mean(-1, keepdims=True) + LN_EPS)
    xh = yc * inv
    return xh * g + c, (xh, inv)


def _ln_back(dout, g, cache):
    xh, inv = cache
    dxh = dout * g
    dy = inv * (dxh - dxh.mean(-1, keepdims=True) - xh * (dxh * xh).mean(-1, keepdims=True))
    return dy, (dout * xh).reshape(-1, xh.shape[-1]).sum(0), dout.reshape(-1, xh.shape[-1]).sum(0)


def _causal_mask(t: int) -> np.ndarray:
    return np.triu(np.ones((t, t), dtype=bool), 1)


def forward(params, cfg: ModelConfig, x_ids: np.ndarray, y_ids: np.ndarray | None = None, keep=False):
    """Logits' loss (when ``y_ids`` is given) and the attention maps, shape (layers, B, T, T).

    With ``keep`` the intermediate values for :func:`backward` are returned too."""
    B, T = x_ids.shape
    d = cfg.d
    dt = params["E"].dtype
    x = params["E"][x_ids] * np.sqrt(d).astype(dt)
    if cfg.positional:
        x = x + _sinusoids(T, d).astype(dt)
    mask = _causal_mask(T)
    caches, attns = [], []
    scale = dt.type(1.0 / np.sqrt(d))
    for l in range(cfg.layers):
        P = lambda n: params[f"{n}{l}"]
        q = x @ P("Wq").T + P("bq")
        k = x @ P("Wk").T + P("bk")
        v = x @ P("Wv").T + P("bv")
        if cfg.attention == "uniform":
            s = np.zeros((B, T, T), dtype=dt)
        else:
            s = (q @ k.transpose(0, 2, 1)) * scale
        s = np.where(mask, -np.inf, s)
        s = s - s.max(-1, keepdims=True)
        a = np.exp(s)
        a /= a.sum(-1, keepdims=True)
        hv = a @ v
        o = hv @ P("Wo").T + P("bo")
        x1, ln1 = _ln(x + o, P("g1"), P("c1"))
        pre = x1 @ P("W1").T + P("b1")
        r = np.maximum(pre, 0)
        f = r @ P("W2").T + P("b2")
        x2, ln2 = _ln(x1 + f, P("g2"), P("c2"))
        caches.append((x, q, k, v, a, hv, ln1, x1, pre, r, ln2))
        attns.append(a)
        x = x2
    out = {"attn": np.stack(attns)}
    if y_ids is not None or keep:
        logits = x @ params["Wd"].T + params["bd"]
        logits -= logits.max(-1, keepdims=True)
        ex = np.exp(logits)
        z = ex.sum(-1, keepdims=True)
        if y_ids is not None:
            logp_y = np.take_along_axis(logits, y_ids[..., None], -1)[..., 0] - np.log(z[..., 0])
            out["loss"] = float(-logp_y.astype(np.float64).mean())
        if keep:
            out["cache"] = (x_ids, caches, x, ex / z)
    return out


def backward(params, cfg: ModelConfig, y_ids: np.ndarray, cache) -> dict[str, np.ndarray]:
    """Gradient of the mean next-token cross-entropy with respect to every parameter."""
    x_ids, caches, xL, prob = cache
    B, T = y_ids.shape
    d = cfg.d
    dt = params["E"].dtype
    n = B * T
    dlog = prob.copy()
    np.put_along_axis(dlog, y_ids[..., None], np.take_along_axis(dlog, y_ids[..., None], -1) - 1, -1)
    dlog /= n
    g = {"bd": dlog.reshape(n, -1).sum(0), "Wd": dlog.reshape(n, -1).T @ xL.reshape(n, d)}
    dx = dlog @ params["Wd"]
    scale = dt.type(1.0 / np.sqrt(d))
    flat = lambda a: a.reshape(-1, a.shape[-1])
    for l in reversed(range(cfg.layers)):
        P = lambda nm: params[f"{nm}{l}"]
        x, q, k, v, a, hv, ln1, x1, pre, r, ln2 = caches[l]
        dy2, g[f"g2{l}"], g[f"c2{l}"] = _ln_back(dx, P("g2"), ln2)
        g[f"b2{l}"] = flat(dy2).sum(0)
        g[f"W2{l}"] = flat(dy2).T @ flat(r)
        dpre = (dy2 @ P("W2")) * (pre > 0)
        g[f"b1{l}"] = flat(dpre).sum(0)
        g[f"W1{l}"] = flat(dpre).T @ flat(x1)
        dx1 = dy2 + dpre @ P("W1")
        dy1, g[f"g1{l}"], g[f"c1{l}"] = _ln_back(dx1, P("g1"), ln1)
        g[f"bo{l}"] = flat(dy1).sum(0)
        g[f"Wo{l}"] = flat(dy1).T @ flat(hv)
        dhv = dy1 @ P("Wo")
        dv = a.transpose(0, 2, 1) @ dhv
        if cfg.attention == "uniform":
            dq = np.zeros_like(q)
            dk = np.zeros_like(k)
        else:
            da = dhv @ v.transpose(0, 2, 1)
            ds = a * (da - (da * a).sum(-1, keepdims=True)) * scale
            dq = ds @ k
            dk = ds.transpose(0, 2, 1) @ q
        dxl = dy1.copy()
        for nm, dz in (("q", dq), ("k", dk), ("v", dv)):
            g[f"b{nm}{l}"] = flat(dz).sum(0)
            g[f"W{nm}{l}"] = flat(dz).T @ flat(x)
            dxl += dz @ P(f"W{nm}")
        dx = dxl
    # Only the rows of the tokens in the batch get a gradient; summing them per distinct token keeps
    # the scatter small (hundreds of rows, not the whole vocabulary).
    uniq, inv = np.unique(x_ids.reshape(-1), return_inverse=True)
    rows = np.zeros((uniq.size, d), dtype=dt)
    np.add.at(rows, inv, flat(dx) * dt.type(np.sqrt(d)))
    g["E"] = (uniq, rows)
    return g


def grad_norm(grads) -> float:
    tot = 0.0
    for k, gk in grads.items():
        arr = gk[1] if k == "E" else gk
        tot += float(np.square(arr, dtype=np.float64).sum())
    return float(np.sqrt(tot))


def dense_grad(grads, params) -> dict[str, np.ndarray]:
    """The gradients with the embedding's row gradient scattered into a full matrix (for tests)."""
    out = dict(grads)
    uniq, rows = grads["E"]
    full = np.zeros_like(params["E"])
    full[uniq] = rows
    out["E"] = full
    return out


def sgd_step(params, grads, lr: float, clip: float | None, frozen: frozenset = frozenset()) -> float:
    """One SGD step in place; the gradient is rescaled to norm ``clip`` when longer (the authors'
    trainer clips at 0.5). Returns the gradient norm before clipping."""
    norm = grad_norm(grads)
    factor = lr * (min(1.0, clip / norm) if clip is not None and norm > 0 else 1.0)
    for k, gk in grads.items():
        if k in frozen:
            continue
        if k == "E":
            uniq, rows = gk
            params["E"][uniq] -= params["E"].dtype.type(factor) * rows
        else:
            params[k] -= params[k].dtype.type(factor) * gk
    return norm


def attention_entropy(attn: np.ndarray) -> np.ndarray:
    """Row entropy ``-sum_j a_ij log a_ij`` of attention maps (..., T, T), nats; zeros count as 0."""
    a = attn.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(a > 0, a * np.log(a), 0.0)
    return -t.sum(-1)
