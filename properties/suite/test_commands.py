"""The front door: every command form the README and the docs show is run here, at its smallest budget.

* Every subcommand of ``python -m theory`` (``analyze``, ``check``, ``train`` with each engine, with
  ``--normalized`` and ``--init``, every ``reproduce`` name, with ``--figure`` wherever it draws one, every
  ``sweep`` name, ``--resume``, ``--figure``), ``--version`` and ``python -m reports``: exit status 0,
  no traceback, one strict JSON document on stdout (``check``: one per line, one per claim), a PNG where
  ``--figure`` asks for one, and the figure redrawn from the printed JSON alone (a figure that read a key the
  JSON drops failed with ``KeyError: '_curves'``).  The ``reproduce`` names and the whole ``check`` run as
  their documented commands only (below), each once.
* Every command in a code block of README.md or docs/ is parsed by the real argument parser: a documented
  command that no longer parses, names an unknown sweep or engine, or a problem file that does not
  exist, fails here.  The docs must show every subcommand, every ``reproduce`` name and every sweep.
* Every ``tpg`` line of README.md and docs/command-line.md is written as it works in a fresh shell after
  the set-up (``.venv/bin/tpg``) and is run: README's through the installed script, the others in this
  process, each in an empty directory with its budget options shrunk (``small_budget``), checked for the
  documented exit status (0, or ``EXPECTED_STATUS``), no traceback, JSON on stdout and the PNG it asks for.

The commands run in this process through ``theory.run.cli.main`` (a subprocess costs ~1 s of imports each);
the entry points themselves (``python -m theory``, the ``tpg`` script, ``python -m reports``) run once each
as subprocesses.  Whole module: about 25 s of CPU under the ci profile before the documented commands were
run as well (most of it syn-medium's smallest run and the first compile of the kernels); those
add about 2 minutes of wall time on a loaded 2-core machine, most of it tian-fig7/10's real-text runs.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from theory.run import cli
from theory.run.reproduce import EXPERIMENTS, FIGURES, _load
from theory.run.sweep import SWEEPS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = "examples/li_cyclic_trial0.json"
PNG = b"\x89PNG\r\n\x1a\n"

pytestmark = pytest.mark.theorem("Command line")


def strict_json(text: str):
    def reject(token):
        raise ValueError(f"non-strict JSON constant {token}")
    return json.loads(text, parse_constant=reject)


def run_cli(capsys, *argv: str, status: int = 0):
    """``python -m theory ARGV`` in this process: its exit status, then its stdout parsed as one JSON document."""
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as exc:  # argparse: a bad command line
        rc = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    assert rc == status, f"{' '.join(map(str, argv))}: exit {rc}\n{err[-3000:]}"
    if status == 0:
        return strict_json(out)
    assert not out and len(err.strip().splitlines()) == 1, (out, err)  # one line on stderr naming the problem


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert len(data) > 1000 and data.startswith(PNG), f"{path}: not a PNG ({len(data)} bytes)"


# ------------------------------------------------------------------------------------------------
# analyze, train
# ------------------------------------------------------------------------------------------------
def test_analyze(capsys):
    out = run_cli(capsys, "analyze", "examples/scc_above_token.json")
    assert {"graphs", "svm", "cyclic_subspace", "finite", "certificate"} <= set(out), sorted(out)


def test_check(capsys):
    """``check --claim``: one claim's JSON object; an unknown claim is a usage error.  (The whole ``check``, one
    object per claim, is the documented ``tpg check examples/scc_above_token.json``, run as written by
    :func:`test_documented_command_runs` and compared with the properties' decision in
    ``properties/suite/test_check.py``.)"""
    one = run_cli(capsys, "check", "examples/scc_above_token.json", "--claim", "li2024.theorem2")
    assert one["claim"] == "li2024.theorem2" and one["verdict"] in ("holds", "fails", "undecided"), one
    run_cli(capsys, "check", "examples/scc_above_token.json", "--claim", "no-such-claim", status=2)


@pytest.mark.parametrize("options", [[], ["--normalized"], ["--engine", "numpy"], ["--engine", "compiled"],
                                     ["--engine", "extended"], ["--init", "INIT"]],
                         ids=["auto", "normalized", "numpy", "compiled", "extended", "init"])
def test_train(capsys, tmp_path, options):
    if "INIT" in options:
        init = tmp_path / "W0.json"
        init.write_text(json.dumps([[0.01 * (i == j) for j in range(8)] for i in range(8)]))  # d = 8
        options = ["--init", init]
    steps = 5 if "extended" in options else 50  # extended: 50-digit arithmetic, ~1 ms a step
    out = run_cli(capsys, "train", EXAMPLE, "--steps", steps, "--step-size", "0.01", *options)
    assert out["steps"] == steps and len(out["W"]) == 8, out
    # The extended engine does not evaluate the loss (theory.core.exact.gd_extended): null in the JSON.
    assert out["loss"] is None if "extended" in options else out["loss"] > 0, out["loss"]


# ------------------------------------------------------------------------------------------------
# reproduce: every registered experiment, at its smallest budget
# ------------------------------------------------------------------------------------------------
SMALL_REPRODUCE = {
    "li-cyclic": ["--trials", "1"],
    "li-acyclic": ["--trials", "1"],
    "li-local": ["--trials", "1"],
    "syn-small": ["--seeds", "1"],
    "syn-medium": ["--seeds", "1"],          # the smallest run: 16 cells x 4 query counts, 100 SGD steps (~3 s)
    "tian-fig3": [],                         # no budget option; the integrator's run is ~0.1 s once compiled
    "tian-fig5": ["--seeds", "1", "--steps", "20"],
    "tian-fig8": ["--steps", "2000"],
    "tian-fig9": [],
    "tian-fig11": ["--seeds", "1", "--steps", "10"],
    "tian-fig12": ["--seeds", "1", "--steps", "10"],
    "tian-fig7": ["--seeds", "1", "--steps", "2"],      # real text: the shipped corpus, a tiny transformer
    "tian-fig10": ["--seeds", "1", "--steps", "2"],
}


def test_every_experiment_is_run_by_a_documented_command():
    """Each ``reproduce`` name is run by a command of README.md or docs/command-line.md (so by
    :func:`test_documented_command_runs`, at its SMALL_REPRODUCE budget), with ``--figure`` where it draws one:
    that test checks the JSON, the PNG and the figure redrawn from the printed JSON."""
    for name in EXPERIMENTS:
        assert name in SMALL_REPRODUCE, f"reproduce {name}: give it a small-budget command in SMALL_REPRODUCE"
    run = [argv for _, _, argv in runnable_commands() if argv[:1] == ["reproduce"] and len(argv) > 1]
    missing = set(EXPERIMENTS) - {argv[1] for argv in run}
    assert not missing, f"reproduce names no README/command-line.md command runs: {sorted(missing)}"
    drawn = {argv[1] for argv in run if "--figure" in argv}
    assert set(FIGURES) <= drawn, f"figures no documented command draws: {sorted(set(FIGURES) - drawn)}"


# ------------------------------------------------------------------------------------------------
# sweep: every registered sweep at one run; --resume and --figure
# ------------------------------------------------------------------------------------------------
ONE_CELL = {
    "theorem1-phase": ["--param", "step=1", "--param", "condition=1", "--param", "K=3"],
    "section5-phase": ["--param", "loss=log", "--param", "head=biorthogonal"],
    "theorem2-phase": ["--param", "condition=1", "--param", "K=3"],
    "automaton-phase": ["--param", "condition=1", "--param", "K=3"],
    "claims": ["--param", "claim=li2024.theorem2", "--param", "condition=1", "--param", "K=3"],
    "kq-phase": ["--param", "m=d", "--param", "shape=4x4", "--param", "steps=10000"],
}


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_sweep(capsys, tmp_path, name):
    out = run_cli(capsys, "sweep", name, "--seeds", "1", *ONE_CELL.get(name, []), "--out", tmp_path / "s.jsonl",
                  "--quiet")
    assert out["runs"] == 1 and out["ran_now"] == 1, out
    records = [strict_json(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert len(records) == 1 and records[0]["sweep"] == name, records


def test_sweep_resume_and_figure(capsys, tmp_path):
    base = ["sweep", "theorem1-phase", *ONE_CELL["theorem1-phase"], "--out", tmp_path / "s.jsonl", "--quiet"]
    run_cli(capsys, *base, "--seeds", "1")
    run_cli(capsys, *base, "--seeds", "1", status=2)  # an existing file without --resume is an error
    out = run_cli(capsys, *base, "--seeds", "2", "--resume", "--figure", tmp_path / "phase.png")
    assert (out["runs"], out["ran_now"]) == (2, 1), out
    assert_png(tmp_path / "phase.png")


# ------------------------------------------------------------------------------------------------
# The entry points, as a user types them
# ------------------------------------------------------------------------------------------------
def _run(argv, cwd, timeout=120):
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


def test_version_of_module_and_console_script(tmp_path):
    from theory import __version__

    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", __version__), __version__
    done = _run([sys.executable, "-m", "theory", "--version"], tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == f"attention-tpg-suite {__version__}", done
    script = shutil.which("tpg", path=str(Path(sys.executable).parent))
    assert script, "the console script tpg is not installed next to this Python (pip install -e .)"
    # From a directory that is not the repository: the shipped example is found by the installed package.
    done = _run([script, "analyze", "examples/scc_above_token.json"], tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert strict_json(done.stdout)["vocab_size"] == 4


def test_package_declares_its_data_and_script():
    """A non-editable install ships what the commands need: pyproject's package data globs match every
    problem file of examples/ (through the link theory/examples) and the schema; ``tpg`` is the CLI."""
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = conf["tool"]["setuptools"]["package-data"]
    shipped = {p.name for pattern in data["theory"] for p in (ROOT / "theory").glob(pattern)}
    assert shipped == {p.name for p in (ROOT / "examples").glob("*.json")}, "examples/*.json not all shipped"
    assert [p.name for pattern in data["theory.core"] for p in (ROOT / "theory" / "core").glob(pattern)] == \
        ["problem.schema.json"]
    assert (ROOT / "theory" / "examples").resolve() == (ROOT / "examples").resolve()
    assert conf["project"]["scripts"] == {"tpg": "theory.run.cli:main"}
    assert "version" in conf["project"] and "dynamic" not in conf["project"]  # defined once, read at run time


SYNTH_CONFTEST = 'pytest_plugins = ["reports.plugin"]\n'
SYNTH_TEST = textwrap.dedent('''
    import pytest
    from hypothesis import given, settings, strategies as st

    @pytest.mark.theorem("Theorem 1")
    @settings(max_examples=5, database=None)
    @given(st.integers(0, 9))
    def test_holds(k):
        assert k >= 0
''')


def test_reports_command(tmp_path):
    """``python -m reports RUN_DIR`` regenerates the HTML page of a run folder (here: a two-second run)."""
    (tmp_path / "conftest.py").write_text(SYNTH_CONFTEST)
    (tmp_path / "test_synth.py").write_text(SYNTH_TEST)
    env_path = {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                           "--rootdir", str(tmp_path), "--report-root", str(tmp_path / "reports"), "test_synth.py"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**{k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}, **env_path})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = (tmp_path / "reports" / "latest").resolve()
    (run_dir / "index.html").unlink()
    done = _run([sys.executable, "-m", "reports", str(run_dir)], tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    page = run_dir / "index.html"
    assert page.exists() and page.stat().st_size > 1000 and "test_holds" in page.read_text()
    bad = _run([sys.executable, "-m", "reports", str(tmp_path / "nothing")], tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


# ------------------------------------------------------------------------------------------------
# Every subcommand is run above
# ------------------------------------------------------------------------------------------------
TESTED_SUBCOMMANDS = {"analyze", "check", "train", "reproduce", "sweep"}


def subcommands() -> set[str]:
    parser = cli._parser()
    return {name for action in parser._subparsers._group_actions for name in action.choices}


def test_every_subcommand_is_run_here():
    assert subcommands() <= TESTED_SUBCOMMANDS, f"untested subcommands: {sorted(subcommands() - TESTED_SUBCOMMANDS)}"


# ------------------------------------------------------------------------------------------------
# The documented commands parse
# ------------------------------------------------------------------------------------------------
FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")
ENGINES = {"auto", "numpy", "compiled", "extended"}


def documented_pages() -> list[Path]:
    pages = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
    return [p for p in pages if "_build" not in p.parts]


def code_block_lines(text: str):
    """(line number, logical line) of every fenced or indented code block; backslash continuations joined."""
    lines = text.splitlines()
    fence, pending, start = None, "", 0
    for no, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if m and (fence is None or m.group(2).startswith(fence)):
            fence = None if fence else m.group(2)[:3]
            continue
        indented = fence is None and line.startswith("    ") and line.strip()
        if not (fence or indented or pending):
            continue
        body = line.strip()
        if not pending:
            start = no
        if body.endswith("\\"):
            pending += body[:-1] + " "
            continue
        yield start, pending + body
        pending = ""


def theory_argv(line: str) -> list[str] | None:
    """The arguments after ``python -m theory`` / ``tpg`` in a shell line, or None when it runs something else."""
    line = line.split(" #", 1)[0].strip()
    for prompt in ("$ ", "> "):
        if line.startswith(prompt):
            line = line[len(prompt):]
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    while words and ENV_ASSIGNMENT.match(words[0]):
        words = words[1:]
    if words and (words[0] == "tpg" or words[0].endswith("/tpg")):  # tpg, .venv/bin/tpg
        return words[1:]
    if len(words) >= 3 and Path(words[0]).name.startswith("python") and words[1:3] == ["-m", "theory"]:
        return words[3:]
    return None


def documented_commands() -> list[tuple[str, list[str]]]:
    found = []
    for page in documented_pages():
        for no, line in code_block_lines(page.read_text()):
            argv = theory_argv(line)
            if argv is not None:
                found.append((f"{page.relative_to(ROOT)}:{no}", argv))
    return found


def check_documented(where: str, argv: list[str]) -> list[str]:
    """Problems of one documented command: it must parse, and name things that exist."""
    try:
        args = cli._parser().parse_args(argv)
    except SystemExit as exc:
        if exc.code == 0 and (argv in (["--version"], ["-h"], ["--help"]) or "--list-claims" in argv
                              or argv[-1:] in (["-h"], ["--help"])):
            return []
        return [f"{where}: `{shlex.join(argv)}` does not parse (exit {exc.code})"]
    bad = []
    from theory.core.problem import shipped_example

    path = getattr(args, "file", None)
    if path and not (ROOT / path).exists() and not Path(path).is_absolute() and shipped_example(path) is None \
            and not re.search(r"[A-Z]{2,}|reports/", path):  # FILE.json, PROBLEM.json, reports/<run>/...: placeholders
        bad.append(f"{where}: {path}: no such file in the repository")
    if args.command == "sweep" and args.name not in SWEEPS:
        bad.append(f"{where}: unknown sweep {args.name!r}")
    if args.command == "train" and args.engine not in ENGINES:
        bad.append(f"{where}: unknown engine {args.engine!r}")
    return bad


def test_documented_commands_parse(capsys):
    commands = documented_commands()
    bad = [p for where, argv in commands for p in check_documented(where, argv)]
    capsys.readouterr()
    assert not bad, "\n".join(bad)
    shown = {argv[0] for _, argv in commands if argv and not argv[0].startswith("-")}
    assert subcommands() <= shown, f"subcommands shown in no code block: {sorted(subcommands() - shown)}"
    named = {argv[1] for _, argv in commands if len(argv) > 1 and argv[0] in ("reproduce", "sweep")}
    missing = (set(EXPERIMENTS) | set(SWEEPS)) - named
    assert not missing, f"reproduce/sweep names shown in no code block: {sorted(missing)}"


def test_documented_command_check_can_fail():
    """Calibration of the docs check: a removed option, an unknown experiment, a missing file, a bad sweep."""
    for argv in (["train", EXAMPLE, "--steps", "5"],                    # --step-size is required
                 ["reproduce", "li-nothing"],
                 ["analyze", "examples/no_such_problem.json"],
                 ["sweep", "no-such-sweep"],
                 ["train", EXAMPLE, "--steps", "5", "--step-size", "1", "--engine", "gpu"]):
        assert check_documented("planted", argv), argv
    assert theory_argv("ATTN_SUITE_REDIS=redis://h:1/0 .venv/bin/python -m theory sweep x  # note") == ["sweep", "x"]
    assert theory_argv(".venv/bin/python -m pytest -n 2") is None
    assert theory_argv(".venv/bin/tpg check --list-claims  # x") == ["check", "--list-claims"]
    text = "para\n\n```console\n$ tpg reproduce tian-fig3 \\\n    --figure f.png\n```\n\n    tpg sweep a\n"
    assert [argv for _, line in code_block_lines(text) if (argv := theory_argv(line))] == \
        [["reproduce", "tian-fig3", "--figure", "f.png"], ["sweep", "a"]]


# ------------------------------------------------------------------------------------------------
# The README's and docs/command-line.md's commands run as written
# ------------------------------------------------------------------------------------------------
RUN_PAGES = ("README.md", "docs/command-line.md")
VENV_PROGRAM = re.compile(r"^(?:\$ )?\.venv/bin/(?:tpg|python) ")
# A documented command that cannot succeed in a test: the status it must give, and why.
EXPECTED_STATUS = {"--scheduler": (2, "no Dask scheduler listens at the documented address in a test")}
SMALL_TRAIN_STEPS = "50"


def runnable_commands() -> list[tuple[str, str, list[str]]]:
    """(page:line, the line as written, its tpg arguments) of every tpg command in RUN_PAGES."""
    found = []
    for rel in RUN_PAGES:
        for no, line in code_block_lines((ROOT / rel).read_text()):
            argv = theory_argv(line)
            if argv is not None:
                found.append((f"{rel}:{no}", line.split(" #", 1)[0].strip(), argv))
    return found


def small_budget(argv: list[str]) -> list[str]:
    """The documented command with its budget options at the smallest: argparse keeps an option's last value
    (and the sweep the last ``--param`` of an axis), so the small values are appended; ``train --steps`` is
    replaced.  A command without budget options runs as written."""
    argv = list(argv)
    if argv[:1] == ["reproduce"] and len(argv) > 1:
        argv += SMALL_REPRODUCE.get(argv[1], [])
    elif argv[:1] == ["sweep"] and len(argv) > 1:
        argv += ["--seeds", "1", *ONE_CELL.get(argv[1], []), "--quiet"]
    elif argv[:1] == ["train"] and "--steps" in argv:
        argv[argv.index("--steps") + 1] = SMALL_TRAIN_STEPS
    return argv


def expected_status(argv: list[str]) -> int:
    return next((status for option, (status, _) in EXPECTED_STATUS.items() if option in argv), 0)


def test_run_pages_call_the_programs_of_the_set_up():
    """README and docs/command-line.md write every command as it works in a fresh shell after the set-up:
    ``.venv/bin/tpg`` or ``.venv/bin/python -m ...``, never a bare ``tpg`` (``command not found``)."""
    commands = runnable_commands()
    assert len(commands) >= 30, commands
    bare = [f"{where}: {line}" for where, line, _ in commands if not VENV_PROGRAM.match(line)]
    assert not bare, "commands that need an activated venv:\n" + "\n".join(bare)
    readme = [line for where, line, _ in commands if where.startswith("README")]
    assert any("--list-claims" in line for line in readme) and len(readme) >= 5, readme
    assert small_budget(["reproduce", "li-cyclic", "--trials", "10"])[-2:] == ["--trials", "1"]
    assert small_budget(["train", EXAMPLE, "--steps", "4000", "--step-size", "1"])[3] == SMALL_TRAIN_STEPS
    assert expected_status(["sweep", "x", "--scheduler", "tcp://h:1"]) == 2 and expected_status(["sweep", "x"]) == 0


def _command_ids():
    return [where for where, _, _ in runnable_commands()]


@pytest.mark.parametrize("where", _command_ids())
def test_documented_command_runs(where, capsys, tmp_path, monkeypatch):
    """One documented command, at its smallest budget, in an empty directory (so its figures and sweep
    files land there): the exit status documented (0 unless EXPECTED_STATUS says otherwise), no traceback,
    JSON on stdout.  README's lines run through the installed script itself, as typed; docs/command-line.md's
    in this process (a subprocess costs ~1 s of imports each)."""
    _, line, argv = next(c for c in runnable_commands() if c[0] == where)
    argv = small_budget(argv)
    status = expected_status(argv)
    if where.startswith("README"):
        script = shutil.which("tpg", path=str(Path(sys.executable).parent))
        assert script, "the console script tpg is not installed next to this Python (pip install -e .)"
        done = _run([script, *argv], tmp_path, timeout=600)
        rc, out, err = done.returncode, done.stdout, done.stderr
    else:
        monkeypatch.chdir(tmp_path)
        try:
            rc = cli.main(argv)
        except SystemExit as exc:  # --version, --list-claims, --help and argparse errors
            rc = exc.code
        out, err = capsys.readouterr()
    assert "Traceback" not in err, f"{where}: {line}\n{err[-3000:]}"
    assert rc == status, f"{where}: `{shlex.join(argv)}` exit {rc}, documented {status}\n{err[-3000:]}"
    if status != 0:
        assert not out and len(err.strip().splitlines()) == 1, (out, err)
        return
    if argv in (["--version"],) or "--list-claims" in argv:
        assert out.strip(), where
        return
    docs = [strict_json(doc) for doc in (out.splitlines() if argv[0] == "check" else [out])]
    assert all(docs), where
    if argv[0] == "check" and "--claim" not in argv:  # --list-claims returned above
        from theory.claims import all_claims

        assert [d["claim"] for d in docs] == [c.name for c in all_claims()], f"{where}: one object per claim"
        assert all(d["verdict"] in ("holds", "fails", "undecided", "not applicable") for d in docs), docs
    if "--figure" in argv:
        assert_png(tmp_path / argv[argv.index("--figure") + 1])
        if argv[0] == "reproduce":
            # The figure is drawn from what the JSON carries: redrawn from the printed result, it must not
            # need anything the JSON dropped (a figure that read a dropped key failed with KeyError: '_curves').
            assert _load(FIGURES[argv[1]])(docs[0]).startswith(PNG), where
