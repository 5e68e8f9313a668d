"""A claim defined outside ``theory/`` joins the suite through the entry-point group ``attention_tpg_suite.claims``.

The fixture package ``properties/fixtures/example_claim_pkg`` (its own pyproject.toml, the entry point
``descent = "tpg_example_claims:claims"``) is registered for one test at a time by writing a temporary
``*.dist-info`` on ``sys.path`` (:func:`properties.fixtures.register_example_claims`; nothing installed).
Then its claim is in :func:`theory.claims.all_claims` after the built-in ones, ``tpg check --claim`` judges
it, the claims catalogue renders it, and its own tests pass.  A broken entry point is one warning naming it,
never a crash; a name already taken keeps its first claim.  The report's dashboard card is tested in
a synthetic run (``test_a_plugin_claim_gets_its_dashboard_card``).
"""
from __future__ import annotations

import importlib.util
import json
import re
import shlex
import sys
import warnings
from html import unescape
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import theory.claims as registry
from properties.fixtures import EXAMPLE_CLAIM, EXAMPLE_PKG, register_example_claims
from theory.core.claims import Claim

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

pytestmark = pytest.mark.theorem("Documentation")


@pytest.fixture
def plugin(monkeypatch, tmp_path):
    register_example_claims(monkeypatch, tmp_path)
    return sys.modules["tpg_example_claims"]


def test_without_the_plugin_only_the_builtin_claims():
    names = [c.name for c in registry.all_claims()]
    assert EXAMPLE_CLAIM not in names and names[0] == "li2024.theorem1"


def test_entry_point_claim_follows_the_builtin_ones(plugin):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a healthy plugin warns nothing
        claims = registry.all_claims()
    names = [c.name for c in claims]
    assert names[-1] == EXAMPLE_CLAIM and names.count(EXAMPLE_CLAIM) == 1, names
    assert names.index(EXAMPLE_CLAIM) > max(i for i, n in enumerate(names) if n.startswith(("li2024.", "tian2023.")))
    assert registry.claim("descent") is plugin.DESCENT  # the short name works for a plugin's claim too


def test_check_judges_the_plugin_claim(plugin, capsys):
    """The command docs/adding-claims.md shows, as written (in this process, the plugin registered)."""
    from theory.run.cli import main

    (line,) = re.findall(r"^\s*\$ \.venv/bin/tpg (check .*)$", (DOCS / "adding-claims.md").read_text(), re.M)
    argv = shlex.split(line)
    assert argv == ["check", "examples/scc_above_token.json", "--claim", EXAMPLE_CLAIM], argv
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 0, err
    lines = [json.loads(x) for x in out.splitlines()]
    assert [(d["claim"], d["verdict"]) for d in lines] == [(EXAMPLE_CLAIM, "holds")], out
    assert lines[0]["reference"] == "Lemma 1 (descent)" and f"checking {EXAMPLE_CLAIM}" in err


def test_check_names_the_plugin_claims_assumption(plugin, capsys):
    """Outside its domain the plugin's claim is 'not applicable', naming its own assumption."""
    from theory.run.cli import main

    rc = main(["check", "examples/section5_counterexample.json", "--claim", EXAMPLE_CLAIM])
    line = json.loads(capsys.readouterr().out)
    assert rc == 0 and line["verdict"] == "not applicable" and "a loss of u" in line["reason"], line


def test_catalogue_renders_the_plugin_claim(plugin):
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        from claims_catalogue import anchor, render_claims
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    text = render_claims(registry.all_claims())
    assert f"## `{EXAMPLE_CLAIM}`: Lemma 1 (descent)" in text and f"(#{anchor(EXAMPLE_CLAIM)})" in text
    assert "- **loss finite at W(0) = 0**" in text and "`tests/test_descent.py`" in text


def test_the_plugins_own_tests_pass(plugin):
    spec = importlib.util.spec_from_file_location("tpg_example_claims_tests", EXAMPLE_PKG / "tests" / "test_descent.py")
    tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tests)
    tests.test_planted_rise_is_rejected()
    tests.test_descent_holds()


def _fake(monkeypatch, *entry_points):
    monkeypatch.setattr(registry, "_entry_points", lambda: list(entry_points))


def _ep(name, value):
    return EntryPoint(name=name, value=value, group=registry.ENTRY_POINT_GROUP)


