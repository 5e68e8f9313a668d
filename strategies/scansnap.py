"""Hypothesis strategies for the sequence classes of Tian et al. 2023 (docs/theory.md, "Scan and Snap"; paper Sec. 3.2).

A layout is drawn structure first: the number of classes ``K``, of query tokens, which classes share which
common tokens, how many distinct tokens each class owns -- then the unnormalized probabilities.  Every
strategy takes strategies for its parts and shrinks toward few classes, one query, few tokens, and equal
(then well separated) probabilities.

Token ids: common tokens first, then each class's distinct tokens in a block (``permute=True`` shuffles ids
so that code relying on the block order is exercised too).  Next tokens are the output ids ``0..K-1``.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from theory.tian2023.model import SequenceClasses, make_classes

__all__ = ["probabilities", "sequence_classes", "single_common_classes", "weak_correlation"]


def probabilities(*, min_value: float = 0.1, max_value: float = 1.0):
    """Unnormalized contextual-token probabilities on a grid of 1/20 (readable, exactly reproducible)."""
    if not (isinstance(min_value, (int, float)) and isinstance(max_value, (int, float))
            and 0.05 <= min_value <= max_value <= 1.0):
        raise InvalidArgument(f"probabilities(): need 0.05 <= min_value <= max_value <= 1 (a grid of 1/20), "
                              f"got min_value={min_value!r}, max_value={max_value!r}")
    lo, hi = int(round(min_value * 20)), int(round(max_value * 20))
    return st.integers(lo, hi).map(lambda k: k / 20.0)


@st.composite
def sequence_classes(draw, *, classes=st.integers(2, 3), queries=st.just(1), distinct=st.integers(1, 3),
                     common=st.integers(0, 2), prob=probabilities(), common_prob=None,
                     common_everywhere=st.booleans(), separated: float | None = None,
                     permute=st.just(False)) -> SequenceClasses:
    """Sequence classes.

    ``classes``, ``queries`` (number of query tokens, clipped to ``K``), ``distinct`` (per class),
    ``common`` (number of global common tokens) are integer strategies; ``prob`` / ``common_prob`` draw
    unnormalized probabilities of distinct / common tokens (``common_prob`` defaults to ``prob``).
    ``common_everywhere``: a common token occurs in every class (else in a random subset of >= 2 classes).
    ``separated``: if set, each class's distinct-token probabilities are pairwise at least this factor apart
    (Theorem 3's order is a statement about *different* probabilities).  Every class gets >= 1 distinct
    token when ``distinct`` allows it, and some class always has one (Theorem 2(b)'s premise).
    """
    K = draw(classes, label="classes")
    nq = min(draw(queries, label="queries"), K)
    # psi: classes 0..nq-1 take queries 0..nq-1 (each query used), the rest any query
    psi = list(range(nq)) + [draw(st.integers(0, nq - 1), label="psi") for _ in range(K - nq)]
    n_common = draw(common, label="common")
    n_distinct = [draw(distinct, label="distinct") for _ in range(K)]
    common_prob = prob if common_prob is None else common_prob
    M = n_common + sum(n_distinct)
    M = max(M, K, nq)
    P = np.zeros((K, M))
    everywhere = draw(common_everywhere, label="common_everywhere") if n_common else True
    for j in range(n_common):
        members = list(range(K)) if everywhere or K == 2 else draw(
            st.lists(st.integers(0, K - 1), min_size=2, max_size=K, unique=True), label="common_members")
        for n in members:
            P[n, j] = draw(common_prob, label="common_prob")
    col = n_common
    for n in range(K):
        if separated:
            # strictly increasing by a factor >= separated, drawn as a product of factors
            p = draw(prob, label="prob")
            vals = [p]
            for _ in range(n_distinct[n] - 1):
                vals.append(vals[-1] * draw(st.sampled_from([separated, separated * 1.5, separated * 2]),
                                            label="ratio"))
        else:
            vals = [draw(prob, label="prob") for _ in range(n_distinct[n])]
        P[n, col:col + n_distinct[n]] = vals
        col += n_distinct[n]
    # a class without any token (no distinct, not in any common token's subset) gets the first common one
    for n in range(K):
        if P[n].sum() == 0:
            P[n, 0 if n_common else min(col, M - 1)] = 1.0
    if draw(permute, label="permute"):
        perm = np.asarray(draw(st.permutations(list(range(M))), label="token_permutation"))
        P = P[:, perm]
    return make_classes(P, query=np.asarray(psi), next_token=np.arange(K))


def single_common_classes(*, classes=st.integers(2, 3), distinct=st.integers(1, 3), prob=probabilities(),
                          common_prob=probabilities(min_value=0.05, max_value=0.5), queries=st.just(1)):
    """Theorem 2(b)'s layout: exactly one common token (shared by a subset of >= 2 classes)."""
    return sequence_classes(classes=classes, queries=queries, distinct=distinct, common=st.just(1), prob=prob,
                            common_prob=common_prob)


def weak_correlation(classes: SequenceClasses) -> float:
    """Assumption 2's quantity at ``Z = 0``: the largest ``|lambda|`` of ``E - I``, ``E = F^T F`` (the Gram
    matrix of the normalized attention outputs ``f_n``).  Small means weakly correlated classes."""
    F = classes.P / np.linalg.norm(classes.P, axis=1, keepdims=True)
    return float(np.max(np.abs(np.linalg.eigvalsh(F @ F.T - np.eye(classes.K)))))
