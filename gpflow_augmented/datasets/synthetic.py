"""Synthetic classification sets: one of any size, generated batch by batch inside a ``tf.data``
pipeline (nothing of size N is ever held, so it measures and tests what training costs as N
grows), and two small hard cases for a training loop's stability: nearly separable imbalanced
classes with duplicated rows, and a few points in separated blobs."""

from typing import Tuple

import numpy as np
import tensorflow as tf
from gpflow.config import default_float

__all__ = ["synthetic_stream", "imbalanced_separable_data", "separated_blobs"]


def synthetic_stream(
    num_data: int,
    batch_size: int,
    num_classes: int,
    input_dim: int,
    seed: int = 0,
    class_separation: float = 2.0,
) -> tf.data.Dataset:
    """The ``num_data // batch_size`` batches ``(X [B, D], Y [B, 1])`` of a Gaussian-mixture
    problem (one unit-variance cluster per class, centres drawn with scale ``class_separation``).

    Batch i is a stateless function of (seed, i), so every pass yields the same N points, and any
    batch can be regenerated alone."""
    if num_data < batch_size:
        raise ValueError(f"num_data ({num_data}) must be at least batch_size ({batch_size})")
    dtype = default_float()
    centres = class_separation * tf.random.stateless_normal(
        [num_classes, input_dim], seed=[seed, -1], dtype=dtype
    )

    def batch(index: tf.Tensor):  # type: ignore[no-untyped-def]
        labels_seed = tf.stack([tf.constant(seed, tf.int64), 2 * index])
        noise_seed = tf.stack([tf.constant(seed, tf.int64), 2 * index + 1])
        labels = tf.random.stateless_uniform(
            [batch_size], seed=labels_seed, maxval=num_classes, dtype=tf.int64
        )
        noise = tf.random.stateless_normal([batch_size, input_dim], seed=noise_seed, dtype=dtype)
        return tf.gather(centres, labels) + noise, labels[:, None]

    return tf.data.Dataset.range(num_data // batch_size).map(batch).prefetch(2)


def imbalanced_separable_data(
    num_rows: int = 6000, spread: float = 1.5, seed: int = 0
) -> Tuple[np.ndarray, np.ndarray]:
    """kddcup in small: five nearly separable classes in 4-D with shares 60 % … 0.5 %, every row
    three times. Returns ``X`` [3 num_rows, 4] and labels [3 num_rows]."""
    rng = np.random.default_rng(seed)
    y = rng.choice(5, num_rows, p=[0.6, 0.25, 0.1, 0.045, 0.005])
    X = spread * rng.standard_normal((5, 4))[y] + 0.5 * rng.standard_normal((num_rows, 4))
    return np.repeat(X, 3, axis=0), np.repeat(y, 3)


def separated_blobs(points_per_class: int, seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """Three well-separated 2-D blobs, ``points_per_class`` points each."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    X = np.concatenate([c + 0.3 * rng.standard_normal((points_per_class, 2)) for c in centres])
    return X, np.repeat(np.arange(3), points_per_class)
