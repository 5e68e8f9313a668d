"""Hypothesis strategies of the suite (public; themselves tested in ``properties/suite/test_strategies.py``).

Options after a strategy's subject (the structure, embeddings or relaxation it draws from) are keyword-only,
take strategies where a part is drawn, and are validated when given out of range
(``hypothesis.errors.InvalidArgument``, one line naming the option).
"""
from strategies.problems import *  # noqa: F401,F403
from strategies.problems import __all__ as _problems
from strategies.relaxations import *  # noqa: F401,F403
from strategies.domains import *  # noqa: F401,F403
from strategies.domains import __all__ as _domains
from strategies.relaxations import __all__ as _relaxations
from strategies.scansnap import *  # noqa: F401,F403
from strategies.scansnap import __all__ as _scansnap
from strategies.kq import *  # noqa: F401,F403
from strategies.kq import __all__ as _kq

__all__ = [*_problems, *_relaxations, *_domains, *_scansnap, *_kq]
