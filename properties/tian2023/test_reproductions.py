"""Reduced Syn-Small and Syn-Medium (Tian et al. 2023, Sec. 8) checking the paper's qualitative findings.

* Syn-Small (Fig. 4): attention on the distinct tokens ends ordered by probability, the common tokens lose
  attention mass, and eta_Y = 10 leaves denser distinct-token attention than eta_Y = eta_Z = 1.
* Syn-Medium (Fig. 6), reduced grid (1 and 3 query tokens, eta_Z in {0.5, 3}, eta_Y/eta_Z in {1, 10}, 3 seeds):
  larger eta_Z gives lower entropy (sparser) at ratio 1; a larger ratio gives higher entropy at eta_Z = 3.
  Criterion: the difference of seed means exceeds 2 standard errors of the difference.
The figures are attached to the report.
"""
from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np
import pytest

from reports.record import record_figure, record_metrics
from theory.tian2023.experiments import PROTOCOLS, syn_medium, syn_medium_figure, syn_small, syn_small_figure

pytestmark = pytest.mark.theorem("Scan and Snap")


def test_syn_small_reduced():
    res = syn_small(argparse.Namespace(seeds=1, seed=0), protocol=replace(PROTOCOLS["syn-small"], steps=200))
    record_figure("syn-small (200 steps)", syn_small_figure(res))
    ent = {}
    for run in res["runs"]:
        for cl in run["classes"]:
            a = np.array(cl["distinct_attention"])
            record_metrics(**{f"etaY{run['eta_y']:g}_class{cl['class']}_entropy": cl["distinct_entropy"],
                              f"etaY{run['eta_y']:g}_class{cl['class']}_common_mass": cl["common_mass"]})
            assert np.all(np.diff(a) > 0), f"distinct attention not ordered by probability: {a}"
            assert cl["common_mass"] < 10 / 15.5 - 0.05, "common tokens did not lose attention"   # initial 0.645
        ent[run["eta_y"]] = np.mean([cl["distinct_entropy"] for cl in run["classes"]])
    assert ent[10.0] > ent[1.0] + 0.02, f"larger eta_Y not denser: {ent}"


def test_syn_medium_reduced():
    reduced = replace(PROTOCOLS["syn-medium"], queries=(1, 3),
                      rates=tuple((ez * r, ez) for ez in (0.5, 3.0) for r in (1.0, 10.0)))
    res = syn_medium(argparse.Namespace(seeds=3, seed=0), protocol=reduced)
    record_figure("syn-medium (reduced grid, 3 seeds)", syn_medium_figure(res))
    cells = {(c["queries"], c["eta_z"], c["ratio"]): c for c in res["cells"]}
    n = res["seeds"]

    def differs(a, b):        # a.mean - b.mean, and 2 standard errors of the difference
        return a["mean"] - b["mean"], 2 * np.sqrt((a["std"] ** 2 + b["std"] ** 2) / max(1, n - 1))
    for q in (1, 3):
        d, se = differs(cells[(q, 0.5, 1.0)], cells[(q, 3.0, 1.0)])
        record_metrics(**{f"q{q}_sparser_with_eta_z": d, f"q{q}_denser_with_ratio": differs(cells[(q, 3.0, 10.0)], cells[(q, 3.0, 1.0)])[0]})
        assert d > se, f"{q} queries: larger eta_Z not sparser ({d:.3f} <= {se:.3f})"
        d, se = differs(cells[(q, 3.0, 10.0)], cells[(q, 3.0, 1.0)])
        assert d > se, f"{q} queries: larger eta_Y/eta_Z not denser ({d:.3f} <= {se:.3f})"


# What Sec. 8 states in words, copied from the paper (not from the code): a vocabulary of 30 tokens, 0-9
# common to both classes, 10-19 distinct to the first and 20-29 to the second, each block's probabilities
# increasing with the token id; batch 128.
PAPER_VOCABULARY, PAPER_COMMON, PAPER_DISTINCT, PAPER_BATCH = 30, range(0, 10), (range(10, 20), range(20, 30)), 128


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_syn_protocol_is_the_papers(name):
    """The protocol's layout (as built, one query token) is the paper's: the vocabulary, which tokens are common
    and which distinct to which class, increasing probabilities; and its batch."""
    pr = PROTOCOLS[name]
    cl = pr.layout(1)
    assert cl.M == PAPER_VOCABULARY and cl.K == 2, f"{name}: {cl.K} classes over {cl.M} tokens"
    assert list(cl.common_tokens) == list(PAPER_COMMON), f"{name}: common tokens {list(cl.common_tokens)}"
    for n, block in enumerate(PAPER_DISTINCT):
        d = list(cl.distinct_tokens(n))
        assert sorted(d) == list(block), f"{name}: class {n}'s distinct tokens {d}, the paper's {list(block)}"
        assert np.all(np.diff(cl.P[n, list(block)]) > 0), f"{name}: class {n}'s probabilities do not increase"
    assert pr.batch == PAPER_BATCH


@pytest.mark.parametrize("run", ["syn-small", "syn-medium"])
def test_syn_runs_print_the_protocol_they_ran(run):
    """The JSON carries the protocol the run used, a reduced one included: its steps, rates and layouts are
    the ones trained (a run that printed the paper's protocol while training a reduced one would fail)."""
    if run == "syn-small":
        pr = replace(PROTOCOLS[run], steps=20)
        res = syn_small(argparse.Namespace(seeds=1, seed=0), protocol=pr)
        assert [(r["eta_y"], r["eta_z"]) for r in res["runs"]] == [tuple(x) for x in pr.rates]
        assert len(res["runs"][0]["classes"][0]["distinct_tokens"]) == pr.n_distinct
        assert res["runs"][0]["_history"]["steps"][-1] == pr.steps
    else:
        pr = replace(PROTOCOLS[run], steps=2, queries=(1,))
        res = syn_medium(argparse.Namespace(seeds=1, seed=0), protocol=pr)
        assert sorted((c["eta_z"] * c["ratio"], c["eta_z"]) for c in res["cells"]) == sorted(tuple(x) for x in pr.rates)
        assert {c["queries"] for c in res["cells"]} == set(pr.queries)
    assert res["protocol"] == pr.as_dict() and res["steps"] == pr.steps
