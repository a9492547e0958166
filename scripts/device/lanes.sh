#!/usr/bin/env bash
# Several gpu_check.sh steps at once on the lent multi-GPU machine, one lane per GPU, with
# everything packed into $OUT/all.tgz: the device tool brings back only a few loose files,
# and one archive always comes back whole. Run from the repo root through the device tool:
#
#   bash scripts/device/lanes.sh 'tests; OPTIMIZE_TIMEOUT=150 optimize' \
#       'GPUS=1 PROBLEMS=10_row_l2_normalize BUDGET=30 TIME_LIMIT=60 bench'
#
# Lane i runs on GPU i (CUDA_VISIBLE_DEVICES=i) with OUT=$OUT/l<i>; its ';'-separated items
# run in order, each `[VAR=value ...] STEP`, its output in $OUT/l<i>/<STEP>.log. LANES_TIMEOUT
# (default 560 s) ends every lane still running, so the archive is written inside the device
# call's limit. Wheels in .whl/ (scripts/device/fetch_wheels.sh) are installed once, for all lanes.
set -uo pipefail
R=${OUT:-.device_out}
mkdir -p "$R"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
CHECK=${GPU_CHECK:-scripts/device/gpu_check.sh}
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PYTHONPATH || { echo "lanes: installing .whl failed" >&2; exit 1; }
fi

run_lane() {  # run_lane INDEX ITEMS
  local index=$1 item words
  export CUDA_VISIBLE_DEVICES=$index OUT=$R/l$index
  mkdir -p "$OUT"
  IFS=';' read -ra items <<< "$2"
  for item in "${items[@]}"; do
    read -ra words <<< "$item"
    (( ${#words[@]} )) || continue
    local step=${words[-1]}
    echo "lane $index: ${words[*]}" >> "$R/lanes.txt"
    env "${words[@]:0:${#words[@]}-1}" bash "$CHECK" "$step" > "$OUT/$step.log" 2>&1
    echo "lane $index: $step exited $?" >> "$R/lanes.txt"
  done
}

pids=()
index=0
for lane in "$@"; do
  setsid bash -c "$(declare -f run_lane); R=$(printf %q "$R") CHECK=$(printf %q "$CHECK"); run_lane $index $(printf %q "$lane")" &
  pids+=($!)
  index=$((index + 1))
done
deadline=$((SECONDS + ${LANES_TIMEOUT:-560}))
for pid in "${pids[@]}"; do
  while kill -0 "$pid" 2> /dev/null && (( SECONDS < deadline )); do sleep 1; done
  if kill -0 "$pid" 2> /dev/null; then
    echo "lanes: LANES_TIMEOUT reached, ending lane process group $pid" >> "$R/lanes.txt"
    kill -TERM -- "-$pid" 2> /dev/null; sleep 2; kill -KILL -- "-$pid" 2> /dev/null
  fi
  wait "$pid" 2> /dev/null
done
( cd "$R" && tar czf all.tgz --exclude=all.tgz -- * )
cat "$R/lanes.txt" 2> /dev/null
for log in "$R"/l*/*.log; do
  [[ -f $log ]] && { echo "== $log"; tail -n "${TAIL_LINES:-6}" "$log"; }
done
