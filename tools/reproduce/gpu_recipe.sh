#!/usr/bin/env bash
# The GPU recipe of the papers' reproduction (RESULTS.md), one prepared call for a machine with a GPU:
#
#   bash tools/reproduce/gpu_recipe.sh [OUT]  (default OUT: results/gpu)
#
# 1. ptb-sentence: the treebank's GCNN and LSTM recipes of `zoo reproduce ptb-sentence`, the same
#    passes over the data as on the CPU (stopped after 11 minutes, resumable: rerun to go on),
#    their sentence-level test perplexities beside the paper's: OUT/ptb-sentence.json and .png;
# 2. table4: throughput and responsiveness on the GPU (3 repeats): OUT/table4.json and .png.
# Each step has its own time limit and writes what it finished; `zoo reproduce --results --out OUT`
# gathers them. Needs the zoo installed with a GPU build of TensorFlow (pip install '.[and-cuda]'
# is not declared: install tensorflow[and-cuda] of the pinned version first).
set -uo pipefail
OUT=${1:-results/gpu}
export ZOO_REPRODUCE_RUNS=${ZOO_REPRODUCE_RUNS:-runs/reproduce-gpu}
python - <<'PY' || exit 1
import tensorflow as tf
gpus = tf.config.list_physical_devices("GPU")
print("GPUs:", gpus)
if not gpus:
    raise SystemExit("No GPU is visible to TensorFlow: this recipe is for a GPU machine "
                     "(the CPU figures come from `zoo reproduce ptb-sentence`).")
PY
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || true
timeout 660 zoo reproduce ptb-sentence --out "$OUT" || echo "ptb-sentence stopped (rc $?): rerun to resume"
timeout 600 zoo reproduce table4 --repeats 3 --out "$OUT" || echo "table4 stopped (rc $?): rerun to resume"
zoo reproduce --results --out "$OUT" --results-file "$OUT/RESULTS.md" || true
