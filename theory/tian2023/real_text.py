"""Scan and Snap on real text: the paper's Fig. 7 and Fig. 10 (Tian et al. 2023, Sec. 8, Appendix G).

The theory (a one-layer model, reparametrized, two learning rates) predicts that self-attention
*scans* (attention moves toward the key tokens that predict the next token, so it gets sparser) and
then *snaps* (a phase transition after which the attention changes only logarithmically slowly: it
looks frozen), and that a larger learning rate snaps later and sparser. The paper checks two
consequences on WikiText with ordinary transformers trained by SGD at one learning rate:

* Fig. 7: in 1-layer and multi-layer models the first layer's attention freezes, and is sparser than
  at the start, at some point of training although the learning rate never changes;
* Fig. 10: the attention entropy averaged over the validation set at the end of training falls as the
  learning rate grows.

Here both are measured on real English text (see :mod:`theory.tian2023.wikitext`) with the numpy
model of :mod:`theory.tian2023.transformer`. Each experiment's protocol is a frozen dataclass printed
with its result; each judged criterion is three-valued ("holds", "fails", "undecided" inside a stated
margin) because it thresholds a statistic of a finite, noisy run.
"""

from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
import multiprocessing

import numpy as np

from . import transformer as tf
from .wikitext import Corpus, batchify, load_corpus

HOLDS, FAILS, UNDECIDED = "holds", "fails", "undecided"


# --------------------------------------------------------------------------- protocols


@dataclass(frozen=True)
class TextProtocol:
    """What the two experiments share: the data rule and the model; the authors' values where they
    exist (embedding and hidden width 200, one head, chunks of 35 tokens, batches of 20 parallel
    streams, validation read as 10 streams, gradient-norm clipping at 0.5, sinusoidal positions,
    their initialization), with three stated changes: plain SGD without momentum (the paper says SGD,
    the authors' trainer defaults to Adam), no dropout (runs are deterministic in the seed), and the
    vocabulary cut to the ``max_vocab`` most frequent training words (the rest is ``<unk>``) because
    the decoder over the full vocabulary is most of the compute on 2 cores."""

    max_vocab: int = 2000
    d: int = 200
    d_hid: int = 200
    seq_len: int = 35
    batch: int = 20
    eval_streams: int = 10
    clip: float = 0.5
    positional: bool = True
    # Validation chunks used for the loss and entropy (None: the whole validation split).
    eval_chunks: int | None = None
    # Validation chunks whose attention maps are stored at each checkpoint for the change measure.
    probe_chunks: int = 8
    # "none" or "shuffle": the control in which every split's token order is permuted (by the seed),
    # so no token predicts the next one.
    text: str = "none"


@dataclass(frozen=True)
class Fig7Protocol:
    """Fig. 7: one learning rate throughout; attention maps on a fixed validation probe at
    log-spaced checkpoints (``per_decade`` a decade, plus step 0).

    Change measure: the mean total-variation distance between the same query's attention rows at two
    consecutive checkpoints (half the L1 distance, in [0, 1]; rows with a single key are skipped), and
    that distance divided by the decades between the two checkpoints ("change per decade").

    What "freezes" means. The theory's snap is not a stop: after the phase transition the attention
    logits grow like log t, so the attention still moves, by a roughly constant amount per decade of
    steps, and looks frozen on a linear time axis. Motion at a constant speed per step would instead
    make the change per decade grow like t (slope 1 in log-log), a random walk like sqrt(t) (slope
    1/2). So the first layer is frozen from the earliest checkpoint after which (i) the log-log slope
    of the change per decade against the step, fitted over every window of ``min_frozen_intervals``
    consecutive later intervals (a decade; at least one window), is below ``slope_level`` = 1/4, halfway between
    logarithmic motion (0) and a random walk (1/2), and (ii) no later interval moves more than
    ``saturation`` of the attention mass (a row that is replaced wholesale between checkpoints has no
    speed to measure: TV saturates and its per-decade value goes flat for the wrong reason), and (iii)
    the mean entropy stays within ``sparsify_level`` (0.1 nats) of its final value: the scan itself can
    proceed at a steady pace per decade, and a layer whose sparsity still changes has not frozen.
    Attention that never moves (change 0) is frozen from step 1.
    """

    text: TextProtocol = field(default_factory=TextProtocol)
    layers: int = 1
    # The authors' notebook uses 5 (with dropout 0.2); here, without dropout, 5 makes the first layer
    # collapse to one-hot rows whose key keeps changing (measured: entropy 0.01 nats, 70-80% of the
    # mass moving between checkpoints), so the default is 2, the middle of Fig. 10's range.
    lr: float = 2.0
    steps: int = 3000
    seeds: int = 1
    per_decade: int = 4
    slope_level: float = 0.25
    slope_margin: float = 0.15
    saturation: float = 0.5
    min_frozen_intervals: int = 4
    sparsify_level: float = 0.1
    sparsify_margin: float = 0.05
    loss_fall_level: float = 0.02
    loss_fall_margin: float = 0.01


