"""Scan and Snap on real text (Tian et al. 2023, Sec. 8 Fig. 7, Appendix G Fig. 10).

Three kinds of property:

* the hand-derived gradients of the numpy transformer equal central finite differences (float64);
* the judges of the two criteria are three-valued with the stated bands, and the protocols are data;
* reduced versions of both experiments on the shipped real text: the criterion holds for the model,
  and the same criterion does not hold for controls that remove what the theory needs (attention
  logits held at their initial value, so attention cannot move; text whose token order is shuffled,
  so that no token predicts the next one).
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from theory.tian2023 import real_text as rt
from theory.tian2023 import transformer as tf

# --------------------------------------------------------------------------- gradients


def _loss(params, cfg, x, y):
    return tf.forward(params, cfg, x, y)["loss"]


@settings(max_examples=6, deadline=None, derandomize=False)
@given(seed=st.integers(0, 2**31 - 1), layers=st.sampled_from([1, 2]),
       attention=st.sampled_from(["learned", "uniform"]), positional=st.booleans())
def test_gradient_equals_finite_differences(seed, layers, attention, positional):
    """Per parameter block, the directional derivative along a random direction: hand gradient
    against a central difference in float64 (step 1e-5, truncation error ~1e-10 relative)."""
    rng = np.random.default_rng(seed)
    cfg = tf.ModelConfig(vocab=11, d=6, d_hid=5, layers=layers, positional=positional, attention=attention)
    p = tf.init_params(cfg, rng, np.float64)
    for k in p:  # move layer-norm parameters off 1/0 so their own gradient paths are exercised
        if k[0] in "gc":
            p[k] = p[k] + rng.normal(0, 0.3, p[k].shape)
    x, y = rng.integers(0, 11, (3, 7)), rng.integers(0, 11, (3, 7))
    out = tf.forward(p, cfg, x, y, keep=True)
    g = tf.dense_grad(tf.backward(p, cfg, y, out["cache"]), p)
    assert set(g) == set(p)
    h = 1e-5
    for k in p:
        v = rng.normal(size=p[k].shape)
        if k == "E":  # only the embedding rows of the batch's tokens have a gradient
            v[np.setdiff1d(np.arange(11), x)] = 0
        analytic = float((g[k] * v).sum())
        base = p[k].copy()
        p[k] = base + h * v
        lp = _loss(p, cfg, x, y)
        p[k] = base - h * v
        lm = _loss(p, cfg, x, y)
        p[k] = base
        fd = (lp - lm) / (2 * h)
        if attention == "uniform" and k[:2] in ("Wq", "Wk", "bq", "bk"):
            assert analytic == 0.0 and abs(fd) < 1e-9, k
            continue
        assert abs(fd - analytic) <= 1e-6 * max(1.0, abs(fd)), (k, fd, analytic)


def test_sgd_step_clips_to_the_stated_norm():
    rng = np.random.default_rng(0)
    cfg = tf.ModelConfig(vocab=9, d=4, d_hid=4)
    p = tf.init_params(cfg, rng, np.float64)
    x, y = rng.integers(0, 9, (2, 5)), rng.integers(0, 9, (2, 5))
    out = tf.forward(p, cfg, x, y, keep=True)
    g = tf.backward(p, cfg, y, out["cache"])
    before = {k: v.copy() for k, v in p.items()}
    norm = tf.sgd_step(p, g, lr=1.0, clip=1e-3)
    moved = np.sqrt(sum(float(((p[k] - before[k]) ** 2).sum()) for k in p))
    assert norm > 1e-3 and moved == pytest.approx(1e-3, rel=1e-6)


def test_attention_entropy_of_uniform_causal_rows():
    cfg = tf.ModelConfig(vocab=7, d=4, d_hid=4, attention="uniform")
    p = tf.init_params(cfg, np.random.default_rng(1), np.float64)
    out = tf.forward(p, cfg, np.random.default_rng(2).integers(0, 7, (2, 9)))
    ent = tf.attention_entropy(out["attn"])[0, 0]
    assert np.allclose(ent, np.log(np.arange(1, 10)))


# --------------------------------------------------------------------------- judges and protocols


def test_freeze_judge_is_three_valued():
    p = rt.Fig7Protocol()
    steps = [0, 1, 10, 100, 1000]
    losses = [8.0, 7.0, 6.0, 5.0, 4.0]
    ent = [2.5, 2.4, 2.0, 1.5, 1.5]
    low, mid, high = p.freeze_level * 0.5, p.freeze_level, p.freeze_level * 2
    # frozen from step 10 on while the loss falls by 2 nats more: holds
    assert rt.judge_freeze(steps, np.array([1, 1, low, low]), losses, ent, p)["verdict"] == rt.HOLDS
    # changes at exactly the level: inside the margin, undecided
    r = rt.judge_freeze(steps, np.array([1, 1, mid, mid]), losses, ent, p)
    assert r["froze"] == rt.UNDECIDED and r["verdict"] == rt.UNDECIDED
    # never below the level: fails
    assert rt.judge_freeze(steps, np.array([1, 1, high, high]), losses, ent, p)["verdict"] == rt.FAILS
    # froze, but the loss had already stopped falling: fails
    flat = [8.0, 7.0, 4.0, 4.0, 4.0]
    assert rt.judge_freeze(steps, np.array([1, 1, low, low]), flat, ent, p)["loss_still_falling"] == rt.FAILS
    # froze without getting sparser: fails
    same = [2.5, 2.5, 2.5, 2.5, 2.5]
    assert rt.judge_freeze(steps, np.array([1, 1, low, low]), losses, same, p)["sparser"] == rt.FAILS


def test_entropy_vs_lr_judge_is_three_valued():
    p = rt.Fig10Protocol()
    lrs = [0.5, 1, 2, 5]
    assert rt.judge_entropy_vs_lr(lrs, [[2.0, 2.02], [1.8, 1.8], [1.5, 1.52], [1.0, 1.01]], p)["verdict"] == rt.HOLDS
    # a drop smaller than the seeds' spread fails
    assert rt.judge_entropy_vs_lr(lrs, [[2.0, 1.0], [1.8, 1.8], [1.5, 1.5], [1.4, 1.4]], p)["verdict"] == rt.FAILS
    # rising with the learning rate fails
    assert rt.judge_entropy_vs_lr(lrs, [[1.0, 1.0], [1.5, 1.5], [1.8, 1.8], [2.0, 2.0]], p)["verdict"] == rt.FAILS
    # a drop just above the spread, within the margin: undecided
    d = p.margin / 2
    e = [[2.0, 2.0], [1.99, 1.99], [1.98, 1.98], [2.0 - d, 2.0 - d]]
    assert rt.judge_entropy_vs_lr(lrs, e, p)["verdict"] == rt.UNDECIDED
    # no spread and no drop (attention that never moves) fails
    assert rt.judge_entropy_vs_lr(lrs, [[2.6, 2.6]] * 4, p)["verdict"] == rt.FAILS


def test_protocols_are_pinned():
    """The protocols of the printed experiments; a change here is a change of the experiment."""
    text = {"max_vocab": 2000, "d": 200, "d_hid": 200, "seq_len": 35, "batch": 20, "eval_streams": 10,
            "clip": 0.5, "positional": True, "eval_chunks": None, "probe_chunks": 8, "text": "none"}
    assert asdict(rt.TextProtocol()) == text
    f7 = asdict(rt.Fig7Protocol())
    assert f7.pop("text") == text
    assert f7 == FIG7_PINNED
    f10 = asdict(rt.Fig10Protocol())
    assert f10.pop("text") == text
    assert f10 == FIG10_PINNED


FIG7_PINNED = {"layers": 1, "lr": 5.0, "steps": 3000, "seeds": 1, "per_decade": 4, "freeze_level": 0.05,
               "freeze_margin": 0.2, "min_frozen_intervals": 2, "sparsify_level": 0.1, "sparsify_margin": 0.05,
               "loss_fall_level": 0.02, "loss_fall_margin": 0.01}
FIG10_PINNED = {"layers": 1, "lrs": (0.5, 1.0, 2.0, 5.0), "steps": 600, "seeds": 2, "margin": 0.05,
                "rank_level": -0.8}


def test_checkpoints_are_log_spaced_and_end_at_the_budget():
    for steps in (5, 99, 1000, 3000):
        c = rt.checkpoints(steps, 4)
        assert c[0] == 0 and c[-1] == steps and c == sorted(set(c))
        ratios = [b / a for a, b in zip(c[1:-1], c[2:])]
        assert all(r >= 10 ** (0.5 / 4) * 0.99 for r in ratios[len(ratios) // 2:])
