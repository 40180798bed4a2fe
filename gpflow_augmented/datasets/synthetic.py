"""A synthetic classification set of any size, generated batch by batch inside a ``tf.data``
pipeline: nothing of size N is ever held, so it measures and tests what training costs as N
grows."""

import tensorflow as tf
from gpflow.config import default_float

__all__ = ["synthetic_stream"]


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
