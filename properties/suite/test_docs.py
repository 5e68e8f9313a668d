"""The documentation site builds with warnings as errors, and the front door says what is true.

* ``sphinx-build -E -W --keep-going -n -b html docs <tmp>``: a broken cross-reference, a missing image, a
  page outside every toctree or a docstring autodoc cannot read fails the build (about 5 s of CPU).
* The claims catalogue is rendered from ``theory.claims.all_claims()`` at build time: the built page names
  every claim, and the renderer is checked on a fake list.
* README: at most 200 lines, a paragraph on what it is and for whom before the two commands, its test
  command is the one ``.ci/run`` runs, its table of claims names
  exactly the claims of ``theory.claims``, and the pictures it and the docs show exist and stay small.
* No tracked file points outside the repository (the shared folder the project was started from).
"""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/python -m pytest -n 2"

pytestmark = pytest.mark.theorem("Documentation")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs-html")
    done = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-n", "-q", "-b", "html",
                           str(DOCS), str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, f"docs build failed (warnings are errors):\n{done.stderr[-5000:]}"
    return out


def test_docs_build_with_warnings_as_errors(built):
    for page in ("index", "getting-started", "theory", "claims", "report", "reproductions", "command-line",
                 "problem-format", "judging", "beyond", "performance", "api", "library", "adding-claims", "strategies",
                 "changelog"):
        assert (built / f"{page}.html").exists(), page
    assert "drawn_problems" in (built / "strategies.html").read_text(), "autodoc rendered no strategy"
    api = (built / "api.html").read_text()
    for target in ("theory.core.problem.Problem", "theory.li2024.svm.graph_svm", "theory.li2024.training.resume",
                   "theory.claims.all_claims", "theory.core.decision.sequential"):
        assert f'id="{target}"' in api, f"the API reference does not document {target}"
    assert "Parameters" in api and "Examples" in api, "napoleon rendered no numpydoc section"
    assert '"additionalProperties"' in (built / "problem-format.html").read_text().replace("&quot;", '"')


def test_claims_catalogue_is_generated_from_the_claims(built):
    from theory.claims import all_claims

    page = (built / "claims.html").read_text()
    for c in all_claims():
        assert c.name in page and c.rule.split()[0] in page, f"{c.name} missing from the catalogue"


@dataclass
class FakeAssumption:
    name: str
    statement: str


@dataclass
class FakeClaim:
    name: str
    paper: str
    reference: str
    statement: str
    assumptions: tuple
    rule: str
    calibrations: tuple
    properties: tuple


def test_render_claims_on_a_fake_list():
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        from claims_catalogue import anchor, render_claims
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    fake = [FakeClaim("paper.thm_a", "Doe, Roe (2020), A Paper", "Theorem 9", "x grows | y shrinks",
                      (FakeAssumption("A1", "the head is biorthogonal"),), "accept when x > 1",
                      ("a planted sign flip",), ("properties/x/test_a.py",)),
            FakeClaim("paper.thm_b", "Doe, Roe (2020), A Paper", "Lemma 2", "z", (), "r", (), ("t.py",))]
    text = render_claims(fake)
    table = [line for line in text.splitlines() if line.startswith("| [`paper.")]
    assert len(table) == 2 and "Doe et al." in table[0] and "accept when x > 1" in table[0]
    assert "x grows \\| y shrinks" in text                    # a pipe in a statement cannot break the table
    assert f"({anchor('paper.thm_a')})=" in text and "## `paper.thm_b`: Lemma 2" in text
    assert "- **A1**: the head is biorthogonal" in text and "- a planted sign flip" in text
    assert text.count("- none") == 2                        # thm_b: no assumption, no calibration
    assert "`properties/x/test_a.py`" in text
    with pytest.raises(ValueError):
        render_claims([])


def readme() -> str:
    return (ROOT / "README.md").read_text()


def test_readme_is_a_front_door():
    lines = readme().splitlines()
    assert len(lines) <= 200, f"README has {len(lines)} lines (limit 200)"
    # A newcomer's order: the title, one paragraph on what it is and for whom, then the two commands, all
    # before the first section.
    head = readme().split("\n## ", 1)[0].splitlines()
    commands = [line.strip() for line in head if line.startswith("    python3 -m venv")]
    assert commands == [TEST_COMMAND.replace("-n 2", "-n 2 --hypothesis-profile=stress"), TEST_COMMAND], commands
    first_command = next(i for i, line in enumerate(head) if line.startswith("    "))
    prose = " ".join(head[1:first_command])
    assert len(prose.split()) >= 60 and re.search(r"\bfor (readers|anyone|researchers)\b", prose), \
        "README: one paragraph on what the suite is and for whom must come before the commands"
    ci = (ROOT / ".ci" / "run").read_text()
    install, run = TEST_COMMAND.split(" && .venv/bin/python")
    assert install in ci and re.search(r"^\.venv/bin/python -m pytest -n 2$", ci, re.M), \
        ".ci/run must run exactly the README's test command"


def test_readme_table_names_every_claim():
    from theory.claims import all_claims

    named = re.findall(r"^\| `([a-z0-9]+\.[a-z0-9_]+)`", readme(), re.M)
    assert sorted(named) == sorted(c.name for c in all_claims()), named


def test_pictures_exist_and_stay_small():
    shown = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", readme())
    for page in DOCS.rglob("*.md"):
        shown += [str(Path("docs") / p) for p in re.findall(r"```\{image\} (\S+\.png)", page.read_text())]
    assert shown, "no picture found"
    for rel in shown:
        path = ROOT / rel
        assert path.exists(), rel
        assert path.stat().st_size <= 250_000, f"{rel}: {path.stat().st_size} bytes"


def test_nothing_points_outside_the_repository():
    outside = re.compile(re.escape("..") + "/" + "shared|/work/" + "shared")
    files = subprocess.run(["git", "ls-files", "-z"], capture_output=True, cwd=ROOT, check=True).stdout.split(b"\0")
    hits = []
    for name in filter(None, files):
        path = ROOT / name.decode()
        if not path.is_file() or path.suffix in (".png", ".jsonl", ".gz"):
            continue
        text = path.read_text(errors="replace")
        hits += [f"{name.decode()}: {m.group(0)}" for m in outside.finditer(text)]
    assert not hits, "\n".join(hits)
