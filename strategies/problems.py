"""Hypothesis strategies for Li et al. 2024 problems, structure first.

The priority structure is drawn first -- per query token ``k`` an ordered list of SCC blocks (highest
priority first) and a DAG between them -- and then realized as samples, so acyclic graphs, several
SCCs, cycles and ``W^svm = 0`` occur with controlled frequency instead of by luck.  Every strategy
takes strategies for its parts and shrinks toward small and simple: fewer samples, shorter sequences,
smaller K, orthonormal (identity) embeddings, acyclic structures.  :func:`drawn_problems` draws the
embedding's choices (kind, ``d - K``, seed) before the structure, so that shrinking the structure keeps them.

Realization rules (why the drawn structure *is* the TPG of the realized samples):
* the query ``k`` lies in block ``b``; labels come only from blocks ``0..b`` (a label ``y`` always gets
  the edge ``y -> k``, so its block must precede or equal k's); tokens below block ``b`` are
  context-only singletons;
* a block ``[t_1..t_m]`` is made strongly connected by samples labelled ``t_j`` containing ``t_{j+1}``
  (cyclically);
* a DAG edge ``B_i -> B_j`` is a sample labelled in ``B_i`` containing a token of ``B_j``;
* padding draws only from the label's own block and its DAG descendants, so no unplanned cycle appears.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from theory.core.problem import Problem

__all__ = ["EMBEDDINGS", "MAX_CONDITION", "SHAPES", "TRAIN_CONDITION", "DrawnProblem", "QueryStructure", "Structure",
           "biorthogonal_heads", "drawn_problems", "embeddings", "heldout_contexts", "min_norm_biorthogonal_head",
           "priority_structures", "problems", "realize", "structures_of", "trainable_problems"]

SHAPES = ("acyclic", "cyclic", "mixed", "svm_zero")
# In shrinking order: a counterexample that needs non-orthonormal embeddings shrinks to ill_conditioned ones
# (condition number min(10, max_condition) or more at every K and seed), so K can shrink with them; listed
# after gaussian, it stopped where a Gaussian draw happened to be ill-conditioned (a seed ill-conditioned at
# K = 6 and not at K = 2).
EMBEDDINGS = ("orthonormal", "ill_conditioned", "gaussian", "nearly_collinear")
MAX_CONDITION = 1e3


def _check(ok: bool, message: str) -> None:
    """A user's option out of range: Hypothesis's own error, raised when a plain strategy function is called
    or at a composite strategy's first draw (its body runs only then)."""
    if not ok:
        raise InvalidArgument(message)


def _check_shapes(shapes, where: str) -> None:
    if isinstance(shapes, str) or not isinstance(shapes, (list, tuple)):
        return  # a strategy: its draws are checked in priority_structures
    unknown = [s for s in shapes if s not in SHAPES]
    _check(len(shapes) > 0 and not unknown,
           f"{where}: shapes must be a non-empty list of {SHAPES}, got {list(shapes)!r}")


def _check_positive_int(value, name: str, where: str, least: int = 1) -> None:
    _check(isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= least,
           f"{where}: {name} must be an integer >= {least}, got {value!r}")


# ------------------------------------------------------------------------------------------------
# Structures
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QueryStructure:
    """The planned ``G^(k)``: SCC blocks (highest priority first), the query's block, DAG edges."""

    query: int
    blocks: tuple[tuple[int, ...], ...]  # blocks[:query_block+1] may hold labels; later ones are context-only
    query_block: int
    dag: frozenset  # {(i, j)}: block i -> block j, i < j

    def descendants(self, i: int) -> set[int]:
        out, stack = set(), [i]
        while stack:
            c = stack.pop()
            for a, b in self.dag:
                if a == c and b not in out:
                    out.add(b)
                    stack.append(b)
        return out


@dataclass(frozen=True)
class Structure:
    K: int
    queries: tuple[QueryStructure, ...]
    shape: str

    @property
    def cyclic(self) -> bool:
        return any(len(b) > 1 for q in self.queries for b in q.blocks)


