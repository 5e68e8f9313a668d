"""Every claim on its whole stated domain: the strategies draw all of it, and ``check`` answers for all of it.

* ``problems_for(claim)`` (``strategies.domains``) finds a problem for every (loss, head) pair the claim's
  :class:`~theory.core.claims.Domain` lists, and every such problem meets the claim's assumptions: a claim's
  properties cannot silently cover less than its statement, and its domain cannot claim more than its
  assumptions accept.
* ``check`` is fuzzed end to end on any valid file (``file_problems``: every loss, default, biorthogonal and
  broken heads, independent, nearly dependent and dependent embeddings): every claim printed once, exit 0 or
  1 (2 is for bad input only), never a traceback, never an ``error`` verdict.
* The files that a first user found wrong answers on are regressions (``examples/``).
"""
from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, event, find, given, settings

from properties.judging import scaled
from strategies.domains import file_problems, problems_for
from theory.claims import all_claims, claim
from theory.core.problem import Problem
from theory.run import cli

DOMAIN_CLAIMS = [c for c in all_claims() if c.domain.pairs()]
PAIRS = [(c.name, pair) for c in DOMAIN_CLAIMS for pair in c.domain.pairs()]


def run_cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main(list(argv))
        except SystemExit as exc:  # argparse's own exits
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def verdicts(stdout: str) -> dict[str, dict]:
    lines = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    names = [d["claim"] for d in lines]
    assert len(names) == len(set(names)), f"a claim printed twice: {names}"
    return {d["claim"]: d for d in lines}


# ------------------------------------------------------------------------------------------------
# The strategies cover each claim's stated domain, and nothing outside it
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,pair", PAIRS, ids=[f"{n}-{l}-{h}" for n, (l, h) in PAIRS])
def test_problems_for_draws_every_pair_of_the_domain(name, pair):
    """A problem with this (loss, head) is drawn, and it meets every assumption of the claim."""
    c = claim(name)
    p = find(problems_for(c, pair=pair), lambda p: True,
             settings=settings(database=None, derandomize=True, max_examples=50,
                               suppress_health_check=list(HealthCheck)))
    assert p.loss == pair[0]
    assert p.assumptions()["head_biorthogonal"] is (pair[1] == "biorthogonal"), (pair, p.to_json())
    failing = c.first_failing_assumption(p)
    assert failing is None, f"{name} on its own domain pair {pair}: {failing.explain(p)[0]}\n{p.to_json()}"


