"""Count what each method's compiled iteration asks of a device, on this CPU: the device-independent
proxy of issue 35 for its cost on a GPU.

* From the unoptimised HLO (the module ``gpflow-augmented scale --export-hlo`` writes, the same on
  every backend), static counts: conditionals and while loops (XLA on a GPU reads each predicate
  on the host), Cholesky factorisations and triangular solves (library calls on a GPU, expanded
  into loops on a CPU). A while loop's body is counted once, whether or not it runs.
* From XLA's CPU-optimised HLO: the fusions, and all instructions that launch work (each a kernel
  or a library call on a GPU), outside fused computations.
* On this CPU: the first call (trace and XLA compile) and the median of later calls.

    python tools/hlo_census.py --sizes 200,100,6,36 1000,200,10,64 --methods lsm,softmax
"""

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Dict

# The benchmark studies (benchmarks/) sit beside tools/ at the repository's root, outside the wheel.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gpflow
import numpy as np
import tensorflow as tf

from benchmarks.hlo_export import DEFAULT_SIZES, opcodes, synthetic_method

# Instructions of an optimised module that launch no work of their own.
_FREE = {
    "parameter",
    "constant",
    "tuple",
    "get-tuple-element",
    "bitcast",
    "copy-start",
    "copy-done",
    "after-all",
    "partition-id",
    "replica-id",
    "opt-barrier",
}


def census(name: str, size, dtype: str, repeats: int = 5) -> Dict:
    config = dataclasses.replace(gpflow.config.config(), float=np.dtype(dtype).type)
    with gpflow.config.as_context(config):
        method, args, _, _ = synthetic_method(name, size, dtype)
        compiled = tf.function(method.iteration_function(), jit_compile=True, autograph=False)
        ir = compiled.experimental_get_compiler_ir(*args)
        hlo, optimised = ir(stage="hlo"), ir(stage="optimized_hlo")
        start = time.perf_counter()
        tf.nest.map_structure(lambda t: t.numpy(), compiled(*args))
        first = time.perf_counter() - start
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            tf.nest.map_structure(lambda t: t.numpy(), compiled(*args))
            times.append(time.perf_counter() - start)
    codes = opcodes(hlo)
    launched = [c for c in opcodes(optimised, skip_fused=True) if c not in _FREE]
    return {
        "method": name,
        "size": size,
        "dtype": dtype,
        "conditional": codes.count("conditional"),
        "while": codes.count("while"),
        "cholesky": codes.count("cholesky"),
        "triangular-solve": codes.count("triangular-solve"),
        "fusion": launched.count("fusion"),
        "launches": len(launched),
        "first call s": first,
        "ms": 1e3 * float(np.median(times)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--sizes", nargs="*", default=[",".join(map(str, s)) for s in DEFAULT_SIZES[:1]]
    )
    parser.add_argument("--methods", default="lsm,lsm-negative-multinomial,softmax")
    parser.add_argument("--dtypes", default="float64")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    keys = ["conditional", "while", "cholesky", "triangular-solve", "fusion", "launches"]
    keys += ["first call s", "ms"]
    print("| method | (B, M, C, D) | dtype | " + " | ".join(keys) + " |")
    print("|---" * (3 + len(keys)) + "|")
    for size in args.sizes:
        size = tuple(int(v) for v in size.split(","))
        for dtype in args.dtypes.split(","):
            for name in args.methods.split(","):
                row = census(name, size, dtype, args.repeats)
                cells = [
                    f"{row[k]:.3g}" if isinstance(row[k], float) else str(row[k]) for k in keys
                ]
                print(f"| {name} | {size} | {dtype} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
