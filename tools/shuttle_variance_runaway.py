"""Issue 33: the closed-form kernel variance on minibatches on shuttle (the runaway measured
2026-11-26, fixed by 3869e15's trust region).

`lsm` on the validation split of shuttle's training data (``tuning.validation_split``, seed 0; M =
100, B = 200, Adam 0.01), with the closed-form variance (the default) and with the variance left to
Adam (``update_variance`` False), for each positive bijector: the validation error / NLL / minibatch
ELBO along the trace and the variance at the end.

    python tools/shuttle_variance_runaway.py ../shared/data 600 softplus,exp
"""

import sys

from gpflow_augmented.comparison import compare
from gpflow_augmented.comparison.tuning import validation_split
from gpflow_augmented.datasets import load_dataset


def main(data_dir, iterations, bijectors):
    dataset = load_dataset("shuttle", data_dir=data_dir)
    split = validation_split(dataset, 0.2, 0)
    for arm, update_variance in (("closed-form variance", None), ("variance by Adam", False)):
        for bijector in bijectors:
            options = {"positive_bijector": bijector}
            if update_variance is not None:
                options["update_variance"] = update_variance
            result = compare(
                split,
                ["lsm"],
                method_options={"lsm": options},
                seed=0,
                batch_size=200,
                num_inducing=100,
                time_budget=None,
                max_iterations=iterations,
                progress=False,
            )
            method = result.methods[0]
            trace = " ".join(
                f"{t['iteration']}:{t['error']:.3f}/{t['nll']:.3f}/{t['elbo']:.0f}"
                for t in method.trace[1::2]
            )
            variance = float(method.method.model.kernel.variance.numpy())
            print(
                f"{arm}, {bijector}: σ² at the end {variance:.4g}; "
                f"iteration:error/NLL/ELBO {trace}",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","))
