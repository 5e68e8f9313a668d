"""The automaton reading of Theorem 1 (Li et al. 2024, Section 3).

For large τ the layer (1) *hard-retrieves* the tokens of the highest-priority SCC of ``G^(k)`` present in
the context and (2) *soft-composes* them with weights ``softmax`` of the ``W^fin`` scores (copies pooled).
"""
from __future__ import annotations

import numpy as np

from theory.li2024.graphs import top_scc_tokens


def attention_on(W: np.ndarray, E: np.ndarray, context) -> np.ndarray:
    """Attention mass per token (length K, copies pooled) of ``f_W`` on a token sequence (query last)."""
    K = E.shape[0]
    counts = np.bincount(np.asarray(context), minlength=K).astype(float)
    scores = E @ W @ E[context[-1]]
    logits = np.where(counts > 0, scores + np.log(np.where(counts > 0, counts, 1.0)), -np.inf)
    a = np.exp(logits - logits.max())
    return a / a.sum()


def predicted_attention(analysis, context, top_of=None) -> np.ndarray:
    """The automaton's limit: zero outside the top SCC present, softmax of ``W^fin`` scores inside.
    ``top_of(tpg, context)`` picks the retrieved tokens (default :func:`top_scc_tokens`, looked up at call
    time; the calibration tests plant a wrong rule there)."""
    top = (top_of or top_scc_tokens)(analysis.graphs[context[-1]], context)
    a = attention_on(analysis.finite.W, analysis.problem.E, context)
    mask = np.zeros_like(a)
    mask[top] = 1.0
    return a * mask / (a * mask).sum()


# ------------------------------------------------------------------------------------------------
# The automaton's verdict on a trained layer (three-valued, theory.core.decision)
# ------------------------------------------------------------------------------------------------
# The leak outside the top SCC decays like ``τ^{-gap}`` with the W^svm score gap >= 1 (every reachable
# lower SCC is at least one margin below), so at Theorem 1's budget it is accepted when <= LEAK_MAX and it
# shrank by DECAY over the last decade; the split inside the top SCC follows the finite error (~1/τ), and
# is accepted when <= SPLIT_MAX and shrinking, or below FLOOR.  Reject zone: kept at least STALL of its
# value a decade before (a wrong rule retrieves the wrong SCC or composes with the wrong scores: its error
# is constant in τ).  Between DECAY and STALL, or shrinking but still above the bound: escalate.  Measured
# (stress seed 2725772940, ||W^svm|| = 170, budget clipped at 1e6 steps): leak 0.084, 0.0084, 0.0008 at
# 1e6, 1e7, 1e8 steps (x0.1 per decade, far from STALL): undecided at 1e6, holds at 1e7.
LEAK_MAX, SPLIT_MAX, DECAY, FLOOR, STALL = 1e-2, 1e-2, 0.5, 1e-8, 0.9


def error_zone(x: float, x0: float, bound: float) -> str:
    """Zone of a leak or split error ``x`` (``x0``: a decade before): accept at most ``bound`` and ``x DECAY``
    (or below FLOOR); reject kept ``>= x STALL`` above FLOOR."""
    from theory.core.decision import zone

    return zone(x, lambda v: v <= bound and (v <= FLOOR or v <= DECAY * x0), lambda v: v > FLOOR and v >= STALL * x0)


def _measure(W, an, ctx, top_of):
    a = attention_on(W, an.problem.E, ctx)
    top = top_of(an.graphs[ctx[-1]], ctx)
    leak = 1.0 - a[top].sum()
    split = a[top] / a[top].sum()
    return leak, float(np.abs(split - predicted_attention(an, ctx)[top]).sum())


def automaton_statistics(traj, an, contexts, top_of=None, earlier=None):
    """``(statistics, measures)``: for each held-out context, the leak outside the retrieved SCC and the
    split inside it against the ``W^fin`` softmax, at ``traj``'s budget and a decade before."""
    from theory.core.decision import Statistic
    from theory.li2024.criteria import _at

    top_of = top_scc_tokens if top_of is None else top_of
    end, mid = traj.final, _at(traj, traj.final.step / 10)
    stats, m = [], {"steps": end.step}
    for j, ctx in enumerate(contexts):
        leak, err = _measure(end.W, an, ctx, top_of)
        leak0, err0 = _measure(mid.W, an, ctx, top_of)
        m[f"leak[{j}]"], m[f"split_error[{j}]"] = leak, err
        for name, v, v0, bound in (("leak", leak, leak0, LEAK_MAX), ("split", err, err0, SPLIT_MAX)):
            z = error_zone(v, v0, bound)
            what = "attention outside the top SCC" if name == "leak" else "split inside the top SCC off the W^fin softmax by"
            stats.append(Statistic(f"{name} {ctx}", v, z, f"context {ctx}: {what} {v:.3g} (was {v0:.3g} a decade "
                                                          f"earlier; accept <= {bound:g} and x{DECAY}, reject >= x{STALL})"))
    return stats, m


def automaton_decide(traj, an, contexts, extend, top_of=None, max_steps=None):
    """The automaton reading on held-out ``contexts``: holds, fails (a stalled error confirmed at two
    budgets) or undecided at ``max_steps`` (default Theorem 1's ``ESCALATE_MAX_STEPS``), escalating x10; through
    the continuation past GD's budget when ``extend`` is an :class:`theory.li2024.continuation.Escalation`
    (:func:`theory.li2024.criteria.escalate`).  The automaton's statistics are attention masses of ``W`` at
    two budgets: the continuation's bound on ``||ΔW||`` moves them as it moves Theorem 1's leak."""
    from theory.li2024.criteria import ESCALATE_MAX_STEPS, escalate

    cap = ESCALATE_MAX_STEPS if max_steps is None else max_steps
    return escalate(lambda run, earlier, last: automaton_statistics(run, an, contexts, top_of, earlier), traj, extend, cap)
