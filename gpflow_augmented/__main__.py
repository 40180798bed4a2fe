"""``python -m gpflow_augmented`` (or ``gpflow-augmented``): train on a bundled real dataset and print
test error, mean NLL and expected calibration error for both augmentation schemes."""
import argparse
import os
import sys
import time
from typing import List, Optional

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="gpflow-augmented", description=__doc__)
    parser.add_argument("--dataset", default="vehicle", help="bundled dataset name (default vehicle)")
    parser.add_argument("--data-dir", default=None, help="folder of .npz datasets instead")
    parser.add_argument("--num-inducing", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import gpflow_augmented as ga

    try:
        d = ga.datasets.load_dataset(args.dataset, args.data_dir, seed=args.seed)
    except (FileNotFoundError, KeyError, ValueError) as error:
        print(f"gpflow-augmented: {error}", file=sys.stderr)
        return 2
    print(f"{d.name}: {len(d.X_train)} train / {len(d.X_test)} test points, "
          f"{d.X_train.shape[1]} features, {d.num_classes} classes; M={args.num_inducing}, "
          f"batch {args.batch_size}, {args.iterations} iterations")
    Z = ga.inducing_points(d.X_train, min(args.num_inducing, len(d.X_train)), seed=args.seed)
    print(f"{'scheme':<10} {'error':>7} {'NLL':>7} {'ECE':>7} {'seconds':>8}")
    for scheme in ga.SCHEMES:
        model = ga.LogisticSoftmaxSVGP(ga.initial_kernel(d.X_train), Z.copy(), d.num_classes,
                                       num_data=len(d.X_train), scheme=scheme)
        start = time.perf_counter()
        ga.fit(model, (d.X_train, d.Y_train), iterations=args.iterations,
               batch_size=args.batch_size, seed=args.seed, progress=sys.stderr.isatty())
        seconds = time.perf_counter() - start
        p = model.predict_y(d.X_test)[0].numpy()
        log_density = model.predict_log_density((d.X_test, d.Y_test)).numpy()
        print(f"{scheme:<10} {ga.metrics.error_rate(p, d.Y_test):7.4f} "
              f"{ga.metrics.mean_nll(log_density):7.4f} "
              f"{ga.metrics.expected_calibration_error(p, d.Y_test):7.4f} {seconds:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