@st.composite
def priority_structures(draw, *, K=st.integers(2, 12), shapes=st.sampled_from(SHAPES),
                        n_queries=st.integers(1, 2), max_block: int = 3, max_label_tokens: int = 3,
                        max_context_tokens: int = 2) -> Structure:
    """Per query token, a DAG of SCC blocks.  ``K``, ``shapes`` and ``n_queries`` are strategies.

    Every label reaches the query (edge ``y -> k``), so the query's block is the lowest of the label
    blocks; below it hang context-only singletons.
    """
    shape = draw(shapes, label="shape")
    _check(shape in SHAPES, f"priority_structures(): shapes drew {shape!r}, expected one of {SHAPES}")
    # A cycle and a ⇒ edge need three tokens; drawing K afterwards keeps "cyclic" honest.
    K = max(draw(K, label="K"), 3 if shape == "cyclic" else 2)
    nq = draw(n_queries.map(lambda q: min(q, K)), label="n_queries")
    queries = draw(st.lists(st.integers(0, K - 1), min_size=nq, max_size=nq, unique=True), label="queries")
    out = []
    for k in queries:
        others = draw(st.permutations([t for t in range(K) if t != k]), label="token_order")
        if shape == "svm_zero":
            # One SCC holding the query and 1..2 other tokens: no ⇒ edge, W^svm = 0.
            m = draw(st.integers(1, min(2, len(others))), label="scc_size")
            out.append(QueryStructure(k, (tuple([*others[:m], k]),), 0, frozenset()))
            continue
        n_lab = draw(st.integers(1, min(max_label_tokens, len(others))), label="label_tokens")
        n_ctx = draw(st.integers(0, min(max_context_tokens, len(others) - n_lab)), label="context_tokens")
        rest, ctx = list(others[:n_lab]), others[n_lab:n_lab + n_ctx]
        blocks: list[list[int]] = []
        while rest:
            size = 1 if shape == "acyclic" else draw(st.integers(1, min(max_block, len(rest))), label="block_size")
            blocks.append(rest[:size])
            rest = rest[size:]
        joins = shape != "acyclic" and draw(st.booleans(), label="query_joins_scc")
        if shape == "cyclic" and all(len(b) == 1 for b in blocks):
            joins = True  # guarantee a cycle
        if joins:
            blocks[-1].append(k)
        else:
            blocks.append([k])
        if len(blocks) == 1 and not ctx:
            # Only shape "svm_zero" may lack a ⇒ edge: give the query its own block, or hang a
            # context-only token below when the block would otherwise lose its cycle.
            if len(blocks[0]) >= 3 or shape != "cyclic" or len(others) <= n_lab:
                blocks[0].remove(k)
                blocks.append([k])
            else:
                ctx = [others[n_lab]]
        qb = len(blocks) - 1
        blocks += [[c] for c in ctx]
        dag = {(i, qb) for i in range(qb)}
        dag |= {(i, j) for i in range(qb) for j in range(i + 1, qb) if draw(st.booleans(), label="edge")}
        for j in range(qb + 1, len(blocks)):
            dag.add((draw(st.integers(0, qb), label="parent"), j))
        out.append(QueryStructure(k, tuple(tuple(b) for b in blocks), qb, frozenset(dag)))
    return Structure(K, tuple(out), shape)


