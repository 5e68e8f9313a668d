"""The layout shows the design: a small core, one package per paper, the runners apart, no import cycles.

Every ``import`` and ``from ... import`` statement is read (module level and inside functions: a lazy import
is still a dependency), and the graph of the project's own modules must have no cycle and respect the
layers below.  Planted violations (a cycle, an upward import) are detected on a synthetic tree.
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("theory", "strategies", "reports", "suite_db", "oracles")
# (importer prefix, forbidden prefix, why)
LAYERS = [
    ("theory.core", "theory.li2024", "the core serves both papers and knows neither"),
    ("theory.core", "theory.tian2023", "the core serves both papers and knows neither"),
    ("theory.core", "theory.run", "the runners sit above the papers"),
    ("theory.li2024", "theory.tian2023", "one paper's package never reaches into the other's"),
    ("theory.tian2023", "theory.li2024", "one paper's package never reaches into the other's"),
    ("theory.li2024", "theory.run", "the runners sit above the papers"),
    ("theory.tian2023", "theory.run", "the runners sit above the papers"),
    ("theory", "strategies", "the reference implementation does not depend on the test strategies"),
    ("theory", "reports", "the reference implementation does not depend on the report"),
    ("theory", "properties", "the reference implementation does not depend on the tests"),
    ("oracles", "theory", "an independent computation shares no code with the reference implementation"),
    ("oracles", "strategies", "an independent computation shares no code with the test strategies"),
]


def module_graph(root: Path, packages=PACKAGES) -> nx.DiGraph:
    """Directed graph module -> module it imports, over the modules of ``packages`` under ``root``."""
    files = {}
    for pkg in packages:
        for f in (root / pkg).rglob("*.py"):
            parts = f.relative_to(root).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    g = nx.DiGraph()
    g.add_nodes_from(files)
    for name, f in files.items():
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            g.add_edges_from((name, t) for t in targets if t in files and t != name)
    return g


def layer_violations(g: nx.DiGraph) -> list[str]:
    def under(name, prefix):
        return name == prefix or name.startswith(prefix + ".")

    return [f"{a} imports {b}: {why}" for a, b in g.edges for lo, hi, why in LAYERS if under(a, lo) and under(b, hi)]


def test_no_import_cycles_anywhere():
    cycles = list(nx.simple_cycles(module_graph(ROOT)))
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c + c[:1]) for c in cycles[:5])


def test_layers_are_respected():
    bad = layer_violations(module_graph(ROOT))
    assert not bad, "\n".join(bad)


def test_each_paper_package_holds_its_claims():
    from theory.claims import all_claims

    for c in all_claims():
        package = c.name.split(".")[0]
        assert (ROOT / "theory" / package / "claims.py").is_file(), c.name


@pytest.mark.parametrize("planted", ["cycle", "upward"])
def test_the_checks_catch_planted_violations(tmp_path, planted):
    for sub in ("theory/core", "theory/li2024"):
        (tmp_path / sub).mkdir(parents=True)
        (tmp_path / sub / "__init__.py").write_text("")
    (tmp_path / "theory/__init__.py").write_text("")
    (tmp_path / "theory/li2024/a.py").write_text("from theory.core import b\n")
    body = "def f():\n    from theory.li2024 import a\n" if planted == "cycle" else "x = 1\n"
    (tmp_path / "theory/core/b.py").write_text(body)
    g = module_graph(tmp_path, ("theory",))
    if planted == "cycle":
        assert list(nx.simple_cycles(g)), "a lazy import cycle was not seen"
        assert layer_violations(g), "the core importing a paper package was not flagged"
    else:
        assert not list(nx.simple_cycles(g)) and not layer_violations(g)
        (tmp_path / "theory/core/b.py").write_text("import theory.li2024.a\n")
        assert layer_violations(module_graph(tmp_path, ("theory",)))


def imports_of_test_modules(g: nx.DiGraph) -> list[str]:
    """Edges of ``g`` into a test module (``test_*``)."""
    return [f"{a} imports {b}" for a, b in g.edges if b.rsplit(".", 1)[-1].startswith("test_")]


def test_no_module_imports_a_test_module():
    """As in data-apis/array-api-tests, test modules are pytest's entry points only: what several share lives
    in a helper module (``properties/helpers.py``, ``properties/li2024/runs.py``, ``properties/report_helpers.py``),
    in ``strategies/``, or with its claim (planted wrong targets: ``theory/li2024/plants.py``); a benchmark
    that runs a property gets it from pytest's collection (``benchmarks/collected.py``)."""
    bad = imports_of_test_modules(module_graph(ROOT, PACKAGES + ("properties", "benchmarks")))
    assert not bad, "\n".join(bad)


def test_the_test_module_check_catches_a_planted_import(tmp_path):
    (tmp_path / "properties/li2024").mkdir(parents=True)
    for f in ("properties/__init__.py", "properties/li2024/__init__.py", "properties/li2024/test_a.py"):
        (tmp_path / f).write_text("x = 1\n")
    (tmp_path / "properties/li2024/test_b.py").write_text("def f():\n    from properties.li2024 import test_a\n")
    (tmp_path / "properties/helpers.py").write_text("from properties.li2024.test_a import x\n")
    bad = imports_of_test_modules(module_graph(tmp_path, ("properties",)))
    assert sorted(bad) == ["properties.helpers imports properties.li2024.test_a",
                           "properties.li2024.test_b imports properties.li2024.test_a"], bad
