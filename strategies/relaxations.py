"""Relaxed assumptions as strategy options (Li et al. 2024, Assumptions 1-2 and Theorem 1's premises).

``relaxed_cases(relaxation)`` draws a problem exactly as :func:`strategies.drawn_problems` does and then
drops one assumption; ``relaxation="none"`` keeps them all (the control of every relaxation test).
Every option shrinks toward the simplest way of breaking the assumption.

* ``head``          Assumption 1 broken: tied head ``C = E`` or a random head, with the ``ce`` loss.
* ``label_absent``  Assumption 2 broken: one sample's label replaced by a token absent from it (``ce`` loss,
                    since ``-log`` of a zero attention is infinite).
* ``loss``          Theorem 1's ``ℓ = -log`` replaced by ``ce``, ``square`` or ``exp`` (head biorthogonal).
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

__all__ = ["ALL_SHAPES", "RELAXATIONS", "SEARCH_SHAPES", "RelaxedCase", "relaxed_cases"]

RELAXATIONS = ("head", "label_absent", "loss", "step", "dependent")


@dataclass(frozen=True)
class RelaxedCase:
    relaxation: str
    problem: "object"  # theory.core.problem.Problem, the relaxed problem that GD trains on
    theory_problem: "object"  # the same data under the theory's assumptions (log loss, default head)
    step_factor: float  # GD step = step_factor x the safe step of the theory problem
    note: str


ALL_SHAPES = ("acyclic", "cyclic", "mixed")
# The shapes a relaxation draws from by default.  'step' is drawn among cyclic problems: its claim is that GD
# stops tracking W^fin, which needs S_fin != {0} (on acyclic ones a huge step merely saturates the softmax in
# floating point).
SEARCH_SHAPES = {"step": ("cyclic",)}


def _base(shapes=ALL_SHAPES, kinds=("orthonormal", "gaussian"), **kw):
    return drawn_problems(structures=structures_of(list(shapes)), embedding_kinds=st.sampled_from(list(kinds)),
                          heads=False, **kw)


@st.composite
def relaxed_cases(draw, relaxation: str = "none", *, shapes=None) -> RelaxedCase:
    if relaxation not in RELAXATIONS + ("none",):
        raise InvalidArgument(f"relaxed_cases(): unknown relaxation {relaxation!r}; expected one of "
                              f"{RELAXATIONS + ('none',)}")
    if shapes is None:
        shapes = SEARCH_SHAPES.get(relaxation, ALL_SHAPES)
    kinds = ("gaussian",) if relaxation == "step" else ("orthonormal", "gaussian")
    p = draw(_base(shapes, kinds), label="problem").problem
    theory = p
    factor, note = 1.0, "assumptions held"
    if relaxation == "head":
        kind = draw(st.sampled_from(["tied", "random"]), label="head_kind")
        C = p.E if kind == "tied" else np.random.default_rng(draw(st.integers(0, 2**16), label="head_seed")).normal(
            size=p.E.shape)
        p = p.replace(head=C, loss="ce")
        note = f"{kind} head, ce loss"
    elif relaxation == "label_absent":
        options = [i for i, s in enumerate(p.sequences) if len(set(s)) < p.K]
        if options:
            i = draw(st.sampled_from(options), label="sample")
            y = draw(st.sampled_from([t for t in range(p.K) if t not in p.sequences[i]]), label="absent_label")
            labels = list(p.labels)
            labels[i] = y
            p = p.replace(labels=labels, loss="ce")
            theory = p.replace(loss="log")
            note = f"sample {i}: label {y} absent, ce loss"
        else:  # every sample holds all K tokens: nothing to relax (rare; labelled so it shows)
            event("label_absent: impossible, every sample holds all tokens")
    elif relaxation == "loss":
        loss = draw(st.sampled_from(["square", "exp", "ce"]), label="loss")
        p = p.replace(loss=loss)
        note = f"{loss} loss"
    elif relaxation == "step":
        factor = draw(st.sampled_from([50.0, 100.0, 200.0]), label="step_factor")
        note = f"step {factor:g}x the safe bound"
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
        note = f"dependent embeddings ({kind})"
    event(f"relaxation={relaxation}")
    return RelaxedCase(relaxation, p, theory, factor, note)
