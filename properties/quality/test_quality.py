"""The suite's own power, in the style of Hypothesis's ``tests/quality/``: for each planted violation the
search finds a failing example within a stated number of examples, for each of three seeds.

A planted violation is a wrong claim checked by the suite's own criteria: Theorem 1 judged against a target
35° off ``W^svm``, against ``W^fin`` moved by 0.2 inside ``S_fin``, or on a run frozen over its last decade;
Theorem 2 judged against the Graph-SVM of a TPG with one ``⇒`` edge reversed; and each relaxed assumption of
``properties/li2024/test_relaxations.py``.  ``WITHIN`` states the budgets; the measured first-hit indices are in
the README ("The suite's own power").
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import strategies as st

from properties.helpers import describe
from properties.search import assert_found_within
from reports.record import record_metrics
from theory.li2024.relaxations import EXPECTED, relaxation_key, svm_infeasible, theorem1_fails
from properties.li2024.runs import certified_path, initial_weights, run_theorem1, theorem_problems
from theory.li2024.plants import wrong_direction, reversed_edge_svms
from theory.li2024.regpath_verdict import direction_verdict, margins_for
from strategies.problems import drawn_problems
from strategies.relaxations import relaxed_cases
from theory.li2024 import criteria

SEEDS = [0, 1, 2]
# Examples within which each planted violation must be found, for every seed.
# 'head' and 'loss:square' drop one assumption only since the relaxations judge the natural generalization
# (the head relaxation used to switch to the ce loss as well, and the loss relaxation compared with the log
# loss's W^fin, which made every other loss a "counterexample"): counterexamples are rarer.  First hits moved
# with unrelated edits (Hypothesis draws toward the project's literal constants), so these budgets come from
# measured rates, not first hits: escalated failures per draw, head 26% (21 of 80), loss:square 13.75% (11 of
# 80, mixed and cyclic shapes; fewer over all shapes, which the search draws); a budget n misses with probability (1 - rate)^n: 25 and 50 give 5e-4.
WITHIN = {"wrong direction": 3, "wrong W^fin": 10, "frozen run": 3, "theorem 2 reversed edge": 10,
          "head": 25, "loss:square": 50, "step": 10, "dependent": 10}

pytestmark = pytest.mark.theorem("Quality")


class Run(tuple):
    """``(analysis, trajectory, seed)``, shown by its problem file (a trajectory's repr is 100s of kB)."""

    def __repr__(self):
        return f"Run(problem={describe(self[0].problem)}, seed={self[2]})"


@st.composite
def theorem1_runs(draw):
    """A valid Theorem 1 problem trained at the safe step: ``Run(analysis, trajectory, seed)``."""
    p = draw(theorem_problems, label="problem").problem
    W0 = draw(initial_weights(p.d), label="W0")
    an, traj = run_theorem1(p, W0, 1.0)
    return Run((an, traj, draw(st.integers(0, 99), label="seed")))


def found_within(strategy, condition, *, key: str, random_seed: int, what: str) -> None:
    index = assert_found_within(strategy, condition, budget=WITHIN[key], random_seed=random_seed, what=what)
    record_metrics(first_hit=index, budget=WITHIN[key])


def _accepts(traj, an) -> bool:
    return criteria.theorem1(traj, an).passed


@pytest.mark.parametrize("random_seed", SEEDS)
def test_finds_theorem1_against_awrong_direction(random_seed):
    def planted_fails(x):
        an, traj, s = x
        wrong = replace(an.svm, W=an.svm.norm * wrong_direction(an, 35.0, s))
        return not _accepts(traj, replace(an, svm=wrong))

    found_within(theorem1_runs(), planted_fails, key="wrong direction", random_seed=random_seed,
                        what="Theorem 1's criterion failing against a target 35° off W^svm")


@pytest.mark.parametrize("random_seed", SEEDS)
def test_finds_theorem1_against_a_wrong_finite_part(random_seed):
    def planted_fails(x):
        an, traj, _ = x
        if an.space.dim == 0:
            return False  # nothing to move: S_fin = {0}
        shift = an.space.compose(np.ones(an.space.dim) / np.sqrt(an.space.dim)) * 0.2
        return not _accepts(traj, replace(an, finite=replace(an.finite, W=an.finite.W + shift)))

    found_within(theorem1_runs(), planted_fails, key="wrong W^fin", random_seed=random_seed,
                        what="Theorem 1's criterion failing against W^fin moved by 0.2")


@pytest.mark.parametrize("random_seed", SEEDS)
def test_finds_theorem1_on_a_frozen_run(random_seed):
    def planted_fails(x):
        an, traj, _ = x
        frozen = list(traj.checkpoints)
        frozen[-1] = replace(criteria._at(traj, traj.final.step / 10), step=traj.final.step)
        return not _accepts(replace(traj, checkpoints=frozen), an)

    found_within(theorem1_runs(), planted_fails, key="frozen run", random_seed=random_seed,
                        what="Theorem 1's criterion failing on a run frozen over its last decade")


@pytest.mark.parametrize("random_seed", SEEDS)
def test_finds_theorem2_against_a_reversed_edge(random_seed):
    from properties.li2024.runs import NONZERO_SVM, REGPATH_CONDITION
    from theory.li2024.regpath_verdict import MIN_DIR_GAP

    def planted_fails(dp):
        p, an, radii, path = certified_path(dp)
        u = an.svm.W / an.svm.norm
        for V in reversed_edge_svms(p, an):
            if np.linalg.norm(V / np.linalg.norm(V) - u) >= MIN_DIR_GAP:
                return not direction_verdict(path, an.space, V, margins_for(p, an))[0]
        return False

    found_within(drawn_problems(structures=NONZERO_SVM, max_condition=REGPATH_CONDITION), planted_fails,
                        key="theorem 2 reversed edge", random_seed=random_seed,
                        what="Theorem 2's criterion failing against a reversed-edge Graph-SVM")


# The relaxations whose table entry is a counterexample (theory.li2024.relaxations.EXPECTED); the others are
# findings ("none found", "undefined") that test_relaxations.py measures.
# loss:square is left to test_relaxations.py: its counterexamples are too rare over all shapes (escalated
# failures in a few % of draws) for a search-power bound that survives the draws' drift with unrelated edits.
COUNTEREXAMPLE_RELAXATIONS = [("head", None), ("step", None)]


@pytest.mark.parametrize("random_seed", SEEDS)
@pytest.mark.parametrize("relaxation,loss", COUNTEREXAMPLE_RELAXATIONS)
def test_finds_theorem1_counterexample_without_an_assumption(relaxation, loss, random_seed):
    assert EXPECTED[("Theorem 1", relaxation_key(relaxation, loss))][0] == "counterexample"
    cases = relaxed_cases(relaxation, losses=(loss,)) if loss else relaxed_cases(relaxation)
    found_within(cases, theorem1_fails, key=relaxation_key(relaxation, loss), random_seed=random_seed,
                 what=f"a Theorem 1 counterexample without '{relaxation_key(relaxation, loss)}'")


@pytest.mark.parametrize("random_seed", SEEDS)
def test_finds_infeasible_graph_svm_with_dependent_embeddings(random_seed):
    found_within(relaxed_cases("dependent"), svm_infeasible, key="dependent",
                        random_seed=random_seed, what="an infeasible Graph-SVM with dependent embeddings")
