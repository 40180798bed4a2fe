#!/bin/bash
# Issue 35's GPU measurement, prepared so that a session lent a GPU spends its device time measuring.
#
# Here, on the CPU (about 15 min): export the whole iteration of `lsm` (the default method),
# `lsm-negative-multinomial` (the augmented CAVI step) and `softmax` at the issue's sizes, from this
# checkout and from a base revision (default: 397390c, the step before the branch-free changes),
# and check the new modules against TensorFlow with jaxlib's CPU client:
#     bash tools/gpu_step_check.sh export [BASE_REV]
# On the device (one call, carry build/hlo; about 6 min of modules after the machine's start):
#     bash tools/gpu_step_check.sh device
# It writes $OUT/new/ and $OUT/base/ (gpu_results.json, gpu_log.txt); summarise each with
# ../shared/tools/xla-gpu/summarise.py.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
tool=$here/../shared/tools/xla-gpu
case "${1:-}" in
export)
    base=${2:-397390c}
    python=${PYTHON:-$here/.venv/bin/python}
    cli='import sys; from gpflow_augmented.comparison.cli import main; sys.exit(main())'
    jax_python=${GPFLOW_AUGMENTED_JAX_PYTHON:-$here/../jaxenv/bin/python}
    rm -rf "$here/build/hlo" && mkdir -p "$here/build/hlo"
    cp -r "$tool" "$here/build/hlo/tool"
    # SIZES / BASE_SIZES (space-separated B,M,C,D) override the sizes, e.g. for a smoke run.
    read -r -a sizes_new <<<"${SIZES:-4096,500,10,64 4096,1000,10,784 200,100,6,36 1000,200,10,64}"
    read -r -a sizes_base <<<"${BASE_SIZES:-4096,500,10,64 4096,1000,10,784}"
    methods=lsm,lsm-negative-multinomial,softmax
    (cd "$here" && PYTHONPATH="$here" "$python" -c "$cli" scale --export-hlo build/hlo/new \
        --sizes "${sizes_new[@]}" --methods $methods --dtypes float64,float32)
    # The base: the two large sizes only, in float64, for the before/after ratio.
    worktree=$(mktemp -d)
    git -C "$here" worktree add -q --detach "$worktree" "$base"
    trap 'git -C "$here" worktree remove --force "$worktree"' EXIT
    (cd "$worktree" && PYTHONPATH="$worktree" "$python" -c "$cli" scale \
        --export-hlo "$here/build/hlo/base" --sizes "${sizes_base[@]}" \
        --methods lsm,softmax --dtypes float64)
    "$jax_python" "$tool/run_hlo.py" --platform cpu --artifacts "$here/build/hlo/new" \
        --keys "${CHECK_KEYS:-_B200_}" --warmup 1 --repeats 3 --out "$here/build/hlo/cpu_check.json"
    du -sh "$here/build/hlo"
    ;;
device)
    OUT=${OUT:-gpu_out}
    ARTIFACTS=build/hlo/new OUT=$OUT/new TIME_LIMIT=${TIME_LIMIT:-270} \
        bash build/hlo/tool/gpu_run.sh --order '_B4096_.*float64,_B4096_.*float32,_B200_,_B1000_' ||
        echo "the new modules' run failed; the base still runs"
    ARTIFACTS=build/hlo/base OUT=$OUT/base TIME_LIMIT=90 bash build/hlo/tool/gpu_run.sh
    ;;
*)
    sed -n 2,13p "$0"
    exit 2
    ;;
esac