@pytest.mark.parametrize("value, says", [
    ("no_such_module_for_tpg:claims", "ModuleNotFoundError"),
    ("theory.claims:ENTRY_POINT_GROUP", "expected Claim objects, got a str"),   # an iterable of the wrong things
    ("theory.core.decision:ESCALATION", "expected an iterable of Claim objects, got int"),
    ("theory.claims:_boom", "RuntimeError: boom"),
])
def test_a_broken_entry_point_is_one_warning_naming_it(monkeypatch, value, says):
    monkeypatch.setattr(registry, "_boom", lambda: (_ for _ in ()).throw(RuntimeError("boom")), raising=False)
    _fake(monkeypatch, _ep("broken", value))
    with pytest.warns(registry.ClaimPluginWarning) as caught:
        claims = registry.all_claims()
    assert [c.name for c in claims] == [c.name for c in _builtin()]
    (w,) = caught
    text = str(w.message)
    assert "\n" not in text and "'broken'" in text and value in text and says in text, text


def test_a_taken_name_keeps_its_first_claim(monkeypatch, plugin):
    theorem1 = registry.claim("li2024.theorem1")
    impostor = Claim(name="li2024.theorem1", paper="x", reference="y", statement="z", assumptions=(), rule="r",
                     calibrations=(), properties=())
    monkeypatch.setattr(plugin, "twice", lambda: [impostor, plugin.DESCENT], raising=False)
    _fake(monkeypatch, _ep("descent", "tpg_example_claims:claims"), _ep("twice", "tpg_example_claims:twice"))
    with pytest.warns(registry.ClaimPluginWarning, match="already taken") as caught:
        claims = registry.all_claims()
    names = [c.name for c in claims]
    assert len(names) == len(set(names)) and names[-1] == EXAMPLE_CLAIM and len(caught) == 2
    assert next(c for c in claims if c.name == "li2024.theorem1") is theorem1


def _builtin():
    from theory.li2024.claims import CLAIMS as LI
    from theory.li2024.factorized_claims import CLAIMS as LI_KQ
    from theory.tian2023.claims import CLAIMS as TIAN

    return [*LI, *LI_KQ, *TIAN]


def test_a_plugin_claim_gets_its_dashboard_card(plugin, tmp_path):
    """The report's dashboard groups tests by the claims' files: the plugin's claim gets a card under its own
    paper, after the built-in papers, counting the test that ran in its file."""
    from reports import generate

    run_dir = tmp_path / "run"
    (run_dir / "data").mkdir(parents=True)
    tests = [{"nodeid": "tests/test_descent.py::test_descent_holds", "theorem": EXAMPLE_CLAIM, "tagged": True,
              "outcome": "passed", "duration": 0.2},
             {"nodeid": "properties/suite/test_s.py::test_s", "outcome": "passed", "duration": 0.1}]
    (run_dir / "data" / "main.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tests))
    html = generate.render(run_dir).read_text()
    start = html.index(f'data-claim="{EXAMPLE_CLAIM}"')
    card = " ".join(unescape(re.sub(r"<[^>]+>", " ", html[start:html.index("</article>", start)])).split())
    assert plugin.DESCENT.statement in card and "Lemma 1 (descent)" in card, card
    assert "1 test: 1 passed , 0 failed" in card and "tests/test_descent.py (1: 1 passed)" in card, card
    assert html.index(f'data-claim="{EXAMPLE_CLAIM}"') > html.index('data-claim="tian2023.theorem4"')
    assert "A. Researcher (2026)" in html


def test_the_claims_sweep_runs_the_plugin_claim(plugin, tmp_path):
    """The ``claims`` sweep's claim axis is read from the registry when it runs: another package's claim is on
    it by default and is judged by its own check, like the built-in ones."""
    from theory.run.sweep import execute, grid_of, read_records

    assert EXAMPLE_CLAIM in grid_of("claims")["claim"]
    out = tmp_path / "claims.jsonl"
    summary = execute("claims", seeds=1, out=out, overrides=[f"claim={EXAMPLE_CLAIM}", "condition=1"],
                      progress=False)
    recs = list(read_records(out))
    assert [r["params"]["claim"] for r in recs] == [EXAMPLE_CLAIM], recs
    assert recs[0]["verdict"] == "pass", recs[0]
    assert (summary["runs"], summary["verdicts"]) == (1, {"pass": 1}), summary
