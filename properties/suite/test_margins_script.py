"""``benchmarks/margins.py`` on a synthetic report folder: the margins table, the false-alarm table, and a
clear error on a folder without report data."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.theorem("Report")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "margins.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture
def run_dir(tmp_path):
    data = tmp_path / "run" / "data"
    data.mkdir(parents=True)
    records = [
        {"nodeid": "p.py::test_valid", "outcome": "passed",
         "judged": {"judged": 40, "generated": 47, "floor": 0.6,
                    "not_judged": {"undecided at the maximum budget": 5, "budget above MAX_STEPS": 2}},
         "records": {"metrics": [{"margin/theorem1 direction trend γ/valid": 0.41},
                                 {"margin/theorem1 direction trend γ/valid": 0.52}]}},
        {"nodeid": "p.py::test_planted", "outcome": "passed",
         "judged": {"judged": 10, "generated": 10, "floor": 0.6, "not_judged": {}},
         "records": {"metrics": [{"margin/theorem1 direction trend γ/planted": 0.97},
                                 {"margin/theorem1 direction trend γ/planted": 0.71}]}},
    ]
    (data / "gw0.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n{cut sho")
    return tmp_path / "run"


def test_margins_table_pools_the_worst_valid_and_mildest_planted(run_dir):
    done = _run(run_dir)
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("| theorem1 direction trend γ"))
    assert "| 2 | 0.52 | 2 | 0.71 |" in row and row.endswith("| yes |"), row


def test_properties_table_counts_undecided_apart(run_dir):
    done = _run("--properties", run_dir)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    valid = next(line for line in lines if line.startswith("| test_valid"))
    assert "| 40 / 47 | 5 | budget above MAX_STEPS: 2 |" in valid, valid
    assert lines[-1] == "| all | | 50 / 57 | 5 | |", lines[-1]


def test_a_folder_without_report_data_is_one_line_and_exit_2(tmp_path):
    done = _run(tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no report data" in done.stderr, done.stderr
