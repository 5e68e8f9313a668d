"""The strategies are themselves tested: what they promise (structure, shapes, sizes, embeddings, heads,
held-out contexts) and that they shrink to small, readable counterexamples."""
from __future__ import annotations

import random

import networkx as nx
import numpy as np
import pytest
from hypothesis import event, find, given, note, settings
from hypothesis import strategies as st

from reports.record import record_inputs
from strategies import (EMBEDDINGS, SHAPES, biorthogonal_heads, drawn_problems, embeddings, heldout_contexts,
                        priority_structures, probabilities, problems, realize, sequence_classes,
                        single_common_classes, structures_of, trainable_problems)
from strategies.problems import MAX_CONDITION
from theory.li2024.graphs import token_priority_graphs, top_scc_tokens
from theory.core.problem import Problem

pytestmark = pytest.mark.theorem("Strategies")

FIND = settings(max_examples=400, database=None, derandomize=True)


def rebuilt_graphs(p: Problem) -> dict[int, nx.DiGraph]:
    """TPGs from the samples with plain networkx (independent of theory.li2024.graphs)."""
    gs: dict[int, nx.DiGraph] = {}
    for seq, y in zip(p.sequences, p.labels):
        g = gs.setdefault(seq[-1], nx.DiGraph())
        g.add_nodes_from(seq)
        g.add_node(y)
        g.add_edges_from((y, x) for x in seq if x != y)
    return gs


def sccs(g: nx.DiGraph) -> set[frozenset]:
    return {frozenset(c) for c in nx.strongly_connected_components(g)}


def record(p: Problem, n_sccs=None) -> None:
    record_inputs(K=p.K, n=p.n, T=max(len(s) for s in p.sequences), n_sccs=n_sccs)


# ------------------------------------------------------------------------------------------------
# Structure realized exactly
# ------------------------------------------------------------------------------------------------
@given(dp=drawn_problems(structures=structures_of(list(SHAPES))))
def test_realized_tpgs_have_exactly_the_drawn_scc_blocks(dp):
    """Per query k: SCCs of G^(k) = the drawn blocks; the condensation's reachability = the drawn DAG's;
    and no other query token appears."""
    p, s = dp.problem, dp.structure
    gs = rebuilt_graphs(p)
    record(p, n_sccs=sum(len(sccs(g)) for g in gs.values()))
    assert set(gs) == {q.query for q in s.queries}, f"queries: expected {sorted(q.query for q in s.queries)}, got {sorted(gs)}"
    for q in s.queries:
        g = gs[q.query]
        expected = {frozenset(b) for b in q.blocks}
        got = sccs(g)
        assert got == expected, f"G^({q.query}) SCCs: expected {sorted(map(sorted, expected))}, got {sorted(map(sorted, got))}"
        block_of = {t: i for i, b in enumerate(q.blocks) for t in b}
        reach_drawn = {(i, j) for i in range(len(q.blocks)) for j in q.descendants(i)}
        cond = nx.condensation(g)
        members = {c: cond.nodes[c]["members"] for c in cond}
        reach_got = {(block_of[next(iter(members[a]))], block_of[next(iter(members[b]))])
                     for a in cond for b in nx.descendants(cond, a)}
        assert reach_got == reach_drawn, f"G^({q.query}) block reachability: expected {sorted(reach_drawn)}, got {sorted(reach_got)}"
        # The query's block is the lowest label block; labels come from blocks 0..query_block.
        assert q.query in q.blocks[q.query_block]
        labels = {y for seq, y in zip(p.sequences, p.labels) if seq[-1] == q.query}
        assert all(block_of[y] <= q.query_block for y in labels), f"labels {labels} below the query block"
    # theory.li2024.graphs agrees on the SCCs
    for k, t in token_priority_graphs(p).items():
        assert {frozenset(c) for c in t.sccs} == sccs(gs[k])


@given(dp=drawn_problems(structures=structures_of(list(SHAPES))))
def test_shapes_keep_their_promise(dp):
    """acyclic: no SCC of size > 1; cyclic: at least one; svm_zero: no ⇒ edge (one SCC per graph)."""
    p, shape = dp.problem, dp.structure.shape
    gs = rebuilt_graphs(p)
    comps = [c for g in gs.values() for c in sccs(g)]
    record(p, n_sccs=len(comps))
    event(f"shape={shape}")
    big = [sorted(c) for c in comps if len(c) > 1]
    if shape == "acyclic":
        assert not big, f"acyclic shape produced SCCs {big}"
    elif shape == "cyclic":
        assert big, "cyclic shape produced no SCC of size > 1"
    elif shape == "svm_zero":
        dom = [(k, i, j) for k, g in gs.items() for i, j in g.edges
               if not nx.has_path(g, j, i)]
        assert not dom, f"svm_zero shape produced ⇒ edges {dom}"
    assert dp.structure.cyclic == bool(big)


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_occurs(shape):
    dp = find(drawn_problems(), lambda dp: dp.structure.shape == shape, settings=FIND)
    assert dp.structure.shape == shape


