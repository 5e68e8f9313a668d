"""pytest plugin: collect every run's results and render ``reports/<run-id>/index.html``.

Registered by the top-level ``conftest.py`` (``pytest_plugins = ["reports.plugin"]``); disable it with
``-p no:reports.plugin``.

Data flow (works with and without pytest-xdist):

* The *controller* (the only process without xdist; the one that spawns workers with it) picks the run id
  and folder in ``pytest_configure``, exports it as ``TPG_REPORT_DIR`` (read by
  :func:`reports.record.report_dir`, so problem files written by properties land in the run folder) and
  hands it, with the Hypothesis seed, to every xdist worker through ``workerinput``.
* Every process that *runs* tests appends one JSON line per test to ``<run>/data/<worker>.jsonl``
  (outcome, duration, theorem marker, Hypothesis statistics, and what the test attached via
  :mod:`reports.record`).  Writing per test means a crashed worker loses at most its current test.
* The controller also notes every outcome it sees (xdist forwards workers' reports), writes
  ``<run>/run.json`` and, after the session, merges the worker files and renders the HTML
  (:mod:`reports.generate`).  ``reports/latest`` then points at the run.
* Every process that observes (see :func:`_observe`) gzips its observation files when its session ends
  (``<run>/observations/*.jsonl.gz``); old run folders beyond ``--report-keep`` (or ``$TPG_REPORT_KEEP``,
  default 30) are deleted after each run.

The report's verdict is pytest's: its header is green exactly when pytest's exit status is 0 (a
non-strict xfail that passes is shown apart, not as a failure).

Report generation never changes the exit status or hides a test result; if it fails, one warning line
with the reason is printed in the terminal summary (the traceback goes to ``<run>/generate-error.txt``).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
import gzip
import secrets
import shutil
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

import pytest

from reports import record
# Re-exported: tests and callers have always found the commands here.
from reports.commands import hypothesis_args, interpreter, replay_command, rerun_command  # noqa: F401

RUN_ID_RE = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{4}$")
# Hypothesis phases whose test cases count as "examples tried" (shrinking is reported separately).
_EXAMPLE_PHASES = ("explicit", "reuse", "generate", "target")
_LONGREPR_MAX = 8000
SIZE_BUDGET_MB = 5
# Run folders kept under the report root (newest first): --report-keep, else this variable, else KEEP_DEFAULT.
KEEP_ENV = "TPG_REPORT_KEEP"
KEEP_DEFAULT = 30
# Hypothesis's observations for Tyche: on unless --no-observations or TPG_REPORT_OBSERVATIONS=0 (off/no/false).
OBSERVATIONS_ENV = "TPG_REPORT_OBSERVATIONS"
_OFF = ("0", "off", "no", "false")

_KEY_INFO = pytest.StashKey[dict]()


def pytest_addoption(parser):
    group = parser.getgroup("tpg-report", "HTML report of the run")
    group.addoption("--report-root", default=None,
                    help="folder holding reports/<run-id>/ and reports/latest (default: <rootdir>/reports)")
    group.addoption("--report-max-cards", type=int, default=12,
                    help="counterexample cards rendered in full; the rest are listed in one line each")
    group.addoption("--report-keep", type=int, default=None, metavar="N",
                    help=f"run folders kept under the report root, newest first (0: keep all); default "
                         f"${KEEP_ENV} if set, else {KEEP_DEFAULT}")
    group.addoption("--no-observations", action="store_true", default=False,
                    help="do not write Hypothesis's observations (JSON lines for Tyche, gzipped when the run "
                         f"ends) into the run folder; {OBSERVATIONS_ENV}=0 does the same")
    group.addoption("--replay-blob", default=None, metavar="BLOB",
                    help="replay one failing example of the one selected Hypothesis test: the "
                         "@reproduce_failure(...) text a failing test prints (its card in the report gives the "
                         "whole command); needs the Hypothesis version that printed it")


def report_keep(config) -> int:
    """How many run folders to keep: ``--report-keep``, else ``$TPG_REPORT_KEEP``, else 30."""
    given = config.getoption("report_keep", None)
    if given is not None:
        return int(given)
    env = os.environ.get(KEEP_ENV, "").strip()
    if not env:
        return KEEP_DEFAULT
    try:
        return int(env)
    except ValueError:
        raise pytest.UsageError(f"{KEEP_ENV}={env!r}: not a whole number of run folders to keep") from None


def observations_setting(config) -> tuple[bool, str]:
    """Whether this run writes observations, and what decided it (shown in the report)."""
    if config.getoption("no_observations", False):
        return False, "off: --no-observations"
    env = os.environ.get(OBSERVATIONS_ENV, "").strip()
    if env.lower() in _OFF:
        return False, f"off: {OBSERVATIONS_ENV}={env}"
    return True, f"on ({OBSERVATIONS_ENV}={env})" if env else "on (the default)"


# --------------------------------------------------------------------------------------------------
# --replay-blob: Hypothesis's @reproduce_failure, from the command line
# --------------------------------------------------------------------------------------------------
_BLOB_ARG_RE = re.compile(r"""^\s*(?:@?reproduce_failure\(\s*['"]([^'"]+)['"]\s*,\s*)?b?['"]?([A-Za-z0-9+/=]+)['"]?\s*\)?\s*$""")


def parse_blob(text: str) -> tuple[str, bytes]:
    """``(version, blob)`` from ``@reproduce_failure('6.x', b'...')`` or the bare blob (this Hypothesis's version)."""
    import hypothesis
    m = _BLOB_ARG_RE.match(text)
    if not m:
        raise pytest.UsageError(f"--replay-blob: not a @reproduce_failure(...) text or blob: {text[:80]!r}")
    return m.group(1) or hypothesis.__version__, m.group(2).encode()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """The blob is the failing example itself: it runs once, where the seed re-runs the search (and
    replays it only under the same code and Hypothesis version: a seed's draws also follow the constants
    of the project's modules, all loaded up front by conftest's ``_import_project_modules``)."""
    text = config.getoption("replay_blob", None)
    if not text:
        return
    version, blob = parse_blob(text)
    tests = [it for it in items if getattr(getattr(it, "obj", None), "is_hypothesis_test", False)]
    if len(tests) != 1:
        raise pytest.UsageError(f"--replay-blob replays one Hypothesis test; {len(tests)} selected: give its node id")
    tests[0].obj._hypothesis_internal_use_reproduce_failure = (version, blob)


# --------------------------------------------------------------------------------------------------
# Configuration: run id, folder, seed.  Runs first so Hypothesis's own pytest_configure sees the seed.
# --------------------------------------------------------------------------------------------------

def _new_run_id() -> str:
    return _dt.datetime.now().strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def _profile_info(config) -> tuple[str, bool]:
    """Name of the Hypothesis profile in force and whether it is derandomized."""
    from hypothesis import settings

    name = config.getoption("hypothesis_profile", None) or settings.get_current_profile_name()
    try:
        derandomize = bool(settings.get_profile(name).derandomize)
    except Exception:  # an unknown profile name: Hypothesis itself will complain
        derandomize = bool(settings.default.derandomize)
    return name, derandomize


def _shared_database(profile: str) -> bool:
    """Whether ``profile`` reads or writes the pooled (Redis) example database (see ``suite_db``)."""
    from hypothesis import settings

    try:
        import suite_db
        return suite_db.uses_shared(settings.get_profile(profile).database)
    except Exception:
        return False


def _shared_label(profile: str) -> str | None:
    """``"redis://host:port/db (writes)"`` / ``(reads)`` when ``profile`` uses the pool, else None."""
    if not _shared_database(profile):
        return None
    import suite_db

    return f"{suite_db._redacted(suite_db.shared_url() or '')} ({'writes' if profile in suite_db.WRITERS else 'reads, read-only'})"


def _force_seed(config, seed) -> None:
    """Make every Hypothesis test of this process draw from ``seed`` (what ``--hypothesis-seed`` does)."""
    from hypothesis import core

    config.option.hypothesis_seed = str(seed)
    core.global_force_seed = seed


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.addinivalue_line("markers", "theorem(name): the theorem or paper section a property checks "
                                       "(groups the report's dashboard)")
    config.addinivalue_line("markers", "judged(floor): the least share of generated examples the property "
                                       "must judge (see properties/judging.py)")
    if getattr(config.option, "collectonly", False) or getattr(config.option, "help", False):
        return
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        # An xdist worker: adopt the controller's folder and seed, so everyone writes to the same run.
        run_dir = workerinput.get("tpg_report_dir")
        if not run_dir:
            return
        os.environ[record.REPORT_DIR_ENV] = run_dir
        if workerinput.get("tpg_seed") is not None:
            _force_seed(config, workerinput["tpg_seed"])
        config.stash[_KEY_INFO] = {"run_dir": Path(run_dir), "worker": workerinput.get("workerid", "gw")}
        _observe(config, Path(run_dir), workerinput.get("workerid", "gw"))
        return

    keep = report_keep(config)  # a malformed $TPG_REPORT_KEEP is a usage error before anything runs

    root = Path(config.getoption("report_root") or (config.rootpath / "reports")).resolve()
    run_id = _new_run_id()
    run_dir = root / run_id
    (run_dir / "data").mkdir(parents=True, exist_ok=True)
    # The controller always overrides an inherited value (e.g. a nested pytest run started by a test).
    os.environ[record.REPORT_DIR_ENV] = str(run_dir)

    profile, derandomize = _profile_info(config)
    given_seed = config.getoption("hypothesis_seed", None)
    seed = None
    if given_seed is not None:
        seed = int(given_seed) if str(given_seed).lstrip("-").isdigit() else given_seed
    elif not derandomize and not _shared_database(profile):
        # A random profile (stress): choose the seed here so the report can say how to replay the run.
        # Not with the pooled example database (ATTN_SUITE_REDIS): a forced seed turns Hypothesis's
        # database off, and replaying the pool is the point of that setting.
        seed = secrets.randbelow(2**32)
    if seed is not None:
        _force_seed(config, seed)

    config.stash[_KEY_INFO] = {
        "controller": True, "run_dir": run_dir, "root": root, "worker": "main",
        "run": {
            "run_id": run_id,
            "started": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
            # What this run wrote is what changed after this instant (the report shows only those sweeps).
            "started_epoch": time.time(),
            "python": interpreter(config.rootpath),
            "profile": profile, "derandomize": derandomize, "seed": seed,
            "seed_chosen_by_report": given_seed is None and seed is not None,
            "shared_database": _shared_label(profile),
            "args": [str(a) for a in config.invocation_params.args],
            "rootdir": str(config.rootpath), "workers": 0,
            "max_cards": config.getoption("report_max_cards"),
            "keep": keep, "observations_setting": observations_setting(config)[1],
            "versions": _versions(),
        },
        "t0": time.time(), "outcomes": {},
    }
    if not getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", "no") == "no":
        _observe(config, run_dir, "main")  # with xdist, the workers run the tests and observe


def _observe(config, run_dir: Path, worker: str) -> None:
    """Hypothesis's observations of every test case (and its info lines), as the JSON lines Tyche reads,
    in ``<run>/observations/<worker>_testcases.jsonl`` and ``<worker>_info.jsonl``; gzipped by
    :func:`_finish_observations` when this process's session ends (a stress run writes ~90 MB of them).

    Coverage collection is switched off: it traces every line of the reference implementation and would
    multiply the run's time; Tyche's other views (examples, events, targets, timings) do not need it."""
    if not observations_setting(config)[0]:
        return
    try:
        from hypothesis.internal import observability
        from hypothesis.strategies._internal.utils import to_jsonable

        observability.OBSERVABILITY_COLLECT_COVERAGE = False
    except Exception as exc:  # a Hypothesis without the (experimental) API: no observations, say so
        _warn_once(config, f"tpg-report: no observations ({exc!r})")
        return
    folder = run_dir / "observations"
    handles: dict = {}

    def deliver(observation, thread_id=None):
        try:
            kind = "testcases" if observation.type == "test_case" else "info"
            fh = handles.get(kind)
            if fh is None:
                folder.mkdir(parents=True, exist_ok=True)
                fh = handles[kind] = open(folder / f"{worker}_{kind}.jsonl", "a", encoding="utf-8")
            fh.write(json.dumps(to_jsonable(observation, avoid_realization=False), default=repr) + "\n")
            fh.flush()
        except Exception as exc:  # observations must never change a test's outcome
            _warn_once(config, f"tpg-report: could not write an observation: {exc!r}")

    observability.add_observability_callback(deliver, all_threads=True)
    config.stash[_KEY_OBSERVER] = {"callback": deliver, "handles": handles, "folder": folder, "worker": worker}


_KEY_OBSERVER = pytest.StashKey[dict]()


def _finish_observations(config) -> None:
    """Stop observing, close this process's observation files and gzip them (``.jsonl`` -> ``.jsonl.gz``).

    Each observing process compresses only its own files; an xdist worker does it before it tells the
    controller it finished, so the controller renders after every file is compressed."""
    observer = config.stash.get(_KEY_OBSERVER, None)
    if observer is None:
        return
    del config.stash[_KEY_OBSERVER]
    try:
        from hypothesis.internal import observability

        observability.remove_observability_callback(observer["callback"])
    except Exception:
        pass
    for fh in observer["handles"].values():
        fh.close()
    for kind in ("testcases", "info"):
        path = observer["folder"] / f"{observer['worker']}_{kind}.jsonl"
        if path.exists():
            try:
                gzip_file(path)
            except OSError as exc:  # the plain file stays; readers accept both
                _warn_once(config, f"tpg-report: could not compress {path}: {exc!r}")


def gzip_file(path: Path) -> Path:
    """``path`` -> ``path.gz`` (written aside, then renamed, then the original removed)."""
    out = path.with_name(path.name + ".gz")
    tmp = path.with_name(path.name + ".gz.tmp")
    with open(path, "rb") as src, gzip.open(tmp, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    os.replace(tmp, out)
    path.unlink()
    return out


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist (controller side): hand the run folder and seed to each worker before it starts."""
    info = node.config.stash.get(_KEY_INFO, None)
    if info is None:
        return
    node.workerinput["tpg_report_dir"] = str(info["run_dir"])
    node.workerinput["tpg_seed"] = info["run"]["seed"]
    info["run"]["workers"] = node.workerinput.get("workercount", info["run"]["workers"] + 1)


def _versions() -> dict:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for dist in ("numpy", "scipy", "networkx", "hypothesis", "pytest", "pytest-xdist", "matplotlib",
                 "jinja2", "cvxpy", "clarabel", "numba"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


# --------------------------------------------------------------------------------------------------
# Per test, in the process that runs it.
# --------------------------------------------------------------------------------------------------

def _theorem(item) -> str | None:
    """The test's ``@pytest.mark.theorem`` name; None for an untagged test (the report groups those by
    the folder or module they live in, see ``reports.generate.untagged_group``)."""
    marker = item.get_closest_marker("theorem")
    if marker is not None and marker.args:
        return str(marker.args[0])
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    record.set_current_test(item.nodeid)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_call(item):
    """Capture Hypothesis's raw statistics dict.

    ``trylast`` makes this the innermost wrapper, so Hypothesis's plugin has already installed its own
    statistics collector (for ``--hypothesis-show-statistics``); ours records and then forwards to it.
    """
    try:
        from hypothesis.statistics import collector
    except ImportError:  # pragma: no cover - hypothesis is a dependency
        return (yield)
    previous = collector.value
    found = item.stash.setdefault(_KEY_STATS, [])

    def note(stats):
        try:
            found.append(summarize_statistics(stats))
        except Exception as exc:  # never let the report break a test
            found.append({"error": f"could not read statistics: {exc!r}"})
        if previous is not None:
            previous(stats)

    with collector.with_value(note):
        result = yield
    _check_judged_floor(item, found)
    return result


# Rejections with no reason from the property: a strategy's filter or an ``assume`` inside a strategy.
REJECTED_DRAW = "rejected draw"
# Overruns are not examples.  Hypothesis generates by mutating earlier choice sequences and caps each
# attempt at 5x the simplest completion's length; a draw that needs more choices than the cap (a K = 12
# problem grown from a K = 2 prefix) is abandoned before any example exists, and the engine draws another.
# How many are abandoned depends on the engine's mutations, not on the property: measured on
# test_theorem2_criterion_rejects_planted_targets (ci profile, derandomized), 4 overruns beside 25 judged
# examples, and 19 after an unrelated edit elsewhere in the code (its strategy has no filter and no
# assume, so those 19 unnamed rejections could only be overruns); charged to the judged share they took
# it from 86% to 57%, under its floor of 60%, with no example of the property skipped.  They are counted
# and shown ("overrun"), never charged to the property's judged share.
# The floor of every @given property without its own ``judged`` marker: at least half of what Hypothesis
# generated must have been judged (rejected draws included in the denominator, overruns not).
DEFAULT_JUDGED_FLOOR = 0.5
NOT_JUDGED = "not judged: "  # properties.judging.NOT_JUDGED (the plugin does not import the test package)


def _check_judged_floor(item, found: list) -> None:
    """``@pytest.mark.judged(floor=F)``: fail when fewer than ``F`` of the generated examples were judged.

    Runs only after the test body passed (a failing property already says more), on the last Hypothesis
    run of the item (the one pytest reports)."""
    marker = item.get_closest_marker("judged")
    if not found or "judged" not in found[-1] or not getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
        return
    if marker is None:
        floor = DEFAULT_JUDGED_FLOOR
    else:
        floor = float(marker.kwargs.get("floor", marker.args[0] if marker.args else 0.0))
    s = found[-1]
    judged, skipped = s["judged"], s["not_judged"]
    generated = judged + sum(skipped.values())
    share = judged / generated if generated else 0.0
    item.stash[_KEY_JUDGED] = {"judged": judged, "generated": generated, "floor": floor, "not_judged": skipped}
    if share < floor:
        reasons = ", ".join(f"{why}: {n}" for why, n in skipped.items()) or "none"
        pytest.fail(f"judged {judged} of {generated} generated examples ({share:.0%}), below this property's "
                    f"floor of {floor:.0%}; not judged: {reasons}", pytrace=False)


_KEY_STATS = pytest.StashKey[list]()
_KEY_JUDGED = pytest.StashKey[dict]()
_KEY_PHASES = pytest.StashKey[dict]()


def summarize_statistics(stats: dict) -> dict:
    """Reduce Hypothesis's per-run statistics (one entry per test case) to what the report shows."""
    phases = {}
    events: Counter = Counter()
    not_judged: Counter = Counter()
    examples = invalid = overrun = failing = cases_for_events = 0
    runtimes = []
    for phase in ("explicit", "reuse", "generate", "target", "shrink", "explain"):
        d = stats.get(phase + "-phase")
        if not d or not d.get("test-cases"):
            continue
        cases = d["test-cases"]
        status = Counter(c["status"] for c in cases)
        phases[phase] = {"cases": len(cases), "valid": status["valid"], "interesting": status["interesting"],
                         "invalid": status["invalid"] + status["overrun"],
                         "seconds": round(float(d.get("duration-seconds", 0.0)), 4)}
        if phase in _EXAMPLE_PHASES:
            examples += status["valid"] + status["interesting"]
            invalid += status["invalid"] + status["overrun"]
            overrun += status["overrun"]
            failing += status["interesting"]
            runtimes += [c.get("runtime", 0.0) for c in cases]
            for c in cases:
                if c["status"] == "invalid":
                    why = [e[len(NOT_JUDGED):] for e in c.get("events", ()) if e.startswith(NOT_JUDGED)]
                    not_judged[why[0] if why else REJECTED_DRAW] += 1
        if phase in ("generate", "target"):
            cases_for_events += len(cases)
            for c in cases:
                events.update(c.get("events", ()))
    shrink = stats.get("shrink-phase") or {}
    runtimes.sort()
    return {
        "examples": examples, "invalid": invalid, "overrun": overrun, "failing": failing,
        "shrink_steps": len(shrink.get("test-cases", [])),
        "shrinks_successful": int(shrink.get("shrinks-successful", 0)),
        "stopped_because": stats.get("stopped-because", ""),
        "events": dict(events.most_common(40)), "event_cases": cases_for_events,
        "phases": phases, "targets": stats.get("targets", {}),
        # judged = every valid example; not judged = rejected ones, by the reason their property gave
        "judged": examples, "not_judged": dict(not_judged.most_common()),
        "median_runtime": runtimes[len(runtimes) // 2] if runtimes else None,
    }


_BLOB_RE = re.compile(r"@reproduce_failure\([^\n]*\)")
_SEED_RE = re.compile(r"--hypothesis-seed=(\S+)|@seed\((\d+)\)")


def _longrepr_text(report) -> str:
    try:
        text = report.longreprtext
    except Exception:
        text = str(report.longrepr)
    if len(text) > _LONGREPR_MAX:  # keep the end: pytest puts the assertion and Hypothesis notes there
        text = "... (truncated)\n" + text[-_LONGREPR_MAX:]
    return text


def _outcome(phases: dict) -> str:
    """One outcome per test from its setup/call/teardown reports."""
    call = phases.get("call")
    if any(p["outcome"] == "failed" for w, p in phases.items() if w != "call"):
        return "error"
    if call is None:
        return "skipped" if phases.get("setup", {}).get("outcome") == "skipped" else "error"
    if call.get("xfail"):
        return "xfailed" if call["outcome"] == "skipped" else "xpassed"
    return call["outcome"]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    info = item.config.stash.get(_KEY_INFO, None)
    if info is None:
        return report
    try:
        phases = item.stash.setdefault(_KEY_PHASES, {})
        entry = {"outcome": report.outcome, "duration": float(report.duration),
                 "xfail": hasattr(report, "wasxfail")}
        if report.failed or (report.skipped and report.when != "teardown"):
            entry["text"] = _longrepr_text(report)
        if hasattr(report, "wasxfail"):
            entry["xfail_reason"] = str(report.wasxfail or "")
        phases[report.when] = entry
        if report.when == "teardown":
            _write_test_line(item, info, phases)
    except Exception as exc:  # the report must never change a test's outcome
        _warn_once(item.config, f"tpg-report: could not record {item.nodeid}: {exc!r}")
    return report


def _write_test_line(item, info, phases) -> None:
    records = record.take_records().get(item.nodeid, {})
    record.set_current_test(None)
    text = "\n".join(p.get("text", "") for p in phases.values() if p.get("text"))
    blob = _BLOB_RE.search(text)
    seed = _SEED_RE.search(text)
    theorem = _theorem(item)
    line = {
        "nodeid": item.nodeid, "worker": info["worker"], "theorem": theorem, "tagged": theorem is not None,
        "module": item.nodeid.split("::")[0],
        "doc": (getattr(getattr(item, "function", None), "__doc__", None) or "").strip().split("\n\n")[0][:600],
        "outcome": _outcome(phases), "duration": sum(p["duration"] for p in phases.values()),
        "text": text, "reproduce_blob": blob.group(0) if blob else None,
        "printed_seed": (seed.group(1) or seed.group(2)) if seed else None,
        "hypothesis": item.stash.get(_KEY_STATS, []),
        "judged": item.stash.get(_KEY_JUDGED, None),
        "records": records,
        "xfail_reason": next((p["xfail_reason"] for p in phases.values() if p.get("xfail_reason") is not None), None),
    }
    path = Path(info["run_dir"]) / "data" / f"{info['worker']}.jsonl"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line, default=_json_default) + "\n")


