"""``benchmarks/mutants.py``'s list against the tree it mutates: a mutant whose original text has left its
file is not run (the script refuses to start), so the mutation score silently loses it.  This test keeps
the list current: every mutant applies exactly once, and the check itself reports a stale one."""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytestmark = pytest.mark.theorem("Report")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "mutants.py"


@pytest.fixture(scope="module")
def mutants():
    spec = importlib.util.spec_from_file_location("mutants_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_every_mutant_applies_exactly_once_to_the_tree(mutants):
    assert mutants.MUTANTS, "the mutation script lists no mutants"
    assert mutants.check_mutants(mutants.MUTANTS) == []


def test_a_mutant_whose_text_left_its_file_is_reported(mutants):
    first = mutants.MUTANTS[0]
    stale = replace(first, name="stale", old=first.old + "  # a line no file holds")
    doubled = replace(first, name="doubled", old="\n")
    problems = mutants.check_mutants([first, stale, doubled])
    assert [p.split(":")[0] for p in problems] == ["stale", "doubled"], problems
    assert "0 times" in problems[0], problems


def test_mutant_names_are_unique(mutants):
    names = [m.name for m in mutants.MUTANTS]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