@given(dp=drawn_problems())
def test_sizes_in_range(dp):
    p = dp.problem
    record(p)
    lengths = [len(s) for s in p.sequences]
    assert 2 <= p.K <= 12, f"K = {p.K} outside 2..12"
    assert p.d >= p.K, f"d = {p.d} < K = {p.K}"
    assert 1 <= p.n <= 12, f"n = {p.n} outside 1..12"
    assert 2 <= min(lengths) and max(lengths) <= 8, f"T outside 2..8: {lengths}"
    assert all(p.assumptions().values()), p.assumptions()


# ------------------------------------------------------------------------------------------------
# Embeddings and heads
# ------------------------------------------------------------------------------------------------
@given(data=st.data(), K=st.integers(2, 12), kind=st.sampled_from(EMBEDDINGS))
def test_embeddings_keep_their_promise(data, K, kind):
    E = data.draw(embeddings(K, kinds=st.just(kind)), label="E")
    record_inputs(K=K)
    event(f"kind={kind}")
    assert E.shape[0] == K and E.shape[1] >= K, f"shape {E.shape}"
    assert np.isfinite(E).all()
    if kind == "orthonormal":
        err = float(np.abs(E @ E.T - np.eye(K)).max())
        assert err <= 1e-12, f"E E^T - I: max entry {err:.2e}"
    elif kind == "gaussian":
        norms = np.linalg.norm(E, axis=1)
        assert np.abs(norms - 1).max() <= 1e-12, f"row norms {norms}"
    else:
        cond = float(np.linalg.cond(E))
        note(f"condition number {cond}")
        assert cond <= MAX_CONDITION * (1 + 1e-9), f"condition number {cond:.3e} > {MAX_CONDITION:g}"
        assert np.linalg.matrix_rank(E) == K, "ill_conditioned embeddings must stay independent"


@given(data=st.data(), K=st.integers(2, 10), kind=st.sampled_from(EMBEDDINGS))
def test_heads_are_biorthogonal(data, K, kind):
    E = data.draw(embeddings(K, kinds=st.just(kind)), label="E")
    C = data.draw(biorthogonal_heads(E), label="C")
    record_inputs(K=K)
    err = float(np.abs(C @ E.T - np.eye(K)).max())
    # backward stable: cond(E) eps up to a small factor (measured <= 1.7; the normal equations reach 954)
    bound = 16 * float(np.linalg.cond(E)) * np.finfo(float).eps
    note(f"C E^T - I: {err:.2e}, cond(E) {np.linalg.cond(E):.3g}")
    assert err <= bound, f"C E^T - I: max entry {err:.2e} > 16 cond(E) eps = {bound:.2e}"
    assert C.shape == E.shape


# ------------------------------------------------------------------------------------------------
# Held-out contexts
# ------------------------------------------------------------------------------------------------
@given(data=st.data())
def test_heldout_contexts_have_the_drawn_block_on_top(data):
    """Every token of a held-out context other than the top block's lies in a DAG descendant of it, so the
    drawn block is the unique highest-priority SCC present; theory.li2024.graphs.top_scc_tokens finds it."""
    dp = data.draw(drawn_problems(structures=structures_of(["acyclic", "cyclic", "mixed"])), label="problem")
    s, p = dp.structure, dp.problem
    ctx = data.draw(heldout_contexts(s), label="context")
    record(p)
    q = next(q for q in s.queries if q.query == ctx[-1])
    assert 2 <= len(ctx) <= 8, f"context length {len(ctx)}"
    block_of = {t: i for i, b in enumerate(q.blocks) for t in b}
    present = {block_of[t] for t in ctx}
    tops = [b for b in present if present - {b} <= q.descendants(b)]
    assert len(tops) == 1, f"context {ctx}: blocks present {sorted(present)}, candidates for the top {tops}"
    top = tops[0]
    assert top <= q.query_block, "the top block must be a label block"
    expected = sorted(t for t in set(ctx) if block_of[t] == top)
    got = top_scc_tokens(token_priority_graphs(p)[q.query], ctx)
    assert got == expected, f"context {ctx}: top SCC tokens expected {expected}, got {got}"