def _json_default(o):
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, (bytes, bytearray)):
        import base64

        return base64.b64encode(bytes(o)).decode("ascii")
    return repr(o)


# --------------------------------------------------------------------------------------------------
# Controller: outcomes as reported (also from workers), then merge and render after the session.
# --------------------------------------------------------------------------------------------------

def pytest_runtest_logreport(report):
    """The controller's own view of every outcome, so a test whose worker died still shows up."""
    info = _controller_info
    if info is None:
        return
    o = info["outcomes"].setdefault(report.nodeid, {"outcome": "passed", "duration": 0.0, "text": ""})
    o["duration"] += float(getattr(report, "duration", 0.0) or 0.0)
    o["worker"] = getattr(getattr(report, "node", None), "gateway", None) and report.node.gateway.id
    if report.failed:
        o["outcome"] = "failed" if report.when == "call" else "error"
        o["text"] = _longrepr_text(report)
    elif report.skipped and report.when != "teardown" and o["outcome"] == "passed":
        o["outcome"] = "xfailed" if hasattr(report, "wasxfail") else "skipped"
    elif report.passed and report.when == "call" and hasattr(report, "wasxfail") and o["outcome"] == "passed":
        o["outcome"] = "xpassed"  # a non-strict xfail that passed: not a failure (pytest exits 0)


