"""Relaxed assumptions as strategy options (Li et al. 2024, Assumptions 1-2 and Theorem 1's premises).

``relaxed_cases(relaxation)`` draws a problem exactly as :func:`strategies.drawn_problems` does and then
drops *one* assumption; ``relaxation="none"`` keeps them all (the control of every relaxation test).
Every option shrinks toward the simplest way of breaking the assumption.  A case carries the problem GD
trains on and the problem whose targets the conclusion is measured against: the conclusion's natural
generalization, i.e. the relaxed problem's own ``W^svm`` and ``W^fin`` wherever they are defined.

* ``head``          Assumption 1 broken, the log loss kept (``loss="ce"`` gives Section 5's setting, where the
                    loss changes too): tied head ``C = E``, a biorthogonal head with one row mixed with
                    another, or a random head; the theorem's targets are the true TPG's (the paper's point is
                    that GD follows a pseudo-TPG instead).
* ``label_absent``  Assumption 2 broken, the log loss kept: one sample's label replaced by a token absent from
                    it.  Under Assumption 1 that sample's ``u`` is 0 at every ``W``: the loss is infinite.
* ``loss``          Theorem 1's ``ℓ = -log`` replaced by ``losses`` (default ``square``, ``exp``, ``ce``), head
                    biorthogonal; measured against that loss's own ``W^fin``.
* ``step``          a constant step 50-200x the safe bound ``1/β`` (unit-norm Gaussian embeddings).
* ``dependent``     independence broken: ``K > d`` or a repeated embedding (the head is tied, so the
                    file stays valid); Graph-SVM may become infeasible.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from strategies.problems import drawn_problems, structures_of
from theory.li2024.losses import log_loss_defined

__all__ = ["ALL_SHAPES", "LOSS_RELAXATIONS", "RELAXATIONS", "SEARCH_SHAPES", "RelaxedCase", "relaxed_cases"]

RELAXATIONS = ("head", "label_absent", "loss", "step", "dependent")


@dataclass(frozen=True)
class RelaxedCase:
    relaxation: str
    problem: "object"  # theory.core.problem.Problem, the relaxed problem that GD trains on
    # the problem whose W^svm/W^fin the conclusion is measured against: the relaxed problem itself where its
    # targets are defined (loss, label_absent, dependent), the same data with Assumption 1 for a broken head
    theory_problem: "object"
    step_factor: float  # GD step = step_factor x the safe step of the theory problem
    note: str


ALL_SHAPES = ("acyclic", "cyclic", "mixed")
# The shapes a relaxation draws from by default.  'step' is drawn among cyclic problems: its claim is that GD
# stops tracking W^fin, which needs S_fin != {0} (on acyclic ones a huge step merely saturates the softmax in
# floating point).  (Restricting 'loss' to mixed and cyclic shapes raised the square loss's rate of escalated
# failures only to 13.75% and its counterexample then shrank to K = 6 with two unused tokens: all shapes.)
SEARCH_SHAPES = {"step": ("cyclic",)}


def _base(shapes=ALL_SHAPES, kinds=("orthonormal", "gaussian"), **kw):
    return drawn_problems(structures=structures_of(list(shapes)), embedding_kinds=st.sampled_from(list(kinds)),
                          heads=False, **kw)


LOSS_RELAXATIONS = ("square", "exp", "ce")


@st.composite
def relaxed_cases(draw, relaxation: str = "none", *, shapes=None, losses=LOSS_RELAXATIONS,
                  head_loss: str = "log") -> RelaxedCase:
    """A :class:`RelaxedCase` with ``relaxation`` dropped (see the module docstring); ``losses`` are the
    losses the ``loss`` relaxation draws from, ``head_loss`` the loss of the ``head`` relaxation."""
    if relaxation not in RELAXATIONS + ("none",):
        raise InvalidArgument(f"relaxed_cases(): unknown relaxation {relaxation!r}; expected one of "
                              f"{RELAXATIONS + ('none',)}")
    if isinstance(losses, str) or not losses or any(x not in LOSS_RELAXATIONS for x in losses):
        raise InvalidArgument(f"relaxed_cases(): losses must be a non-empty list of {LOSS_RELAXATIONS}, got {losses!r}")
    if head_loss not in ("log", "ce", "lsq"):
        raise InvalidArgument(f"relaxed_cases(): head_loss must be log, ce or lsq, got {head_loss!r}")
    if shapes is None:
        shapes = SEARCH_SHAPES.get(relaxation, ALL_SHAPES)
    kinds = ("gaussian",) if relaxation == "step" else ("orthonormal", "gaussian")
    p = draw(_base(shapes, kinds), label="problem").problem
    theory = p
    factor, note = 1.0, "assumptions held"
    if relaxation == "head":
        kind = draw(st.sampled_from(["tied", "mixed", "random"]), label="head_kind")
        if kind == "tied":
            C = p.E
        elif kind == "mixed":
            i, j = draw(st.permutations(range(p.K)), label="mixed_rows")[:2]
            C = p.C.copy()
            C[i] = C[i] + C[j]  # H row i = e_i + e_j: u stays positive, so the log loss stays finite
        else:
            C = np.random.default_rng(draw(st.integers(0, 2**16), label="head_seed")).normal(size=p.E.shape)
        relaxed = p.replace(head=C, loss=head_loss)
        if head_loss == "log" and not log_loss_defined(relaxed):
            event("head: tied or random head makes u <= 0 at W = 0 under the log loss; the mixed head instead")
            i, j = 0, p.K - 1
            C = p.C.copy()
            C[i] = C[i] + C[j]
            kind, relaxed = "mixed", p.replace(head=C, loss=head_loss)
        p = relaxed
        note = f"with a {kind} head ({head_loss} loss)"
    elif relaxation == "label_absent":
        options = [i for i, s in enumerate(p.sequences) if len(set(s)) < p.K]
        if options:
            i = draw(st.sampled_from(options), label="sample")
            y = draw(st.sampled_from([t for t in range(p.K) if t not in p.sequences[i]]), label="absent_label")
            labels = list(p.labels)
            labels[i] = y
            p = p.replace(labels=labels)
            theory = p
            note = f"with label {y} absent from sample {i} (log loss)"
        else:  # every sample holds all K tokens: nothing to relax (rare; labelled so it shows)
            event("label_absent: impossible, every sample holds all tokens")
    elif relaxation == "loss":
        loss = draw(st.sampled_from(list(losses)), label="loss")
        p = p.replace(loss=loss)
        theory = p  # the conclusion's natural generalization: this loss's own W^fin
        note = f"with the {loss} loss"
    elif relaxation == "step":
        factor = draw(st.sampled_from([50.0, 100.0, 200.0]), label="step_factor")
        note = f"with a step {factor:g}x the safe bound"
    elif relaxation == "dependent":
        kind = draw(st.sampled_from(["repeated", "low_dim"]), label="dependence")
        E = p.E.copy()
        if kind == "repeated" or p.K < 2:
            i, j = draw(st.permutations(range(p.K)), label="pair")[:2]
            E[j] = E[i]
        else:
            d = draw(st.integers(1, p.K - 1), label="d_small")
            E = np.random.default_rng(draw(st.integers(0, 2**16), label="seed")).normal(size=(p.K, d))
            E /= np.linalg.norm(E, axis=1, keepdims=True)
        p = p.replace(embeddings=E, head=E)
        theory = p
        note = f"with dependent embeddings ({kind})"
    event(f"relaxation={relaxation}")
    return RelaxedCase(relaxation, p, theory, factor, note)