@pytest.mark.parametrize("name", [c.name for c in DOMAIN_CLAIMS])
@settings(max_examples=scaled(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=__import__("hypothesis").strategies.data())
def test_every_domain_draw_meets_the_claims_assumptions(name, data):
    c = claim(name)
    p = data.draw(problems_for(c), label="problem")
    failing = c.first_failing_assumption(p)
    assert failing is None, f"{failing.explain(p)[0]}\n{p.to_json()}"


@pytest.mark.parametrize("option,value,holds", [
    ("losses", ("exp",), lambda p: p.loss == "exp"),
    ("losses", ("ce", "lsq"), lambda p: p.loss in ("ce", "lsq")),
    ("embeddings", ("dependent",), lambda p: not p.assumptions()["embeddings_independent"]),
    ("embeddings", ("independent",), lambda p: p.assumptions()["embeddings_independent"]),
])
def test_file_problems_honours_its_options(option, value, holds):
    """Every draw respects the option (a strategy that ignored it would draw the others too)."""
    from hypothesis import strategies as st

    @settings(max_examples=20, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draws(data):
        p = data.draw(file_problems(**{option: value}))
        assert holds(p), (option, value, p.to_json())

    draws()


def test_domain_outside_pairs_are_refused():
    from hypothesis.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="outside"):
        find(problems_for(claim("li2024.theorem1"), pair=("exp", "biorthogonal")), lambda p: True)
    with pytest.raises(InvalidArgument, match="own experiments"):
        find(problems_for(claim("tian2023.theorem2")), lambda p: True)


# ------------------------------------------------------------------------------------------------
# check, fuzzed end to end on any valid file
# ------------------------------------------------------------------------------------------------
LI_CLAIMS = [c.name for c in all_claims() if c.name.startswith("li2024.")]


@pytest.mark.slow
@settings(max_examples=scaled(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=file_problems())
def test_check_answers_every_valid_file(p, tmp_path_factory):
    """Every Li et al. claim printed once; exit 0 or 1, never 2 (valid input); 3 (a computation that failed its
    certificate, printed as an ``error`` verdict naming it) only where the loss is not convex; a claim outside
    its domain names the assumption."""
    path = tmp_path_factory.mktemp("check") / "problem.json"
    p.save(path)
    args = ["check", str(path), "--budget-scale", "0.01"] + [a for n in LI_CLAIMS for a in ("--claim", n)]
    rc, out, err = run_cli(*args)
    assert "Traceback" not in err, err
    # Exit 3 is documented for a computation that failed its certificate; it is accepted only where no
    # certificate of global optimality exists (a non-convex loss: a bounded loss or a broken head), and the
    # line must say what failed.  With the log loss and Assumptions 1-2 every answer must certify.
    convex = p.loss == "log" and p.assumptions()["head_biorthogonal"]
    assert rc in (0, 1) or (rc == 3 and not convex), f"exit {rc}: {err.strip().splitlines()[-1:]}\n{json.dumps(p.to_json())}"
    got = verdicts(out)
    assert sorted(got) == sorted(LI_CLAIMS), sorted(got)
    for name, d in got.items():
        event(f"{name}: {d['verdict']}")
        if d["verdict"] == "error" and not convex:
            assert d["reason"].startswith("numerical error: "), d["reason"]
            continue
        assert d["verdict"] != "error", f"{name}: {d['reason']}\n{json.dumps(p.to_json())}"
        if d["verdict"] == "not applicable":
            assert d["reason"], name
        # A valid problem inside a theorem's domain never gets "fails" (a false alarm), except Theorem 2
        # without W^fin, the statement's gap the oracle shows, and Section 5, whose claim allows 5% of judged
        # cases not aligned (its own property counts them).
        if d["verdict"] == "fails" and name != "li2024.section5":
            assert name == "li2024.theorem2" and d["measures"].get("finite") == "not applicable", (
                f"{name} fails on a valid problem: {d['reason']}\n{json.dumps(p.to_json())}")


# ------------------------------------------------------------------------------------------------
# Regressions: valid files a first user got wrong answers on
# ------------------------------------------------------------------------------------------------
def test_theorem1_and_the_automaton_are_judged_at_their_regime_past_gds_budget():
    """Log loss, default head, nearly collinear embeddings (found by this module's file property): 10^4 τ₀ is
    6.7e10 steps, past GD's cap of 1e7.  Theorem 1 was undecided there, and the automaton's leak outside the
    top SCC, 0.55 -> 0.57 from 1e6 to 1e7 steps (below the regime), was called a failure of the reading.
    Both decisions now start at the continuation's first budget at or past 10^4 τ₀ (1e11) and hold there;
    with a horizon below 10^4 τ₀ (``--budget-scale 0.01``: 1e10 steps-equivalent) both are undecided, with the reason."""
    rc, out, _ = run_cli("check", "examples/automaton_near_collinear.json", "--claim", "li2024.automaton",
                         "--claim", "li2024.theorem1")
    got = verdicts(out)
    assert rc == 0, rc
    for claim in ("li2024.theorem1", "li2024.automaton"):
        d = got[claim]
        assert d["verdict"] == "holds" and d["budget"] >= 6.7e10, d
        assert d["measures"]["engine"] == "continuation", d["measures"]
    rc, out, _ = run_cli("check", "examples/automaton_near_collinear.json", "--claim", "li2024.automaton",
                         "--claim", "li2024.theorem1", "--budget-scale", "0.01")
    for claim, d in verdicts(out).items():
        assert d["verdict"] == "undecided" and "exceed GD's budget" in d["reason"], d


def test_theorem2_holds_on_an_exp_loss_problem_against_its_own_W_fin():
    """exp loss, Assumptions 1-2: the path's finite part tends to the exp loss's W^fin (δ = 1.7080, i.e.
    ±0.854; the log loss's is ±ln 2 / 2 = ±0.3466), so Theorem 2 holds (it was judged against the log
    loss's W^fin and declared false)."""
    rc, out, _ = run_cli("check", "examples/theorem2_exp_loss.json", "--claim", "li2024.theorem2")
    d = verdicts(out)["li2024.theorem2"]
    assert (rc, d["verdict"]) == (0, "holds"), d["reason"]
    rc, out, _ = run_cli("analyze", "examples/theorem2_exp_loss.json")
    W = np.array(json.loads(out)["finite"]["W"])
    assert abs((W[1, 0] - W[0, 0]) - 1.7080) < 1e-3, W


def test_theorem2_without_W_fin_is_judged_on_the_whole_direction():
    """exp loss whose L̃ has its infimum at infinity along S_fin: no W^fin, so the finite-part conclusion has no
    target ('not applicable', with the reason: a bounded loss), and the direction is judged on the whole
    W̄_R/R -- which does not approach W^svm (the S_fin part grows with R): Theorem 2's direction conclusion
    fails on a problem its statement covers, as properties/li2024/test_oracle.py shows independently."""
    rc, out, _ = run_cli("check", "examples/theorem2_exp_no_finite_minimizer.json", "--claim", "li2024.theorem2")
    d = verdicts(out)["li2024.theorem2"]
    # "fails" only when every start of the non-convex path agrees; here they found two local minima at the
    # escalated radii, so the suite does not claim the failure itself (the oracle's test does).
    assert (rc, d["verdict"]) in ((1, "fails"), (0, "undecided")), d
    assert d["measures"]["finite"] == "not applicable" and d["measures"]["direction"] == "fails", d["measures"]
    assert "whole" in d["reason"], d["reason"]
    assert "bounded" in d["reason"] and "Assumption 1" not in d["reason"].split("finite part:")[1], d["reason"]


@pytest.mark.parametrize("name", ["section5_log_broken_head", "section5_log_broken_head_mixed"])
def test_check_judges_every_claim_on_log_loss_with_a_broken_head(name):
    """Section 5's own setting with the log loss: every claim printed, exit 0 or 1 (was: three claims, then
    'no finite smoothness bound' and exit 2)."""
    rc, out, err = run_cli("check", f"examples/{name}.json", "--budget-scale", "0.1")
    got = verdicts(out)
    assert rc in (0, 1), err
    assert sorted(got) == sorted(c.name for c in all_claims()), sorted(got)
    assert got["li2024.section5"]["verdict"] != "not applicable", got["li2024.section5"]["reason"]
    assert got["li2024.theorem1"]["verdict"] == "not applicable"


def test_analyze_reports_dependent_embeddings_with_a_head():
    """Dependent embeddings, head = I: the log loss is infinite for the label whose head row misses its
    SCC; analyze exits 0, reports the assumptions, and says W^fin is not defined (was: NaNs, exit 3)."""
    rc, out, err = run_cli("analyze", "examples/dependent_embeddings_with_head.json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["assumptions"]["embeddings_independent"] is False
    assert doc["assumptions"]["loss_finite_at_zero"] is False
    assert doc["finite"]["exists"] is False and "infinite" in doc["finite"]["reason"], doc["finite"]


def test_constant_loss_is_judged_not_crashed():
    """One distinct token per sequence: L is constant in W (beta = 0); Theorem 1's W^svm = 0 case holds
    (GD stays at W(0), a minimizer) instead of a 'step size inf' exit 2."""
    rc, out, err = run_cli("check", "examples/constant_loss_single_token.json", "--claim", "li2024.theorem1")
    assert rc == 0, err
    assert verdicts(out)["li2024.theorem1"]["verdict"] == "holds"


def test_a_head_rounded_to_6_decimals_is_not_applicable_with_its_residual():
    """A head typed with 6 decimals misses C E^T = I by ~1e-6, beyond the 1e-8 relative tolerance: the claims that need Assumption 1
    are not applicable, and the reason says by how much and how to write an exact file."""
    p = Problem.load("examples/head_rounded_6_decimals.json")
    measured, tol = p.assumption_residuals()["head_biorthogonal"]
    assert measured > tol
    rc, out, _ = run_cli("check", "examples/head_rounded_6_decimals.json", "--claim", "li2024.theorem1")
    d = verdicts(out)["li2024.theorem1"]
    assert rc == 0 and d["verdict"] == "not applicable"
    assert d["measures"]["residual"] == pytest.approx(measured) and d["measures"]["tolerance"] == pytest.approx(tol)
    assert "omit" in d["reason"] and "17 significant digits" in d["reason"], d["reason"]


def test_a_null_head_is_the_default_head_for_loader_and_schema():
    import jsonschema

    from theory.core.problem import schema

    doc = {"embeddings": [[0, 0, 1], [0, 1, 0], [1, 0, 0]], "sequences": [[0], [0], [0]], "labels": [0, 0, 0],
           "loss": "log", "head": None}
    jsonschema.validate(doc, schema())
    assert Problem.from_json(doc).assumptions()["head_biorthogonal"]