_controller_info: dict | None = None


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    global _controller_info
    info = session.config.stash.get(_KEY_INFO, None)
    _controller_info = info if info is not None and info.get("controller") else None


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    """Every observing process gzips its observations; the controller then writes run.json and renders.

    ``trylast`` and ``session.exitstatus``: the status recorded is the one pytest exits with, after any
    other plugin's ``pytest_sessionfinish`` had its say."""
    global _controller_info
    _finish_observations(session.config)
    info = _controller_info
    _controller_info = None
    if info is None:
        return
    run = info["run"]
    run["finished"] = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    run["duration_s"] = round(time.time() - info["t0"], 2)
    run["finished_epoch"] = time.time()
    run["exitstatus"] = int(getattr(session, "exitstatus", exitstatus))
    run["rerun"] = rerun_command(run)
    run["outcomes"] = info["outcomes"]
    run_dir = Path(info["run_dir"])
    try:
        (run_dir / "run.json").write_text(json.dumps(run, indent=1, default=_json_default))
        from reports import generate

        out = generate.render(run_dir)
        _point_latest(info["root"], run_dir)
        _prune(info["root"], run_dir, run["keep"])
        size = out.stat().st_size / 1e6
        info["message"] = f"HTML report: {out} ({size:.2f} MB)"
        if size > SIZE_BUDGET_MB:
            info["message"] = f"WARNING tpg-report: {out} is {size:.1f} MB, over the {SIZE_BUDGET_MB} MB budget"
    except Exception as exc:
        try:
            (run_dir / "generate-error.txt").write_text(traceback.format_exc())
        except OSError:
            pass
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        info["message"] = f"WARNING tpg-report: report generation failed ({reason}); see {run_dir}/generate-error.txt"
    session.config.stash[_KEY_INFO] = info


