"""The HTML report: a small synthetic run is reported completely and correctly.

Two ways in:

* the generator alone, on synthetic collected data written by hand (fast; checks every section, the
  images, the dashboard numbers, the card budget and ``python -m reports.generate``);
* a real nested ``pytest`` run of a synthetic suite in a temporary folder, with and without
  ``-n 2`` (checks the plugin end to end: Hypothesis statistics, events, records, problem files in the
  run folder, the worker files merged by the controller, ``latest``, the re-run and replay commands).

The nested runs use a subprocess so their ``TPG_REPORT_DIR`` never touches this run's.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reports import generate
from reports.plugin import replay_command
from properties.report_helpers import Page, check_page, hypothesis_statistics, write_synthetic_run

pytestmark = pytest.mark.theorem("Report")

REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------------
# Parsing the report
# --------------------------------------------------------------------------------------------------

# --------------------------------------------------------------------------------------------------
# The generator on hand-written collected data
# --------------------------------------------------------------------------------------------------

def test_generator_renders_every_section(tmp_path):
    from theory.claims import all_claims

    run_dir = tmp_path / "20240501-100000-abcd"
    write_synthetic_run(run_dir, n_cards=3)
    out = generate.render(run_dir)
    page = check_page(out)
    # One TPG drawing, one heatmap pair, one curve pair for the single card drawn in full (max_cards=1).
    assert len(page.images) == 3, len(page.images)
    assert page.svgs >= 6 and page.svg_rects > 0, "input histograms missing"
    text = page.text
    for needle in ("Theorem 1", "Theorem 2", "Relaxations",  # dashboard rows
                   *(c.reference for c in all_claims()),  # claim cards
                   "stress", "1234", "--hypothesis-seed=1234", "--hypothesis-profile=stress",  # run + re-run
                   "cyclic", "settings.max_examples=12",  # Hypothesis events and why it stopped
                   "label not in context", "W^svm infeasible", "×3",  # relaxation row, deduplicated
                   "@reproduce_failure", "-p no:xdist",  # the failing test's replay
                   "worker 'gw1' crashed",  # a test only the controller saw
                   "K (vocabulary)", "||W^svm||", "mean correlation"):
        assert needle in text, f"{needle!r} not in the report"
    assert text.count("Drawings left out") == 2, "card budget not applied"
    assert "no property ran" in text  # no test of the synthetic run is in a claim's files
    # The dashboard row of Theorem 2: 1 property, 5 examples generated, 5 judged (100%), 0 passed, 1 failed.
    row = text[text.index("Theorem 2 Li et al. 2024"):][:70]
    assert row.split()[6:12] == ["1", "5", "5", "(100%)", "0", "1"], row


def test_generator_cli_and_bad_folder(tmp_path):
    run_dir = tmp_path / "run"
    write_synthetic_run(run_dir)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "reports.generate", str(run_dir)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    check_page(run_dir / "index.html")
    bad = subprocess.run([sys.executable, "-m", "reports.generate", str(tmp_path / "nothing")], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=120)
    assert bad.returncode == 2 and "not a run folder" in bad.stderr


def test_truncated_worker_line_is_skipped(tmp_path):
    run_dir = tmp_path / "run"
    write_synthetic_run(run_dir)
    with open(run_dir / "data" / "gw1.jsonl", "a") as fh:
        fh.write('{"nodeid": "properties/test_b.py::test_cut", "outc')  # a worker killed mid-write
    page = check_page(generate.render(run_dir))
    assert "test_relax" in page.text and "test_cut" not in page.text


# --------------------------------------------------------------------------------------------------
# A real nested pytest run of a synthetic suite
# --------------------------------------------------------------------------------------------------

SYNTH_CONFTEST = """
from hypothesis import settings
pytest_plugins = ["reports.plugin"]
settings.register_profile("ci", max_examples=15, derandomize=True, deadline=None, print_blob=True)
settings.register_profile("stress", max_examples=20, derandomize=False, deadline=None, print_blob=True)
settings.load_profile("ci")
"""

SYNTH_TESTS = '''
import json
import numpy as np
import pytest
from hypothesis import event, given, strategies as st
from reports.record import (record_counterexample, record_figure, record_inputs, record_metrics,
                            record_relaxation, report_dir)

GRAPHS = {"2": {"edges": [[0, 1], [1, 0], [0, 2]], "sccs": [[0, 1], [2]]}}

@pytest.mark.theorem("Theorem 1")
@given(st.integers(2, 9), st.integers(1, 6))
def test_holds(K, n):
    """A property that holds."""
    record_inputs(K=K, n=n, T=min(K, 3), n_sccs=K // 2, dim_sfin=K - 1, svm_norm=float(K) ** 0.5)
    event("cyclic" if K % 2 else "acyclic")

@pytest.mark.theorem("Theorem 2")
@given(st.integers(0, 1000))
def test_breaks(x):
    """Fails for x >= 10: records one card, writes its problem file into the run folder."""
    record_inputs(K=x)
    if x >= 10:
        problem = {"embeddings": [[1, 0, 0], [0, 1, 0], [0, 0, 1]], "sequences": [[0, 1, 2]], "labels": [0], "loss": "log"}
        path = report_dir() / "problem-breaks.json"
        path.write_text(json.dumps(problem))
        record_counterexample(title=f"x = {x}", problem=problem, what_fails="x too large", amount=x,
                              problem_file=str(path), replay=f"python -m theory check {path}", E=np.eye(3),
                              graphs=GRAPHS, svm_tokens=np.eye(3), fin_tokens=-np.eye(3),
                              curves={"tau": [1, 10, 100], "correlation": [0.1, 0.5, 0.9], "finite_error": [1, 0.1, 0.01]})
    assert x < 10

@pytest.mark.theorem("Relaxations")
def test_relaxed():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import io
    fig, ax = plt.subplots(figsize=(2, 1.5)); ax.plot([0, 1], [1, 0]); buf = io.BytesIO(); fig.savefig(buf, format="png")
    record_figure("a figure", buf.getvalue())
    record_relaxation(theorem="Theorem 1", relaxation="tied head", expected="fails", outcome="fails", reason="synthetic")
    record_metrics(mean=0.5)

@pytest.mark.skip(reason="synthetic skip")
def test_skipped():
    pass

def test_unmarked():
    pass
'''


def run_synthetic(tmp_path: Path, *args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    (tmp_path / "conftest.py").write_text(SYNTH_CONFTEST)
    (tmp_path / "test_synth.py").write_text(textwrap.dedent(SYNTH_TESTS))
    extra = env or {}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for name in ("PYTEST_ADDOPTS", "TPG_REPORT_OBSERVATIONS", "TPG_REPORT_KEEP"):
        env.pop(name, None)
    env.update(extra)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path),
                           "--report-root", str(tmp_path / "reports"), *args, "test_synth.py"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    latest = tmp_path / "reports" / "latest"
    assert latest.exists(), f"no reports/latest\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done, latest.resolve()


@pytest.mark.parametrize("workers", [None, "2"], ids=["no-xdist", "xdist-2"])
def test_nested_run_is_reported(tmp_path, workers):
    args = ["-n", workers] if workers else ["-p", "no:xdist"]
    done, run_dir = run_synthetic(tmp_path, *args)
    assert done.returncode == 1, done.stdout[-3000:]  # test_breaks fails; the report must not hide it
    assert "HTML report:" in done.stdout and "WARNING tpg-report" not in done.stdout, done.stdout[-3000:]
    data_files = sorted(p.name for p in (run_dir / "data").glob("*.jsonl"))
    if workers:
        assert data_files and all(f.startswith("gw") for f in data_files), data_files
    else:
        assert data_files == ["main.jsonl"]
    run = generate.load_run(run_dir)
    assert run["workers"] == (2 if workers else 0)
    tests = run["tests"]
    assert {t.split("::")[1] for t in tests} == {"test_holds", "test_breaks", "test_relaxed", "test_skipped",
                                                 "test_unmarked"}, sorted(tests)
    holds = tests["test_synth.py::test_holds"]
    assert holds["outcome"] == "passed" and holds["theorem"] == "Theorem 1"
    assert holds["hypothesis"][0]["examples"] == 15 and set(holds["hypothesis"][0]["events"]) == {"cyclic", "acyclic"}
    assert len(holds["records"]["inputs"]) >= 15
    breaks = tests["test_synth.py::test_breaks"]
    assert breaks["outcome"] == "failed" and breaks["hypothesis"][0]["shrink_steps"] > 0
    # Inputs met while shrinking are not coverage: only the examples tried plus the final replay.
    assert len(breaks["records"]["inputs"]) <= breaks["hypothesis"][0]["examples"] + 1
    assert breaks["reproduce_blob"] and breaks["reproduce_blob"].startswith("@reproduce_failure")
    cards = breaks["records"]["counterexample"]
    assert [c["title"] for c in cards] == ["x = 10"], "one card, from the shrunk example"
    assert (run_dir / "problem-breaks.json").exists(), "problem file not written into the run folder"
    assert tests["test_synth.py::test_skipped"]["outcome"] == "skipped"
    unmarked = tests["test_synth.py::test_unmarked"]
    assert unmarked["theorem"] is None and not unmarked["tagged"] and unmarked["group"] == "Synth, untagged", unmarked
    page = check_page(run_dir / "index.html")
    assert len(page.images) == 4  # the recorded figure + the card's graph, heatmaps and curves
    assert "x too large" in page.text and "problem-breaks.json" in page.text
    assert "test_breaks( x=10, )" in page.text, "Hypothesis's falsifying example not shown"
    assert "python -m pytest test_synth.py::test_breaks -p no:xdist --hypothesis-profile=ci" in page.text


def test_stress_run_gets_a_seed_that_replays(tmp_path):
    """A random profile gets a seed, handed to the xdist workers; the report's replay command (no xdist)
    then draws exactly the examples the worker drew."""
    done, run_dir = run_synthetic(tmp_path, "-n", "2", "--hypothesis-profile=stress", "-k", "holds")
    assert done.returncode == 0, done.stdout[-3000:]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["profile"] == "stress" and isinstance(run["seed"], int)
    assert f"--hypothesis-seed={run['seed']}" in run["rerun"] and "--hypothesis-profile=stress" in run["rerun"]
    first = generate.load_run(run_dir)["tests"]["test_synth.py::test_holds"]["records"]["inputs"]
    command = shlex.split(replay_command(run, "test_synth.py::test_holds"))
    assert command[:3] == [os.path.abspath(sys.executable), "-m", "pytest"]  # the interpreter that ran
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, *command[1:], "--report-root", str(tmp_path / "reports")],
                   capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    run_dir2 = (tmp_path / "reports" / "latest").resolve()
    assert run_dir2 != run_dir
    second = generate.load_run(run_dir2)["tests"]["test_synth.py::test_holds"]["records"]["inputs"]
    assert len(first) == 20 and first == second


@pytest.mark.slow
def test_failure_replays_from_its_blob(tmp_path):
    """A failing test's replay command (report card) carries its blob: run as printed, it executes the
    shrunk failing example once and fails; a malformed blob or a selection of several Hypothesis tests
    is a one-line usage error."""
    done, run_dir = run_synthetic(tmp_path, "-n", "2", "--hypothesis-profile=stress", "-k", "breaks")
    assert done.returncode == 1, done.stdout[-3000:]
    run = generate.load_run(run_dir)
    breaks = run["tests"]["test_synth.py::test_breaks"]
    command = shlex.split(replay_command(run, "test_synth.py::test_breaks", breaks["reproduce_blob"]))
    assert command[-1] == "--replay-blob=" + breaks["reproduce_blob"].lstrip("@"), command
    assert "--replay-blob=reproduce_failure(" in (run_dir / "index.html").read_text(), "the card gives no blob replay"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)

    def run_replay(*args):
        return subprocess.run([sys.executable, *args, "--report-root", str(tmp_path / "reports")],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)

    replay = run_replay(*command[1:])
    assert replay.returncode == 1 and "x=10" in replay.stdout, replay.stdout[-3000:]
    again = generate.load_run((tmp_path / "reports" / "latest").resolve())["tests"]["test_synth.py::test_breaks"]
    assert again["outcome"] == "failed" and again["records"]["inputs"] == [{"K": 10}], again["records"].get("inputs")
    for bad in (["test_synth.py", "-p", "no:xdist", command[-1]],
                ["test_synth.py::test_breaks", "-p", "no:xdist", "--replay-blob=not a blob!"]):
        out = run_replay("-m", "pytest", *bad)
        assert out.returncode == 4 and "--replay-blob" in out.stderr and "Traceback" not in out.stderr, \
            (out.returncode, out.stderr[-2000:])


def test_generation_failure_warns_but_keeps_the_result(tmp_path):
    (tmp_path / "conftest.py").write_text(SYNTH_CONFTEST + "\nimport reports.generate as g\n"
                                          "def _boom(*a, **k):\n    raise RuntimeError('synthetic breakage')\n"
                                          "g.render = _boom\n")
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    pass\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                           "--rootdir", str(tmp_path), "--report-root", str(tmp_path / "reports")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0 and "1 passed" in done.stdout
    warnings = [line for line in done.stdout.splitlines() if "WARNING tpg-report" in line]
    assert len(warnings) == 1 and "synthetic breakage" in warnings[0], done.stdout[-2000:]


def test_old_runs_are_pruned_and_nothing_else(tmp_path):
    from reports.plugin import _prune

    runs = [tmp_path / f"20240501-1000{i:02d}-abcd" for i in range(5)]
    for r in runs:
        r.mkdir()
    (tmp_path / "templates").mkdir()
    (tmp_path / "notes-20240501").mkdir()
    _prune(tmp_path, runs[0], keep=2)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([runs[0].name, runs[3].name, runs[4].name, "notes-20240501", "templates"]), left


# --------------------------------------------------------------------------------------------------
# Judged, not just generated: the floor and the targets (properties/judging.py)
# --------------------------------------------------------------------------------------------------

SYNTH_JUDGED = '''
import pytest
from hypothesis import given, strategies as st
from properties.judging import aim, not_judged

@pytest.mark.judged(floor=0.5)
@given(st.integers(0, 9))
def test_mostly_rejected(x):
    """Judges only x >= 8: about 20%, below its floor."""
    if x < 8:
        not_judged("x below 8")

@pytest.mark.judged(floor=0.5)
@given(st.integers(0, 999))
def test_mostly_judged(x):
    if x < 200:
        not_judged("x below 200")
    aim("closeness", x / 999, f"x={x}")

@given(st.integers(0, 99))
def test_default_floor(x):
    """No marker: the default floor (50%) applies."""
    if x < 90:
        not_judged("x below 90")
'''


def test_judged_floor_and_targets_are_reported(tmp_path):
    """A property that judged fewer examples than its floor fails with the counts by reason (marked or
    by the default floor); one above it passes; its judged counts and best target reach the report."""
    (tmp_path / "conftest.py").write_text(SYNTH_CONFTEST)
    (tmp_path / "test_judged.py").write_text(textwrap.dedent(SYNTH_JUDGED))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                           "--rootdir", str(tmp_path), "--report-root", str(tmp_path / "reports"), "test_judged.py"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    out = done.stdout
    assert done.returncode == 1, out[-3000:]
    assert "FAILED test_judged.py::test_mostly_rejected" in out and "FAILED test_judged.py::test_default_floor" in out, out[-3000:]
    assert "test_mostly_judged" not in out.split("short test summary")[-1], out[-3000:]
    assert "below this property's floor of 50%; not judged: x below 8:" in out, out[-3000:]
    run = generate.load_run((tmp_path / "reports" / "latest").resolve())
    ok = run["tests"]["test_judged.py::test_mostly_judged"]
    stats = ok["hypothesis"][-1]
    assert stats["judged"] == 15 and set(stats["not_judged"]) <= {"x below 200"}, stats
    assert ok["judged"]["floor"] == 0.5 and ok["judged"]["generated"] == 15 + sum(stats["not_judged"].values())
    best = ok["records"]["targets"]
    assert [e["label"] for e in best] == ["closeness"] and best[0]["example"] == f"x={round(best[0]['score'] * 999)}"
    assert best[0]["score"] >= 200 / 999, best
    page = check_page(tmp_path / "reports" / "latest" / "index.html")
    assert "Closest to the edge" in page.text and "closeness" in page.text
    assert "Judged 15 of" in page.text


def test_observations_are_written_for_tyche(tmp_path):
    """Every Hypothesis test case of the run is an observation line (Tyche's format: type, status,
    representation, features) in the run folder, linked from the report; ``--no-observations`` turns it off."""
    done, run_dir = run_synthetic(tmp_path, "-p", "no:xdist", "-k", "holds")
    assert done.returncode == 0, done.stdout[-3000:]
    # Gzipped when the run ends; nothing left uncompressed.
    assert sorted(p.name for p in (run_dir / "observations").iterdir()) == ["main_info.jsonl.gz",
                                                                            "main_testcases.jsonl.gz"]
    with gzip.open(run_dir / "observations" / "main_testcases.jsonl.gz", "rt") as fh:
        lines = [json.loads(x) for x in fh]
    cases = [o for o in lines if o["type"] == "test_case" and o["property"].endswith("test_holds")]
    assert len(cases) >= 15 and {o["status"] for o in cases} == {"passed"}, [o["status"] for o in cases]
    assert all("representation" in o and "features" in o for o in cases)
    page = (run_dir / "index.html").read_text()
    assert 'href="observations/main_testcases.jsonl.gz"' in page and f"{len(lines)} test cases" in page
    assert "--no-observations" in page and "TPG_REPORT_OBSERVATIONS=0" in page, "the report does not say how to turn them off"
    done, run_dir = run_synthetic(tmp_path, "-p", "no:xdist", "-k", "holds", "--no-observations")
    assert not (run_dir / "observations").exists()
    assert "off: --no-observations" in Page((run_dir / "index.html").read_text()).text
    done, run_dir = run_synthetic(tmp_path, "-p", "no:xdist", "-k", "holds", env={"TPG_REPORT_OBSERVATIONS": "0"})
    assert not (run_dir / "observations").exists()


def test_observations_with_xdist_are_gzipped_before_the_report_counts_them(tmp_path):
    """Each worker gzips its own files before it tells the controller it finished: the controller's report
    counts every case from the .gz files."""
    done, run_dir = run_synthetic(tmp_path, "-n", "2", "-k", "holds or breaks")
    names = sorted(p.name for p in (run_dir / "observations").iterdir())
    assert names and all(n.endswith(".jsonl.gz") for n in names), names
    cases = 0
    for f in (run_dir / "observations").glob("*_testcases.jsonl.gz"):
        with gzip.open(f, "rt") as fh:
            cases += sum(1 for _ in fh)
    assert cases > 15 and f"{cases} test cases" in Page((run_dir / "index.html").read_text()).text


def test_reader_accepts_gzipped_and_cut_files(tmp_path):
    """The generator reads data/*.jsonl.gz as well as .jsonl (a gzipped run re-renders), and a gzip stream
    cut short by a killed process yields the lines it holds."""
    run_dir = tmp_path / "run"
    write_synthetic_run(run_dir)
    for f in (run_dir / "data").glob("*.jsonl"):
        data = f.read_bytes()
        (f.parent / (f.name + ".gz")).write_bytes(gzip.compress(data))
        f.unlink()
    page = check_page(generate.render(run_dir))
    assert "test_relax" in page.text and "test_t2" in page.text
    obs = run_dir / "observations"
    obs.mkdir()
    whole = gzip.compress(b"".join(b'{"type": "test_case", "n": %d}\n' % i for i in range(2000)))
    (obs / "gw0_testcases.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    (obs / "gw1_testcases.jsonl").write_text('{"type": "test_case"}\n' * 3)
    found = generate._observations(run_dir)
    assert found["files"] == ["observations/gw0_testcases.jsonl.gz", "observations/gw1_testcases.jsonl"]
    assert 3 < found["cases"] < 2003, found


def test_every_project_module_is_loaded_before_the_first_draw():
    """Hypothesis draws toward the constants of the local modules loaded at each draw, so a test's examples
    depend on its seed alone only if every project module is loaded before any test runs (conftest's
    ``_import_project_modules``; measured without it: a one-test replay and the same test after
    test_theorem1 drew different examples from the 5th on)."""
    import sys

    missing = []
    for package in ("theory", "strategies", "properties", "reports", "suite_db"):
        for path in sorted((REPO / package).rglob("*.py")):
            if "example_claim_pkg" in path.parts:
                # A separate distribution standing for another package (properties/fixtures): imported only
                # inside the plugin test, under its own name, and removed from sys.modules at its teardown.
                continue
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if parts[-1] != "__main__" and name not in sys.modules:
                missing.append(name)
    assert not missing, f"project modules not loaded before the tests ran: {missing}"


# --------------------------------------------------------------------------------------------------
# A report that tells the truth at a glance (issue 30): the verdict, xpasses, relaxations, groups
# --------------------------------------------------------------------------------------------------

class Verdict(HTMLParser):
    """The header's verdict element (id ``verdict``): its classes, exit status and text; the xpass note."""

    def __init__(self, text: str):
        super().__init__()
        self.cls = self.exit = self.text = None
        self.xpass_note = False
        self._in = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id") == "verdict":
            self.cls, self.exit, self._in, self.text = a.get("class", ""), a.get("data-exitstatus"), True, ""
        if a.get("id") == "xpass-note":
            self.xpass_note = True

    def handle_endtag(self, tag):
        self._in = False

    def handle_data(self, data):
        if self._in:
            self.text += data


def _outcome_run(run_dir: Path, outcomes: dict, exitstatus) -> None:
    """A run folder whose tests have the given outcomes (node id -> outcome) and a recorded exit status."""
    (run_dir / "data").mkdir(parents=True)
    run = {"run_id": run_dir.name, "profile": "ci", "derandomize": True, "args": [], "rootdir": "/repo"}
    if exitstatus is not None:
        run["exitstatus"] = exitstatus
    (run_dir / "run.json").write_text(json.dumps(run))
    lines = [{"nodeid": nodeid, "theorem": "Theorem 1", "tagged": True, "outcome": outcome, "duration": 0.1,
              "text": "", "xfail_reason": "the gap named here" if outcome.startswith("x") else None}
             for nodeid, outcome in outcomes.items()]
    (run_dir / "data" / "main.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


@pytest.mark.parametrize("outcomes, exitstatus, green, says", [
    # The case: a green CI run whose only oddity is a non-strict xfail that passed.
    ({"p/test_a.py::t1": "passed", "p/test_a.py::t2": "xpassed", "p/test_a.py::t3": "xfailed"}, 0, True,
     "none of 3 properties failed: 1 passed, 1 xfailed"),
    ({"p/test_a.py::t1": "passed", "p/test_a.py::t2": "failed"}, 1, False, "1 of 2 properties failed"),
    # Interrupted, or a usage error: no test failed, and still not green.
    ({"p/test_a.py::t1": "passed"}, 2, False, "pytest exited with status 2 (interrupted)"),
    ({}, 5, False, "pytest exited with status 5 (no tests collected)"),
    ({"p/test_a.py::t1": "passed", "p/test_a.py::t2": "skipped"}, 0, True, "none of 2 properties failed: 1 passed, 1 skipped"),
    # No exit status recorded (a hand-written run.json): the failures decide, and the header says so.
    ({"p/test_a.py::t1": "passed"}, None, True, "all 1 properties passed · exit status not recorded"),
], ids=["xpass-exit0", "failed-exit1", "interrupted", "no-tests", "skipped", "no-status"])
def test_header_verdict_is_the_exit_status(tmp_path, outcomes, exitstatus, green, says):
    run_dir = tmp_path / "run"
    _outcome_run(run_dir, outcomes, exitstatus)
    html = generate.render(run_dir).read_text()
    v = Verdict(html)
    assert v.cls == ("status good" if green else "status bad"), (v.cls, v.text)
    assert says in v.text, v.text
    assert v.exit == ("" if exitstatus is None else str(exitstatus))
    has_xpass = "xpassed" in outcomes.values()
    assert v.xpass_note == has_xpass
    if has_xpass:
        page = Page(html)
        assert "xpasses" in page.ids and "the gap named here" in page.text
        failing = html[html.index('id="counterexamples"'):html.index('id="xpasses"')]
        assert "No property failed." in failing and "p/test_a.py::t2" not in failing, "the xpass is listed as a failure"
        assert "(1 failed)" not in page.text.split("Self-attention")[0], "the title counts the xpass as a failure"


def test_xpass_from_a_real_run_is_not_a_failure(tmp_path):
    """Nested run: a non-strict xfail that passes exits 0, is recorded as xpassed (by the worker file and by
    the controller), with its reason, and the header is green."""
    (tmp_path / "conftest.py").write_text(SYNTH_CONFTEST)
    (tmp_path / "test_x.py").write_text(textwrap.dedent('''
        import pytest

        @pytest.mark.xfail(strict=False, reason="stale?")
        def test_xpass():
            pass

        @pytest.mark.xfail(strict=True, reason="strict")
        def test_strict_xpass():
            pass
        '''))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)
    for args, code in ((["-k", "test_xpass"], 0), ([], 1)):
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                               "--rootdir", str(tmp_path), "--report-root", str(tmp_path / "reports"), *args],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert done.returncode == code, done.stdout[-2000:]
        run_dir = (tmp_path / "reports" / "latest").resolve()
        run = generate.load_run(run_dir)
        assert run["exitstatus"] == code and run["outcomes"]["test_x.py::test_xpass"]["outcome"] == "xpassed"
        assert run["tests"]["test_x.py::test_xpass"]["outcome"] == "xpassed"
        assert run["tests"]["test_x.py::test_xpass"]["xfail_reason"] == "stale?"
        v = Verdict((run_dir / "index.html").read_text())
        assert v.cls == ("status good" if code == 0 else "status bad") and v.xpass_note, (v.cls, v.text)
    # pytest fails a strict xfail that passes: so does the report.
    assert run["tests"]["test_x.py::test_strict_xpass"]["outcome"] == "failed"
    assert "1 of 2 properties failed" in v.text, v.text


def test_relaxation_rows_follow_their_legend(tmp_path):
    """An outcome that is the expected one (with details after it) is green; a different one is amber,
    red when its property failed."""
    assert generate.relaxation_matches("counterexample", "counterexample (n=2, K=3) at head.json")
    assert generate.relaxation_matches("holds", "Holds")
    assert not generate.relaxation_matches("counterexample", "none found")
    assert not generate.relaxation_matches("hold", "holds")
    assert not generate.relaxation_matches("", "")
    run_dir = tmp_path / "run"
    (run_dir / "data").mkdir(parents=True)

    def row(relaxation, expected, outcome):
        return {"theorem": "Theorem 1", "relaxation": relaxation, "expected": expected, "outcome": outcome,
                "reason": "r"}
    lines = [
        {"nodeid": "properties/li2024/test_relaxations.py::test_a[head]", "theorem": "Relaxations", "outcome": "passed",
         "records": {"relaxation": [row("head", "counterexample", "counterexample (n=2, K=3) at head.json")]}},
        {"nodeid": "properties/li2024/test_relaxations.py::test_a[loss]", "theorem": "Relaxations", "outcome": "failed",
         "records": {"relaxation": [row("loss", "counterexample", "none found")]}},
        {"nodeid": "properties/li2024/test_relaxations.py::test_b", "theorem": "Relaxations", "outcome": "passed",
         "records": {"relaxation": [row("step", "holds", "counterexample (n=1, K=2) at step.json")]}},
    ]
    (run_dir / "data" / "main.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    html = generate.render(run_dir).read_text()
    table = html[html.index('id="relaxations"'):]
    table = table[:table.index("</table>")]
    states = re.findall(r'<tr class="(\w+)"><td>Theorem 1</td><td>(\w+)</td>', table)
    assert states == [("good", "head"), ("bad", "loss"), ("warn", "step")], states
    ctx = generate.build_context(generate.load_run(run_dir), run_dir)
    assert [r["state"] for r in ctx["relaxations"]] == ["good", "bad", "warn"]


@pytest.mark.parametrize("nodeid, group, paper", [
    ("properties/li2024/test_theorem1.py::test_helper", "Li et al. 2024, untagged", "Li et al. 2024"),
    ("properties/test_theorem1.py::test_helper", "Li et al. 2024, untagged", "Li et al. 2024"),
    ("properties/tian2023/test_model.py::test_x", "Tian et al. 2023, untagged", "Tian et al. 2023"),
    ("properties/test_scansnap_model.py::test_x", "Tian et al. 2023, untagged", "Tian et al. 2023"),
    ("properties/suite/test_sweep.py::test_grid[a-b]", "Suite machinery", "suite"),
    ("properties/test_sweep.py::test_grid[a-b]", "Suite machinery", "suite"),
    ("properties/test_shared_database.py::test_pool", "Suite machinery", "suite"),
    ("properties/core/test_conic.py::test_x", "Core, untagged", "both"),
    ("properties/li2024/deep/test_x.py::test_y", "Li et al. 2024, untagged", "Li et al. 2024"),
    ("properties/newpaper_2025/test_x.py::test_y", "Newpaper 2025, untagged", ""),
    ("/abs/repo/properties/tian2023/test_model.py::test_x", "Tian et al. 2023, untagged", "Tian et al. 2023"),
    ("test_synth.py::test_unmarked", "Synth, untagged", ""),
])
def test_untagged_tests_are_grouped_by_folder_in_both_layouts(nodeid, group, paper):
    assert generate.untagged_group(nodeid) == (group, paper)


def test_untagged_tests_sit_apart_from_the_theorem_rows(tmp_path):
    """On the dashboard, the theorem rows hold only theorem names; untagged tests (also old lines whose
    "theorem" was their module's name) are rows of their own section, under readable names."""
    run_dir = tmp_path / "run"
    write_synthetic_run(run_dir)
    with open(run_dir / "data" / "gw1.jsonl", "a") as fh:
        # (test_helpers_synth.py is in no claim's files: a test in one would sit on the claim's card instead)
        for nodeid in ("properties/suite/test_sweep.py::test_grid", "properties/li2024/test_helpers_synth.py::test_helper"):
            fh.write(json.dumps({"nodeid": nodeid, "theorem": None, "tagged": False, "outcome": "passed"}) + "\n")
    html = generate.render(run_dir).read_text()
    theorems = html[html.index('<tbody class="theorems">'):html.index("</tbody>")]
    untagged = html[html.index('<tbody class="untagged">'):]
    untagged = untagged[:untagged.index("</tbody>")]
    assert "test_b" not in theorems and "test_sweep" not in theorems and "test_helpers" not in theorems, theorems
    assert "Suite machinery" in untagged and "Li et al. 2024, untagged" in untagged, untagged
    # The old line from properties/test_b.py (its "theorem" was its module's name) counts as untagged:
    # in the flat layout, a module that is not a paper's belongs to the suite machinery.
    ctx = generate.build_context(generate.load_run(run_dir), run_dir)
    assert [g["name"] for g in ctx["untagged_groups"]] == ["Li et al. 2024, untagged", "Suite machinery"]
    suite = next(g for g in ctx["untagged_groups"] if g["name"] == "Suite machinery")
    # test_b: test_plain (skipped) and test_crashed (only the controller saw it, failed); test_sweep passed
    assert suite["modules"] == ["B", "Sweep"] and (suite["properties"], suite["skipped"], suite["failed"]) == (3, 1, 1), suite
    assert all(g["tagged"] for g in ctx["theorem_groups"])
    check_page(run_dir / "index.html")


# --------------------------------------------------------------------------------------------------
# The dashboard grouped paper -> claim (issue 29): one card per claim of the registry
# --------------------------------------------------------------------------------------------------

class ClaimCards(HTMLParser):
    """The dashboard's claim cards (``<article class="claim ..." data-claim=NAME>``): each card's text and
    classes, in page order, and the paper headings before them."""

    def __init__(self, text: str):
        super().__init__()
        self.cards: dict[str, dict] = {}
        self.order: list[str] = []
        self.papers: list[str] = []
        self._card = None
        self._depth = 0
        self._paper = None
        self.feed(text)
        for c in self.cards.values():
            c["text"] = " ".join("".join(c.pop("parts")).split())

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "article" and "data-claim" in a:
            self._card = self.cards[a["data-claim"]] = {"cls": a.get("class", ""), "parts": [], "hrefs": []}
            self.order.append(a["data-claim"])
            self._depth = 0
        elif self._card is not None:
            if tag == "article":
                self._depth += 1
            if tag == "a":
                self._card["hrefs"].append(a.get("href", ""))
        if tag == "h3" and "paper" in (a.get("class") or "").split():
            self._paper = []

    def handle_endtag(self, tag):
        if tag == "article" and self._card is not None:
            if self._depth == 0:
                self._card = None
            else:
                self._depth -= 1
        if tag == "h3" and self._paper is not None:
            self.papers.append(" ".join("".join(self._paper).split()))
            self._paper = None

    def handle_data(self, data):
        if self._card is not None:
            self._card["parts"].append(data)
        if self._paper is not None:
            self._paper.append(data)


def _judged_hyp(examples, not_judged):
    return {**hypothesis_statistics(examples), "judged": examples, "not_judged": not_judged}


def _claims_run(run_dir: Path, claims) -> dict:
    """A run whose tests live in the claims' files (one passing test per file; the first claim's first file
    also a failing one and undecided examples; every file shared by several claims undecided ones too),
    plus two tests in no claim's file.  Returns what each claim's card must say: tests, passed, failed,
    undecided."""
    (run_dir / "data").mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"run_id": run_dir.name, "profile": "ci", "derandomize": True,
                                                  "args": [], "rootdir": "/repo", "exitstatus": 1}))
    files = list(dict.fromkeys(f for c in claims for f in c.properties))
    shared = {f for f in files if sum(f in c.properties for c in claims) > 1}
    first = claims[0].properties[0]
    lines, per_file = [], {}
    for i, f in enumerate(files):
        undecided = 3 if f == first else (i + 1 if f in shared else 0)
        reasons = {"undecided at the maximum budget": undecided} if undecided else {}
        if f == first:
            reasons["10^4 time units exceed MAX_STEPS"] = 2
        lines.append({"nodeid": f"{f}::test_holds", "theorem": "Theorem 1", "tagged": True, "outcome": "passed",
                      "duration": 0.5, "hypothesis": [_judged_hyp(20, reasons)]})
        per_file[f] = {"tests": 1, "passed": 1, "failed": 0, "undecided": undecided}
    lines.append({"nodeid": f"{first}::test_breaks", "theorem": "Theorem 1", "tagged": True, "outcome": "failed",
                  "duration": 0.1, "text": "AssertionError: planted", "hypothesis": []})
    per_file[first].update(tests=2, failed=1)
    lines += [{"nodeid": "properties/suite/test_machinery_synth.py::test_x", "outcome": "passed", "duration": 0.1},
              {"nodeid": "properties/li2024/test_other_synth.py::test_y", "theorem": "Engine", "tagged": True,
               "outcome": "passed", "duration": 0.1}]
    (run_dir / "data" / "main.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return {c.name: {k: sum(per_file[f][k] for f in c.properties) for k in ("tests", "passed", "failed", "undecided")}
            for c in claims}


def test_dashboard_has_one_card_per_claim(tmp_path):
    """Paper -> claim: a run whose tests live in the claims' files renders one card per claim of the registry,
    in its order under its paper, saying the claim's statement and verdict rule and how its tests did --
    outcomes, judged and not-judged counts by reason, and the UNDECIDED outcomes as ``undecided: N``.  A
    file several claims list counts for each; tests in no claim's files stay in the table of groups."""
    from theory.claims import all_claims

    claims = all_claims()
    run_dir = tmp_path / "run"
    want = _claims_run(run_dir, claims)
    html = generate.render(run_dir).read_text()
    page = check_page(run_dir / "index.html")
    found = ClaimCards(html)
    assert found.order == [c.name for c in claims], found.order
    for c in claims:
        card, w = found.cards[c.name], want[c.name]
        for needle in (c.reference, c.statement, c.rule, *c.calibrations):
            assert " ".join(needle.split()) in card["text"], (c.name, needle, card["text"])
        assert f"undecided: {w['undecided']}" in card["text"], (c.name, w, card["text"])
        noun = "test" if w["tests"] == 1 else "tests"
        assert f"{w['tests']} {noun}: {w['passed']} passed, {w['failed']} failed" in card["text"], (c.name, card["text"])
        assert ("bad" if w["failed"] else "good") in card["cls"].split(), (c.name, card["cls"])
        assert all(h[1:] in page.ids for h in card["hrefs"] if h.startswith("#")), card["hrefs"]
    first = found.cards[claims[0].name]["text"]
    assert "not judged: undecided at the maximum budget 3, 10^4 time units exceed MAX_STEPS 2" in first, first
    assert "test_breaks" in first, "the failing test is not named on its claim's card"
    # Papers in the registry's order, each named once.
    papers = list(dict.fromkeys(c.name.split(".")[0] for c in claims))
    assert len(found.papers) == len(papers), found.papers
    assert found.papers[0].startswith("Li et al. 2024") and found.papers[-1].startswith("Tian et al. 2023"), found.papers
    # The tests in no claim's files: rows of the table, not on any card; the header counts every test.
    table = html[html.index('id="dashboard-table"'):]
    table = table[:table.index("</table>")]
    assert "Suite machinery" in table and ">Engine<" in table and "Theorem 1" not in table, table
    assert not any("test_x" in c["text"] or "test_y" in c["text"] for c in found.cards.values())
    n_tests = len({f for c in claims for f in c.properties}) + 3
    assert f"1 of {n_tests} properties failed" in Verdict(html).text


def test_a_claim_with_no_test_says_so(tmp_path):
    """A claim none of whose files ran is on the dashboard all the same, grey, saying so."""
    run_dir = tmp_path / "run"
    (run_dir / "data").mkdir(parents=True)
    (run_dir / "data" / "main.jsonl").write_text(json.dumps({"nodeid": "properties/suite/test_s.py::test_s",
                                                             "outcome": "passed"}) + "\n")
    from theory.claims import all_claims

    found = ClaimCards(generate.render(run_dir).read_text())
    assert found.order == [c.name for c in all_claims()]
    for name, card in found.cards.items():
        assert "no property ran" in card["text"] and "none" in card["cls"].split(), (name, card)


def test_dashboard_falls_back_without_the_registry(tmp_path, monkeypatch):
    """Where theory.claims cannot be imported, the dashboard is the theorem table of before: the theorem
    rows (shown even when none ran), tests grouped by their marker, no claim card, and a note saying why."""
    from theory.claims import all_claims

    run_dir = tmp_path / "run"
    _claims_run(run_dir, all_claims())
    monkeypatch.setitem(sys.modules, "theory.claims", None)  # "import theory.claims" raises ImportError
    html = generate.render(run_dir).read_text()
    check_page(run_dir / "index.html")
    assert not ClaimCards(html).cards
    theorems = html[html.index('<tbody class="theorems">'):]
    theorems = theorems[:theorems.index("</tbody>")]
    for name in generate.ALWAYS_SHOWN:
        assert f">{name}<" in theorems, (name, theorems)
    assert "Theorem dashboard" in html and "theory.claims cannot be imported" in html


def test_the_dashboard_imports_only_the_claims_registry(tmp_path):
    """Rendering a report loads no project module beyond what theory.claims itself loads (no training, no
    solver): measured in a fresh process, against the modules loaded by importing the registry first."""
    from theory.claims import all_claims

    run_dir = tmp_path / "run"
    _claims_run(run_dir, all_claims())
    code = ("import sys\n"
            "from theory.claims import all_claims\n"
            "all_claims()\n"
            "before = set(sys.modules)\n"
            "from reports import generate\n"
            f"generate.render({str(run_dir)!r})\n"
            "new = sorted(m for m in set(sys.modules) - before if m.split('.')[0] in "
            "('theory', 'properties', 'strategies', 'scipy', 'cvxpy', 'clarabel', 'numba', 'hypothesis'))\n"
            "assert not new, new\n"
            "assert 'theory.claims' in before\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "claim" in (run_dir / "index.html").read_text()


@pytest.mark.slow
def test_report_keep_from_the_option_or_the_environment(tmp_path):
    """--report-keep N wins; else TPG_REPORT_KEEP; a malformed value is a one-line usage error."""
    for keep_args, env, left in (([], {"TPG_REPORT_KEEP": "2"}, 2), (["--report-keep=1"], {"TPG_REPORT_KEEP": "3"}, 1)):
        root = tmp_path / f"keep-{left}"
        root.mkdir()
        for _ in range(3):
            run_synthetic(root, "-p", "no:xdist", "-k", "unmarked", "--no-observations", *keep_args, env=env)
        runs = [p for p in (root / "reports").iterdir() if generate_run_id(p.name)]
        assert len(runs) == left, sorted(p.name for p in runs)
        assert (root / "reports" / "latest").resolve() in [r.resolve() for r in runs]
        assert f"the newest {left}" in (root / "reports" / "latest" / "index.html").read_text()
    bad = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", "--rootdir", str(tmp_path / "keep-1"),
                          "--report-root", str(tmp_path / "r"), "-k", "unmarked", "test_synth.py"],
                         capture_output=True, text=True, cwd=tmp_path / "keep-1", timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO), "TPG_REPORT_KEEP": "many"})
    assert bad.returncode == 4 and "TPG_REPORT_KEEP='many'" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def generate_run_id(name: str) -> bool:
    from reports.plugin import RUN_ID_RE

    return bool(RUN_ID_RE.match(name))


def test_generate_does_not_import_the_plugin():
    """No import cycle: the generator (and its command line) load without the pytest plugin; both take
    the re-run and replay commands from reports.commands."""
    code = ("import sys, reports.generate, reports.commands; "
            "assert 'reports.plugin' not in sys.modules, 'reports.generate imported reports.plugin'; "
            "from reports.plugin import replay_command; assert replay_command is reports.commands.replay_command")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]


def test_overruns_are_counted_apart_from_the_judged_share():
    """Hypothesis's per-phase statistics: a valid case is judged, an invalid one with a ``not judged:``
    event is charged to its reason, an invalid one without is a rejected draw, and an overrun (a draw
    abandoned at the engine's size cap, before any example existed) is counted apart, never charged."""
    from reports.plugin import REJECTED_DRAW, summarize_statistics

    cases = ([{"status": "valid", "events": []}] * 6
             + [{"status": "invalid", "events": ["not judged: radius at rounding level"]}] * 2
             + [{"status": "invalid", "events": []}]
             + [{"status": "overrun", "events": []}] * 5)
    s = summarize_statistics({"generate-phase": {"test-cases": cases, "duration-seconds": 1.0}})
    assert s["judged"] == 6, s
    assert s["not_judged"] == {"radius at rounding level": 2, REJECTED_DRAW: 1}, s
    assert s["overrun"] == 5 and s["invalid"] == 8, s
