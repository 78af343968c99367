#!/usr/bin/env bash
# tools/gpu-check.sh: everything a GPU machine has to prove, in one run, into ONE summary file.
#
#   tools/gpu-check.sh                       # on a machine with a GPU, nvcc, ninja, python3
#   MESON=/opt/meson/meson.py DOCTEST_INCLUDE=/opt/doctest/usr/include tools/gpu-check.sh
#
# Steps (each one's pass/fail, time and figures go into $SUMMARY):
#   1. tools   nvcc, ninja, python3, Meson (MESON=... or `meson` on PATH), doctest
#              (DOCTEST_INCLUDE=dir holding doctest/doctest.h, or found by Meson itself)
#   2. gpu     nvidia-smi: the GPUs and their compute capability -> -Dgpu_arch=90 etc.
#              (GPU_ARCH=90 overrides; with no GPU and no GPU_ARCH the run stops here)
#   3. build   Meson + ninja, CUDA enabled, for that architecture, in $BUILD
#   4. tests   the whole suite: CPU suites, the hand-written CUDA kernels natively against the
#              reference and cuBLAS/cuDNN against the hand-written ones (tests/kernels/cuda,
#              tests/kernels/emu), engine CUDA streams/events/copies
#   5. parity  the pipeline runtime's parity matrix with every stage on cuda:0
#              (BRIGADE_TEST_DEVICES=cuda), then stage d on cuda:(d mod GPUs) (=cuda:all)
#   6. bench   brigade-bench --quick (cpu, hand-written and vendor ops; training samples/s on
#              the CPU and on cuda:0) and brigade-bench-pipeline
#   7. nccl    NcclLink and NcclReducer under `mpirun -np 2` (tests/distributed/nccl_test.cpp),
#              then `mpirun -np 2 brigade-train --distributed --devices cuda` against one
#              process on cuda:0,cuda:1 (tests/distributed/parity_test.cpp, its GPUs case);
#              skipped with fewer than 2 GPUs (NCCL wants a GPU per rank) or without mpirun
# Budget: 8 minutes on one GPU (BUILD_JOBS defaults to the number of cores).
# Exit status: 0 all passed; 1 a step failed; 2 a tool is missing; 3 no GPU here.
# Environment: MESON, DOCTEST_INCLUDE, GPU_ARCH, BUILD (default build-gpu), SUMMARY (default
# $BUILD/gpu-check-summary.txt), BUILD_JOBS.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 2
BUILD=${BUILD:-build-gpu}
mkdir -p "$BUILD" || exit 2
SUMMARY=${SUMMARY:-$BUILD/gpu-check-summary.txt}
LOGS=$BUILD/gpu-check-logs
mkdir -p "$LOGS" || exit 2
START=$(date +%s)
FAILED=0
: >"$SUMMARY"

say() { echo "$@" | tee -a "$SUMMARY"; }
elapsed() { echo $(($(date +%s) - START)); }
# result NAME STATUS DETAIL: one line per check, grep-able: "RESULT <status> <name> <detail>"
result() {
  say "RESULT $2 $1 ${3:-} (t=$(elapsed)s)"
  [ "$2" = PASS ] || [ "$2" = SKIP ] || FAILED=1
}
# run_step NAME TIMEOUT_S CMD...: runs CMD with a deadline; stdout in $LOGS/NAME.log, stderr
# in $LOGS/NAME.err.
run_step() {
  local name=$1 limit=$2
  shift 2
  say "--- $name: $*"
  timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>"$LOGS/$name.err"
  local rc=$?
  if [ $rc -eq 0 ]; then result "$name" PASS; else
    [ $rc -eq 124 ] && say "    timed out after ${limit}s"
    tail -n 20 "$LOGS/$name.log" "$LOGS/$name.err" | sed 's/^/    | /' >>"$SUMMARY"
    result "$name" FAIL "exit $rc, logs $LOGS/$name.log and .err"
  fi
  return $rc
}

say "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

