r"""
An independent check on the Gibbs sampler: the posterior of the original (non-augmented) model,

    p(v | y) ∝ Π_i p(y_i | f_i) · N(v | 0, I),    f = m + Aᵀv  (m = μ(X), the prior mean),

with the likelihood's own p(y = k | f) (``log_class_probabilities``: σ(f_k) / Σ_c σ(f_c) for the
logistic-softmax), sampled by the No-U-Turn sampler of TensorFlow Probability on the whitened
latents v, with the step size tuned by dual averaging during burn-in. Nothing here uses the
augmentation, so agreement with :class:`~gpflow_augmented.sampling.gibbs.GibbsSampler` tests the
augmentation and the Gibbs conditionals. Whitening makes the prior isotropic, so an identity mass
matrix suits NUTS.
"""

from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from gpflow.config import default_float

from .posterior import LatentSampler, PosteriorSamples, check_counts

__all__ = ["NutsSampler"]


class NutsSampler(LatentSampler):
    """NUTS on the whitened latents of the non-augmented GP classifier.

    The arguments are those of :class:`~gpflow_augmented.sampling.posterior.LatentSampler`.
    """

    def log_density(self, whitened: tf.Tensor) -> tf.Tensor:
        """Unnormalised log p(v | y), [S, K, M] → [S]."""
        f = tf.einsum("cmn,scm->snc", self.projection, whitened)
        f += tf.constant(self.prior_mean.T, whitened.dtype)
        labels = tf.constant(self.labels_onehot.T, whitened.dtype)  # [N, C]
        log_p = self.likelihood.log_class_probabilities(f)
        log_likelihood = tf.reduce_sum(labels[None] * log_p, axis=[1, 2])
        return log_likelihood - 0.5 * tf.reduce_sum(tf.square(whitened), axis=[1, 2])

    def sample(
        self,
        num_samples: int,
        *,
        num_chains: int = 4,
        num_burnin: int = 1000,
        seed: Optional[int] = None,
        target_accept_prob: float = 0.8,
        max_tree_depth: int = 8,
        jit_compile: bool = True,
    ) -> PosteriorSamples:
        """Run ``num_chains`` chains from independent prior draws; adapt the step size during the
        first 80 % of ``num_burnin`` steps and keep ``num_samples`` steps after burn-in.

        :return: :class:`PosteriorSamples` with [num_chains, num_samples, K, M] whitened draws.
        """
        check_counts(
            num_samples=(num_samples, 1), num_chains=(num_chains, 1), num_burnin=(num_burnin, 0)
        )
        rng = np.random.default_rng(seed)
        initial = tf.constant(
            rng.standard_normal((num_chains, self.num_latent_gps, self.num_latent)),
            default_float(),
        )
        stateless_seed = tf.constant(rng.integers(0, 2**31 - 1, size=2), tf.int32)
        kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
            tfp.mcmc.NoUTurnSampler(
                self.log_density,
                step_size=tf.constant(0.1, default_float()),
                max_tree_depth=max_tree_depth,
            ),
            num_adaptation_steps=int(0.8 * num_burnin),
            target_accept_prob=tf.constant(target_accept_prob, default_float()),
        )

        def run_chain(state: tf.Tensor, chain_seed: tf.Tensor) -> tf.Tensor:
            return tfp.mcmc.sample_chain(
                num_results=int(num_samples),
                num_burnin_steps=int(num_burnin),
                current_state=state,
                kernel=kernel,
                trace_fn=None,
                seed=chain_seed,
            )

        compiled = tf.function(run_chain, jit_compile=jit_compile, autograph=False)
        draws = compiled(initial, stateless_seed)
        whitened = np.swapaxes(draws.numpy(), 0, 1)  # [chains, draws, C, M]
        return self.posterior(whitened)
