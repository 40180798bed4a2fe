"""Issue 33: choose the default positive bijector of a method on validation splits, never on test data.

For each dataset and seed, the validation split ``tuning.validation_split`` carves from the training data (the
one ``--tune`` uses), and the method at its other defaults (M = 100, B = 200, Adam 0.01) once per bijector, under
the same time budget. Prints validation error / NLL and, per dataset, which bijector had the lower mean NLL.

    python tools/default_bijector_on_validation.py ../shared/data lsm 40 0,1 \
        vehicle,segment,satimage,shuttle,letter,waveform,pendigits,dna,optdigits,usps11k
"""
import json
import sys
import time

import numpy as np

from gpflow_augmented.comparison import compare
from gpflow_augmented.comparison.baselines import POSITIVE_BIJECTORS
from gpflow_augmented.comparison.tuning import validation_split
from gpflow_augmented.datasets import load_dataset


def main(data_dir, method, time_budget, seeds, names):
    rows = []
    for name in names:
        dataset = load_dataset(name, data_dir=data_dir)
        for seed in seeds:
            split = validation_split(dataset, 0.2, seed)
            for bijector in POSITIVE_BIJECTORS:
                started = time.time()
                result = compare(split, [method], method_options={method: {"positive_bijector": bijector}},
                                 seed=seed, batch_size=200, num_inducing=100, time_budget=time_budget,
                                 progress=False)
                final = result.methods[0].final_metrics
                rows.append({"dataset": name, "seed": seed, "bijector": bijector, "error": final["error"],
                             "nll": final["nll"], "iterations": result.methods[0].iterations})
                print(f"{name} seed {seed} {bijector}: validation error {final['error']:.4f} NLL {final['nll']:.4f} "
                      f"({result.methods[0].iterations} iterations, {time.time() - started:.0f} s)", flush=True)
    print(json.dumps(rows))
    wins = {b: 0 for b in POSITIVE_BIJECTORS}
    for name in names:
        mean = {b: np.mean([r["nll"] for r in rows if r["dataset"] == name and r["bijector"] == b])
                for b in POSITIVE_BIJECTORS}
        best = min(mean, key=mean.get)
        wins[best] += 1
        means = " ".join(f"{b} {nll:.4f}" for b, nll in mean.items())
        print(f"{name}: mean validation NLL {means} -> {best}")
    print("lower mean validation NLL:", wins)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), [int(s) for s in sys.argv[4].split(",")],
         sys.argv[5].split(","))