# ------------------------------------------------------------------------------------------------
# Realization as samples
# ------------------------------------------------------------------------------------------------
@st.composite
def realize(draw, structure: Structure, *, max_len: int = 8, max_samples: int = 12, extra_samples=st.integers(0, 3),
            padding=st.integers(0, 2)):
    """Samples ``(sequences, labels)`` whose TPGs are exactly ``structure``."""
    _check_positive_int(max_len, "max_len", "realize()", least=2)  # the query and one other token
    _check_positive_int(max_samples, "max_samples", "realize()")
    seqs, labels = [], []

    def add(q: QueryStructure, y: int, required: list[int]):
        bi = next(i for i, b in enumerate(q.blocks) if y in b)
        pool = list(q.blocks[bi]) + [t for j in sorted(q.descendants(bi)) for t in q.blocks[j]]
        body = [t for t in [y, *required] if t != q.query]
        room = max_len - 1 - len(body)
        pad = min(draw(padding, label="padding"), room)
        body += [draw(st.sampled_from(pool), label="pad_token") for _ in range(pad)]
        if not body:  # T >= 2: the query alone would be a sequence of length 1
            body = [draw(st.sampled_from(pool), label="pad_token")]
        order = draw(st.permutations(body), label="positions")
        seqs.append(list(order) + [q.query])
        labels.append(y)

    for q in structure.queries:
        for bi, block in enumerate(q.blocks[: q.query_block + 1]):
            if len(block) > 1:
                for j, t in enumerate(block):
                    add(q, t, [block[(j + 1) % len(block)]])
        for i, j in sorted(q.dag):
            if j == q.query_block and i < j:
                continue  # implied: every label in block i < b already has the edge to the query
            y = draw(st.sampled_from(q.blocks[i]), label="edge_label")
            add(q, y, [draw(st.sampled_from(q.blocks[j]), label="edge_target")])
        for block in q.blocks[: q.query_block]:  # singleton label blocks not yet used as a label
            if not any(s[-1] == q.query and y in block for s, y in zip(seqs, labels)):
                add(q, draw(st.sampled_from(block), label="block_label"), [])
    for _ in range(min(draw(extra_samples, label="extra_samples"), max(0, max_samples - len(seqs)))):
        q = draw(st.sampled_from(structure.queries), label="extra_query")
        y = draw(st.sampled_from([t for b in q.blocks[: q.query_block + 1] for t in b]), label="extra_label")
        add(q, y, [])
    return seqs, labels


# ------------------------------------------------------------------------------------------------
# Embeddings and heads
# ------------------------------------------------------------------------------------------------
def _rng(draw, label):
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1), label=label))


@dataclass(frozen=True)
class EmbeddingPlan:
    """The choices of an embedding that do not depend on K: ``d - K``, the kind, the seed and the kind's
    parameters (the nearly collinear pair, which does, is drawn when the embeddings are built)."""

    extra: int
    kind: str
    seed: int | None = None  # None: orthonormal and not rotated
    log10_delta: float = 0.0  # nearly_collinear
    scale: float = 1.0  # nearly_collinear
    condition: float = 1.0  # ill_conditioned


@st.composite
def embedding_plans(draw, *, d_extra=st.integers(0, 3), kinds=st.sampled_from(EMBEDDINGS),
                    max_condition: float = MAX_CONDITION) -> EmbeddingPlan:
    """An :class:`EmbeddingPlan`.  :func:`drawn_problems` draws it before the structure, so that shrinking
    the structure (K, the samples) leaves the embedding's choices where they are: a counterexample that
    needs non-orthonormal embeddings then shrinks to K = d = 2 (drawn after the structure, shrinking K moved
    the choices after it, the kind among them, and the shrinker stopped at K = 3..9)."""
    extra = draw(d_extra, label="d_extra")
    kind = draw(kinds, label="embedding_kind")
    if kind == "orthonormal":
        rotate = draw(st.booleans(), label="rotate")
        return EmbeddingPlan(extra, kind, draw(st.integers(0, 2**32 - 1), label="rotation_seed") if rotate else None)
    seed = draw(st.integers(0, 2**32 - 1), label="embedding_seed")
    if kind == "nearly_collinear":
        return EmbeddingPlan(extra, kind, seed, log10_delta=draw(st.floats(-4.0, -1.0), label="log10_delta"),
                             scale=draw(st.floats(0.5, 2.0), label="collinear_scale"))
    if kind == "ill_conditioned":
        return EmbeddingPlan(extra, kind, seed,
                             condition=draw(st.floats(min(10.0, max_condition), max_condition), label="condition_number"))
    return EmbeddingPlan(extra, kind, seed)


