#!/bin/bash
# Issue 35's GPU measurement, prepared so that a session lent a GPU spends its device time measuring.
#
# Here, on the CPU (about 8 min on a 2-core AMD EPYC): export the whole iteration of `lsm` (the default method),
# `lsm-negative-multinomial` (the augmented CAVI step) and `softmax` at the issue's sizes, from this
# checkout; `lsm` and `softmax` from a base revision (default: 397390c, the step before the
# branch-free changes); `lsm` from each candidate revision (CANDIDATES, NAME=REV, space-separated;
# none by default); `lsm` and `softmax` in float32
# with TF32 off; the closed-form step's parts (tools/step_parts.py); and check the modules against
# TensorFlow with jaxlib's CPU client:
#     bash tools/gpu_step_check.sh export [BASE_REV]
# On the device (carry build/hlo; at most DEVICE_BUDGET s, default 480, of modules started after
# the machine's start, in the order: new, candidates, parts, TF32 off, base, and the large sizes
# without autotuning; the compiles fill that before the small sizes, so plan a second call):
#     bash tools/gpu_step_check.sh device
# It writes RESULTS (default /tmp/gpu_out)/new/, candidates/<name>/, parts/, f32-highest/, base/ and
# autotune-0/ (gpu_results.json, gpu_log.txt), and after each phase archives that folder as
# $OUT/gpu_out.tar.gz: the device returns 8 files at most, and a call stopped at its limit still
# returns the phases it finished. Here, `tar -xzf gpu_out.tar.gz` and
# `python tools/gpu_summary.py gpu_out` make the tables.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
tool=$here/../shared/tools/xla-gpu
case "${1:-}" in
export)
    base=${2:-397390c}
    python=${PYTHON:-$here/.venv/bin/python}
    # This checkout exports through the benchmarks' command; older revisions (the base and the
    # candidates) through theirs, `gpflow-augmented scale --export-hlo`.
    export='import sys; from benchmarks.__main__ import main; sys.exit(main())'
    cli='import sys; from gpflow_augmented.comparison.cli import main; sys.exit(main())'
    jax_python=${GPFLOW_AUGMENTED_JAX_PYTHON:-$here/../jaxenv/bin/python}
    rm -rf "$here/build/hlo" && mkdir -p "$here/build/hlo"
    cp -r "$tool" "$here/build/hlo/tool"
    # SIZES / BASE_SIZES (space-separated B,M,C,D) override the sizes, e.g. for a smoke run.
    read -r -a sizes_new <<<"${SIZES:-4096,500,10,64 4096,1000,10,784 200,100,6,36 1000,200,10,64}"
    read -r -a sizes_base <<<"${BASE_SIZES:-4096,500,10,64 4096,1000,10,784}"
    methods=lsm,lsm-negative-multinomial,softmax
    (cd "$here" && PYTHONPATH="$here" "$python" -c "$export" export-hlo build/hlo/new \
        --sizes "${sizes_new[@]}" --methods $methods --dtypes float64,float32)
    worktrees=()
    trap 'for w in "${worktrees[@]}"; do git -C "$here" worktree remove --force "$w"; done' EXIT
    export_revision() {  # REV FOLDER METHODS SIZES...: that revision's modules, in float64
        local rev=$1 folder=$2 methods=$3 worktree
        shift 3
        worktree=$(mktemp -d)
        git -C "$here" worktree add -q --detach "$worktree" "$rev"
        worktrees+=("$worktree")
        (cd "$worktree" && PYTHONPATH="$worktree" "$python" -c "$cli" scale \
            --export-hlo "$folder" --sizes "$@" --methods "$methods" --dtypes float64)
    }
    # The base: the two large sizes only, for the before/after ratio.
    export_revision "$base" "$here/build/hlo/base" lsm,softmax "${sizes_base[@]}"
    # Candidate and probe revisions, whose GPU time decides (NAME=REV, space-separated).
    read -r -a candidates <<<"${CANDIDATES:-}"
    read -r -a sizes_candidate <<<"${CANDIDATE_SIZES:-4096,500,10,64 4096,1000,10,784 200,100,6,36}"
    for candidate in "${candidates[@]}"; do
        export_revision "${candidate#*=}" "$here/build/hlo/candidates/${candidate%%=*}" lsm \
            "${sizes_candidate[@]}"
    done
    # float32 with TF32 off: TensorFlow then exports every product with operand_precision=highest.
    tf32_off='import sys, tensorflow as tf; tf.config.experimental.enable_tensor_float_32_execution(False)'
    (cd "$here" && PYTHONPATH="$here" "$python" -c "$tf32_off; ${export#import sys; }" export-hlo \
        build/hlo/f32-highest --sizes "${sizes_candidate[@]}" --methods lsm,softmax \
        --dtypes float32)
    (cd "$here" && PYTHONPATH="$here" "$python" tools/step_parts.py build/hlo/parts \
        --sizes "${sizes_new[@]}")
    for folder in "$here/build/hlo/new" "$here"/build/hlo/candidates/* "$here/build/hlo/f32-highest" \
        "$here/build/hlo/parts"; do
        [ -d "$folder" ] || continue
        "$jax_python" "$tool/run_hlo.py" --platform cpu --artifacts "$folder" \
            --keys "${CHECK_KEYS:-_B200_}" --warmup 1 --repeats 3 --out "$folder/cpu_check.json"
    done
    du -sh "$here/build/hlo"
    ;;
device)
    returned=${OUT:-.}  # the folder the device sends back
    mkdir -p "$returned"
    archive=$returned/gpu_out.tar.gz
    OUT=${RESULTS:-/tmp/gpu_out}
    # A machine still warm from an earlier call keeps that call's results: none may pass for this one's.
    rm -rf "$OUT" && mkdir -p "$OUT"
    start=$SECONDS
    budget=${DEVICE_BUDGET:-480}
    run() {  # FOLDER RESULTS LIMIT [gpu_run.sh options]: within what is left of the budget
        local folder=$1 results=$2 limit=$3 left
        shift 3
        left=$((budget - (SECONDS - start)))
        [ -d "$folder" ] || return 0
        if [ "$left" -lt 15 ]; then
            echo "no time left for $folder"
            return 0
        fi
        ARTIFACTS=$folder OUT=$OUT/$results TIME_LIMIT=$((limit < left ? limit : left)) \
            bash build/hlo/tool/gpu_run.sh "$@" || echo "the run of $folder failed; the next one runs"
        # Written aside and renamed, so that a call stopped during tar still returns the last whole one.
        tar -czf "$archive.part" -C "$(dirname "$OUT")" "$(basename "$OUT")" && mv -f "$archive.part" "$archive"
    }
    run build/hlo/new new 270 --order '_B4096_.*float64,_B4096_.*float32,_B200_,_B1000_'
    for folder in build/hlo/candidates/*; do
        run "$folder" "candidates/$(basename "$folder")" 60 --order '_B4096_,_B200_'
    done
    run build/hlo/parts parts 45 --order '_B4096_,_B200_'
    run build/hlo/f32-highest f32-highest 60 --order '_B4096_,_B200_'
    run build/hlo/base base 60
    # Compile time without XLA's autotuning of the products (it picks each one's kernel by timing
    # candidates): what the compile-time target would cost at run time, the large sizes only.
    XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_autotune_level=0" run build/hlo/new autotune-0 60 \
        --keys '_B4096_' --order '^lsm_,^softmax_'
    ;;
*)
    sed -n 2,20p "$0"
    exit 2
    ;;
esac
