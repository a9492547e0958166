#!/usr/bin/env bash
# Cost of one evaluation before and after a change, in one GPU run (issue 11's budget: +25 % at most).
#   scripts/device/eval_cost.sh BASELINE_TREE   (a copy of the old code's src/ and scripts/, carried to the device)
# Runs scripts/throughput.py (launch-config candidates of row-L2 through the search's gates, pool off)
# on the old tree, then this tree, then the old tree again, so drift shows; writes $OUT/eval_cost_*.json.
set -uo pipefail
OUT=${OUT:-.device_out}; mkdir -p "$OUT"
old=${1:?usage: eval_cost.sh BASELINE_TREE}
P=examples/problems/level1/10_row_l2_normalize.py
run() {  # tree label
  PYTHONPATH=$1/src PYTHONUNBUFFERED=1 python3 $1/scripts/throughput.py $P --size batch_size=${ROWS:-4096} \
    --candidates ${CANDIDATES:-16} --workers 0 --json "$OUT/eval_cost_$2.json" 2>&1 | tee "$OUT/eval_cost_$2.txt" | tail -6
}
run "$old" before_1; run "$PWD" after; run "$old" before_2
