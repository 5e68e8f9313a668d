"""Every code example of the documentation runs, and the public API is documented.

* The ```python blocks of each page of docs/ run in order, in one namespace per page, from the repository's
  root (as a reader pastes them into one session); ```toml blocks parse, and the entry-point table that
  docs/adding-claims.md shows is the one the fixture package declares.
* The Examples sections of the API's docstrings run as doctests (:data:`API_MODULES`; ``doctest``, from the
  repository's root).
* Every name in an API module's ``__all__`` has a docstring, and every public function or method of those
  names that takes arguments has numpydoc ``Parameters`` and ``Returns`` sections.

Runtime: a few seconds (small problems, short training runs, five Hypothesis examples).
"""
from __future__ import annotations

import doctest
import importlib
import inspect
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
API_MODULES = ["theory.core.problem", "theory.li2024.analysis", "theory.li2024.svm", "theory.li2024.finite",
               "theory.li2024.training", "theory.claims", "theory.core.claims", "theory.core.decision"]
# Every page; a block shown for its shape (docs/strategies.md's test body elided with "...") still runs.
PAGES = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "_build" not in p.parts)

pytestmark = pytest.mark.theorem("Documentation")


def blocks(text: str, lang: str) -> list[tuple[int, str]]:
    """``(line, code)`` of each fenced block of ``lang`` (```` ```python ````), in page order."""
    out = []
    for m in re.finditer(rf"^```{lang}[ \t]*\n(.*?)^```[ \t]*$", text, re.S | re.M):
        out.append((text[:m.start()].count("\n") + 2, m.group(1)))
    return out


def test_the_pages_have_examples():
    assert len(blocks((DOCS / "library.md").read_text(), "python")) >= 5
    assert len(blocks((DOCS / "adding-claims.md").read_text(), "python")) >= 4


@pytest.mark.parametrize("page", [p for p in PAGES if blocks((DOCS / p).read_text(), "python")])
def test_python_blocks_run(page, monkeypatch):
    monkeypatch.chdir(ROOT)
    namespace = {"__name__": f"docs.{Path(page).stem}"}
    for line, code in blocks((DOCS / page).read_text(), "python"):
        try:
            exec(compile(code, f"docs/{page}:{line}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"docs/{page}, the block at line {line}: {type(exc).__name__}: {exc}") from exc


@pytest.mark.parametrize("page", [p for p in PAGES if blocks((DOCS / p).read_text(), "toml")])
def test_toml_blocks_parse(page):
    for line, code in blocks((DOCS / page).read_text(), "toml"):
        tomllib.loads(code)


def test_the_documented_entry_point_is_the_fixtures():
    shown = tomllib.loads(blocks((DOCS / "adding-claims.md").read_text(), "toml")[0][1])
    fixture = tomllib.loads((ROOT / "properties/fixtures/example_claim_pkg/pyproject.toml").read_text())
    assert shown["project"]["entry-points"] == fixture["project"]["entry-points"]


@pytest.mark.parametrize("name", API_MODULES)
def test_docstring_examples_run(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} doctests failed (run " \
                               f"python -m doctest -v on it)"


def _public_callables(obj):
    """``obj`` itself when a function, else its public methods defined in this project (a class)."""
    if inspect.isfunction(obj):
        return [(obj.__name__, obj)]
    out = []
    for attr, value in vars(obj).items():
        if attr.startswith("_"):
            continue
        value = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
        if inspect.isfunction(value):
            out.append((f"{obj.__name__}.{attr}", value))
    return out


@pytest.mark.parametrize("name", API_MODULES)
def test_public_names_have_numpydoc_docstrings(name):
    module = importlib.import_module(name)
    assert hasattr(module, "__all__") and module.__doc__, f"{name}: no __all__ or no module docstring"
    missing = []
    for public in module.__all__:
        obj = getattr(module, public)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue  # constants: documented by a #: comment or the module docstring
        if not (obj.__doc__ or "").strip():
            missing.append(f"{public}: no docstring")
            continue
        for qual, fn in _public_callables(obj):
            params = [p for p in inspect.signature(fn).parameters if p not in ("self", "cls")]
            doc = inspect.getdoc(fn) or ""
            if not doc:
                missing.append(f"{qual}: no docstring")
            elif params and inspect.isfunction(obj) and not all(s in doc for s in ("Parameters\n---", "Returns\n---")):
                missing.append(f"{qual}: no numpydoc Parameters/Returns section")
    assert not missing, f"{name}:\n" + "\n".join(missing)
