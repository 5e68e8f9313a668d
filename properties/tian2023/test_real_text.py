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

from properties.judging import not_judged

from theory.tian2023 import real_text as rt
from theory.tian2023 import transformer as tf

# --------------------------------------------------------------------------- gradients


def _loss(params, cfg, x, y):
    return tf.forward(params, cfg, x, y)["loss"]


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), layers=st.sampled_from([1, 2]),
       attention=st.sampled_from(["learned", "uniform"]), positional=st.booleans())
def test_gradient_equals_finite_differences(seed, layers, attention, positional):
    """Per parameter block, the directional derivative along a random direction: hand gradient
    against a central difference in float64 (step 1e-6: truncation ~1e-12, rounding ~1e-10)."""
    rng = np.random.default_rng(seed)
    cfg = tf.ModelConfig(vocab=11, d=6, d_hid=5, layers=layers, positional=positional, attention=attention)
    p = tf.init_params(cfg, rng, np.float64)
    for k in p:  # move layer-norm parameters off 1/0 so their own gradient paths are exercised
        if k[0] in "gc":
            p[k] = p[k] + rng.normal(0, 0.3, p[k].shape)
    x, y = rng.integers(0, 11, (3, 7)), rng.integers(0, 11, (3, 7))
    out = tf.forward(p, cfg, x, y, keep=True)
    # a feed-forward pre-activation within reach of the step would put a ReLU kink inside the difference
    if min(np.abs(layer[8]).min() for layer in out["cache"][1]) <= 1e-4:
        not_judged("a ReLU pre-activation within 1e-4 of its kink (the derivative is one-sided there)")
    g = tf.dense_grad(tf.backward(p, cfg, y, out["cache"]), p)
    assert set(g) == set(p)
    h = 1e-6
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
    steps = [0, 1, 2, 3, 6, 10, 18, 32, 56, 100]
    n = len(steps) - 1
    losses = list(np.linspace(8.0, 4.0, n + 1))
    ent = [2.5, 2.4, 2.1, 1.7, 1.55, 1.5, 1.5, 1.5, 1.5, 1.5]
    ends = np.array(steps[1:], float)

    def judge(rates, losses=losses, ent=ent, tv=None):
        rates = np.asarray(rates, float)
        return rt.judge_freeze(steps, rates * 0.25 if tv is None else tv, rates, losses, ent, p)

    # change per decade constant (logarithmic motion) once the entropy has settled: holds
    r = judge(np.full(n, 0.4))
    assert r["verdict"] == rt.HOLDS and r["freeze_step"] == 6, r
    # change per decade growing like t (motion at a constant speed per step): fails
    assert judge(0.01 * ends)["froze"] == rt.FAILS
    # growing like t^(1/4): the slope sits at the level, inside the margin: undecided
    assert judge(0.1 * ends ** 0.25)["froze"] == rt.UNDECIDED
    # rows replaced wholesale between checkpoints: not a measurable speed, fails
    assert judge(np.full(n, 3.0), tv=np.full(n, 0.8))["froze"] == rt.FAILS
    # entropy still falling at the end: not frozen
    assert judge(np.full(n, 0.4), ent=list(np.linspace(2.5, 1.0, n + 1)))["froze"] == rt.FAILS
    # froze, but the loss had stopped falling long before: fails
    flat = [8.0, 7.0, 6.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0]
    assert judge(np.full(n, 0.4), losses=flat)["loss_still_falling"] == rt.FAILS
    # froze without getting sparser: fails
    assert judge(np.full(n, 0.4), ent=[2.5] * (n + 1))["sparser"] == rt.FAILS
    # settled only in the last decade of the budget: too late for one window, undecided
    late = [2.5, 2.4, 2.3, 2.2, 2.1, 2.0, 1.9, 1.55, 1.5, 1.5]
    r = judge(np.full(n, 0.4), ent=late)
    assert r["froze"] == rt.UNDECIDED and r["settled_too_late_to_judge_from"] == 32, r


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


FIG7_PINNED = {"layers": 1, "lr": 2.0, "steps": 3000, "seeds": 1, "per_decade": 4, "slope_level": 0.25,
               "slope_margin": 0.15, "saturation": 0.5, "min_frozen_intervals": 4, "sparsify_level": 0.1,
               "sparsify_margin": 0.05, "loss_fall_level": 0.02, "loss_fall_margin": 0.01}
