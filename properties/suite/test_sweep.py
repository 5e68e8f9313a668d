"""``python -m theory sweep``: the same seeds give the same records in-process and on Dask; ``--resume``; a
worker killed mid-sweep (real ``LocalCluster``, SIGKILL) still leaves every record exactly once; kernels
loaded once per worker; the figure; one-line errors.  Small grids (2 workers, 1 thread each)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from theory.run import sweep

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["K=3", "condition=1,10", "step=0.25,4,64"]  # 6 cells: pass, fail and overflow verdicts
SEEDS = 2


def _keys(recs):
    return [sweep.record_key(r["sweep"], r["params"], r["seed"]) for r in recs]


def _by_key(recs):
    return {k: r for k, r in zip(_keys(recs), recs)}


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "inproc.jsonl"
    s = sweep.execute("theorem1-phase", seeds=SEEDS, out=out, overrides=SMALL, progress=False)
    return s, sweep.read_records(out)


def test_records_are_complete_and_judged(in_process):
    summary, recs = in_process
    assert summary["runs"] == 12 and summary["ran_now"] == 12 and len(recs) == 12
    assert len(set(_keys(recs))) == 12
    verdicts = Counter(r["verdict"] for r in recs)
    assert verdicts["pass"] > 0 and verdicts["fail"] > 0, verdicts  # both phases on this small grid
    for r in recs:
        assert set(r) == {"sweep", "params", "seed", "verdict", "measures"}
        if r["verdict"] in ("pass", "fail") and "reason" not in r["measures"]:
            assert {"growth_ratio", "direction_rate", "finite_error", "top_scc_mass"} <= set(r["measures"])


def test_same_seeds_same_records_on_a_local_cluster(in_process, tmp_path):
    """The command line with ``--workers 2`` (a LocalCluster of spawned worker processes), its progress bar
    on stderr and its figure: the records equal the in-process ones."""
    _, recs = in_process
    out, fig = tmp_path / "cluster.jsonl", tmp_path / "phase.png"
    r = subprocess.run([sys.executable, "-m", "theory", "sweep", "theorem1-phase", "--workers", "2", "--seeds", str(SEEDS),
                        "--out", str(out), "--figure", str(fig), *[a for p in SMALL for a in ("--param", p)]],
                       cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(r.stdout)
    assert s["mode"] == "LocalCluster(2)" and s["ran_now"] == 12 and s["figure"] == str(fig)
    assert "12/12" in r.stderr and "run/s" in r.stderr  # tqdm's bar
    assert fig.read_bytes()[:4] == b"\x89PNG"
    assert _by_key(sweep.read_records(out)) == _by_key(recs)


def test_resume_skips_finished_runs_and_ends_with_the_same_records(in_process, tmp_path):
    _, recs = in_process
    out = tmp_path / "resume.jsonl"
    first = sweep.execute("theorem1-phase", seeds=SEEDS, out=out, overrides=["K=3", "condition=1,10", "step=0.25"],
                          progress=False)
    assert first["ran_now"] == 4
    with open(out, "a") as fh:
        fh.write('{"sweep": "theorem1-phase", "par')  # a torn last line from a killed client
    with pytest.raises(sweep.SweepError, match="--resume"):
        sweep.execute("theorem1-phase", seeds=SEEDS, out=out, overrides=SMALL, progress=False)
    second = sweep.execute("theorem1-phase", seeds=SEEDS, out=out, overrides=SMALL, resume=True, progress=False)
    assert second["skipped_finished"] == 4 and second["ran_now"] == 8
    got = sweep.read_records(out)
    assert sorted(_keys(got)) == sorted(set(_keys(got)))  # each once
    assert _by_key(got) == _by_key(recs)


def test_worker_killed_mid_sweep_every_record_exactly_once(in_process, tmp_path):
    """A real LocalCluster (2 worker processes under nannies); the sweep joins it with ``--scheduler`` from a
    separate process; once the first records are written one worker is SIGKILLed.  Dask reschedules its
    task, the nanny restarts it, and the file ends with every record exactly once, equal to the in-process
    records.  The kernels were loaded once per worker process (the plugin), not per task."""
    from distributed import Client, LocalCluster

    _, recs = in_process
    out = tmp_path / "killed.jsonl"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=50) as cluster, Client(cluster) as client:
        pids = client.run(os.getpid)
        proc = subprocess.Popen([sys.executable, "-m", "theory", "sweep", "theorem1-phase", "--scheduler",
                                 cluster.scheduler_address, "--seeds", str(SEEDS), "--out", str(out), "--quiet",
                                 *[a for p in SMALL for a in ("--param", p)]],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while time.time() < deadline and (not out.exists() or out.read_text().count("\n") < 2):
            time.sleep(0.02)
        lines_at_kill = out.read_text().count("\n") if out.exists() else 0
        victim = sorted(pids.values())[0]
        os.kill(victim, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr[-2000:]
        assert 0 < lines_at_kill < 12, f"the kill was not mid-sweep ({lines_at_kill} records written)"
        got = sweep.read_records(out)
        assert Counter(_keys(got)) == Counter(_keys(recs))  # every record, each exactly once
        assert _by_key(got) == _by_key(recs)
        deadline = time.time() + 30
        while len(client.scheduler_info()["workers"]) < 2 and time.time() < deadline:
            time.sleep(0.1)
        counts = client.run(lambda: __import__("theory.run.sweep", fromlist=["x"]).WARM_UPS["count"])
        assert victim not in client.run(os.getpid).values(), "the killed worker is still there"
        assert all(c == 1 for c in counts.values()), counts


def test_reproduction_sweep_runs_are_the_reproductions_trials(tmp_path):
    """``sweep li-cyclic`` seed s is ``reproduce li-cyclic --trials 1 --seed s``."""
    from argparse import Namespace

    from theory.run.reproduce import run

    s = sweep.execute("li-cyclic", seeds=2, out=tmp_path / "li.jsonl", progress=False)
    assert s["ran_now"] == 2
    for r in sweep.read_records(tmp_path / "li.jsonl"):
        ref = run("li-cyclic", Namespace(trials=1, seed=r["seed"], steps=None))
        assert r["measures"]["correlation"] == pytest.approx(ref["correlation"]["mean"], rel=1e-9)
        assert r["measures"]["top_scc_mass"] == pytest.approx(ref["top_scc_mass"]["mean"], rel=1e-9)


@pytest.mark.parametrize("loss, head", [("ce", "tied"), ("lsq", "random"), ("square", "biorthogonal")])
def test_section5_phase_uses_the_section5_property_criterion(loss, head):
    """section5-phase's verdict is the one ``judge`` of properties/li2024/test_section5.py gives the same run."""
    from properties.li2024.runs import judge
    from theory.li2024.local_convergence import STEPS, train_section5
    from strategies.relaxations import RelaxedCase

    seen = Counter()
    for seed in range(2):
        p = sweep.valid_problem(sweep._cell_seed(seed, 6), 6, 1.0, loss=loss, head=sweep.HEADS[head])
        traj, step = train_section5(p, STEPS)
        case = RelaxedCase("head", p, p.replace(head=None, loss="log"), 1.0, f"{head} head, {loss} loss")
        expected = {"aligned": "pass", "not aligned": "fail", "not judged": "not judged"}[judge(case, traj)]
        verdict, _ = sweep.section5_judge(p, traj, step)
        assert verdict == expected, (loss, head, seed)
        assert sweep.run_one("section5-phase", {"loss": loss, "head": head}, seed)["verdict"] == verdict
        seen[verdict] += 1
    assert seen


