#!/usr/bin/env bash
# One full GPU pass on the lent H200 (run from the repo root through the device tool):
#   scripts/device/gpu_check.sh [all|fixtures|tests|throughput|cli|verify|optimize|models|runmode|kernels|graph|bench|llm]
# (run scripts/device/fetch_wheels.sh first and carry .whl for the llm step)
# Everything worth keeping is written under $OUT (or ./.device_out when run by hand).
set -uo pipefail
OUT=${OUT:-.device_out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
step=${1:-all}
# Wheels from scripts/device/fetch_wheels.sh travel in .whl (name it in the device tool's carry): the LLM
# step needs the SDKs, optimize and bench need plotly for their HTML report (without it they still run and
# print one warning line instead of the report).
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PYTHONPATH PATH=/tmp/site/bin:$PATH || exit 1  # bin: ninja, for CUDA C++ candidates
fi
KO="python3 -m kernelopt"
STORE=$OUT/kernelopt.db
P=examples/problems
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } 2>&1 | tee "$OUT/env.txt"
if [[ $step == all || $step == fixtures ]]; then
  mkdir -p /tmp/fixtures
  python3 scripts/record_captures.py /tmp/fixtures \
    $P/level1/12_softmax_wide.py $P/level1/15_rmsnorm.py $P/level2/03_gemm_bias_gelu.py \
    $P/level2/07_conv2d_bn_relu.py $P/level3/03_transformer_block.py 2>&1 | tail -20
  tar czf "$OUT/fixtures.tgz" -C /tmp/fixtures .
fi
if [[ $step == all || $step == tests ]]; then  # every GPU test but the optimize, models and LLM ones (their own steps)
  python3 -m pytest -m gpu -v -p no:cacheprovider tests --ignore tests/test_gpu_optimize.py --ignore tests/test_gpu_llm.py \
    --ignore tests/test_gpu_models.py --ignore tests/test_gpu_kernel_file.py --ignore tests/test_gpu_graph.py \
    --ignore tests/test_gpu_run_mode.py \
    2>&1 | tee "$OUT/pytest_gpu.txt" | tail -40
fi
if [[ $step == all || $step == throughput ]]; then
  python3 scripts/throughput.py $P/level1/10_row_l2_normalize.py --size batch_size=4096 --candidates ${CANDIDATES:-24} \
    --workers 0,8 --json "$OUT/throughput.json" 2>&1 | tee "$OUT/throughput.txt" | tail -20
fi
if [[ $step == all || $step == cli ]]; then
  $KO doctor --store "$STORE" 2>&1 | tee "$OUT/doctor.txt"
  for p in level2/03_gemm_bias_gelu level1/10_row_l2_normalize level1/12_softmax_wide; do
    $KO analyze $P/$p.py --store "$STORE" 2>&1 | tee "$OUT/analyze_$(basename $p).txt"
  done
fi
if [[ $step == all || $step == verify ]]; then
  for p in level1/10_row_l2_normalize level1/12_softmax_wide; do
    name=$(basename $p)
    python3 scripts/config_sweep.py $P/$p.py --out /tmp/$name.best.py --limit ${SWEEP_LIMIT:-16} 2>&1 | tee "$OUT/sweep_$name.txt" | tail -25
    kernel=$(sed -n 's/^wrote .* (kernel \(.*\))$/\1/p' "$OUT/sweep_$name.txt")
    [[ -n $kernel ]] && $KO verify $P/$p.py --kernel "$kernel" --candidate /tmp/$name.best.py \
      --export /tmp/$name.kopt.json --store "$STORE" 2>&1 | tee "$OUT/verify_$name.txt"
  done
fi
if [[ $step == all || $step == optimize ]]; then
  timeout ${OPTIMIZE_TIMEOUT:-420} python3 -m pytest -m gpu -v -s -p no:cacheprovider tests/test_gpu_optimize.py 2>&1 \
    | tee "$OUT/pytest_gpu_optimize.txt" | tail -30
fi
if [[ $step == all || $step == models ]]; then  # each example model optimized, then loaded through the backend afresh
  timeout ${MODELS_TIMEOUT:-1500} python3 -m pytest -m gpu -v -s -p no:cacheprovider tests/test_gpu_models.py 2>&1 \
    | tee "$OUT/pytest_gpu_models.txt" | tail -30
