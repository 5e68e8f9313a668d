"""Independent computations that share no code with ``theory/``: before the suite or ``tpg check`` reports that a
published result fails, one of these must read the same (:mod:`oracles.flow`: Section 5's evidence;
:mod:`oracles.theorem1`: Theorem 1's statistics and the automaton reading; :mod:`oracles.one_query`: tiny
one-query problems' targets and regularization path, Theorem 2).  Nothing here imports ``theory``, ``strategies`` or ``properties``."""