def test_figure_and_report_section(in_process, tmp_path, monkeypatch):
    """The PNG, and the report page of a run whose folder holds a sweep file shows its phase diagram."""
    from properties.report_helpers import check_page, write_synthetic_run
    from reports import generate

    _, recs = in_process
    png = sweep.figure(recs)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    counts = sweep.cell_counts(recs, ("step", "condition"))
    assert sum(sum(c.values()) for c in counts.values()) == len(recs)
    monkeypatch.delenv(generate.SWEEP_DIR_ENV, raising=False)
    run_dir = tmp_path / "20240501-100000-abcd"
    write_synthetic_run(run_dir)
    before = len(check_page(generate.render(run_dir)).images)
    (run_dir / "sweeps").mkdir()
    (run_dir / "sweeps" / "theorem1-phase.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (run_dir / "sweeps" / "broken.jsonl").write_text('{"sweep": "x"}\n')
    page = check_page(generate.render(run_dir))
    v = Counter(r["verdict"] for r in recs)
    text = " ".join(page.text.split())
    assert "Sweeps" in text and "theorem1-phase.jsonl" in text, text[-1500:]
    assert f"{len(recs)} runs, " in text and f"{v['pass']} pass" in text, text[-1500:]
    assert "not drawn: KeyError" in text  # a bad sweep file is named, never breaks the report
    assert len(page.images) == before + 1  # the phase diagram


@pytest.mark.parametrize("args, message", [
    (["no-such-sweep"], "unknown sweep 'no-such-sweep'"),
    (["theorem1-phase", "--param", "alpha=1"], "has no parameter 'alpha'"),
    (["theorem1-phase", "--param", "step"], "expected NAME=V1,V2"),
    (["theorem1-phase", "--seeds", "0"], "--seeds"),
    (["theorem1-phase", "--workers", "0"], "--workers"),
    (["theorem1-phase", "--scheduler", "tcp://127.0.0.1:9"], "--scheduler tcp://127.0.0.1:9: cannot connect"),
    (["theorem1-phase", "--scheduler", "tcp://no-port"], "--scheduler tcp://no-port: expected tcp://HOST:PORT"),
    (["theorem1-phase", "--workers", "2", "--scheduler", "tcp://127.0.0.1:9"], "not allowed with argument"),
])
def test_bad_input_is_one_line_and_status_2(args, message, tmp_path, capsys):
    from theory.run.cli import main

    try:
        rc = main(["sweep", *args, "--out", str(tmp_path / "x.jsonl"), "--quiet"])
    except SystemExit as exc:  # argparse errors
        rc = exc.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and len(lines) == 1 and message in lines[0], (rc, err)
    assert not (tmp_path / "x.jsonl").exists() or not (tmp_path / "x.jsonl").read_text()


@pytest.mark.parametrize("name, judge", [("theorem2-phase", "judge_theorem2"), ("automaton-phase", "judge_automaton")])
def test_claim_sweeps_give_the_claims_verdict(tmp_path, name, judge):
    """theorem2-phase and automaton-phase call the claim's own judge: a run's verdict is the one
    :mod:`theory.li2024.claims` gives the same problem (the one ``check`` prints)."""
    from theory.li2024 import claims

    out = tmp_path / "s.jsonl"
    sweep.execute(name, seeds=2, out=out, overrides=["condition=1", "K=3"], progress=False)
    recs = sweep.read_records(out)
    assert len(recs) == 2
    for r in recs:
        p = sweep.valid_problem(sweep._cell_seed(r["seed"], 3, 1.0), 3, 1.0)
        v = getattr(claims, judge)(p)
        expected = {"holds": "pass", "fails": "fail", "undecided": "undecided", "not applicable": "not judged"}
        assert r["verdict"] == expected[v.outcome.value], (r, str(v))
