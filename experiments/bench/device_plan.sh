#!/usr/bin/env bash
# The GPU machine's calls that the open issues' figures need, one self-contained step per call (the
# machine lets go of its state after 30 s idle, and a call may run 600 s at most). Run on the device
# from the repo root, with the wheels and the corpus carried:
#
#   bash ../shared/device/pack-wheels.sh                        # here, once: .whl/
#   mkdir -p scratch && cp -r ../shared/corpora/pike-level3 scratch/   # scratch/ is git-ignored
#   run(command="bash experiments/bench/device_plan.sh STEP", carry=[".whl", "scratch"])
#
# Steps (each ~570 s or less; outputs under $OUT/bench/ and $OUT/tests/):
#   gpu1, gpu2, gpu3  tests/core/test_gpu.py in thirds (45 tests; session 23 on an H100: gpu3 136 s)
#                     (all 45 in one call do not fit: session 24's reached the 40th at 570 s)
#   gpu4              the GPU tests of every other file (object cache, pool, channel, isolation,
#                     profiling; 415 s on an H100)
#   gpu4-builds       gpu4's tests of the build path alone (isolation, object cache, pool; ~310 s)
#   window            the GPU tests of timing alone: where a call starts (test_timing_gpu.py), the
#                     window (confirmation, drain, the legit cases, the launch-bound comparison)
#   run1              issue 35: loaded run 1 (kernelbench-v0, 16 in flight, cold caches), cut at 570 s
#                     (session 27: a cold run over all 90 ends by ~515 s; s27's run1, cut at 330 s
#                     to leave the quiet list time, shared only 24 accepted kernels with run2)
#   quiet             issue 35: the quiet list at concurrency 1 in run 1's TMPDIR (its object cache
#                     holds their builds: right after run1, or after run2, on the same warm
#                     machine), cut at CUT s (default 300)
#   run2              issue 35: loaded run 2, a fresh TMPDIR, cut at 570 s
#                     (run1/run2/quiet take CUT, s, and TIMING, a --timing override, e.g. TIMING=call_start=idle;
#                     session 28's pair gated rounds on the launch path, since removed: round_gate.py)
#   split1, split2    issue 37: run1/run2 on the machine split into a 4-core GPU node and three
#                     4-core CPU-only build nodes (builds pool, pinned), ended by their budget;
#                     GPU_CPUS (the GPU node's cores) and BUILD_NODES change the split
#   split-tenants     issue 37: a short split run (BUDGET 150 s) with cpu_tenants.py naming what ran
#                     on the GPU node's cores while the builds ran (~200 s)
#   launch-state      issue 35: launch_state.py, the dispatch path alone, with other CPUs spinning,
#                     with the GPU busy and with another process's copies on the link, in shuffled
#                     windows, every reading beside the link's PCIe generation (~130 s; session 28)
#   reference         issue 35: reference_modes.py on VanillaRNN, call_start queued then idle (~2 min
#                     each), traces kept
#   starts1, starts2  issue 35: where a timed call starts (timing.call_start queued / idle) on the
#                     24 kernels that moved most (moved24.list), one object cache at a fixed TMPDIR:
#                     starts1 builds (idle0, cold), then queued1, idle1; starts2 queued2, idle2
#                     (run it right after starts1, on the same warm machine, or its first run builds)
#   hacks             issue 34: hack_profiles.py on the GPU (every family under all three profiles)
#   strict, kernelbench, v0
#                     issue 34: one run per profile over all 90 kernels, cut at 570 s (one object
#                     cache at a fixed TMPDIR: run them back to back on one warm machine)
#   verdicts          issue 34: strict, kernelbench, kernelbench-v0 in one resumable stream (run it
#                     back to back until all three are through; session 29)
#   kb                issue 34: kb_check.py (the KernelBench-style check) of the refusals in
#                     scratch/verdicts_*.jsonl (copy the profile runs' streams there first)
#   builds-ahead      issue 37: local builds with builds_ahead 0 then automatic, one call
#   builds-local, builds-pool, builds-both, builds-split
#                     issue 37: build_throughput.py per mode (both: local then pool), then the
#                     split cluster; COUNT (a stratified sample, default all), BUDGET (s per mode,
#                     default 540) and AHEAD (evaluation.builds_ahead, default -1) from the
#                     environment: COUNT=36 BUDGET=175 ... builds-both fits one call
# Afterwards, here: python experiments/bench/speedup_dispersion.py run1.jsonl run2.jsonl --quiet quiet.jsonl
# (its launch_fast: the same pair with each figure re-derived from the rounds whose launch path
# read fast, from the rows' round_ratios and round_dispatch_us; session 26)
# Session 34 ran split1, split2 (one warm machine), gpu2 (16 passed) and split-tenants. Not run
# on the current tree (no GPU test ran after these): the pooled builds' credit (69f45a1: run
# gpu4-builds first) and kill_session's newest-pid probe (ef6289b: gpu2's faults), then gpu1,
# gpu3, gpu4. Next for issue 37's split: GPU_CPUS=8 BUILD_NODES=2 (the GPU node on 8 cores, two 4-core
# build nodes) or CONC=4, split1 then split2, to tell the GPU node's own load from the socket
# the build nodes share (session 34's host-bound median 4.0 % against 3.0 % paused).
set -uo pipefail
step="${1:?a step: gpu1 gpu2 gpu3 gpu4 gpu4-builds window run1 quiet run2 split1 split2 split-tenants starts1 starts2 launch-state reference hacks strict kernelbench v0 verdicts kb builds-ahead builds-local builds-pool builds-both builds-split}"
OUT="${OUT:-/tmp/out}"
mkdir -p "$OUT/bench" "$OUT/tests"

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
nproc >> "$OUT/device.txt"