fi
if [[ $step == all || $step == runmode ]]; then  # launch-bound example models delivered under their CUDA-graph mode
  # about 4-5 minutes a model (optimize --stock-modes compiles every stock mode); RUNMODE_K=llama runs one
  timeout -s INT ${RUNMODE_TIMEOUT:-600} python3 -m pytest -m gpu -v -s -p no:cacheprovider tests/test_gpu_run_mode.py \
    ${RUNMODE_K:+-k "$RUNMODE_K"} 2>&1 | tee "$OUT/pytest_gpu_run_mode.txt" | tail -30
fi
if [[ $step == all || $step == kernels ]]; then  # standalone Triton and Helion kernel files, then the CLI on one
  # Helion: the newest carried wheel that imports and runs a kernel on this torch (.whl_helion, carried on its own:
  # pip takes one version of a package at a time)
  probe=$(mktemp --suffix .py)  # a file: Helion reads its kernels' source back
  cat > "$probe" <<'PY'
import torch, helion, helion.language as hl
@helion.kernel(config=helion.Config(block_sizes=[64]))
def add(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] + 1
    return out
x = torch.zeros(1000, device="cuda"); assert bool((add(x) == 1).all()); print("helion runs")
PY
  for w in $(ls -r .whl_helion/helion-*.whl 2>/dev/null); do
    rm -rf /tmp/helion_site && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/helion_site "$w" .whl_helion/filecheck-*.whl \
      && PYTHONPATH=/tmp/helion_site:$PYTHONPATH python3 "$probe" 2>&1 | tail -1 | sed "s|^|$(basename $w): |" | tee -a "$OUT/helion_probe.txt" | grep -q runs \
      && export PYTHONPATH=/tmp/helion_site:$PYTHONPATH && break
  done
  timeout -s INT ${KERNELS_TIMEOUT:-600} python3 -m pytest -m gpu -v -s -p no:cacheprovider tests/test_gpu_kernel_file.py \
    ${KERNELS_K:+-k "$KERNELS_K"} 2>&1 | tee "$OUT/pytest_gpu_kernel_file.txt" | tail -30
  [[ ${KERNEL_CLI:-1} == 1 ]] && timeout ${KERNEL_CLI_TIMEOUT:-240} $KO optimize examples/kernels/softmax_naive.py --budget 8 --store "$STORE" \
    --export "$OUT/softmax_naive.kopt.py" 2>&1 | tee "$OUT/optimize_softmax_naive.txt" | tail -20
fi
if [[ $step == all || $step == graph ]]; then  # graph candidates: judged through optimize, delivered, under CUDA graphs
  # GRAPH_K=two_graphs runs one test (the one-graph promotion test alone took 549 s on an H100)
  timeout -s INT ${GRAPH_TIMEOUT:-540} python3 -m pytest -m gpu -v -s -p no:cacheprovider tests/test_gpu_graph.py ${GRAPH_K:+-k "$GRAPH_K"} 2>&1 \
    | tee "$OUT/pytest_gpu_graph.txt" | tail -30