@dataclass(frozen=True)
class Fig10Protocol:
    """Fig. 10: the validation attention entropy at the end of training against the learning rate,
    over ``seeds`` initializations each. Same steps for every learning rate (the paper trains "until
    convergence"; a fixed budget is what 10 minutes on 2 cores allow, and it is stated)."""

    text: TextProtocol = field(default_factory=TextProtocol)
    layers: int = 1
    lrs: tuple[float, ...] = (0.5, 1.0, 2.0, 3.0, 5.0)
    steps: int = 600
    seeds: int = 2
    margin: float = 0.05
    rank_level: float = -0.8


# --------------------------------------------------------------------------- training


def _model_config(tp: TextProtocol, vocab: int, layers: int, attention: str) -> tf.ModelConfig:
    return tf.ModelConfig(vocab=vocab, d=tp.d, d_hid=tp.d_hid, layers=layers, positional=tp.positional,
                          attention=attention)


def _streams(corpus: Corpus, tp: TextProtocol, seed: int):
    train, valid = corpus.train, corpus.valid
    if tp.text == "shuffle":
        rng = np.random.default_rng([seed, 7])
        train, valid = rng.permutation(train), rng.permutation(valid)
    elif tp.text != "none":
        raise ValueError(f"unknown text rule {tp.text!r}")
    return batchify(train, tp.batch), batchify(valid, tp.eval_streams)


def _chunks(stream: np.ndarray, seq_len: int):
    n = (stream.shape[1] - 1) // seq_len
    return n


def _chunk(stream, i, seq_len):
    s = i * seq_len
    return stream[:, s:s + seq_len], stream[:, s + 1:s + 1 + seq_len]


def evaluate(params, cfg: tf.ModelConfig, valid: np.ndarray, tp: TextProtocol) -> dict:
    """Validation loss and mean attention entropy per layer (every query position, as the authors
    average it), and the attention maps of the probe chunks."""
    n = _chunks(valid, tp.seq_len)
    if tp.eval_chunks is not None:
        n = min(n, tp.eval_chunks)
    loss, ent, probe = 0.0, np.zeros(cfg.layers), []
    for i in range(n):
        x, y = _chunk(valid, i, tp.seq_len)
        out = tf.forward(params, cfg, x, y)
        loss += out["loss"]
        ent += tf.attention_entropy(out["attn"]).mean(axis=(1, 2))
        if i < tp.probe_chunks:
            probe.append(out["attn"].astype(np.float32))
    return {"loss": loss / n, "entropy": (ent / n).tolist(), "probe": np.concatenate(probe, axis=1)}


def checkpoints(steps: int, per_decade: int) -> list[int]:
    """Step 0, the distinct rounded steps 10**(k/per_decade) below ``steps``, and ``steps``; a grid
    step closer to ``steps`` than half a grid interval is dropped, so that no interval is so short
    that dividing its change by its length in decades would blow the change up."""
    out = {0, steps}
    k = 0
    while True:
        s = int(round(10 ** (k / per_decade)))
        if s * 10 ** (0.5 / per_decade) >= steps:
            break
        out.add(s)
        k += 1
    return sorted(out)