# ------------------------------------------------------------------------------------------------
# Shrinking: counterexamples shrink to readable problems
# ------------------------------------------------------------------------------------------------
def test_minimal_problem_is_tiny():
    dp = find(drawn_problems(), lambda dp: True, settings=FIND)
    p = dp.problem
    assert p.n == 1, f"n = {p.n}"
    assert p.K == 2 and p.d == 2, f"K = {p.K}, d = {p.d}"
    assert np.array_equal(p.E, np.eye(p.K, p.d)), f"E = {p.E.tolist()}"
    assert len(p.sequences[0]) == 2, f"sequence {p.sequences[0]}"
    assert dp.structure.shape == "acyclic"


@pytest.fixture(scope="module")
def minimal_cyclic():
    return find(drawn_problems(), lambda dp: dp.structure.cyclic, settings=FIND)


def test_minimal_cyclic_problem_is_readable(minimal_cyclic):
    """What the shrinker reaches today: identity embeddings, at most three tokens, samples and positions."""
    p = minimal_cyclic.problem
    assert np.array_equal(p.E, np.eye(p.K, p.d)), f"E = {p.E.tolist()}"
    assert p.K <= 3 and p.n <= 3, f"K = {p.K}, n = {p.n}, sequences {p.sequences}"
    assert max(len(s) for s in p.sequences) <= 3, f"sequences {p.sequences}"


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "strategies/problems.py: the minimal drawn_problems() with a cycle shrinks to shape 'cyclic' with "
    "K = 3, n = 3 (token 1 above SCC {2, 0}: (2,0):2, (2,0):0, (1,0):1) under the ci settings, although "
    "K = 2, n = 2 exists (shape svm_zero: (1,0):1, (1,0):0) and even shape 'cyclic' fits in n = 2 "
    "((1,0):0, (1,2,0):1).  realize() gives every DAG edge its own sample, and the shrinker does not "
    "move from 'cyclic' to the later-listed 'svm_zero'."))
def test_minimal_cyclic_problem_is_small(minimal_cyclic):
    p = minimal_cyclic.problem
    assert p.K <= 3 and p.n <= 2, f"minimal cyclic problem: K = {p.K}, n = {p.n}, sequences {p.sequences}"


def test_minimal_problem_with_two_sccs_in_one_graph_is_small():
    def ok(dp):
        gs = rebuilt_graphs(dp.problem)
        return any(any(len(c) > 1 for c in sccs(g)) and len(sccs(g)) >= 2 for g in gs.values())
    dp = find(drawn_problems(), ok, settings=FIND)
    p = dp.problem
    assert p.K <= 4 and p.n <= 4, f"K = {p.K}, n = {p.n}, sequences {p.sequences}, labels {p.labels}"


@pytest.fixture(scope="module")
def minimal_ill_conditioned():
    return find(drawn_problems(), lambda dp: np.linalg.cond(dp.problem.E) > 5, settings=FIND)


def test_minimal_ill_conditioned_problem_has_one_short_sample(minimal_ill_conditioned):
    p = minimal_ill_conditioned.problem
    assert p.n == 1 and len(p.sequences[0]) == 2, f"n = {p.n}, sequences {p.sequences}"


# Random seeds of the search below.  Measured on 20 seeds (0-19), 400 examples each: every search ends at
# K = d = 2 (0.4-2.3 s, 1.0 s on average).  Before the embedding's choices were drawn ahead of the structure
# and ill_conditioned ahead of gaussian, 3 of 12 seeds did (the others ended at K = 3 to 9; seed 0 at 7);
# drawing the choices first alone, 15 of 20 (the others, seed 8 among them, ended at a Gaussian seed 0 with
# K = 3 or 6, ill-conditioned there and not at K = 2).  Seeds 0 and 1 are the first two; 8 keeps the
# second half of the fix checked.
ILL_CONDITIONED_SEEDS = (0, 1, 8)


