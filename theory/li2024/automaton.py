"""The automaton reading of Theorem 1 (Li et al. 2024, Section 3; THEORY.md "Automaton reading").

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