@st.composite
def planned_embeddings(draw, plan: EmbeddingPlan, *, K: int, max_condition: float = MAX_CONDITION) -> np.ndarray:
    """The K x (K + ``plan.extra``) embeddings of ``plan`` (see :func:`embeddings` for the kinds)."""
    d, kind = K + plan.extra, plan.kind
    if kind == "orthonormal":
        E = np.eye(K, d)
        if plan.seed is not None:
            Q, _ = np.linalg.qr(np.random.default_rng(plan.seed).normal(size=(d, d)))
            E = E @ Q
        return E
    rng = np.random.default_rng(plan.seed)
    if kind == "gaussian" or (kind == "nearly_collinear" and K < 2):
        E = rng.normal(size=(K, d))
        return E / np.linalg.norm(E, axis=1, keepdims=True)
    if kind == "nearly_collinear":
        # Orthonormal rows, then row j pulled onto row i along j's own direction: E[j] = c (E[i] + delta e_j).
        # Only the (i, j) block is ill-conditioned, so doubling delta walks the condition number down to the
        # bound and stops for certain (at delta = 1 it is below 5 for c in [0.5, 2]).  A Gaussian base, as
        # before, is itself ill-conditioned when d = K (stress-found: condition 2e3 with delta already 1).
        Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
        E = Q[:K].copy()
        i, j = draw(st.lists(st.integers(0, K - 1), min_size=2, max_size=2, unique=True), label="collinear_pair")
        n = E[j].copy()
        delta, c = 10.0 ** plan.log10_delta, plan.scale
        while True:
            E[j] = c * (E[i] + delta * n)
            if np.linalg.cond(E) <= max_condition or delta >= 1.0:
                break
            delta = min(2.0 * delta, 1.0)
        event(f"nearly collinear: condition number 10^{int(np.log10(np.linalg.cond(E)))}")
        return E
    U, _ = np.linalg.qr(rng.normal(size=(K, K)))
    V, _ = np.linalg.qr(rng.normal(size=(d, d)))
    s = np.geomspace(1.0, 1.0 / plan.condition, K)
    return (U * s) @ V[:K]


@st.composite
def embeddings(draw, K: int, *, d=None, kinds=st.sampled_from(EMBEDDINGS), max_condition: float = MAX_CONDITION) -> np.ndarray:
    """K x d embeddings of a kind drawn from ``kinds``: ``orthonormal`` (shrinks to [I 0]),
    ``gaussian`` (unit-norm Gaussian rows, as the paper), ``ill_conditioned`` (independent,
    condition number in [min(10, max_condition), max_condition]) or ``nearly_collinear`` (one pair of rows
    nearly parallel, condition number at most ``max_condition``)."""
    d = draw(d if d is not None else st.integers(K, K + 3), label="d")
    if d < K:
        raise InvalidArgument(f"embeddings(): d={d} < K={K} cannot be independent; use dependent_embeddings")
    plan = draw(embedding_plans(d_extra=st.just(d - K), kinds=kinds, max_condition=max_condition), label="plan")
    return draw(planned_embeddings(plan, K=K, max_condition=max_condition), label="E")


def min_norm_biorthogonal_head(E: np.ndarray) -> np.ndarray:
    """The minimum-norm ``C`` with ``C E^T = I``, backward stable: ``E^T = QR``, ``C = R^{-1} Q^T``, so
    ``|C E^T - I| ~ cond(E) eps``.  The normal equations ``solve(E E^T, E)`` square the condition number:
    stress seed 1023003438 (Gaussian 10 x 10, cond 1.8e4) left ``C E^T`` 8e-9 from I, where this gives
    1.7e-12.  Measured on 300 Gaussian E (K 2-12, cond up to 5e3): ``max |C E^T - I| / (cond eps)`` is 954
    with the normal equations, 1.7 with this."""
    from scipy.linalg import solve_triangular

    Q, R = np.linalg.qr(E.T)
    return solve_triangular(R, Q.T)


@st.composite
def biorthogonal_heads(draw, E: np.ndarray):
    """Heads with ``C E^T = I`` (Assumption 1): the minimum-norm one, plus optionally a part orthogonal to
    the embeddings' span (possible when d > K)."""
    C = min_norm_biorthogonal_head(E)
    K, d = E.shape
    if d > K and draw(st.booleans(), label="head_extra"):
        N = _rng(draw, "head_seed").normal(size=(K, d))
        Q, _ = np.linalg.qr(E.T)  # orthonormal basis of span(E): exact to rounding, unlike pinv(E) E
        N -= (N @ Q) @ Q.T  # rows orthogonal to span(E): C E^T unchanged
        C = C + N
    return C


