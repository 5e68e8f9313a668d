"""Reference implementation of the theory the suite verifies (docs/theory.md).

``theory.core``: problem files and their schema, exact arithmetic, the conic solver, the decision procedure;
``theory.li2024``: Li et al. 2024 (token-priority graphs, Graph-SVM, Theorems 1-2, the automaton, Section 5);
``theory.tian2023``: Tian et al. 2023 (Scan and Snap); ``theory.run``: the command line ``python -m theory``
(also installed as ``tpg``).

The version is defined once, in ``pyproject.toml``, and read here from the installed distribution.
"""
from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("attention-tpg-suite")
except PackageNotFoundError:  # a source tree on sys.path that was never installed
    __version__ = "0+unknown"