# ---- 1. tools ------------------------------------------------------------------------------
missing=()
[ -d /usr/local/cuda/bin ] && PATH=/usr/local/cuda/bin:$PATH
command -v nvcc >/dev/null || missing+=("nvcc (the CUDA toolkit; put its bin/ on PATH)")
command -v ninja >/dev/null || missing+=("ninja")
command -v python3 >/dev/null || missing+=("python3")
if [ -n "${MESON:-}" ]; then
  [ -f "$MESON" ] || missing+=("MESON=$MESON: no such file")
  # Debian's package unpacked with dpkg -x: DIR/usr/bin/meson finds its modules beside it.
  pkgdir=$(cd "$(dirname "$MESON")/.." 2>/dev/null && pwd)/lib/python3/dist-packages
  [ -d "$pkgdir/mesonbuild" ] && export PYTHONPATH="$pkgdir${PYTHONPATH:+:$PYTHONPATH}"
  MESON_CMD=(python3 "$MESON")
elif command -v meson >/dev/null; then
  MESON_CMD=(meson)
else
  missing+=("Meson: set MESON=path/to/meson.py (tools/bench/README.md: apt-get download meson)")
fi
if [ -n "${DOCTEST_INCLUDE:-}" ]; then
  if [ -f "$DOCTEST_INCLUDE/doctest/doctest.h" ]; then
    # Meson looks doctest up by pkg-config: describe the unpacked headers to it.
    mkdir -p "$BUILD/gpu-check-pkgconfig"
    version=$(sed -n 's/^#define DOCTEST_VERSION_STR "\(.*\)"/\1/p' "$DOCTEST_INCLUDE/doctest/doctest.h")
    printf 'Name: doctest\nDescription: doctest headers\nVersion: %s\nCflags: -I%s\n' \
      "${version:-2.4.9}" "$(cd "$DOCTEST_INCLUDE" && pwd)" >"$BUILD/gpu-check-pkgconfig/doctest.pc"
    export PKG_CONFIG_PATH="$PWD/$BUILD/gpu-check-pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    command -v pkg-config >/dev/null || command -v pkgconf >/dev/null ||
      missing+=("pkg-config (Meson reads DOCTEST_INCLUDE through it; apt-get download pkgconf pkgconf-bin libpkgconf3)")
  else
    missing+=("DOCTEST_INCLUDE=$DOCTEST_INCLUDE has no doctest/doctest.h")
  fi