# ------------------------------------------------------------------------------------------------
# Problems
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DrawnProblem:
    problem: Problem
    structure: Structure
    notes: dict = field(default_factory=dict)


@st.composite
def drawn_problems(draw, *, structures=None, embedding_kinds=st.sampled_from(EMBEDDINGS), loss=st.just("log"),
                   max_len: int = 8, max_samples: int = 12, heads=True, d_extra=st.integers(0, 3),
                   max_condition: float = MAX_CONDITION) -> DrawnProblem:
    """A problem satisfying Assumptions 1-2 together with the structure it realizes.

    ``heads=True`` draws a biorthogonal head (``head`` key of the file); ``False`` leaves the default.
    """
    _check_positive_int(max_len, "max_len", "drawn_problems()", least=2)
    _check_positive_int(max_samples, "max_samples", "drawn_problems()")
    _check(isinstance(max_condition, (int, float)) and max_condition >= 1,
           f"drawn_problems(): max_condition must be a number >= 1 (a condition number), got {max_condition!r}")
    # The embedding's choices first (see embedding_plans): shrinking the structure then keeps them.
    plan = draw(embedding_plans(d_extra=d_extra, kinds=embedding_kinds, max_condition=max_condition), label="embedding_plan")
    structure = draw(structures if structures is not None else priority_structures(), label="structure")
    K = structure.K
    seqs, labels = draw(realize(structure, max_len=max_len, max_samples=max_samples), label="samples")
    E = draw(planned_embeddings(plan, K=K, max_condition=max_condition), label="E")
    head = draw(biorthogonal_heads(E), label="C") if heads else None
    problem = Problem.create(E, seqs, labels, draw(loss, label="loss"), head)
    event(f"shape={structure.shape}")
    event(f"cyclic={structure.cyclic}")
    return DrawnProblem(problem, structure)


# Condition number of the "badly conditioned" embeddings in training properties: the time unit τ₀ of
# theory.li2024.criteria grows like κ⁴, and κ <= 3 keeps 10⁴ τ₀ under criteria.MAX_STEPS for almost every
# structure (rare nearly-collinear Gaussian draws exceed it; the Theorem 1 properties count them).
TRAIN_CONDITION = 3.0


def trainable_problems(*, shapes=("acyclic", "cyclic", "mixed")):
    """Problems whose GD can be judged on the finite budget of :mod:`theory.li2024.criteria` (W^svm != 0 unless
    ``shapes`` asks for ``svm_zero``)."""
    _check_shapes(shapes, "trainable_problems()")
    return drawn_problems(structures=structures_of(list(shapes)), max_condition=TRAIN_CONDITION)


def problems(**kw):
    """Problems satisfying Assumptions 1-2 (see :func:`drawn_problems`)."""
    return drawn_problems(**kw).map(lambda dp: dp.problem)


def structures_of(shapes, *, K=st.integers(2, 12), n_queries=st.integers(1, 3)):
    """Priority structures of the given ``shapes`` (a list drawn from ``SHAPES``, or a strategy of them)."""
    _check_shapes(shapes, "structures_of()")
    return priority_structures(K=K, shapes=st.sampled_from(shapes) if isinstance(shapes, (list, tuple)) else shapes,
                               n_queries=n_queries)


# ------------------------------------------------------------------------------------------------
# Held-out contexts (hard retrieval / soft composition)
# ------------------------------------------------------------------------------------------------
@st.composite
def heldout_contexts(draw, structure: Structure, *, max_len: int = 8):
    """A new sequence drawn from the same priority structure: a top token from a label block, tokens of its
    block and of its DAG descendants, and the query last.  Its top SCC is the one holding the first token."""
    q = draw(st.sampled_from(structure.queries), label="heldout_query")
    bi = draw(st.integers(0, q.query_block), label="heldout_block")
    top = q.blocks[bi]
    pool = list(top) + [t for j in sorted(q.descendants(bi)) for t in q.blocks[j]]
    body = [draw(st.sampled_from(top), label="heldout_top")]
    body += draw(st.lists(st.sampled_from(pool), max_size=max_len - 2), label="heldout_body")
    return draw(st.permutations(body), label="heldout_positions") + [q.query]