C=scratch/pike-level3
S=$C/solutions
all_kernels=(--tasks "$C/tasks" --solutions "$S/orig" "$S/openevolve_pop_25_no_agents_300"
  "$S/openevolve_pop_10_no_agents_300")

gpu_third() {  # the Nth third of test_gpu.py's test ids
  python3 -m pytest -q -m gpu --collect-only tests/core/test_gpu.py 2>/dev/null | grep '::' > /tmp/ids
  local n total size
  n=$1
  total=$(wc -l < /tmp/ids)
  size=$(((total + 2) / 3))
  sed -n "$(((n - 1) * size + 1)),$((n * size))p" /tmp/ids
}

case "$step" in
  gpu1 | gpu2 | gpu3)
    mapfile -t ids < <(gpu_third "${step#gpu}")
    timeout 570 python3 -m pytest -v --durations=8 -m gpu -p no:cacheprovider "${ids[@]}" 2>&1 | tee "$OUT/tests/$step.log" | tail -40
    ;;
  window)
    timeout 570 python3 -m pytest -v --durations=8 -m gpu -p no:cacheprovider tests/core/test_timing_gpu.py \
      tests/core/test_gpu.py -k "idle_start or either_start or confirmation or will_not_drain or legit_kernel_passes or launch_bound or unjoined_side_stream" \
      2>&1 | tee "$OUT/tests/window.log" | tail -40
    ;;
  gpu4)
    timeout 570 python3 -m pytest -v --durations=10 -m gpu -p no:cacheprovider tests --ignore=tests/core/test_gpu.py \
      2>&1 | tee "$OUT/tests/gpu4.log" | tail -40
    ;;
  gpu4-builds)
    # the GPU tests of the build path alone (confinement, object cache, pool builds, outputs back;
    # ~310 s on the H200, session 31): after a change to builds when gpu4's 410 s do not fit
    timeout 400 python3 -m pytest -v --durations=10 -m gpu -p no:cacheprovider tests/core/test_isolation.py \
      tests/core/test_object_cache.py tests/core/test_pool.py tests/core/test_channel.py \
      tests/core/test_hardware.py 2>&1 | tee "$OUT/tests/gpu4-builds.log" | tail -30
    ;;
  run1)
    export TMPDIR=/tmp/tmp_run1
    mkdir -p "$TMPDIR"
    timeout -s INT "${CUT:-570}" python3 experiments/bench/field_verdicts.py "${all_kernels[@]}" \
      --profiles kernelbench-v0 --concurrency 16 ${TIMING:+--timing "$TIMING"} --stream "$OUT/bench/run1.jsonl" 2>&1 | tail -5
    ;;
  quiet)
    # run1's TMPDIR: its object cache holds the builds (run it on the same warm machine)
    export TMPDIR=/tmp/tmp_run1
    mkdir -p "$TMPDIR"
    timeout -s INT "${CUT:-300}" python3 experiments/bench/field_verdicts.py "${all_kernels[@]}" \
      --profiles kernelbench-v0 --concurrency 1 --only experiments/bench/data/trusted_fitness_quiet20.list \
      ${TIMING:+--timing "$TIMING"} --stream "$OUT/bench/quiet.jsonl" 2>&1 | tail -5
    ;;
  run2)
    TMPDIR=$(mktemp -d)
    export TMPDIR
    timeout -s INT "${CUT:-570}" python3 experiments/bench/field_verdicts.py "${all_kernels[@]}" \
      --profiles kernelbench-v0 --concurrency 16 ${TIMING:+--timing "$TIMING"} --stream "$OUT/bench/run2.jsonl" 2>&1 | tail -5
    ;;
  split1 | split2)
    # issue 37: run1/run2 with builds on three pinned 4-core CPU-only nodes and the GPU node on 4
    # cores of its own (CONC in flight, default 16): dispersion between split1 and split2 against
    # run1/run2's, where the quiet windows pause the node's own builds
    # (the run's own budget, not the call's limit, ends it: the JSON line with builds per node and
    # the GPU node's busy share prints only from a run that ends itself; ~40 s left for shutdown)
    TMPDIR=$(mktemp -d)
    export TMPDIR
    timeout -s INT 585 python3 experiments/bench/field_verdicts.py "${all_kernels[@]}" \
      --profiles kernelbench-v0 --concurrency "${CONC:-16}" --builds pool --split --pin \
      --gpu-node-cpus "${GPU_CPUS:-0}" --build-nodes "${BUILD_NODES:-3}" \
      --budget-s "${BUDGET:-$((545 - SECONDS))}" --stream "$OUT/bench/$step.jsonl" 2>&1 \
      | tee "$OUT/bench/$step.log" | grep -v "^\[" | tail -25
    ;;
  split-tenants)
    # issue 37: who runs on the GPU node's 4 cores while the split cluster's builds run (session
    # 34's split runs: their windows' rounds contended 12-20 a window while the builds ran, 0-3
    # after), cpu_tenants.py pinned to a build node's last core, from LEAD s in for SAMPLE s
    TMPDIR=$(mktemp -d)
    export TMPDIR
    timeout -s INT "${CUT:-190}" python3 experiments/bench/field_verdicts.py "${all_kernels[@]}" \
      --profiles kernelbench-v0 --concurrency 16 --builds pool --split --pin \
      --budget-s "${BUDGET:-150}" --stream "$OUT/bench/$step.jsonl" > "$OUT/bench/$step.log" 2>&1 &
    sleep "${LEAD:-30}"
    taskset -c 15 python3 experiments/bench/cpu_tenants.py --cores 0-3 --seconds "${SAMPLE:-110}" --top 30 \
      | tee "$OUT/bench/cpu_tenants.txt"
    wait
    grep -v "^\[\|No CUDA runtime" "$OUT/bench/$step.log" | tail -4
    ;;
  starts1 | starts2)
    export TMPDIR=/tmp/tmp_starts
    mkdir -p "$TMPDIR"
    runs=(idle0 queued1 idle1)
    [ "$step" = starts2 ] && runs=(queued2 idle2)
    # RUNS overrides the list (session 26: starts1's three did not fit 600 s; idle1 went to starts2)
    [ -n "${RUNS:-}" ] && read -r -a runs <<< "$RUNS"
    for r in "${runs[@]}"; do
      cut=${CUT:-150}
      [ "$r" = idle0 ] && cut=240  # cold: session 16's cold run of these 24 took 193 s
      timeout -s INT $cut python3 -u experiments/bench/field_verdicts.py "${all_kernels[@]}" \
        --profiles kernelbench-v0 --concurrency 16 --only experiments/bench/data/trusted_fitness_moved24.list \
        --timing "call_start=\"${r%%[0-9]}\"" --stream "$OUT/bench/starts_$r.jsonl" 2>&1 | tail -3
    done
    ;;
  launch-state)
    # issue 35: is the launch path's slow state an idle CPU package or an idle GPU? (~100 s)
    timeout 300 python3 -u experiments/bench/launch_state.py 2>&1 | tee "$OUT/bench/launch_state.log" | tail -3
    ;;
  reference)
    # issue 35: what moves a tiny host-bound eager reference (VanillaRNN) between windows
    # queued (the method the modes were seen with), then idle (the call after its flush)
    for start in queued idle; do
      timeout 270 python3 -u experiments/bench/reference_modes.py --task "$C/tasks/33_VanillaRNN.py" \
        --call-start $start --save-traces --out "$OUT/bench/reference_modes_$start" 2>&1 \
        | tee "$OUT/bench/reference_modes_$start.log" | grep -v '^{' | tail -25
    done
    ;;
  hacks)
    # issue 34: the hack corpus (CUDA fixtures and the CPU ones worth repeating) under all three
    # profiles, static rules on and, where a file says, off
    timeout 570 python3 experiments/bench/hack_profiles.py --device cuda --jobs "${JOBS:-6}" 2>&1 \
      | tee "$OUT/bench/hack_profiles.log" | tail -25
    ;;
  strict | kernelbench | v0)
    profile=$([ "$step" = v0 ] && echo kernelbench-v0 || echo "$step")
    # one object cache for the three profiles' runs on one warm machine: the verdicts do not
    # depend on where a build came from, and a later profile's run then gets through all 90
    export TMPDIR=/tmp/tmp_verdicts
    mkdir -p "$TMPDIR"
    timeout -s INT 570 python3 experiments/bench/field_verdicts.py "${all_kernels[@]}" \
      --profiles "$profile" --concurrency 16 --stream "$OUT/bench/verdicts_$step.jsonl" 2>&1 | tail -20
    ;;
  verdicts)
    # issue 34: all three profiles over all 90 kernels, one object cache, one baselines file, one
    # stream that each call resumes: run it again, back to back, until every profile is through
    # (a warm machine keeps /tmp/tmp_verdicts; a fresh one starts from the stream carried in
    # scratch/verdicts_all.jsonl, copy $OUT's there between calls)
    export TMPDIR=/tmp/tmp_verdicts
    mkdir -p "$TMPDIR"
    # STREAM names another stream (a fresh run beside one on record, e.g. STREAM=verdicts_kb
    # PROFILES=kernelbench after the models' mode changed, session 29)
    name=${STREAM:-verdicts_all}
    stream=$TMPDIR/$name.jsonl
    [ -f "$stream" ] || [ ! -f "scratch/$name.jsonl" ] || cp "scratch/$name.jsonl" "$stream"
    timeout -s INT "${CUT:-570}" python3 -u experiments/bench/field_verdicts.py "${all_kernels[@]}" \
      --profiles "${PROFILES:-strict,kernelbench,kernelbench-v0}" --concurrency 16 \
      --baselines "$TMPDIR/baselines.db" --stream "$stream" --resume 2>&1 | grep -v '^\[' | tail -60
    cp "$stream" "$OUT/bench/$name.jsonl"
    wc -l < "$stream"
    ;;
  kb)
    # issue 34: the KernelBench-style check of every kernel the profile runs refused, from their
    # streams copied here into scratch/ (carried): scratch/verdicts_*.jsonl; kernels checked before
    # (scratch/kb_*.jsonl, earlier calls' kb.jsonl) are not run again
    shopt -s nullglob
    checked=(scratch/kb_*.jsonl)
    timeout 570 python3 -u experiments/bench/kb_check.py --tasks "$C/tasks" --solutions "$S/orig" \
      "$S/openevolve_pop_25_no_agents_300" "$S/openevolve_pop_10_no_agents_300" \
      --verdicts scratch/verdicts_*.jsonl --checked "${checked[@]}" --jobs "${JOBS:-8}" \
      --out "$OUT/bench/kb.jsonl" 2>&1 \
      | tee "$OUT/bench/kb.log" | tail -30
    ;;
  builds-ahead)
    # issue 37: local builds without and with builds ahead (the supervisor's build out of the
    # active gate), side by side in one call: BUDGET (default 170) s each (session 25, H200: 225 s
    # each did not fit 585 s: mode 1's warm-up built the precompiled header, 80 s); MODES
    # overrides the list (MODES=local:-1: builds ahead alone)
    TMPDIR=$(mktemp -d)
    export TMPDIR
    timeout -s INT 585 python3 experiments/bench/build_throughput.py --corpus "$C" --builds "${MODES:-local:0,local:-1}" \
      --count "${COUNT:-all}" --budget-s "${BUDGET:-170}" --stream "$OUT/bench/$step.jsonl" 2>&1 \
      | tee "$OUT/bench/$step.log" | tail -20
    ;;
  builds-local | builds-pool | builds-both)
    # COUNT (a stratified sample of the CUDA files, or all) and BUDGET (s per mode) fit both modes
    # into one call: COUNT=36 BUDGET=180 bash device_plan.sh builds-both
    TMPDIR=$(mktemp -d)
    export TMPDIR
    modes=${step#builds-}
    [ "$modes" = both ] && modes=local,pool
    timeout -s INT 585 python3 experiments/bench/build_throughput.py --corpus "$C" --builds "$modes" \
      --kept 2 --ahead "${AHEAD:--1}" --count "${COUNT:-all}" --budget-s "${BUDGET:-540}" \
      --stream "$OUT/bench/$step.jsonl" 2>&1 | tee "$OUT/bench/$step.log" | tail -20
    ;;
  builds-split)
    TMPDIR=$(mktemp -d)
    export TMPDIR
    timeout -s INT 585 python3 experiments/bench/build_throughput.py --corpus "$C" --builds pool --split --pin \
      --ahead "${AHEAD:--1}" --count "${COUNT:-all}" --budget-s "${BUDGET:-540}" \
      --stream "$OUT/bench/$step.jsonl" 2>&1 | tee "$OUT/bench/$step.log" | tail -20
    ;;
  *)
    echo "unknown step $step" >&2
    exit 2
    ;;
esac