FIG10_PINNED = {"layers": 1, "lrs": (0.5, 1.0, 2.0, 3.0, 5.0), "steps": 600, "seeds": 2, "margin": 0.05,
                "rank_level": -0.8}


def test_checkpoints_are_log_spaced_and_end_at_the_budget():
    for steps in (5, 99, 1000, 3000):
        c = rt.checkpoints(steps, 4)
        assert c[0] == 0 and c[-1] == steps and c == sorted(set(c))
        ratios = [b / a for a, b in zip(c[1:-1], c[2:])]
        assert all(r >= 10 ** (0.5 / 4) * 0.99 for r in ratios[len(ratios) // 2:])


# --------------------------------------------------------------------------- reduced experiments on real text
#
# The shipped King James text at a reduced size (embedding 32, vocabulary 500, 20 validation chunks),
# in-process. The full-size protocols are the ones pinned above; the reduced ones shrink the model and
# the budget, never the criteria.

REDUCED_TEXT = rt.TextProtocol(max_vocab=500, d=32, d_hid=32, eval_chunks=20, probe_chunks=4)
REDUCED_FIG10 = rt.Fig10Protocol(text=REDUCED_TEXT, lrs=(0.5, 1.0, 2.0), steps=300, seeds=2)
REDUCED_FIG7 = rt.Fig7Protocol(text=REDUCED_TEXT, lr=2.0, steps=1500)


@pytest.fixture(scope="module")
def corpus():
    from theory.tian2023.wikitext import load_corpus

    return load_corpus(None, max_vocab=REDUCED_TEXT.max_vocab)


def _fig10(corpus, seed_base, **kw):
    p = replace(REDUCED_FIG10, text=replace(REDUCED_TEXT, **kw.pop("text", {})))
    return rt.run_fig10(p, workers=0, corpus=corpus, seed_base=seed_base, **kw)


@pytest.mark.slow
@settings(max_examples=1, deadline=None)
@given(seed_base=st.integers(0, 10_000))
def test_fig10_entropy_falls_with_the_learning_rate_and_the_controls_do_not(corpus, seed_base):
    """Fig. 10: on real text the final validation attention entropy falls from lr 0.5 to 2 by more
    than the seeds' spread; with the attention logits held at 0, or with the token order shuffled, the
    same judge must not say so."""
    real = _fig10(corpus, seed_base)
    assert real["verdict"] == rt.HOLDS, real["first_layer"]
    held = _fig10(corpus, seed_base, attention="uniform")
    assert held["verdict"] == rt.FAILS, held["first_layer"]
    shuffled = _fig10(corpus, seed_base, text={"text": "shuffle"})
    assert shuffled["verdict"] == rt.FAILS, shuffled["first_layer"]
    assert real["protocol"] == asdict(REDUCED_FIG10)
    json.dumps(real)


def _fig7(corpus, **kw):
    p = replace(REDUCED_FIG7, text=replace(REDUCED_TEXT, **kw.pop("text", {})))
    r = rt.run_fig7(p, workers=0, corpus=corpus, **kw)
    return r, r["runs"][0]["first_layer"]


@pytest.mark.slow
def test_fig7_first_layer_gets_sparser_while_the_loss_falls_and_the_controls_do_not(corpus):
    """Fig. 7's "becomes sparse": on real text the first layer's validation attention entropy drops
    by more than the stated level while the validation loss falls; with the logits held at 0 or with
    shuffled text the same judge finds no such drop, so the whole criterion fails for both."""
    real, fl = _fig7(corpus)
    assert fl["sparser"] == rt.HOLDS, fl
    assert real["runs"][0]["val_loss"][-1] < real["runs"][0]["val_loss"][0] - 1.0
    for kw in ({"attention": "uniform"}, {"text": {"text": "shuffle"}}):
        ctrl, cfl = _fig7(corpus, **kw)
        assert cfl["sparser"] == rt.FAILS and ctrl["verdict"] == rt.FAILS, (kw, cfl)
    # Measured deviation from the paper (docs/reproductions/real-text.md): at this budget the first
    # layer has NOT frozen; its maps still move by more than a tenth of their mass per quarter decade.
    # If this fails, the model now freezes and the page's account must be revised.
    assert fl["froze"] != rt.HOLDS, fl
    assert max(real["runs"][0]["change_per_interval"][0][-3:]) > 0.1