def test_minimal_ill_conditioned_problem_has_two_tokens(minimal_ill_conditioned):
    """A problem that only needs non-orthonormal embeddings shrinks to K = d = 2: under the ci settings and
    from a few random seeds (strategies.problems draws the embedding's kind, d - K and seed before the
    structure, so shrinking K keeps them)."""
    found = {"derandomized": minimal_ill_conditioned}
    for s in ILL_CONDITIONED_SEEDS:
        found[f"seed {s}"] = find(drawn_problems(), lambda dp: np.linalg.cond(dp.problem.E) > 5,
                                  settings=settings(FIND, derandomize=False), random=random.Random(s))
    sizes = {k: (dp.problem.K, dp.problem.d) for k, dp in found.items()}
    assert all(kd == (2, 2) for kd in sizes.values()), f"minimal (K, d) per search: {sizes}"


@given(s=priority_structures(), data=st.data())
def test_realize_respects_the_length_cap(s, data):
    seqs, labels = data.draw(realize(s, max_len=5, max_samples=4), label="samples")
    assert len(seqs) == len(labels) >= 1
    assert all(2 <= len(q) <= 5 for q in seqs), [len(q) for q in seqs]



# ------------------------------------------------------------------------------------------------
# The public API: keyword-only options, validated
# ------------------------------------------------------------------------------------------------
BAD_OPTIONS = [
    ("drawn_problems(max_len=1)", lambda s: s.drawn_problems(max_len=1), "max_len"),
    ("drawn_problems(max_samples=0)", lambda s: s.drawn_problems(max_samples=0), "max_samples"),
    ("drawn_problems(max_condition=0.5)", lambda s: s.drawn_problems(max_condition=0.5), "max_condition"),
    ("structures_of(['tree'])", lambda s: s.structures_of(["tree"]), "shapes"),
    ("structures_of([])", lambda s: s.structures_of([]), "shapes"),
    ("priority_structures(shapes=just('tree'))", lambda s: s.priority_structures(shapes=st.just("tree")), "tree"),
    ("trainable_problems(shapes=('cyclic', 'x'))", lambda s: s.trainable_problems(shapes=("cyclic", "x")), "shapes"),
    ("relaxed_cases('heads')", lambda s: s.relaxed_cases("heads"), "unknown relaxation"),
    ("embeddings(3, d=just(2))", lambda s: s.embeddings(3, d=st.just(2)), "d=2 < K=3"),
    ("probabilities(min_value=0.9, max_value=0.2)", lambda s: s.probabilities(min_value=0.9, max_value=0.2),
     "min_value"),
]


@pytest.mark.parametrize("call,make,names", BAD_OPTIONS, ids=[b[0] for b in BAD_OPTIONS])
def test_bad_options_get_one_clear_error(call, make, names):
    """An option out of range is Hypothesis's ``InvalidArgument`` naming the option, raised when the strategy
    is built or at its first draw (never a wrong problem or a traceback from deep inside a draw)."""
    import strategies
    from hypothesis.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as info:
        find(make(strategies), lambda _: True, settings=settings(database=None, max_examples=5))
    message = str(info.value)
    assert names in message and "\n" not in message, f"{call}: expected one line naming {names!r}, got {message!r}"


def test_options_after_the_subject_are_keyword_only():
    """xarray's convention: options are keyword-only, so a positional option is a TypeError at the call."""
    import inspect

    import strategies

    for name in strategies.__all__:
        obj = getattr(strategies, name)
        if not inspect.isfunction(obj) or name in ("min_norm_biorthogonal_head", "weak_correlation", "problems"):
            continue  # plain functions of one subject, or a pass-through of drawn_problems' keywords
        params = list(inspect.signature(obj).parameters.values())
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        assert len(positional) <= 1, f"{name}{inspect.signature(obj)}: only the subject may be positional"
    with pytest.raises(TypeError):
        strategies.drawn_problems(None)
    with pytest.raises(TypeError):
        strategies.structures_of(["cyclic"], st.just(3))


# ------------------------------------------------------------------------------------------------
# Every option is honoured: a narrow value set, every draw respects it
# ------------------------------------------------------------------------------------------------
OPTION = settings(max_examples=8, database=None, derandomize=True, deadline=None)


@OPTION
@given(dp=drawn_problems(loss=st.just("exp")))
def test_drawn_problems_honours_loss(dp):
    assert dp.problem.loss == "exp"


@OPTION
@given(p=problems(loss=st.sampled_from(["square"])))
def test_problems_honours_loss(p):
    assert p.loss == "square"


@OPTION
@given(s=priority_structures(K=st.just(7)))
def test_priority_structures_honours_K(s):
    assert s.K == 7


