"""Problems drawn from a claim's whole stated domain, and from the whole problem-file domain.

A claim states its domain as data (:class:`theory.core.claims.Domain`: the losses and head kinds its
statement covers).  :func:`problems_for` draws exactly that set, so a claim's properties cannot cover less
than its statement: ``properties/suite/test_domains.py`` finds a drawn problem for every (loss, head) pair
of every claim, and checks that each one meets the claim's assumptions.

:func:`file_problems` draws what a user may bring to ``tpg check``: every loss, biorthogonal, default,
tied, random and rounded heads, and independent, nearly dependent and dependent embeddings (with a head,
since the default head needs independent embeddings).
"""
from __future__ import annotations

import numpy as np
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from strategies.problems import drawn_problems, min_norm_biorthogonal_head, structures_of
from theory.core.problem import LOSSES, Problem

__all__ = ["BROKEN_HEADS", "EMBEDDING_CASES", "file_problems", "problems_for"]

# Heads that break Assumption 1, in shrinking order: tied C = E (Section 5's example), a biorthogonal head
# with one row mixed with another (u can reach 0 or exceed 1), a random Gaussian head, and the biorthogonal
# head rounded to 8 decimals (misses C E^T = I by ~1e-8: the numerical boundary of the assumption).
BROKEN_HEADS = ("tied", "mixed_row", "random", "perturbed")
EMBEDDING_CASES = ("independent", "nearly_dependent", "dependent")


def _mixed(E: np.ndarray, i: int, j: int, mix: float) -> np.ndarray:
    C = min_norm_biorthogonal_head(E)
    C[i] = C[i] + mix * C[j]  # H = C E^T gets row i = e_i + mix e_j
    return C


def _broken_head(draw, p: Problem) -> np.ndarray:
    """A head that breaks Assumption 1 on ``p`` (and keeps the log loss finite at W = 0 when ``p`` uses it):
    tied ``C = E`` (Section 5's example), the biorthogonal head with one row mixed with another, a random
    Gaussian head, or the biorthogonal head perturbed by ~1e-7 (the numerical boundary of the assumption).
    A tied head on orthonormal embeddings is biorthogonal, and a random one can make ``u <= 0`` where the
    log loss starts: those fall back to a mixed row (``e_i + e_j``), which breaks the assumption for sure."""
    from theory.li2024.losses import log_loss_defined

    E = p.E
    K = E.shape[0]
    kind = draw(st.sampled_from(BROKEN_HEADS), label="broken_head")
    i, j = draw(st.permutations(range(K)), label="mixed_rows")[:2]
    if kind == "tied":
        C = E.copy()
    elif kind == "perturbed":
        rng = np.random.default_rng(draw(st.integers(0, 2**16), label="head_seed"))
        C = min_norm_biorthogonal_head(E) + 1e-7 * rng.normal(size=E.shape)
    elif kind == "random":
        C = np.random.default_rng(draw(st.integers(0, 2**16), label="head_seed")).normal(size=E.shape)
    else:
        C = _mixed(E, i, j, draw(st.sampled_from([1.0, 0.5, -0.5]), label="mix"))
    q = p.replace(head=C)
    if q.assumptions()["head_biorthogonal"] or (q.loss == "log" and not log_loss_defined(q)):
        kind, C = "mixed_row", _mixed(E, i, j, 1.0)
    event(f"broken head: {kind}")
    return C


@st.composite
def problems_for(draw, claim, *, pair=None) -> Problem:
    """A problem inside ``claim``'s stated domain (``claim.domain``): a (loss, head) pair it covers, drawn
    uniformly (or the given ``pair``), Assumption 2 and independent embeddings as every Li et al. claim asks.

    Raises ``InvalidArgument`` for a claim with an empty domain (one judged on its own experiments) or a
    ``pair`` outside it."""
    pairs = claim.domain.pairs()
    if not pairs:
        raise InvalidArgument(f"problems_for(): {claim.name} is judged on its own experiments, not on problem files")
    if pair is not None and tuple(pair) not in pairs:
        raise InvalidArgument(f"problems_for(): {tuple(pair)!r} is outside {claim.name}'s domain {pairs!r}")
    loss, head = tuple(pair) if pair is not None else draw(st.sampled_from(pairs), label="loss_head")
    p = draw(drawn_problems(structures=structures_of(["acyclic", "cyclic", "mixed", "svm_zero"], K=st.integers(2, 5)),
                            max_len=5, max_samples=6, max_condition=30.0, heads=head == "biorthogonal",
                            loss=st.just(loss)), label="problem").problem
    if head == "broken":
        p = p.replace(head=_broken_head(draw, p))
    event(f"domain pair: {loss}, {head}")
    return p


@st.composite
def file_problems(draw, *, losses=LOSSES, embeddings=EMBEDDING_CASES) -> Problem:
    """Any valid problem file of small size: every loss in ``losses``, a default, biorthogonal or broken head,
    embeddings of the kinds in ``embeddings`` (dependent ones always with a head); labels in context."""
    if not losses or any(x not in LOSSES for x in losses):
        raise InvalidArgument(f"file_problems(): losses must be a non-empty subset of {LOSSES}, got {losses!r}")
    if not embeddings or any(x not in EMBEDDING_CASES for x in embeddings):
        raise InvalidArgument(f"file_problems(): embeddings must be a non-empty subset of {EMBEDDING_CASES}, "
                              f"got {embeddings!r}")
    emb = draw(st.sampled_from(list(embeddings)), label="embedding_case")
    kinds = ["nearly_collinear"] if emb == "nearly_dependent" else ["orthonormal", "gaussian"]
    p = draw(drawn_problems(structures=structures_of(["acyclic", "cyclic", "mixed", "svm_zero"], K=st.integers(2, 5)),
                            embedding_kinds=st.sampled_from(kinds), max_len=5, max_samples=6,
                            max_condition=1e3 if emb == "nearly_dependent" else 30.0, heads=False,
                            loss=st.sampled_from(list(losses))), label="problem").problem
    if emb == "dependent":
        E = p.E.copy()
        i, j = draw(st.permutations(range(p.K)), label="dependent_pair")[:2]
        E[j] = draw(st.sampled_from([1.0, -1.0, 2.0]), label="dependent_factor") * E[i]
        head = draw(st.sampled_from(["tied", "identity_like"]), label="dependent_head")
        C = E.copy() if head == "tied" else np.eye(p.K, p.d)
        return p.replace(embeddings=E, head=C)
    head = draw(st.sampled_from(["default", "biorthogonal", "broken"]), label="head_case")
    if head == "biorthogonal":
        return p.replace(head=min_norm_biorthogonal_head(p.E))
    if head == "broken":
        return p.replace(head=_broken_head(draw, p))
    return p