fi
if [ ${#missing[@]} -gt 0 ]; then
  for m in "${missing[@]}"; do say "missing: $m"; done
  result tools FAIL "see tools/bench/README.md, "Preparing a GPU machine", to prepare them"
  say "gpu-check: stopped: tools missing"
  exit 2
fi
result tools PASS "nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), ninja $(ninja --version), $(python3 --version 2>&1), meson $("${MESON_CMD[@]}" --version)"

# ---- 2. gpu --------------------------------------------------------------------------------
gpus=0
arch=${GPU_ARCH:-}
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,compute_cap --format=csv,noheader \
    | sed 's/^/gpu: /' | tee -a "$SUMMARY"
  gpus=$(nvidia-smi -L | grep -c '^GPU ')
  if [ -z "$arch" ]; then
    # "9.0" -> "90"; every distinct capability of the machine's GPUs.
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | tr -d ' .' | sort -u | paste -sd, -)
  fi
fi
if [ "$gpus" -eq 0 ] && [ -z "$arch" ]; then
  result gpu FAIL "no GPU: nvidia-smi finds none (is this a GPU machine? is the driver loaded?)"
  say "gpu-check: no GPU: stopped before the build (GPU_ARCH=90 builds anyway, then stops before the tests)"
  exit 3
fi
if [ -z "$arch" ]; then
  result gpu FAIL "nvidia-smi gives no compute capability (old driver?): set GPU_ARCH=90 (or 80, ...)"
  exit 3
fi
[ "$gpus" -gt 0 ] && result gpu PASS "$gpus GPU(s), gpu_arch=$arch"

# ---- 3. build ------------------------------------------------------------------------------
jobs=${BUILD_JOBS:-$(nproc)}
if [ -f "$BUILD/build.ninja" ]; then
  setup=("${MESON_CMD[@]}" configure "$BUILD" -Dcuda=enabled "-Dgpu_arch=$arch" -Dbuildtype=release)
else
  setup=("${MESON_CMD[@]}" setup "$BUILD" -Dcuda=enabled "-Dgpu_arch=$arch" -Dbuildtype=release)
fi
run_step configure 120 "${setup[@]}" || { say "gpu-check: stopped: configure failed"; exit 1; }
run_step build 360 ninja -C "$BUILD" -j "$jobs" || { say "gpu-check: stopped: build failed"; exit 1; }

if [ "$gpus" -eq 0 ]; then
  say "gpu-check: no GPU: built for gpu_arch=$arch, but the tests and benchmarks need a GPU; stopped"
  exit 3
fi

# ---- 4. tests, 5. parity on cuda:0 and on all GPUs --------------------------------------------
# Per-test results come from Meson's JSON log, one RESULT line each.
test_results() {  # $1: log base name
  python3 - "$BUILD/meson-logs/$1.json" <<'EOF' | tee -a "$SUMMARY"
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    print(f"  test {t['result']:<8} {t['name']:<32} {t['duration']:7.1f}s")
EOF
}
mtest=("${MESON_CMD[@]}" test -C "$BUILD" --print-errorlogs --num-processes "$jobs")
run_step tests 300 "${mtest[@]}" --logbase gpu-check-tests
test_results gpu-check-tests
BRIGADE_TEST_DEVICES=cuda run_step parity-cuda0 120 "${mtest[@]}" --logbase gpu-check-cuda0 runtime
test_results gpu-check-cuda0
BRIGADE_TEST_DEVICES=cuda:all run_step parity-all-gpus 120 "${mtest[@]}" --logbase gpu-check-all runtime
test_results gpu-check-all
[ "$gpus" -eq 1 ] && say "    (one GPU: cuda:all puts every stage on cuda:0 again)"

# ---- 6. benchmarks ---------------------------------------------------------------------------
if run_step bench 150 "$BUILD/tools/brigade-bench" --quick --json "$BUILD/gpu-check-bench.json"; then
  sed 's/^/    /' "$LOGS/bench.log" >>"$SUMMARY"
fi
if run_step bench-pipeline 90 "$BUILD/tools/brigade-bench-pipeline" --devices 2 --batch 64 \
     --microbatches 4 --steps 2; then
  sed 's/^/    /' "$LOGS/bench-pipeline.log" >>"$SUMMARY"
fi

# ---- 7. NCCL between ranks -------------------------------------------------------------------
# The MPI transport's CPU tests ran in step 4 (suite distributed). NCCL refuses two ranks of one
# communicator on the same GPU, so this needs a GPU per rank.
if ! command -v mpirun >/dev/null; then
  result nccl SKIP "no mpirun (Debian: openmpi-bin libopenmpi-dev; then reconfigure)"
elif [ ! -x "$BUILD/tests/distributed/test_nccl" ]; then
  result nccl SKIP "test_nccl not built: Meson found no MPI or no libnccl (see its summary)"
elif [ "$gpus" -lt 2 ]; then
  result nccl SKIP "$gpus GPU: NCCL needs a GPU of its own for each of the 2 ranks"
else
  run_step nccl 180 mpirun --oversubscribe --allow-run-as-root -np 2 \
    "$BUILD/tests/distributed/test_nccl"
  # The trainer on a GPU per rank: parameters within 1e-5 of the one-process GPU pipeline.
  run_step nccl-train 240 "$BUILD/tests/distributed/test_dist_train" --no-colors \
    --test-case='GPUs*'
fi

say "gpu-check: $([ $FAILED -eq 0 ] && echo 'ALL PASSED' || echo 'FAILURES (RESULT FAIL above)') in $(elapsed)s; summary $SUMMARY"
exit $FAILED
