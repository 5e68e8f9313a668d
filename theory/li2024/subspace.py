"""The cyclic subspace ``S_fin`` (docs/theory.md, "Graph-SVM, the cyclic subspace and the finite component").

``S_fin = span{(e_i - e_j) e_k^T : (i ≍ j) ∈ G^(k)}`` in the Frobenius inner product.  The generators
are not orthogonal unless E is orthonormal, so the basis comes from an SVD of the generator matrix.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from theory.li2024.graphs import TPG, token_priority_graphs
from theory.core.problem import Problem
from theory.li2024.svm import constraints

RANK_TOL = 1e-10


@dataclass(frozen=True)
class CyclicSubspace:
    basis: np.ndarray  # r x d x d, orthonormal in the Frobenius inner product

    @property
    def dim(self) -> int:
        return self.basis.shape[0]

    def coordinates(self, W: np.ndarray) -> np.ndarray:
        return np.tensordot(self.basis, W, axes=([1, 2], [0, 1]))

    def compose(self, theta: np.ndarray) -> np.ndarray:
        d = self.basis.shape[1]
        return np.tensordot(theta, self.basis, axes=1) if self.dim else np.zeros((d, d))

    def project(self, W: np.ndarray) -> np.ndarray:
        """Orthogonal projection ``Π_{S_fin} W``."""
        return self.compose(self.coordinates(W))


def cyclic_subspace(problem: Problem, graphs: dict[int, TPG] | None = None) -> CyclicSubspace:
    d = problem.d
    gens = constraints(problem, graphs or token_priority_graphs(problem)).equal
    if len(gens) == 0:
        return CyclicSubspace(np.zeros((0, d, d)))
    U, s, _ = np.linalg.svd(gens.T, full_matrices=False)
    r = int((s > RANK_TOL * max(1.0, s[0])).sum())
    return CyclicSubspace(U[:, :r].T.reshape(r, d, d))
