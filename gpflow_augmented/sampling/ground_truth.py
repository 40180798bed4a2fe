r"""
How close the variational posteriors get to the exact one: the paper's Figure 5.

All methods share one fixed kernel and use no inducing-point approximation (Z = X), so what remains
is the error of each approximation:

* ``gibbs``: the Gibbs sampler of the augmented model, the ground truth;
* ``nuts``: NUTS on the original model, an independent check of the ground truth;
* ``exact``, ``negative-multinomial`` and ``gamma-poisson``:
  :class:`~gpflow_augmented.LogisticSoftmaxSVGP` trained to convergence by full-batch CAVI (ρ = 1)
  under each scheme (``exact``: closed-form steps on the exact ELBO, the package's default);
* ``vi``: GPflow's ``SVGP`` with the (non-augmented) :class:`~gpflow_augmented.LogisticSoftmax`,
  q(u) optimised by L-BFGS on the deterministic quasi-Monte Carlo ELBO.

Each is summarised at the test inputs by the posterior-predictive probabilities p (the variational
models with the likelihood's default ``predictive="mean"``, E_q p(y | f), the quantity the samplers
average), and the latent means μ and variances σ², and compared entry by entry with the Gibbs
values.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, NamedTuple, Optional, Tuple

import gpflow
import numpy as np
from gpflow.config import default_float
from gpflow.kernels import Kernel
from gpflow.utilities import set_trainable

from ..cavi import CAVI
from ..datasets import Dataset, load_dataset
from .gibbs import GibbsSampler
from ..initialisation import initial_kernel
from ..likelihoods import LogisticSoftmax
from .nuts import NutsSampler
from ..models import LogisticSoftmaxSVGP
from .posterior import ConvergenceDiagnostics, PosteriorSamples, monte_carlo_standard_error

__all__ = [
    "GroundTruthComparison",
    "PosteriorSummary",
    "QUANTITIES",
    "compare_with_gibbs",
    "discrepancy",
    "fit_cavi",
    "fit_vi",
    "summarise",
]

QUANTITIES = ("probabilities", "latent_mean", "latent_variance")


class PosteriorSummary(NamedTuple):
    """What a posterior says at test inputs, each [N, C]."""

    probabilities: np.ndarray
    latent_mean: np.ndarray
    latent_variance: np.ndarray


def summarise(posterior: Any, Xnew: np.ndarray) -> PosteriorSummary:
    """Summarise a :class:`PosteriorSamples` or any GPflow model with ``predict_f`` and
    ``predict_y``."""
    mean, variance = posterior.predict_f(Xnew)
    probabilities, _ = posterior.predict_y(Xnew)
    return PosteriorSummary(*(np.asarray(x) for x in (probabilities, mean, variance)))


def discrepancy(
    reference: PosteriorSummary, approximation: PosteriorSummary
) -> Dict[str, Tuple[float, float]]:
    """Mean and max absolute difference from the reference, per quantity."""
    result = {}
    for name in QUANTITIES:
        difference = np.abs(getattr(approximation, name) - getattr(reference, name))
        result[name] = (float(difference.mean()), float(difference.max()))
    return result


def fit_cavi(
    data: Tuple[np.ndarray, np.ndarray],
    kernel: Kernel,
    num_classes: int,
    scheme: str,
    *,
    max_iterations: int = 1000,
    tolerance: float = 1e-10,
) -> LogisticSoftmaxSVGP:
    """The full-GP augmented model (Z = X) trained by full-batch CAVI until the ELBO's relative
    change falls below ``tolerance`` (exact coordinate ascent: the ELBO never decreases)."""
    X, Y = data
    model = LogisticSoftmaxSVGP(kernel, X.copy(), num_classes, scheme=scheme)
    # No warm start: full-batch steps on the model's own bound from the first (the exact bound's are
    # line-searched), so the stopping rule never sees the warm start's different bound level off.
    cavi = CAVI(model, step_size=1.0, warm_start_iterations=0)
    batch = cavi.prepare((X, Y))
    previous = -np.inf
    for _ in range(max_iterations):
        elbo = float(cavi.step(batch))
        if abs(elbo - previous) <= tolerance * abs(elbo):
            break
        previous = elbo
    return model


def fit_vi(
    data: Tuple[np.ndarray, np.ndarray],
    kernel: Kernel,
    num_classes: int,
    *,
    max_iterations: int = 5000,
) -> gpflow.models.SVGP:
    """GPflow's ``SVGP`` with the non-augmented likelihood on the full GP (Z = X), only q(u)
    free."""
    X, Y = data
    model = gpflow.models.SVGP(
        kernel,
        LogisticSoftmax(num_classes),
        X.copy(),
        num_latent_gps=num_classes,
        whiten=True,
    )
    set_trainable(model.kernel, False)
    set_trainable(model.inducing_variable, False)
    gpflow.optimizers.Scipy().minimize(
        model.training_loss_closure((X, Y)),
        model.trainable_variables,
        options={"maxiter": max_iterations},
    )
    return model


@dataclass
class GroundTruthComparison:
    """The result of :func:`compare_with_gibbs`.

    ``summaries`` maps each method to its :class:`PosteriorSummary` on the test inputs;
    ``diagnostics`` the samplers' convergence diagnostics there; ``sampler_standard_error`` the
    combined Monte Carlo standard error [N, C] of the Gibbs and NUTS predictive probabilities.
    """

    dataset: Dataset
    kernel: Kernel
    summaries: Dict[str, PosteriorSummary]
    diagnostics: Dict[str, ConvergenceDiagnostics]
    sampler_standard_error: np.ndarray
    samples: Dict[str, PosteriorSamples] = field(repr=False, default_factory=dict)

    def discrepancies(self, reference: str = "gibbs") -> Dict[str, Dict[str, Tuple[float, float]]]:
        """Per method other than ``reference``: quantity → (mean, max) absolute difference."""
        truth = self.summaries[reference]
        return {
            name: discrepancy(truth, summary)
            for name, summary in self.summaries.items()
            if name != reference
        }

    def report(self) -> str:
        discrepancies = self.discrepancies()
        width = max(len("method"), *map(len, discrepancies))
        lines = [
            f"{self.dataset.name}: N = {len(self.dataset.X_train)} train, "
            f"{len(self.dataset.X_test)} test, C = {self.dataset.num_classes}",
            f"{'method':<{width}} " + " ".join(f"{q:>26}" for q in QUANTITIES),
            f"{'':<{width}} " + " ".join(f"{'mean |Δ|':>12} {'max |Δ|':>13}" for _ in QUANTITIES),
        ]
        for name, table in discrepancies.items():
            cells = " ".join(f"{table[q][0]:>12.4f} {table[q][1]:>13.4f}" for q in QUANTITIES)
            lines.append(f"{name:<{width}} {cells}")
        for name, diagnostics in self.diagnostics.items():
            lines.append(
                f"{name}: max split R-hat {diagnostics.max_rhat:.4f}, "
                f"min ESS {diagnostics.min_ess:.0f} "
                f"(predictive {np.min(diagnostics.probability_ess):.0f}, "
                f"latent {np.min(diagnostics.latent_ess):.0f})"
            )
        return "\n".join(lines)


def compare_with_gibbs(
    dataset: Optional[Dataset] = None,
    kernel: Optional[Kernel] = None,
    *,
    num_samples: int = 5000,
    num_burnin: int = 500,
    num_nuts_samples: int = 1000,
    num_chains: int = 4,
    seed: int = 0,
    progress: bool = False,
) -> GroundTruthComparison:
    """Gibbs ground truth against NUTS and the three variational methods (the paper's Figure 5).

    :param dataset: default: the 3-class wine data, standardised, 20 % held out (seed 0).
    :param kernel: fixed for every method; default: SE-ARD with variance 1 and lengthscales at the
        median pairwise distance of the training inputs (the paper's initial values).
    """
    dataset = dataset or load_dataset("wine", seed=0)
    kernel = kernel or initial_kernel(dataset.X_train)
    data: Tuple[np.ndarray, np.ndarray] = (
        np.asarray(dataset.X_train, default_float()),
        np.asarray(dataset.Y_train, np.int64),
    )
    C, X_test = dataset.num_classes, dataset.X_test
    samples = {
        "gibbs": GibbsSampler(data, kernel, C).sample(
            num_samples,
            num_chains=num_chains,
            num_burnin=num_burnin,
            seed=seed,
            progress=progress,
        ),
        "nuts": NutsSampler(data, kernel, C).sample(
            num_nuts_samples, num_chains=num_chains, num_burnin=num_burnin, seed=seed + 1
        ),
    }
    models = {
        "exact": fit_cavi(data, kernel, C, "exact"),
        "negative-multinomial": fit_cavi(data, kernel, C, "negative-multinomial"),
        "gamma-poisson": fit_cavi(data, kernel, C, "gamma-poisson"),
        "vi": fit_vi(data, kernel, C),
    }
    summaries = {name: summarise(posterior, X_test) for name, posterior in samples.items()}
    summaries.update({name: summarise(model, X_test) for name, model in models.items()})
    diagnostics = {name: posterior.diagnostics(X_test) for name, posterior in samples.items()}
    standard_error = np.sqrt(
        sum(
            np.square(monte_carlo_standard_error(posterior.predictive_draws(X_test)))
            for posterior in samples.values()
        )
    )
    return GroundTruthComparison(dataset, kernel, summaries, diagnostics, standard_error, samples)