fi
if [[ $step == all || $step == bench ]]; then  # the example suite, one problem per GPU at a time; resumable
  # GPUS (default 1), SHARD=I/N, BENCH_RESUME=<dir with an earlier results.json>, BENCH_NAME (folder under $OUT),
  # RETRY=1 runs the problems that failed before again, RERUN=a,b runs those again though they finished
  # (bench --rerun: the new row replaces the old, kept in meta.replaced), PROBLEMS=a,b runs only those, in that order (bench --problems),
  # BENCH_RESUME=benchmarks/<folder> goes on with a suite an earlier session began (a full suite takes about
  # two hours of one H200 at 2-5 minutes a problem: more than one session's device time),
  # OPERATORS=launch-config,eviction-policy,graph-variants searches with those (bench --operators)
  # BENCH_STOP_AFTER (default BENCH_TIMEOUT - PROBLEM_TIMEOUT): no problem starts after that many seconds, so
  # none is cut by BENCH_TIMEOUT and its device time lost (bench --stop-after)
  # BENCH_SLOT (instead): the bench's whole seconds, a little under BENCH_TIMEOUT; a problem starts only where
  # the seconds it is expected to take fit in what is left (bench --slot: its earlier row on a rerun, else
  # the longest row of the results, else PROBLEM_TIMEOUT), and one still running when it ends is stopped there,
  # its run left for the next call's resume; BENCH_STOP_AFTER then applies only where given; with it,
  # BENCH_EXPECT_FROM=benchmarks/<folder> (another card's scoreboard of the suite) says how long each problem
  # takes (bench --expect-from), and BENCH_ELSE_EXPECT_FROM is that for the other card's branch below, as
  # BENCH_ELSE_RERUN is RERUN there; BENCH_ORDER=payoff (with BENCH_EXPECT_FROM) starts first the problems
  # that would add most to the target a second (bench --order payoff), on either branch
  # BENCH_CARD=H200: where this GPU's name lacks it (a call for one kind may get another), the resumed
  # scoreboard is left alone and BENCH_ELSE_PROBLEMS (if set; else nothing) runs into a folder of its own,
  # <BENCH_NAME>_<card>, so the call still measures something: a fresh one, or the other card's own
  # scoreboard resumed where BENCH_ELSE_RESUME names it (bench refuses one measured on yet another card)
  card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  if [[ -n ${BENCH_CARD:-} && $card != *"$BENCH_CARD"* ]]; then
    if [[ -z ${BENCH_ELSE_PROBLEMS:-} ]]; then
      echo "this GPU is $card, not an $BENCH_CARD: nothing run (BENCH_ELSE_PROBLEMS names what to run there)"; exit 3
    fi
    echo "this GPU is $card, not an $BENCH_CARD: running $BENCH_ELSE_PROBLEMS in a folder of its own${BENCH_ELSE_RESUME:+, resuming $BENCH_ELSE_RESUME}"
    BENCH_RESUME=${BENCH_ELSE_RESUME:-} RERUN=${BENCH_ELSE_RERUN:-} PROBLEMS=$BENCH_ELSE_PROBLEMS BENCH_NAME=${BENCH_NAME:-bench}_$(echo "$card" | tr -c 'A-Za-z0-9\n' '_')
    BENCH_EXPECT_FROM=${BENCH_ELSE_EXPECT_FROM:-}
  fi
  B=$OUT/${BENCH_NAME:-bench}; mkdir -p "$B"
  STOP_AFTER=${BENCH_STOP_AFTER:-$(( ${BENCH_TIMEOUT:-3000} - ${PROBLEM_TIMEOUT:-420} ))}
  if [[ -n ${BENCH_SLOT:-} ]]; then
    WHEN="--slot $BENCH_SLOT ${BENCH_STOP_AFTER:+--stop-after $BENCH_STOP_AFTER} ${BENCH_EXPECT_FROM:+--expect-from $BENCH_EXPECT_FROM} ${BENCH_ORDER:+--order $BENCH_ORDER}"
  else
    WHEN="--stop-after $(( STOP_AFTER > 0 ? STOP_AFTER : 0 ))"
  fi
  [[ -f ${BENCH_RESUME:-/nonexistent}/results.json ]] && cp "$BENCH_RESUME"/results.* "$B/" && { cp "$BENCH_RESUME"/kernelopt.db* "$B/" 2>/dev/null || true; }
  # a resumed suite measured on another kind of GPU: bench stops in one line before any problem runs
  timeout ${BENCH_TIMEOUT:-3000} $KO bench $P --gpus ${GPUS:-1} ${SHARD:+--shard $SHARD} ${PROBLEMS:+--problems $PROBLEMS} ${OPERATORS:+--operators $OPERATORS} --time-limit ${TIME_LIMIT:-20} \
    --budget ${BUDGET:-10} --max-targets ${MAX_TARGETS:-2} --timeout ${PROBLEM_TIMEOUT:-420} $WHEN --out "$B" --resume ${RETRY:+--retry-failed} ${RERUN:+--rerun $RERUN} \
    --store "$B/kernelopt.db" 2>&1 | tee "$B/log.txt" | tail -60
  # the device tool brings back 8 files at most, two folders deep: the results folder (its store, report,
  # models/) travels as one archive; unpack it here and commit what is worth keeping under benchmarks/
  if [[ $OUT != .device_out ]]; then  # on the device (run by hand, the folder stays as it is)
    tar czf "$OUT/${BENCH_NAME:-bench}.tgz" -C "$OUT" "${BENCH_NAME:-bench}" && rm -rf "$B"
  fi
fi
if [[ $step == all || $step == llm ]]; then
  KERNELOPT_TEST_OUT=$OUT timeout 300 python3 -m pytest -m gpu -v -s -p no:cacheprovider tests/test_gpu_llm.py 2>&1 | tee "$OUT/pytest_gpu_llm.txt" | tail -20
fi
