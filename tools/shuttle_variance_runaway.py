"""Issue 33: the closed-form kernel variance on minibatches runs away on shuttle (measured 2026-11-26).

`lsm` on the validation split of shuttle's training data (``tuning.validation_split``, seed 0; M = 100, B = 200,
Adam 0.01), with the closed-form variance (the default) and with the variance left to Adam, for each positive
bijector: the validation error / NLL / minibatch ELBO along the trace and the variance at the end.

    python tools/shuttle_variance_runaway.py ../shared/data 600 softplus,exp
"""
import functools
import sys

import gpflow_augmented.training as training
from gpflow_augmented.comparison import compare
from gpflow_augmented.comparison.tuning import validation_split
from gpflow_augmented.datasets import load_dataset

closed_form_default = training.Trainer.__init__


@functools.wraps(closed_form_default)
def variance_by_adam(self, *args, **kwargs):
    # compare builds its own Trainer and has no option for this: the comparison arm only.
    kwargs["update_variance"] = False
    return closed_form_default(self, *args, **kwargs)


def main(data_dir, iterations, bijectors):
    dataset = load_dataset("shuttle", data_dir=data_dir)
    split = validation_split(dataset, 0.2, 0)
    try:
        for arm, init in (("closed-form variance", closed_form_default), ("variance by Adam", variance_by_adam)):
            training.Trainer.__init__ = init
            for bijector in bijectors:
                result = compare(split, ["lsm"], method_options={"lsm": {"positive_bijector": bijector}}, seed=0,
                                 batch_size=200, num_inducing=100, time_budget=None, max_iterations=iterations,
                                 progress=False)
                method = result.methods[0]
                trace = " ".join(f"{t['iteration']}:{t['error']:.3f}/{t['nll']:.3f}/{t['elbo']:.0f}"
                                 for t in method.trace[1::2])
                variance = float(method.method.model.kernel.variance.numpy())
                print(f"{arm}, {bijector}: σ² at the end {variance:.4g}; iteration:error/NLL/ELBO {trace}", flush=True)
    finally:
        training.Trainer.__init__ = closed_form_default


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","))
