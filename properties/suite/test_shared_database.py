"""The pooled example database (``suite_db``, ``ATTN_SUITE_REDIS``) against a real Redis server.

A fixture starts Debian's ``redis-server`` on a free loopback port (no persistence) and stops it after the
test.  Every check runs real pytest subprocesses on a tiny planted-failing test file written to
``tmp_path``, each with its own empty local database directory, loading the project's ``conftest.py``
(profiles and report plugin) with ``-p conftest``.  When ``redis-server`` is not installed the tests skip
and say so (``.ci/run`` installs it).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import suite_db

ROOT = Path(__file__).resolve().parents[2]
PLANTED = '''
from hypothesis import given, strategies as st


@given(st.integers(0, 10**9))
def test_planted(x):
    assert x < 123_456
'''
# Mid-run: a first property talks to the server, then the server is killed, then the planted failure is
# found and must be saved (locally) although Redis is gone.
PLANTED_KILL = '''
import os, signal, time
from hypothesis import given, settings, strategies as st


@settings(max_examples=5)
@given(st.integers(0, 10))
def test_0_talks_to_the_server(x):
    pass


def test_1_server_goes_away():
    os.kill(int(os.environ["PLANTED_REDIS_PID"]), signal.SIGKILL)
    time.sleep(0.5)


@given(st.integers(0, 10**9))
def test_2_planted(x):
    assert x < 123_456
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_server(tmp_path):
    exe = shutil.which("redis-server")
    if exe is None:
        msg = "redis-server not installed (apt-get install redis-server; .ci/run installs it): Redis tests skipped"
        print(msg, file=sys.stderr)
        pytest.skip(msg)
    import redis

    port = _free_port()
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(host="127.0.0.1", port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("redis-server did not answer within 5 s")
    yield {"url": f"redis://127.0.0.1:{port}/0", "client": client, "proc": proc}
    if proc.poll() is None:
        proc.terminate()
        proc.wait(10)


def _pytest(tmp_path: Path, test_file: Path, profile: str, local: str, url: str | None, **env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATTN_SUITE_", "PYTEST_", "HYPOTHESIS_"))}
    env[suite_db.LOCAL_ENV] = str(tmp_path / local)
    if url:
        env[suite_db.REDIS_ENV] = url
    env.update(env_extra)
    reports = tmp_path / f"reports-{local}"
    cmd = [sys.executable, "-m", "pytest", str(test_file), "-p", "conftest", "-p", "no:xdist", "-p", "no:cacheprovider",
           "--rootdir", str(tmp_path), "--report-root", str(reports), f"--hypothesis-profile={profile}", "-q"]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    return r, reports


def _testcases(reports: Path) -> list[dict]:
    """The run's Hypothesis observations, gzipped when the session ended (read as the report reads them)."""
    from reports.generate import _read_text

    files = sorted(reports.glob("*/observations/*_testcases.jsonl*"))
    assert files, f"no observations under {reports}"
    return [json.loads(line) for f in files for line in _read_text(f).splitlines() if line.strip()]


def _local_values(folder: Path) -> list:
    from hypothesis.database import choices_from_bytes

    return [choices_from_bytes(f.read_bytes()) for f in folder.rglob("*") if f.is_file() and not f.name.startswith(".")]


@pytest.mark.slow
def test_a_counterexample_found_on_one_machine_is_replayed_first_on_another(tmp_path, redis_server):
    test_file = tmp_path / "test_planted.py"
    test_file.write_text(PLANTED)
    # Machine A (fuzz profile, empty local database) finds the planted failure and saves it in Redis.
    a, _ = _pytest(tmp_path, test_file, "fuzz", "local-a", redis_server["url"])
    assert a.returncode == 1 and "123456" in a.stdout, a.stdout[-3000:] + a.stderr[-2000:]
    keys = redis_server["client"].keys(b"hypothesis-example:*")
    assert keys, "nothing was saved in the shared database"
    # Machine B (the everyday random profile, its own empty local database) replays it in the reuse phase.
    b, reports_b = _pytest(tmp_path, test_file, "stress", "local-b", redis_server["url"])
    assert b.returncode == 1 and "123456" in b.stdout, b.stdout[-3000:] + b.stderr[-2000:]
    cases = [c for c in _testcases(reports_b) if c.get("type") == "test_case"]
    first = cases[0]
    assert first["how_generated"] == "during reuse phase", first["how_generated"]
    assert first["status"] == "failed" and "123456" in first["representation"], first
    # B read the pool read-only: its find went to its own local database, not back to Redis as new entries.
    assert any(v and 123456 in v for v in _local_values(tmp_path / "local-b")), "B did not keep the failure locally"
    run = json.loads(next(reports_b.glob("*/run.json")).read_text())
    assert run.get("seed") is None, "a forced seed would have switched the database off"
    assert run["shared_database"] == f"{redis_server['url']} (reads, read-only)"
    page = next(reports_b.glob("*/index.html")).read_text()
    assert "Example database" in page and "a fixed seed would switch the pooled example database off" in page


def test_without_a_shared_database_the_same_command_does_not_replay(tmp_path, redis_server):
    """Control for the test above: with an empty pool, B's first test case is generated, not reused."""
    test_file = tmp_path / "test_planted.py"
    test_file.write_text(PLANTED)
    b, reports_b = _pytest(tmp_path, test_file, "stress", "local-b", redis_server["url"])
    cases = [c for c in _testcases(reports_b) if c.get("type") == "test_case"]
    assert cases[0]["how_generated"] != "during reuse phase"


def test_server_killed_mid_run_warns_and_keeps_local_results(tmp_path, redis_server):
    test_file = tmp_path / "test_planted_kill.py"
    test_file.write_text(PLANTED_KILL)
    r, _ = _pytest(tmp_path, test_file, "fuzz", "local-a", redis_server["url"],
                   PLANTED_REDIS_PID=str(redis_server["proc"].pid))
    out = r.stdout + r.stderr
    assert redis_server["proc"].poll() is not None, "the planted test did not kill the server"
    assert r.returncode == 1, out[-3000:]  # the planted failure, not an internal error
    assert "1 failed, 2 passed" in r.stdout, r.stdout[-3000:]
    assert "shared example database redis://127.0.0.1" in out and "continuing with the local database only" in out, out[-3000:]
    assert any(v and 123456 in v for v in _local_values(tmp_path / "local-a")), "the failure was not kept locally"


def test_without_the_variable_nothing_changes(monkeypatch):
    set_at_import = bool(os.environ.get(suite_db.REDIS_ENV))
    monkeypatch.delenv(suite_db.REDIS_ENV, raising=False)
    for profile in ("ci", "dev", "stress", "deep", "fuzz"):
        assert suite_db.profile_database(profile, ROOT) is None
    from hypothesis import settings

    assert settings.get_profile("ci").database is None  # derandomized: no database, as before
    if not set_at_import:  # the profiles were registered without the pool
        assert not suite_db.uses_shared(settings.get_profile("stress").database)