def train_run(corpus: Corpus, tp: TextProtocol, layers: int, lr: float, steps: int, seed: int,
              attention: str = "learned", at: list[int] | None = None, progress=None) -> dict:
    """Train one model; evaluate at the steps ``at`` (default: only the end).

    Data order is the authors': step i reads chunk i (mod the chunks of an epoch) of the 20 training
    streams. The seed sets the initialization (and the permutation of the shuffled-text control)."""
    from threadpoolctl import threadpool_limits

    # One BLAS thread: on 2 shared cores a multi-threaded BLAS spent up to ten times the CPU of one
    # thread on these (20 x 35 x 200) products, spinning while it waited for the other core.
    with threadpool_limits(1):
        return _train(corpus, tp, layers, lr, steps, seed, attention, at, progress)


def _train(corpus, tp, layers, lr, steps, seed, attention, at, progress):
    cfg = _model_config(tp, corpus.vocab_size, layers, attention)
    params = tf.init_params(cfg, np.random.default_rng(seed), np.float32)
    train, valid = _streams(corpus, tp, seed)
    n_chunks = _chunks(train, tp.seq_len)
    at = sorted(set(at or [steps]))
    evals, train_loss = [], []
    for step in range(steps + 1):
        if step in at:
            ev = evaluate(params, cfg, valid, tp)
            ev["step"] = step
            evals.append(ev)
        if step == steps:
            break
        x, y = _chunk(train, step % n_chunks, tp.seq_len)
        out = tf.forward(params, cfg, x, y, keep=True)
        if not math.isfinite(out["loss"]):
            raise FloatingPointError(f"training diverged at step {step} (lr={lr})")
        train_loss.append(out["loss"])
        tf.sgd_step(params, tf.backward(params, cfg, y, out["cache"]), lr, tp.clip)
        if progress is not None:
            progress(1)
    return {"lr": lr, "seed": seed, "layers": layers, "attention": attention, "evals": evals,
            "train_loss": train_loss}


def _job(args):
    corpus, tp, layers, lr, steps, seed, attention, at = args
    return train_run(corpus, tp, layers, lr, steps, seed, attention, at)


def _run_jobs(jobs, workers: int, total_steps: int, desc: str):
    """Run training jobs, results in the order of ``jobs``: ``workers`` >= 1 worker processes (each
    run uses one BLAS thread, see :func:`train_run`), or 0 to run them in this process."""
    from tqdm import tqdm

    with tqdm(total=total_steps, desc=desc, unit="step", disable=None, leave=False) as bar:
        if workers <= 0:
            return [train_run(*j[:7], at=j[7], progress=bar.update) for j in jobs]
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=ctx) as pool:
            futs = [pool.submit(_job, j) for j in jobs]
            results = []
            for j, f in zip(jobs, futs):
                results.append(f.result())
                bar.update(j[4])
            return results


# --------------------------------------------------------------------------- measures and criteria


