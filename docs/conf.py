"""Sphinx configuration: MyST Markdown pages, built with warnings as errors (properties/suite/test_docs.py)."""
from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(DOCS / "_ext"), str(ROOT)]

from theory import __version__  # noqa: E402  (the version is defined once, in pyproject.toml)

project = "attention-tpg-suite"
author = "the attention-tpg-suite authors"
copyright = "2024-2026, the attention-tpg-suite authors"
release = version = __version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.autosummary", "sphinx.ext.napoleon",
              "claims_catalogue"]
# The API's docstrings are numpydoc-style (Parameters / Returns / Raises / Examples sections).
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_preprocess_types = True  # "optional", "default 1.0" and {"a", "b"} in a type are words, not references
# The API's types by their short names in the docstrings' Parameters / Returns sections.
napoleon_type_aliases = {name: f"~{mod}.{name}" for mod, names in {
    "theory.core.problem": ["Problem"], "theory.li2024.analysis": ["Analysis"],
    "theory.li2024.svm": ["SVMSolution"], "theory.li2024.finite": ["FiniteSolution"],
    "theory.li2024.training": ["Trajectory", "Checkpoint"], "theory.core.claims": ["Claim", "Assumption"],
    "theory.core.decision": ["Verdict", "Statistic", "Outcome"]}.items() for name in names}
autosummary_generate = False  # the API page lists its objects itself (docs/api.md): no generated stubs
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "scripts", "README.md"]

# Broken cross-references are errors too (the build runs with -W --keep-going -n).
nitpicky = True
# Types named in the strategies' signatures that live in other projects' documentation (no intersphinx:
# the build must work offline).
# Targets inside theory/ are named in the strategies' docstrings but only the strategies are an API page.
nitpick_ignore_regex = [("py:class", r"(hypothesis|numpy|np)\..*"), ("py:class", r"(SearchStrategy|ndarray)"),
                        ("py:(class|mod|func|meth|attr)", r"theory\..*"), ("py:class", r"SequenceClasses"),
                        # numpydoc type words (napoleon), standard-library types (no intersphinx) and the
                        # internal types an API docstring names without documenting them:
                        ("py:class", r"(array_like|sequence|callable|object|os\.PathLike|pathlib\.Path|"
                                     r"CyclicSubspace|TPG|.+ to .+)"),
                        # helpers a rendered module docstring names, not part of the API (not in __all__)
                        ("py:(func|meth|attr)", r"(certify|error_bound|limit_data|_Objective\..*|assumptions|Outcome\..*)"),
                        ("py:obj", r"(True|False|None)")]
autodoc_typehints = "description"
autodoc_member_order = "bysource"

html_theme = "alabaster"
html_static_path = ["_static"]
html_title = f"attention-tpg-suite {release}"
html_theme_options = {"description": "What one self-attention layer learns, checked by properties",
                      "fixed_sidebar": True, "page_width": "1100px", "sidebar_width": "230px"}


MORE = "<!-- more-reproductions: conf.py lists the pages of docs/reproductions/ here when there are any -->"


def _more_reproductions(app, docname, source):
    """Pages under docs/reproductions/ (e.g. the real-text reproductions) join the Reproductions page's toctree
    when they exist; a glob toctree that matches nothing would be a warning, hence an error."""
    pages = sorted(p.stem for p in (DOCS / "reproductions").glob("*.md"))
    if docname == "reproductions" and pages:
        toc = "```{toctree}\n:maxdepth: 1\n\n" + "\n".join(f"reproductions/{p}" for p in pages) + "\n```"
        source[0] = source[0].replace(MORE, "Reproductions with pages of their own:\n\n" + toc)


def setup(app):
    app.connect("source-read", _more_reproductions)
