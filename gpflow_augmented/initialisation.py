"""The paper's initial state (§5), shared by this package's model and every baseline so that
comparisons start from the same place: an SE-ARD kernel with variance 1 and lengthscales at the
median pairwise distance, and inducing points from k-means++."""

from typing import Optional

import numpy as np
from gpflow.kernels import SquaredExponential

__all__ = ["inducing_points", "median_lengthscale", "initial_kernel"]


def inducing_points(X: np.ndarray, num_inducing: int, seed: int = 0) -> np.ndarray:
    """``num_inducing`` k-means centres, seeded by k-means++ (scikit-learn's implementation)."""
    from sklearn.cluster import KMeans

    X = np.asarray(X, dtype=np.float64)
    if not 1 <= num_inducing <= len(X):
        raise ValueError(f"num_inducing must be in 1..{len(X)}, got {num_inducing}")
    kmeans = KMeans(num_inducing, init="k-means++", n_init=1, max_iter=100, random_state=seed)
    return kmeans.fit(X).cluster_centers_


def median_lengthscale(X: np.ndarray, max_points: int = 2000, seed: int = 0) -> float:
    """The median pairwise Euclidean distance (on a seeded subsample of at most ``max_points``)."""
    X = np.asarray(X, dtype=np.float64)
    if len(X) > max_points:
        X = X[np.random.default_rng(seed).choice(len(X), max_points, replace=False)]
    squared = np.sum(X**2, 1)
    d2 = np.maximum(squared[:, None] + squared[None, :] - 2 * X @ X.T, 0.0)
    distances = np.sqrt(d2[np.triu_indices(len(X), k=1)])
    return float(np.median(distances)) if distances.size else 1.0


def initial_kernel(
    X: np.ndarray, fallback_lengthscale: Optional[float] = None
) -> SquaredExponential:
    """SE-ARD kernel with variance 1 and every lengthscale at the median pairwise distance; where
    that is 0 (mostly repeated rows), at ``fallback_lengthscale`` if given, else refused."""
    X = np.asarray(X)
    lengthscale = median_lengthscale(X)
    if not lengthscale > 0 and fallback_lengthscale is not None:
        lengthscale = fallback_lengthscale
    if not lengthscale > 0:
        raise ValueError(
            "initial_kernel: the median distance between the rows of X is 0 (constant features, "
            "or mostly repeated rows), so there is no lengthscale to start from; drop constant "
            "columns, or build the kernel yourself"
        )
    return SquaredExponential(variance=1.0, lengthscales=np.full(X.shape[1], lengthscale))