def attention_changes(probes: list[np.ndarray], steps: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per layer and interval between consecutive checkpoints: the mean total-variation distance of
    the attention rows, and that distance per decade; both of shape (layers, len(steps) - 1).
    The interval that starts at step 0 has no length in decades; it is counted as one decade."""
    tvs, rates = [], []
    for k in range(1, len(steps)):
        a, b = probes[k - 1].astype(np.float64), probes[k].astype(np.float64)
        tv = 0.5 * np.abs(a - b).sum(-1)[..., 1:]  # row 0 has a single key: always [1]
        tv = tv.mean(axis=tuple(range(1, tv.ndim)))
        decades = math.log10(steps[k] / steps[k - 1]) if steps[k - 1] > 0 else 1.0
        tvs.append(tv)
        rates.append(tv / decades)
    return np.array(tvs).T, np.array(rates).T


def growth_slope(ends: list[int], rates: np.ndarray) -> float:
    """Least-squares slope of log10(change per decade) against log10(step); 0 for no motion at all."""
    r = np.asarray(rates, float)
    if np.all(r <= 1e-12):
        return 0.0
    return float(np.polyfit(np.log10(ends), np.log10(np.maximum(r, 1e-12)), 1)[0])


def freeze_step(steps: list[int], tv: np.ndarray, rates: np.ndarray, slope_level: float,
                saturation: float, window: int, entropy=None, entropy_band: float = np.inf) -> int | None:
    """Earliest checkpoint (step >= 1) from which on every run of ``window`` consecutive intervals
    (a decade at the default spacing) has a log-log growth slope of the change per decade below
    ``slope_level``, no interval moves ``saturation`` of the mass or more, and the entropy stays within
    ``entropy_band`` of its final value; None when there is none with at least one full window after it."""
    n = len(rates)
    settled = np.ones(n + 1, bool) if entropy is None else np.array(
        [np.all(np.abs(np.asarray(entropy[k:]) - entropy[-1]) <= entropy_band) for k in range(n + 1)])
    ends = steps[1:]
    local = [growth_slope(ends[j:j + window], rates[j:j + window]) for j in range(n - window + 1)]
    for k in range(1, n - window + 1):  # interval k runs from steps[k] to steps[k + 1]
        if settled[k] and np.all(tv[k:] < saturation) and all(sl < slope_level for sl in local[k:]):
            return steps[k]
    return None


def _combine(verdicts):
    if FAILS in verdicts:
        return FAILS
    return HOLDS if all(v == HOLDS for v in verdicts) else UNDECIDED


def _band(value: float, level: float, margin: float) -> str:
    """``value`` above ``level + margin`` holds, below ``level - margin`` fails, in between undecided."""
    if value > level + margin:
        return HOLDS
    if value < level - margin:
        return FAILS
    return UNDECIDED


def judge_freeze(steps, tv_first, rates_first, losses, entropy_first, p: Fig7Protocol) -> dict:
    """The Fig. 7 criterion for one run, on the first layer: it (a) became sparser, (b) froze in the
    sense of :class:`Fig7Protocol`, and (c) froze while the validation loss was still falling.

    (a) entropy at step 0 minus entropy at the end, against ``sparsify_level`` +- ``sparsify_margin``
        nats: 0.1 nats is about 4% of the entropy of uniform causal attention over 35 positions
        (2.6 nats), the smallest drop we call "sparser"; the margin is half of it, because the entropy
        is averaged over a finite validation sample.
    (b) a freeze step exists at slope ``slope_level - slope_margin`` (holds); none exists even at
        ``slope_level + slope_margin`` (fails, unless the layer settled only within the last decade of
        the budget, too late for one window: undecided); else undecided. The margin (0.15) is about the standard
        error of a slope fitted to 4 points a quarter decade apart whose values scatter by 10-15%
        from interval to interval, as the change measure does between neighbouring checkpoints.
    (c) validation loss at the freeze step (the strict one when both exist) minus the final loss,
        against ``loss_fall_level`` +- ``loss_fall_margin`` nats: 0.02 nats is beyond the scatter of
        the validation loss between neighbouring checkpoints late in a run (a few thousandths).
    """
    drop = float(entropy_first[0] - entropy_first[-1])
    v_sparse = _band(drop, p.sparsify_level, p.sparsify_margin)
    args = (p.saturation, p.min_frozen_intervals, entropy_first, p.sparsify_level)
    strict = freeze_step(steps, tv_first, rates_first, p.slope_level - p.slope_margin, *args)
    loose = freeze_step(steps, tv_first, rates_first, p.slope_level + p.slope_margin, *args)
    v_freeze = HOLDS if strict is not None else FAILS if loose is None else UNDECIDED
    at = strict if strict is not None else loose
    # Settled (entropy within the band, no saturated interval) only in the last decade: the budget
    # ended before one window could be observed, which is "not yet known", not "does not freeze".
    late = None
    if at is None:
        n = len(rates_first)
        for k in range(1, n):
            tail = np.abs(np.asarray(entropy_first[k:], float) - entropy_first[-1])
            if np.all(tail <= p.sparsify_level) and np.all(np.asarray(tv_first[k:]) < p.saturation):
                if k > n - p.min_frozen_intervals:  # first settled too late for a full window
                    late, v_freeze = steps[k], UNDECIDED
                break
    if at is None:
        fall, v_fall = None, (UNDECIDED if late is not None else FAILS)
    else:
        fall = float(losses[steps.index(at)] - losses[-1])
        v_fall = _band(fall, p.loss_fall_level, p.loss_fall_margin)
    k = None if at is None else steps.index(at)
    return {
        "entropy_drop": drop, "sparser": v_sparse,
        "freeze_step": at, "freeze_step_strict": strict, "freeze_step_loose": loose, "froze": v_freeze,
        "settled_too_late_to_judge_from": late,
        # the slope fitted over all intervals after the freeze step, for the record
        "growth_slope_after_freeze": None if k is None else growth_slope(steps[k + 1:], rates_first[k:]),
        "entropy_at_freeze": None if k is None else float(entropy_first[k]),
        "val_loss_at_freeze": None if k is None else float(losses[k]),
        "val_loss_end": float(losses[-1]), "loss_fall_after_freeze": fall, "loss_still_falling": v_fall,
        "verdict": _combine([v_sparse, v_freeze, v_fall]),
    }


def _spearman(x, y) -> float:
    rx = np.argsort(np.argsort(x)).astype(float)
    ry = np.argsort(np.argsort(y)).astype(float)
    if rx.std() == 0 or ry.std() == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


def judge_entropy_vs_lr(lrs, entropies, p: Fig10Protocol) -> dict:
    """The Fig. 10 criterion: the final validation attention entropy falls as the learning rate grows,
    by more than the seeds' spread.

    ``entropies[i][s]``: learning rate ``lrs[i]``, seed ``s``. Drop D = mean entropy at the smallest
    learning rate minus mean at the largest; spread S = the largest range over seeds at any one
    learning rate. Holds when D > S + ``margin`` and the rank correlation between learning rate and
    mean entropy is at most ``rank_level`` (a trend, not two end points); fails when D <= S or the rank
    correlation is >= 0; else undecided. The margin (0.05 nats, 2% of the entropy of uniform causal
    attention) is there because with 2-3 seeds the range under-estimates the seeds' true spread.
    """
    e = np.asarray(entropies, dtype=float)
    mean = e.mean(axis=1)
    order = np.argsort(lrs)
    drop = float(mean[order[0]] - mean[order[-1]])
    spread = float((e.max(axis=1) - e.min(axis=1)).max())
    rho = _spearman(np.asarray(lrs, float), mean)
    if drop <= spread or rho >= 0:
        v = FAILS
    elif drop > spread + p.margin and rho <= p.rank_level:
        v = HOLDS
    else:
        v = UNDECIDED
    return {"drop": drop, "seed_spread": spread, "rank_correlation": rho, "verdict": v}


# --------------------------------------------------------------------------- experiments


def _protocol_json(p) -> dict:
    return asdict(p)


def _corpus_for(tp: TextProtocol, data_dir):
    return load_corpus(data_dir, max_vocab=tp.max_vocab)


def run_fig7(protocol: Fig7Protocol = Fig7Protocol(), data_dir=None, workers: int = 2,
             attention: str = "learned", corpus: Corpus | None = None, seed_base: int = 0) -> dict:
    """Fig. 7: train ``protocol.seeds`` models at one learning rate; per log-spaced checkpoint the
    validation loss, each layer's mean attention entropy and change per decade; the first layer's
    freeze step against the validation loss there; the criterion of :func:`judge_freeze` per seed.

    ``attention="uniform"`` is the control with the attention logits held at their initial value 0
    (raises nothing: it is judged like the real run and must fail)."""
    p = protocol
    corpus = corpus if corpus is not None else _corpus_for(p.text, data_dir)
    at = checkpoints(p.steps, p.per_decade)
    jobs = [(corpus, p.text, p.layers, p.lr, p.steps, seed, attention, at) for seed in range(seed_base, seed_base + p.seeds)]
    runs = _run_jobs(jobs, workers, p.steps * p.seeds, f"tian-fig7 ({p.layers} layer)")
    out_runs = []
    for r in runs:
        ev = r["evals"]
        steps = [e["step"] for e in ev]
        losses = [e["loss"] for e in ev]
        ent = np.array([e["entropy"] for e in ev]).T  # (layers, checkpoints)
        tv, rates = attention_changes([e["probe"] for e in ev], steps)
        judged = judge_freeze(steps, tv[0], rates[0], losses, ent[0], p)
        out_runs.append({
            "seed": r["seed"],
            "checkpoints": steps,
            "val_loss": [round(x, 4) for x in losses],
            "entropy": [[round(x, 4) for x in row] for row in ent.tolist()],
            # change per decade of the interval that ENDS at checkpoints[k + 1]
            "change_per_decade": [[round(x, 5) for x in row] for row in rates.tolist()],
            "change_per_interval": [[round(x, 5) for x in row] for row in tv.tolist()],
            "first_layer": judged,
        })
    return {
        "experiment": "tian-fig7",
        "paper": "Tian et al. 2023, Sec. 8 (Real-world Dataset), Fig. 7",
        "protocol": _protocol_json(p),
        "attention": attention,
        "corpus": corpus.describe(),
        "uniform_attention_entropy": float(np.mean(np.log(np.arange(1, p.text.seq_len + 1)))),
        "runs": out_runs,
        "verdict": _combine([r["first_layer"]["verdict"] for r in out_runs]),
    }


def run_fig10(protocol: Fig10Protocol = Fig10Protocol(), data_dir=None, workers: int = 2,
              attention: str = "learned", corpus: Corpus | None = None, seed_base: int = 0) -> dict:
    """Fig. 10: the final validation attention entropy (mean over query positions and validation
    chunks) for every learning rate and seed, and the criterion of :func:`judge_entropy_vs_lr` on the
    first layer (later layers are reported, not judged: the paper's Fig. 10 is a one-layer model)."""
    p = protocol
    corpus = corpus if corpus is not None else _corpus_for(p.text, data_dir)
    jobs = [(corpus, p.text, p.layers, lr, p.steps, seed, attention, [p.steps])
            for lr in p.lrs for seed in range(seed_base, seed_base + p.seeds)]
    runs = _run_jobs(jobs, workers, p.steps * len(jobs), f"tian-fig10 ({p.layers} layer)")
    ent = np.array([r["evals"][-1]["entropy"] for r in runs]).reshape(len(p.lrs), p.seeds, p.layers)
    loss = np.array([r["evals"][-1]["loss"] for r in runs]).reshape(len(p.lrs), p.seeds)
    return {
        "experiment": "tian-fig10",
        "paper": "Tian et al. 2023, Appendix G, Fig. 10",
        "protocol": _protocol_json(p),
        "attention": attention,
        "corpus": corpus.describe(),
        "uniform_attention_entropy": float(np.mean(np.log(np.arange(1, p.text.seq_len + 1)))),
        "lrs": list(p.lrs),
        # entropy[layer][lr][seed]
        "entropy": np.round(ent.transpose(2, 0, 1), 4).tolist(),
        "val_loss": np.round(loss, 4).tolist(),
        "first_layer": judge_entropy_vs_lr(p.lrs, ent[:, :, 0], p),
        "verdict": judge_entropy_vs_lr(p.lrs, ent[:, :, 0], p)["verdict"],
    }


# --------------------------------------------------------------------------- figures


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    _pyplot().close(fig)
    return buf.getvalue()


def fig7_figure(result: dict) -> bytes:
    """PNG of a :func:`run_fig7` result: each layer's entropy and change per decade over training."""
    plt = _pyplot()

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
    for r in result["runs"]:
        steps = np.array(r["checkpoints"])
        x = np.maximum(steps, 1)
        for l, row in enumerate(r["entropy"]):
            ax0.plot(x, row, marker="o", ms=3, label=f"layer {l + 1}, seed {r['seed']}")
        for l, row in enumerate(r["change_per_decade"]):
            ax1.plot(x[1:], row, marker="o", ms=3, label=f"layer {l + 1}, seed {r['seed']}")
        fs = r["first_layer"]["freeze_step"]
        if fs is not None:
            for ax in (ax0, ax1):
                ax.axvline(max(fs, 1), color="grey", ls=":", lw=1)
    ax0.axhline(result["uniform_attention_entropy"], color="k", ls="--", lw=0.8, label="uniform attention")
    twin = ax0.twinx()
    for r in result["runs"]:
        twin.plot(np.maximum(r["checkpoints"], 1), r["val_loss"], color="tab:red", alpha=0.5, lw=1)
    twin.set_ylabel("validation loss (red)")
    for ax in (ax0, ax1):
        ax.set_xscale("log")
        ax.set_xlabel("SGD step (step 0 drawn at 1)")
    ax0.set_ylabel("mean attention entropy (nats)")
    ax1.set_ylabel("attention change per decade (mean TV)")
    ax1.set_yscale("log")
    ax0.legend(fontsize=7, loc="lower left")
    ax1.legend(fontsize=7)
    p = result["protocol"]
    fig.suptitle(f"Fig. 7 on real text: {p['layers']}-layer, lr={p['lr']}, {result['corpus']['source']}; "
                 f"verdict: {result['verdict']}", fontsize=9)
    fig.tight_layout()
    return _png(fig)


def fig10_figure(result: dict) -> bytes:
    """PNG of a :func:`run_fig10` result: final validation entropy against the learning rate."""
    plt = _pyplot()

    fig, ax = plt.subplots(figsize=(5.5, 4))
    lrs = np.array(result["lrs"])
    for l, per_lr in enumerate(result["entropy"]):
        e = np.array(per_lr)
        m = e.mean(1)
        ax.errorbar(lrs, m, yerr=[m - e.min(1), e.max(1) - m], marker="o", capsize=3, label=f"layer {l + 1}")
    ax.set_xscale("log")
    ax.set_xlabel("learning rate (SGD)")
    ax.set_ylabel("validation attention entropy (nats)")
    ax.legend(fontsize=8)
    p = result["protocol"]
    ax.set_title(f"Fig. 10 on real text: {p['seeds']} seeds, {p['steps']} steps; verdict: {result['verdict']}",
                 fontsize=9)
    fig.tight_layout()
    return _png(fig)


# --------------------------------------------------------------------------- command line


def _overrides(args, p):
    """The protocol with the command line's --layers/--seeds/--steps; bad values raise a one-line
    ValueError (the command turns it into exit status 2)."""
    ch = {}
    layers = getattr(args, "layers", None)
    if layers is not None:
        if layers not in (1, 2):
            raise ValueError(f"--layers: expected 1 or 2, got {layers}")
        ch["layers"] = layers
    for name in ("seeds", "steps"):
        v = getattr(args, name, None)
        if v is not None:
            if v < 1:
                raise ValueError(f"--{name}: expected a positive integer, got {v}")
            ch[name] = v
    return replace(p, **ch)


def _seed_base(args) -> int:
    return int(getattr(args, "seed", 0) or 0)


def tian_fig7(args) -> dict:
    """``python -m theory reproduce tian-fig7 [--data DIR] [--layers 1|2] [--seeds N] [--steps N]``."""
    return run_fig7(_overrides(args, Fig7Protocol()), data_dir=getattr(args, "data", None),
                    seed_base=_seed_base(args))


def tian_fig10(args) -> dict:
    """``python -m theory reproduce tian-fig10 [--data DIR] [--layers 1|2] [--seeds N] [--steps N]``."""
    return run_fig10(_overrides(args, Fig10Protocol()), data_dir=getattr(args, "data", None),
                     seed_base=_seed_base(args))