def pytest_terminal_summary(terminalreporter, config):
    info = config.stash.get(_KEY_INFO, None)
    if info and info.get("message"):
        terminalreporter.write_line(info["message"], yellow="WARNING" in info["message"])
    for message in config.stash.get(_KEY_WARNINGS, []):
        terminalreporter.write_line(message, yellow=True)


_KEY_WARNINGS = pytest.StashKey[list]()


def _warn_once(config, message: str) -> None:
    found = config.stash.setdefault(_KEY_WARNINGS, [])
    if message not in found:
        found.append(message)


def _point_latest(root: Path, run_dir: Path) -> None:
    """``reports/latest`` -> the run: a relative symlink, swapped atomically; a one-line file if symlinks fail."""
    latest = root / "latest"
    tmp = root / f".latest-{run_dir.name}"
    try:
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        os.symlink(run_dir.name, tmp, target_is_directory=True)
        os.replace(tmp, latest)
    except OSError:
        if latest.is_symlink():
            latest.unlink()
        latest.write_text(str(run_dir / "index.html") + "\n")


def _prune(root: Path, current: Path, keep: int) -> None:
    """Delete the oldest run folders beyond ``keep`` so reports/ does not grow without bound.  Only
    folders named like a run id are touched, never the current one."""
    if keep <= 0:
        return
    runs = sorted((p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and RUN_ID_RE.match(p.name)),
                  key=lambda p: p.name, reverse=True)
    for old in runs[keep:]:
        if old != current:
            shutil.rmtree(old, ignore_errors=True)
