"""The claims of Tian et al. 2023 ("Scan and Snap") that the suite checks, as objects.

They are statements about the paper's data model (query fixed by the next token, contextual tokens drawn
from ``P(l | n)``) and its reparameterized dynamics, checked on the experiments of this package
(:mod:`theory.tian2023.model`, :mod:`theory.tian2023.snap`, :mod:`theory.tian2023.adam`,
:mod:`theory.tian2023.recall`); a problem file of Li et al.'s format does not carry that model, so
``check`` lists them as not applicable to it.
"""
from __future__ import annotations

from theory.core.claims import Assumption, Claim

PAPER = "Tian, Wang, Chen, Du (2023), Scan and Snap: Understanding Training Dynamics and Token Composition in 1-layer Transformer"

DATA_MODEL = Assumption("Scan and Snap data model",
                        "tokens drawn from P(l | n) with the query fixed by the next token (not a problem file)",
                        lambda problem: False)
Z0 = Assumption("zero start", "Y(0) = Z(0) = 0", lambda problem: False)


def _claim(name, reference, statement, rule, calibrations, properties, assumptions=(DATA_MODEL,)):
    return Claim(f"tian2023.{name}", PAPER, reference, statement, assumptions, rule, calibrations, properties)


THEOREM2 = _claim("theorem2", "Theorem 2", "distinct tokens' attention logits grow and a single common token's shrinks",
                  "signs of dz/dt over the simulated dynamics, per token class",
                  ("a planted sign flip of the common token's drift",), ("properties/tian2023/test_theorems.py",))
THEOREM3 = _claim("theorem3", "Theorem 3 (scan)",
                  "the relative gain r(t) = r(0) e^{2(z_l - z_l(0))}; the most probable distinct token dominates and "
                  "lower-probability tokens are overtaken first",
                  "the identity to integrator tolerance, the ordering of the logits at the end of the run",
                  ("a permuted probability order",), ("properties/tian2023/test_theorems.py",), (DATA_MODEL, Z0))
THEOREM4 = _claim("theorem4", "Theorem 4 (snap)",
                  "the dominant logit's growth turns logarithmic near t₀ ≈ 2K ln M / η_Y; a larger η_Y snaps earlier "
                  "and leaves denser attention",
                  "snap time and final entropy ordered with η_Y, judged against the entropies' certified errors",
                  ("a tie at uniform attention", "the other rate moved too"), ("properties/tian2023/test_theorems.py",))
FIGURES = _claim("figures", "Figures 3, 5, 8, 9, 11, 12",
                 "the figures' calibrated claims: snap ordering (Fig. 3, 9), Lemma 7 gap decay (Fig. 8), Adam overlap "
                 "(Fig. 5), recall curves (Fig. 11, 12)",
                 "each figure's stated criterion on a reduced run, with a control that must fail it",
                 ("each figure's planted control",), ("properties/tian2023/test_figures.py",
                                                      "properties/tian2023/test_reproductions.py"))

CLAIMS = (THEOREM2, THEOREM3, THEOREM4, FIGURES)
