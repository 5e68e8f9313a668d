"""The report of a run shows that run's work only, and says how to re-run it with the interpreter that ran.

* Sweep files: a run's report draws every ``<run>/sweeps/*.jsonl`` and, of ``<rootdir>/sweeps/`` (or
  ``$ATTN_SUITE_SWEEPS``), only the files modified while the run ran (``started_epoch`` ..
  ``finished_epoch`` in run.json).  A ``tpg sweep`` left there by an earlier command is not shown (it was:
  a pytest run's "all passed" report showed the earlier sweep's "60 fail").  A run folder written before
  the epochs were recorded falls back to its ISO ``started`` time and ``duration_s``; a run that does not say
  when it ran shows none of the shared files.
* The re-run and replay commands name the interpreter that ran (``sys.executable``), relative to the
  repository when it lies inside it (``.venv/bin/python -m pytest ...``), absolute otherwise; a run.json
  without it keeps ``python``.  The plugin records it (checked on a real nested pytest run).
Synthetic run folders as in ``test_report.py``; about 3 s, most of it the nested run.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from properties.report_helpers import check_page, write_synthetic_run
from reports import generate
from reports.commands import interpreter, replay_command, rerun_command

pytestmark = pytest.mark.theorem("Report")

REPO = Path(__file__).resolve().parents[2]
START = 1_714_557_600.0  # 2024-05-01T10:00:00+00:00, the synthetic run's start
RECORD = {"sweep": "theorem1-phase", "params": {"step": 1, "condition": 1, "K": 3}, "seed": 0, "verdict": "pass",
          "measures": {}}


def write_sweep(path: Path, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**RECORD, "sweep": path.stem}) + "\n")
    os.utime(path, (mtime, mtime))


def set_run(run_dir: Path, **changes) -> None:
    run = json.loads((run_dir / "run.json").read_text())
    run.update(changes)
    run = {k: v for k, v in run.items() if v is not None}
    (run_dir / "run.json").write_text(json.dumps(run))


def _names_on_page(run_dir: Path) -> list[str]:
    text = check_page(generate.render(run_dir)).text
    return sorted(n for n in ("earlier.jsonl", "during.jsonl", "later.jsonl", "own.jsonl") if n in text)


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """A repository with sweeps/ holding a file from before the run, one from during it and one from after,
    and a run folder with its own sweeps/own.jsonl."""
    monkeypatch.delenv(generate.SWEEP_DIR_ENV, raising=False)
    repo = tmp_path / "repo"
    write_sweep(repo / "sweeps" / "earlier.jsonl", START - 3600)  # a tpg sweep an hour before the run
    write_sweep(repo / "sweeps" / "during.jsonl", START + 4)
    write_sweep(repo / "sweeps" / "later.jsonl", START + 3600)   # a tpg sweep after the run ended
    run_dir = repo / "reports" / "20240501-100000-abcd"
    write_synthetic_run(run_dir)
    write_sweep(run_dir / "sweeps" / "own.jsonl", START - 7200)   # in the run folder: always the run's
    return repo, run_dir


def test_report_shows_only_the_sweeps_this_run_wrote(layout):
    repo, run_dir = layout
    set_run(run_dir, rootdir=str(repo), started_epoch=START, finished_epoch=START + 9)
    assert _names_on_page(run_dir) == ["during.jsonl", "own.jsonl"]
    # Calibration: the same folder with the run window widened to cover them shows every file.
    set_run(run_dir, started_epoch=START - 4000, finished_epoch=START + 4000)
    assert _names_on_page(run_dir) == ["during.jsonl", "earlier.jsonl", "later.jsonl", "own.jsonl"]


def test_the_sweep_folder_from_the_environment_is_filtered_too(layout, monkeypatch, tmp_path):
    repo, run_dir = layout
    elsewhere = tmp_path / "elsewhere"
    (repo / "sweeps").rename(elsewhere)
    monkeypatch.setenv(generate.SWEEP_DIR_ENV, str(elsewhere))
    set_run(run_dir, rootdir=str(repo), started_epoch=START, finished_epoch=START + 9)
    assert _names_on_page(run_dir) == ["during.jsonl", "own.jsonl"]


def test_older_run_folders_use_their_start_time_or_show_no_shared_file(layout):
    repo, run_dir = layout
    # write_synthetic_run: started 2024-05-01T10:00:00+00:00, duration_s 9, no epochs.
    set_run(run_dir, rootdir=str(repo))
    assert _names_on_page(run_dir) == ["during.jsonl", "own.jsonl"]
    set_run(run_dir, started="?")  # a run.json that does not say when it ran
    assert _names_on_page(run_dir) == ["own.jsonl"]


def test_rerun_and_replay_name_the_interpreter(tmp_path):
    venv_python = str(tmp_path / ".venv" / "bin" / "python")
    assert interpreter(tmp_path, venv_python) == ".venv/bin/python"
    assert interpreter(tmp_path / "elsewhere", venv_python) == venv_python  # outside the repository: absolute
    run = {"profile": "stress", "seed": 7, "args": ["-n", "2", "--hypothesis-profile=stress"],
           "python": ".venv/bin/python"}
    assert rerun_command(run) == ".venv/bin/python -m pytest -n 2 --hypothesis-profile=stress --hypothesis-seed=7"
    assert shlex.split(replay_command(run, "t.py::x"))[:3] == [".venv/bin/python", "-m", "pytest"]
    del run["python"]  # a run.json from before the interpreter was recorded
    assert rerun_command(run).startswith("python -m pytest ")
    run_dir = tmp_path / "20240501-100000-abcd"
    write_synthetic_run(run_dir)
    set_run(run_dir, python=".venv/bin/python")
    text = check_page(generate.render(run_dir)).text
    assert ".venv/bin/python -m pytest -n 2 --hypothesis-profile=stress --hypothesis-seed=1234" in text, text[:2000]


def test_the_plugin_records_the_interpreter_and_the_run_window(tmp_path):
    """A real nested run: run.json holds sys.executable (outside tmp_path: absolute) and the epochs that
    bracket the run; its re-run line starts with that interpreter."""
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["reports.plugin"]\n')
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert True\n")
    env = {**{k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}, "PYTHONPATH": str(REPO)}
    import time

    before = time.time()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                           "--rootdir", str(tmp_path), "--report-root", str(tmp_path / "reports"), "test_one.py"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    after = time.time()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = json.loads(((tmp_path / "reports" / "latest").resolve() / "run.json").read_text())
    assert run["python"] == os.path.abspath(sys.executable), run["python"]
    assert before <= run["started_epoch"] <= run["finished_epoch"] <= after, run
    assert run["rerun"].startswith(shlex.quote(run["python"]) + " -m pytest "), run["rerun"]
