"""The paper's experiments (Li et al. 2024, Figure 2 setting), reduced to 3 trials: the numbers the paper
reports -- correlation with W^svm near 0.97-0.99 after 4000 normalized-GD steps, small finite error --
must come out of ``python -m theory reproduce`` (called in-process here)."""
from __future__ import annotations

import argparse

import pytest

from reports.record import record_metrics
from theory.li2024.experiments import li_cyclic, li_acyclic

TRIALS = 3


@pytest.mark.theorem("Theorem 1")
@pytest.mark.parametrize("run", [li_cyclic, li_acyclic], ids=["li-cyclic", "li-acyclic"])
def test_reproduction_matches_the_paper(run):
    out = run(argparse.Namespace(trials=TRIALS, seed=0, steps=None))
    record_metrics(correlation_mean=out["correlation"]["mean"], finite_error_mean=out["finite_error"]["mean"],
                   top_scc_mass_mean=out["top_scc_mass"]["mean"])
    assert out["trials"] == TRIALS and len(out["correlation"]["values"]) == TRIALS
    assert min(out["correlation"]["values"]) >= 0.97, f"{out['experiment']}: correlations {out['correlation']}"
    assert max(out["finite_error"]["values"]) <= 0.05, f"{out['experiment']}: finite errors {out['finite_error']}"
    assert min(out["top_scc_mass"]["values"]) >= 0.99, f"{out['experiment']}: top-SCC mass {out['top_scc_mass']}"


@pytest.mark.theorem("Section 5")
@pytest.mark.parametrize("loss", ["ce", "lsq"])
def test_li_local_pseudo_tpg_beats_true_tpg(loss):
    """Section 5 as the authors run it (tied head, cyclic datasets, 2000 normalized steps), 10 trials: the
    pseudo-TPG SVM explains GD's direction (mean correlation >= 0.97) and the true TPG's does not (at
    least 0.1 lower).  40 trials (README): ce 0.773 vs 0.986, lsq 0.739 vs 0.995.  The figure goes to the
    report."""
    from reports.record import record_figure
    from theory.li2024.experiments import li_local, li_local_figure

    out = li_local(argparse.Namespace(trials=10, seed=0, steps=None, loss=loss, shape=None, figure=None))
    record_figure(f"li-local ({loss}, 10 trials)", li_local_figure(out))
    t, p = out["correlation_true_tpg"], out["correlation_pseudo_tpg"]
    record_metrics(corr_true_mean=t["mean"], corr_pseudo_mean=p["mean"], pseudo_equals_true=out["pseudo_equals_true"])
    assert p["mean"] >= 0.97 and t["mean"] <= p["mean"] - 0.1, f"true {t}, pseudo {p}"
