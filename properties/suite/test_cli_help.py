"""The help pages of the command line are a CLI's: ``tpg --help`` and ``tpg COMMAND --help`` for every
subcommand, run in this process through ``theory.run.cli.main``.

* Each page exits 0, is headed ``usage: tpg ...`` (not ``python -m theory``), has a description (a
  paragraph between the usage and the argument lists), an ``exit status:`` section listing 0, 2 and 3
  (and 1 for ``check`` and the main page), an example command, and every argument has help (FILE too).
* No page carries reStructuredText markup (double backticks, ``:func:``, ``:mod:``, ...): the module
  docstring was used as the description and showed it.
* ``tpg check --list-claims`` prints one line per claim of ``theory.claims.all_claims()`` (name, reference,
  statement, tab-separated) and exits 0 without a FILE; ``tpg check`` with neither exits 2 with one line.
* The checker itself is calibrated on planted bad pages (markup, no description, no exit codes).
"""
from __future__ import annotations

import argparse
import re

import pytest

from theory.run import cli

pytestmark = pytest.mark.theorem("Command line")

MARKUP = re.compile(r"``|:(?:func|mod|class|meth|attr|data|ref|doc|term):`")


def parsers() -> dict:
    """The main parser (key None) and each subcommand's."""
    parser = cli._parser()
    return {None: parser, **parser._subparsers._group_actions[0].choices}


def arguments_without_help(parser) -> list[str]:
    return [a.dest for a in parser._actions if not a.help and not isinstance(a, argparse._SubParsersAction)]


def subcommands() -> list[str]:
    parser = cli._parser()
    return sorted(name for action in parser._subparsers._group_actions for name in action.choices)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        rc = cli.main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def page_problems(page: str, statuses: tuple[int, ...]) -> list[str]:
    """What is wrong with one help page (empty when it is a usable page)."""
    bad = []
    if m := MARKUP.search(page):
        bad.append(f"reStructuredText markup {m.group(0)!r}")
    if not page.startswith("usage: tpg"):
        bad.append(f"not headed 'usage: tpg': {page[:40]!r}")
    # argparse prints: usage (up to the first blank line), then the description, then the argument lists.
    blocks = page.split("\n\n")
    if len(blocks) < 2 or blocks[1].startswith(("positional arguments:", "options:", "commands:")) \
            or len(blocks[1].split()) < 8:
        bad.append("no description")
    if "exit status:" not in page:
        bad.append("no exit status section")
    else:
        section = page.split("exit status:", 1)[1].split("\n\n", 1)[0]
        listed = {int(n) for n in re.findall(r"^\s+(\d)\s", section, re.M)}
        if listed != set(statuses):
            bad.append(f"exit status section lists {sorted(listed)}, expected {sorted(statuses)}")
    if not re.search(r"^examples?:\n\s+tpg \w", page, re.M):
        bad.append("no example")
    return bad


@pytest.mark.parametrize("command", [None, *subcommands()])
def test_help_page_is_usable(capsys, command):
    argv = ["--help"] if command is None else [command, "--help"]
    rc, out, err = run(capsys, *argv)
    assert rc == 0 and not err, (rc, err)
    statuses = (0, 1, 2, 3) if command in (None, "check") else (0, 2, 3)
    assert not page_problems(out, statuses), f"tpg {' '.join(argv)}: {page_problems(out, statuses)}\n{out}"
    if command is not None:
        assert out.startswith(f"usage: tpg {command}"), out[:80]
    assert not arguments_without_help(parsers()[command]), arguments_without_help(parsers()[command])
    if command in ("analyze", "check", "train"):
        assert re.search(r"^  FILE\s+problem file", out, re.M), out


def test_main_page_names_every_subcommand(capsys):
    _, out, _ = run(capsys, "--help")
    for command in subcommands():
        assert re.search(rf"^    {command}\b", out, re.M), f"{command} missing from tpg --help"


def test_checker_catches_bad_pages():
    good = ("usage: tpg x [-h] FILE\n\nDoes x to a problem file and prints one JSON object on stdout.\n\n"
            "positional arguments:\n  FILE        a file\n\nexit status:\n  0  ok\n  2  bad input\n  3  error\n\n"
            "example:\n  tpg x f.json\n")
    assert page_problems(good, (0, 2, 3)) == []
    planted = {
        "markup": good.replace("Does x", "Does ``x``"),
        "role": good.replace("Does x", "Does :func:`x`"),
        "no description": good.replace("Does x to a problem file and prints one JSON object on stdout.\n\n", ""),
        "no exit codes": good.replace("exit status:\n  0  ok\n  2  bad input\n  3  error\n\n", ""),
        "a missing code": good.replace("  3  error\n", ""),
        "no example": good.replace("example:\n  tpg x f.json\n", ""),
        "old prog": good.replace("usage: tpg", "usage: python -m theory"),
    }
    for name, page in planted.items():
        assert page_problems(page, (0, 2, 3)), f"planted {name!r} not caught"
    bare = argparse.ArgumentParser()
    bare.add_argument("file", help="a file")
    bare.add_argument("--steps")
    assert arguments_without_help(bare) == ["steps"]


def test_list_claims_without_a_file(capsys):
    from theory.claims import all_claims

    rc, out, err = run(capsys, "check", "--list-claims")
    assert rc == 0 and not err, (rc, err)
    rows = [line.split("\t") for line in out.splitlines()]
    assert rows == [[c.name, c.reference, c.statement] for c in all_claims()], out
    rc, out, err = run(capsys, "check", "examples/scc_above_token.json", "--list-claims")
    assert rc == 0 and len(out.splitlines()) == len(all_claims()), (rc, out, err)  # lists, judges nothing


def test_check_without_file_or_list_is_one_line_exit_2(capsys):
    rc, out, err = run(capsys, "check")
    assert rc == 2 and not out and err.strip() == \
        "error: check needs a problem FILE (or --list-claims to list the claims)", (rc, out, err)