@OPTION
@given(s=structures_of(["acyclic", "mixed"], K=st.just(5)))
def test_structures_of_honours_K(s):
    assert s.K == 5 and s.shape in ("acyclic", "mixed")


@OPTION
@given(E=embeddings(3, d=st.just(6)))
def test_embeddings_honour_d(E):
    assert E.shape == (3, 6)


@OPTION
@given(E=embeddings(2, d=st.sampled_from([7, 8])))
def test_embeddings_honour_a_wide_d(E):
    assert E.shape[0] == 2 and E.shape[1] in (7, 8)


@OPTION
@given(dp=drawn_problems(d_extra=st.just(2)))
def test_drawn_problems_honours_d_extra(dp):
    assert dp.problem.d == dp.problem.K + 2


@OPTION
@given(p=problems(d_extra=st.just(5)))
def test_problems_honours_d_extra(p):
    assert p.d == p.K + 5


def _cond(E) -> float:
    s = np.linalg.svd(np.asarray(E), compute_uv=False)
    return float(s[0] / s[-1])


# (strategy option, the strategy drawn with it narrowed, what every draw must then satisfy)
OPTIONS = [
    ("priority_structures-shapes", lambda: priority_structures(shapes=st.just("acyclic")),
     lambda s: s.shape == "acyclic" and not s.cyclic),
    ("priority_structures-n_queries", lambda: priority_structures(K=st.just(6), n_queries=st.just(2)),
     lambda s: len(s.queries) == 2),
    ("structures_of-shapes", lambda: structures_of(["cyclic"]), lambda s: s.shape == "cyclic" and s.cyclic),
    ("structures_of-n_queries", lambda: structures_of(["mixed"], K=st.just(6), n_queries=st.just(3)),
     lambda s: len(s.queries) == 3),
    ("trainable_problems-shapes", lambda: trainable_problems(shapes=("svm_zero",)),
     lambda dp: dp.structure.shape == "svm_zero"),
    ("drawn_problems-structures", lambda: drawn_problems(structures=structures_of(["acyclic"], K=st.just(4))),
     lambda dp: dp.structure.shape == "acyclic" and dp.problem.K == 4),
    ("drawn_problems-heads", lambda: drawn_problems(heads=False), lambda dp: "head" not in dp.problem.to_json()),
    ("drawn_problems-embedding_kinds", lambda: drawn_problems(embedding_kinds=st.just("orthonormal")),
     lambda dp: np.allclose(dp.problem.E @ dp.problem.E.T, np.eye(dp.problem.K), atol=1e-9)),
    ("drawn_problems-max_condition",
     lambda: drawn_problems(embedding_kinds=st.just("ill_conditioned"), max_condition=4.0),
     lambda dp: _cond(dp.problem.E) <= 4.0 * (1 + 1e-6)),
    ("drawn_problems-max_len", lambda: drawn_problems(max_len=3),
     lambda dp: max(len(s) for s in dp.problem.sequences) <= 3),
    ("embeddings-kinds", lambda: embeddings(3, kinds=st.just("gaussian")),
     lambda E: np.allclose(np.linalg.norm(E, axis=1), 1.0)),
    ("embeddings-max_condition", lambda: embeddings(3, kinds=st.just("ill_conditioned"), max_condition=5.0),
     lambda E: _cond(E) <= 5.0 * (1 + 1e-6)),
    ("probabilities-min_value-max_value", lambda: probabilities(min_value=0.5, max_value=0.6),
     lambda p: 0.5 <= p <= 0.6),
    ("sequence_classes-classes", lambda: sequence_classes(classes=st.just(4)), lambda c: c.K == 4),
    ("sequence_classes-queries", lambda: sequence_classes(classes=st.just(3), queries=st.just(2)),
     lambda c: len(set(np.asarray(c.query).tolist())) == 2),
    ("sequence_classes-distinct-common", lambda: sequence_classes(classes=st.just(2), distinct=st.just(2),
                                                                  common=st.just(0)),
     lambda c: np.asarray(c.P).shape == (2, 4)),
    ("single_common_classes-classes", lambda: single_common_classes(classes=st.just(3)), lambda c: c.K == 3),
]


@pytest.mark.parametrize("strategy, check", [pytest.param(s, c, id=name) for name, s, c in OPTIONS])
def test_every_draw_honours_a_narrowed_option(strategy, check):
    """A strategy that ignored the option would draw outside it: 8 derandomized draws, each must respect it."""
    @OPTION
    @given(x=strategy())
    def every_draw(x):
        assert check(x), x

    every_draw()
