"""The shell commands a report prints: re-run the whole run, replay one test.

Shared by :mod:`reports.plugin` (which stores the re-run command in ``run.json``) and
:mod:`reports.generate` (which prints both on the page), so neither imports the other for them.
"""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path


def interpreter(rootdir=None, executable: str | None = None) -> str:
    """The Python that runs this process, as a command: relative to ``rootdir`` (the repository) when it lies
    inside it (``.venv/bin/python``), else absolute.  Not resolved: a venv's python is a link to the base one."""
    exe = Path(os.path.abspath(executable or sys.executable or "python"))
    if rootdir is not None:
        try:
            return str(exe.relative_to(os.path.abspath(rootdir)))
        except ValueError:
            pass
    return str(exe)


def _strip_options(args, names) -> list[str]:
    """``args`` without ``--name=value`` / ``--name value`` for each of ``names``."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in names:
            skip = True
            continue
        if any(a.startswith(n + "=") for n in names):
            continue
        out.append(a)
    return out


def hypothesis_args(run: dict) -> list[str]:
    args = [f"--hypothesis-profile={run['profile']}"]
    if run.get("seed") is not None:
        args.append(f"--hypothesis-seed={run['seed']}")
    return args


def rerun_command(run: dict) -> str:
    """The command that re-runs the whole run (same interpreter, arguments, profile and, for random profiles,
    seed); ``run["python"]`` is the interpreter that ran (see :func:`interpreter`), ``python`` for older runs."""
    args = _strip_options(run.get("args", []), ("--hypothesis-profile", "--hypothesis-seed"))
    return shlex.join([run.get("python") or "python", "-m", "pytest", *args, *hypothesis_args(run)])


def replay_command(run: dict, nodeid: str, blob: str | None = None) -> str:
    """The one command that replays a single test, without xdist: its failing example itself when the
    failure printed a blob (``--replay-blob``, see ``reports.plugin.pytest_collection_modifyitems``), else
    the run's draws by seed."""
    # One argument, without the '@': pytest reads an argument starting with '@' as a file of arguments.
    extra = [f"--replay-blob={blob.lstrip('@')}"] if blob else []
    return shlex.join([run.get("python") or "python", "-m", "pytest", nodeid, "-p", "no:xdist", *hypothesis_args(run),
                       *extra])
