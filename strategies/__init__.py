"""Hypothesis strategies of the suite (public; themselves tested in ``properties/suite/test_strategies.py``)."""
from strategies.problems import (  # noqa: F401
    EMBEDDINGS, SHAPES, DrawnProblem, QueryStructure, Structure, biorthogonal_heads, drawn_problems, embeddings,
    heldout_contexts, priority_structures, problems, realize, structures_of, trainable_problems, TRAIN_CONDITION,
)
