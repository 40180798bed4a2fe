"""
How far the closed-form answer is from exact VI on a user's data: the augmented bound, the exact
ELBO and their gap, for the model's current q(u) and hyperparameters on the whole training set.

augmented bound ≤ exact ELBO ≤ log p(y): the gap is what the augmentation costs at this q(u). The
exact ELBO's expectation is a quadrature (:mod:`~gpflow_augmented.likelihoods.logistic_softmax`);
its error is estimated by the likelihood's ``refined_exact_local_elbo`` (for the logistic-softmax,
twice the Hermite nodes and half the grid step).
"""

from typing import NamedTuple, Tuple

import numpy as np
import tensorflow as tf
from gpflow.config import default_float

from .models import AugmentedSVGP
from .validation import check_data, is_soft

__all__ = ["BoundCertificate", "bound_certificate"]


class BoundCertificate(NamedTuple):
    """The model's bound against the exact ELBO on the training data
    (:func:`bound_certificate`)."""

    #: the augmented bound; equals ``exact`` for an exact-bound model
    augmented: float
    #: E_q log p(y | f) - KL, by quadrature
    exact: float
    #: exact - augmented ≥ 0
    gap: float
    #: | exact with 2× Hermite nodes and ½ the grid step - exact |
    quadrature_error: float

    def as_dict(self) -> dict:
        """The four numbers by name, e.g. for a log or a JSON file."""
        return self._asdict()


def _local_sums(
    model: AugmentedSVGP, X: np.ndarray, Y: np.ndarray, chunk_size: int
) -> Tuple[float, float, float]:
    augmented = exact = refined = 0.0
    for start in range(0, len(X), chunk_size):
        Xc = tf.constant(X[start : start + chunk_size], dtype=default_float())
        Yc = tf.constant(Y[start : start + chunk_size])
        marginals = model.batch_geometry(Xc).marginals
        augmented += float(tf.reduce_sum(model.likelihood.augmented_local_elbo(marginals, Yc)))
        exact += float(tf.reduce_sum(model.likelihood.exact_local_elbo(marginals, Yc)))
        refined += float(tf.reduce_sum(model.likelihood.refined_exact_local_elbo(marginals, Yc)))
    return augmented, exact, refined


def bound_certificate(
    model: AugmentedSVGP, data: Tuple[np.ndarray, np.ndarray], chunk_size: int = 500
) -> BoundCertificate:
    """The :class:`BoundCertificate` of ``model`` on ``data = (X, Y)`` (all of the training set, so
    that the bounds are those of the model's ``num_data`` points), in chunks of ``chunk_size``.
    The labels are checked as ``fit`` checks them: integers 0..C-1 [N, 1], or rows of class
    probabilities [N, C] where the model takes them."""
    X, Y = np.asarray(data[0]), np.asarray(data[1])
    check_data(X, Y, model.num_classes, model.input_dim, model.accepts_soft_labels)
    if not is_soft(Y, model.num_classes):
        Y = Y.astype(np.int64)
    augmented, exact, refined = _local_sums(model, X, Y, chunk_size)
    scale = 1.0 if model.num_data is None else model.num_data / len(X)
    kl = float(model.prior_kl())
    augmented_elbo, exact_elbo = scale * augmented - kl, scale * exact - kl
    return BoundCertificate(
        augmented=augmented_elbo,
        exact=exact_elbo,
        gap=exact_elbo - augmented_elbo,
        quadrature_error=abs(scale * (refined - exact)),
    )
