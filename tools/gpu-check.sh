#!/usr/bin/env bash
# tools/gpu-check.sh: what one GPU run proves, in one run of at most 8 minutes, into one summary.
#
#   tools/gpu-check.sh                                        # on the GPU machine (docs/gpu.md)
#   GPU_ARCH=90 OUT=/tmp/gc tools/gpu-check.sh --build-only   # the build alone: no GPU needed
#   OUT=/tmp/gce tools/gpu-check.sh --emulated                # the whole run on emulated GPUs
#
# What the GPU machine lacks comes from .gpu-kit/ (tools/gpu-kit.sh makes it on a Debian machine):
# its headers, libraries and pkg-config files go on CPATH, LIBRARY_PATH, PKG_CONFIG_PATH and
# LD_LIBRARY_PATH, and its pkg-config serves where the machine has none. cuDNN and NCCL come from
# $CUDA_HOME or from the pip wheels (python3 -c 'import nvidia.cudnn'); the unversioned
# libcudnn.so the wheels lack is a link in $BUILD/vendor-links. $CUDA_HOME/lib64 is on
# LD_LIBRARY_PATH: cuDNN 9's runtime-compiled engines load NVRTC from it.
#
# Steps, most valuable first. Each has a share of the budget (BUDGET_S, 480 s, counted from the
# start): it is cut at its share or at what is left. Once the budget is spent, a GPU step not yet
# run is NOT-RUN (a failure: the run proved less than it should); build-rest and suite, which
# come after every GPU step and have what is left as their share, are SKIP when the budget ends
# before or during them (what they had finished by then is still judged: a compile error or a
# failed test is a FAIL; a test the cut stopped, meson's INTERRUPT, is listed with how long it
# had run, neither passed nor failed).
#   preflight   every missing tool, header, library and pkg-config module, listed at once; then
#               nvcc and the host compiler build and run two probes (C++20 + cuDNN + cuBLAS; the
#               kit's headers + OpenBLAS + zlib). Anything missing: stop before building (exit 2)
#   configure   -Dcuda=enabled, -Dgpu_arch=GPU_ARCH (else nvidia-smi's compute capability, else
#               __nvcc_device_query's, which also counts the GPUs where nvidia-smi fails):
#               meson.build adds PTX of the highest and -lineinfo; -Dmpi=disabled (one GPU)
#   build       the executables of the GPU steps (ninja -k 0); the CPU reference of `train`
#               starts in the background as soon as brigade-train exists
#   kernels-*   tests/kernels/cuda: the hand-written kernels natively and cuBLAS/cuDNN, against
#               brigade::ref, cuBLAS's bf16 GEMM on tensor cores included (vendor_bf16_test);
#               tests/kernels/emu: the emulator, the native lesson kernels and the hand-written
#               bf16 tensor-core GEMM (ops_gemm_mma_test: the GPU's own mma fragment layout)
#   memcheck    compute-sanitizer --tool memcheck on tests/kernels/cuda (both paths), with
#               --report-api-errors no: an API error cuDNN or cuBLAS returns to itself inside a
#               call is theirs (Brigade checks every status it gets back)
#   racecheck   compute-sanitizer --tool racecheck on the op kernels (tests/kernels/cuda) and the
#               native lesson kernels (tests/kernels/emu)
#   parity-*    the runtime's parity matrix with every stage on cuda:0 (BRIGADE_TEST_DEVICES=cuda),
#               on each path (BRIGADE_CUDA_PATH=vendor, =handwritten), --precision bf16's
#               bit-for-bit parity included on both
#   train       brigade-train on cuda:0, TRAIN_STEPS steps of seed_cnn on synthetic data, on each
#               path, against the same run on cpu:0: per-step losses (--metrics) side by side,
#               each within |cuda - cpu| <= 1e-4 + 1e-2 |cpu| over the first 100 steps, and
#               the last 50 steps' mean loss within half the CPU's + 1e-3 (float32 runs part
#               after the loss's steep descent)
#   bench-*     training samples/s of seed_cnn on cuda:0, Brigade (both paths) beside PyTorch on
#               the same GPU (tools/compare/pytorch_gpu_bench.py), FP32 both (TF32 off; PyTorch's
#               with NVIDIA_TF32_OVERRIDE=0 too, which no step of Brigade's has, below):
#               brigade-bench's model level (a plain loop) and runtime level (the step
#               brigade-train runs, CUDA graphs on and off, each row with the GPU's peak memory
#               in a step), both in fp32 and bf16; the same two with TF32 on both
#               (bench-*-tf32: brigade-bench --math tf32, PyTorch's allow_tf32); then per-op
#               ms, hand-written against
#               cuDNN/cuBLAS, fp32 and bf16 (brigade-bench --level ops)
#   multi-gpu, nccl   the parity matrix on cuda:all and NCCL between ranks: SKIP with one GPU
#   <step>-rest, <step>-asan-build, <step>-asan   after a test program of a step crashed (killed
#               by a signal): the crashed case (doctest's "TEST CASE:") alone under cuda-gdb or
#               gdb, the crashing thread's backtrace into the summary; the program without that
#               case (-rest); the program built again with AddressSanitizer in $BUILD-asan, and
#               run whole under it, its report into the summary (-asan-build, -asan). A
#               crash outside any case (start-up, exit): the whole program under the debugger
#   build-rest, suite the rest of the build, then every meson test suite but the docs'
# --build-only: preflight, configure, build, build-rest; no GPU (then GPU_ARCH is needed).
# --emulated: a rehearsal of the whole run without a GPU, every step in the same order under the
#   same budget into the same summary, against an emulated-GPU build (-Dcuda=emulated; BUILD
#   defaults to build-emu): BRIGADE_EMULATED_GPUS=1 (every stage on cuda:0, as on a one-GPU
#   machine), EMULATED_MULTI_GPUS (2) for multi-gpu. What only a GPU can do is SKIP with the
#   reason: compute-sanitizer (the command it would run is shown), timing (brigade-bench's
#   commands run on CPU devices, 1 repetition, to check their flags, and --math tf32's on the
#   emulated GPU, which it needs; PyTorch's script is compiled), NCCL. The CUDA toolkit is not needed (its pieces found are listed, not
#   probed). Defaults: TRAIN_STEPS 3, TRAIN_BATCH 4, EMULATED_TEST_ARGS (test_runtime's
#   arguments: "--test-case-exclude=every*1-4*devices*,CUDA*graphs:*several*stages*", the
#   parity matrix over 1-4 devices and the memory of three stages on one GPU at 4096 samples,
#   which take minutes there and which CI runs on their own).
#
# Output in $OUT (else $BUILD), at most 8 files: summary.txt (one "RESULT
# PASS|FAIL|SKIP|NOT-RUN <step>" line per step, with its figures and tables; its last line
# "gpu-check: ALL PASSED ..." or "gpu-check: FAILURES ..."), logs.txt (each step's command and
# last 300 lines), train-losses.tsv, bench-model.json, bench-ops.json, pytorch-gpu.json,
# bench-model-tf32.json, pytorch-gpu-tf32.json (each run empties the first two and removes the
# others first). Whole logs: $BUILD/gpu-check-logs/. A failing step's last lines go to stdout.
# Exit status: 0 all passed; 1 a step failed or did not run; 2 preflight failed; 3 no GPU.
# Environment: GPU_ARCH, OUT, BUILD (build-gpu; --emulated: build-emu), BUDGET_S (480; 3600
# with --build-only), BUILD_JOBS (nproc), KIT (.gpu-kit), MESON (a meson.py, run with python3),
# CUDA_HOME (/usr/local/cuda), TRAIN_STEPS (300), TRAIN_BATCH (128), CUDA_PATHS (the paths of
# the parity-*, train and bench-ops steps: "vendor handwritten"; a path left out is SKIP),
# EMULATED_MULTI_GPUS (2).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
REPO=$PWD
build_only=0 emulated=0
for arg in "$@"; do
  case $arg in
    --build-only) build_only=1 ;;
    --emulated) emulated=1 ;;
    -h | --help) sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$arg' (--build-only, --emulated, --help)" >&2; exit 2 ;;
  esac
done
[ $build_only -eq 1 ] && [ $emulated -eq 1 ] && { echo "gpu-check: --build-only or --emulated, not both" >&2; exit 2; }

abs() { case $1 in /*) echo "$1" ;; *) echo "$REPO/$1" ;; esac; }
export BUILD RESULTS LOGS
BUILD=$(abs "${BUILD:-$([ $emulated -eq 1 ] && echo build-emu || echo build-gpu)}")
RESULTS=$(abs "${OUT:-$BUILD}")
LOGS=$BUILD/gpu-check-logs
KIT=$(abs "${KIT:-.gpu-kit}")
BUDGET_S=${BUDGET_S:-$([ $build_only -eq 1 ] && echo 3600 || echo 480)}  # --build-only: no GPU time to save
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# --emulated: an emulated GPU runs a kernel thousands of times slower than a real one.
TRAIN_STEPS=${TRAIN_STEPS:-$([ $emulated -eq 1 ] && echo 3 || echo 300)}
TRAIN_BATCH=${TRAIN_BATCH:-$([ $emulated -eq 1 ] && echo 4 || echo 128)}
CUDA_PATHS=${CUDA_PATHS:-vendor handwritten}
EMULATED_MULTI_GPUS=${EMULATED_MULTI_GPUS:-2}
# --emulated: test_runtime's arguments in parity-* and multi-gpu. Its parity matrix over every
# schedule on 1-4 devices, and its memory case of three stages on one GPU at 4096 samples (the
# hand-written path's GEMMs, emulated), take minutes on emulated GPUs (CI runs both on 1, 2
# and 4 of them).
runtime_args=()
if [ $emulated -eq 1 ]; then
  read -r -a runtime_args <<<"${EMULATED_TEST_ARGS---test-case-exclude=every*1-4*devices*,CUDA*graphs:*several*stages*}"  # words: no spaces
fi
JOBS=${BUILD_JOBS:-$(nproc)}
mkdir -p "$BUILD" "$RESULTS" "$LOGS" || exit 2
SUMMARY=$RESULTS/summary.txt
: >"$SUMMARY"
: >"$RESULTS/logs.txt"
# An earlier run's tables in a reused OUT would read as this run's where a step does not run.
rm -f "$RESULTS"/{train-losses.tsv,bench-model.json,bench-ops.json,pytorch-gpu.json} \
  "$RESULTS"/{bench-model-tf32.json,pytorch-gpu-tf32.json}
START=$(date +%s)
FAILED=0
AFTER_GPU=0  # set before build-rest: from there on, a step the budget does not reach is SKIP
# NVIDIA_TF32_OVERRIDE=0 turns TF32 off inside cuBLAS and cuDNN whatever a program asks. No
# step of Brigade's runs with it: its fp32 is FP32 by itself (cuDNN in FMA math with FMA
# algorithms only, cuBLAS in its default math), which the checks against the CPU test here, and
# its bf16 convolutions run on TF32 tensor cores, exact on bf16 operands, as in a user's run.
# Only PyTorch's FP32 benchmark sets it (bench-pytorch), a guard beside its own flags.
unset NVIDIA_TF32_OVERRIDE
ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}

say() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(($(date +%s) - START)); }
left() { echo $((BUDGET_S - $(elapsed))); }
result() {  # NAME STATUS [DETAIL]: the step's one grep-able line
  say "RESULT $2 $1${3:+ $3} (t=$(elapsed)s)"
  case $2 in PASS | SKIP) ;; *) FAILED=1 ;; esac
}
# Why a step the budget does not reach (or cuts) is no failure: every GPU step before it passed.
budget_skip() { [ $AFTER_GPU -eq 1 ] && [ $FAILED -eq 0 ]; }
# A step's own verdict on a log cut at the budget's end: 0 when what it finished had no failure.
# build-rest: no compile or link error; suite: no failed test among those meson finished.
cut_clean() {  # NAME
  case $1 in
    build-rest) ! grep -q -E '^FAILED: ' "$LOGS/$1.log" ;;
    suite) ! grep -q -E '^ *[0-9]+/[0-9]+ .* (FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS) ' "$LOGS/$1.log" ;;
    *) return 1 ;;
  esac
}
# After a cut: the tests meson stopped (INTERRUPT: killed by the cut, which says nothing of
# them), each with how long it had run, into the summary under the step; then how many of
# meson's tests have a result. Only meson's result lines ("3/12 name  OK  1.2s") match.
# Sets STOPPED.
meson_stopped() {  # NAME RC
  local lines n total none='not started'
  local res='(OK|FAIL|SKIP|TIMEOUT|ERROR|INTERRUPT|EXPECTEDFAIL|UNEXPECTEDPASS)'
  # One line per test number: the "Summary of Failures" at the end repeats a test's line.
  lines=$(grep -E "^ *[0-9]+/[0-9]+ .* $res +[0-9.]+s" "$LOGS/$1.log" | awk '!seen[$1]++')
  STOPPED=$(grep -c ' INTERRUPT ' <<<"$lines")
  [ -n "$lines" ] || return 0
  sed -nE 's#^ *[0-9]+/[0-9]+ (.*[^ ]) +INTERRUPT +([0-9.]+s).*#    stopped by the cut: \1, after \2#p' \
    <<<"$lines" | cut -c1-300 | tee -a "$SUMMARY"
  n=$(grep -c . <<<"$lines")
  total=$(head -n 1 <<<"$lines" | sed -E 's#^ *[0-9]+/([0-9]+) .*#\1#')
  # Killed (137), meson could not list the tests it had running: they are among those without.
  [ "$2" -eq 137 ] && none='without a result (not started, or running when meson was killed)'
  say "    meson: of its $total tests, $((n - STOPPED)) finished, $STOPPED stopped by the cut," \
    "$((total - n)) $none"
}
# step NAME SHARE CMD...: CMD for at most min(SHARE, what is left of the budget), its output in
# $LOGS/NAME.log; SHARE "rest": what is left. Lines "summary: ..." and doctest's and
# compute-sanitizer's totals are copied into the summary. With REHEARSAL set (--emulated), a
# step that ran clean is SKIP with that reason: it checked the command, not what only a GPU
# measures. Returns CMD's status (124: cut at its limit; 125: not run).
REHEARSAL=
step() {
  local name=$1 share=$2 limit rc cut_at
  shift 2
  limit=$(left)
  if [ "$limit" -lt 5 ]; then
    if budget_skip; then result "$name" SKIP "the ${BUDGET_S}s budget ended before it (every GPU step had passed)"
    else result "$name" NOT-RUN "the ${BUDGET_S}s budget is spent"; fi
    return 125
  fi
  cut_at="what was left of the ${BUDGET_S}s budget"
  if [ "$share" != rest ] && [ "$share" -lt "$limit" ]; then
    limit=$share cut_at="its share of the ${BUDGET_S}s budget"
  fi
  say "--- $name (share $([ "$share" = rest ] && echo 'the rest' || echo "${share}s"), limit ${limit}s, $(left)s of the budget left): $*"
  timeout --kill-after=5 "$limit" "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  { echo "===== $name (exit $rc): $*"; tail -n 300 "$LOGS/$name.log"; } >>"$RESULTS/logs.txt"
  # A test program's totals, except under meson (suite), whose log holds a program's totals
  # only where it failed (its FAIL line and first errors follow) or was stopped by the cut,
  # when doctest counts the case it was in as failed though nothing failed.
  local totals='^(summary: |\[doctest\] test cases|========= ERROR SUMMARY)'
  [ "$name" = suite ] && totals='^summary: '
  grep -E "$totals" "$LOGS/$name.log" | sed 's/^summary: //; s/^/    /' >>"$SUMMARY"
  STOPPED=0
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then meson_stopped "$name" $rc; fi
  if [ $rc -eq 0 ]; then
    if [ -n "$REHEARSAL" ]; then result "$name" SKIP "$REHEARSAL"; else result "$name" PASS; fi
  elif { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && budget_skip && cut_clean "$name"; then
    # What is known: nothing that finished failed; a stopped test is neither passed nor failed.
    local known="no failure before the cut"
    if [ "$name" = suite ]; then
      known="no failure among the tests that finished; stopped: $STOPPED tests (listed above)"
      [ "$STOPPED" -gt 0 ] || known="no failure among the tests that finished; meson listed no stopped test"
    fi
    result "$name" SKIP "cut at ${limit}s ($cut_at), $known (every GPU step had passed)"
  else
    { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && say "    cut at its limit of ${limit}s ($cut_at)"
    { grep -m 6 -E 'FAILED:|error:|undefined reference|ERROR' "$LOGS/$name.log" | sed 's/^/    first: /'
      tail -n 20 "$LOGS/$name.log" | sed 's/^/    | /'; } | cut -c1-300 | tee -a "$SUMMARY"
    result "$name" FAIL "exit $rc, whole log $LOGS/$name.log"
    # Killed by a signal (128 + N; not timeout's SIGKILL, 137): a test program's crash.
    if [ $rc -gt 128 ] && [ $rc -ne 137 ] && [[ $1 == "$BUILD"/tests/* ]] && [[ $name != *-rest ]]; then
      after_crash "$name" "$@"
    fi
  fi
  return $rc
}
# A test program that crashed took its other cases with it, and its log says little of where.
# The case doctest names as crashed (the last "TEST CASE:" before "test case CRASHED") runs
# again alone under a debugger (cuda-gdb, else gdb), whose backtrace of the crashing thread goes
# into the summary (every thread's in $LOGS/NAME-backtrace.log); then the program runs once more
# without that case, as step NAME-rest, so that its other cases are still judged; last, the whole
# program runs under AddressSanitizer (NAME-asan-build, NAME-asan). A crash doctest names no case
# for (its signal handler is set only while a case runs: a crash at start-up or at exit) gets
# the whole program under the debugger, and neither of the others. The crashed step stays FAIL.
after_crash() {  # NAME CMD...
  local name=$1 crashed filter debugger limit a drc what excluded=0 rest=() only=()
  shift
  # Between the case's header and the crash line stand its subcases and, unflushed, its output.
  crashed=$(awk '/^TEST CASE:/ { c = $0 } /test case CRASHED/ { print c; exit }' "$LOGS/$name.log" |
    sed 's/^TEST CASE: *//')
  if [ -n "$crashed" ]; then
    filter=${crashed//,/?}  # doctest's filters: a comma separates two; '?' matches any character
    for a in "$@"; do  # the command's own exclusions, if any, and this case
      case $a in --test-case-exclude=*) rest+=("$a,$filter"); excluded=1 ;; *) rest+=("$a") ;; esac
    done
    [ $excluded -eq 1 ] || rest+=("--test-case-exclude=$filter")
    only=("--test-case=$filter") what="the crashed case alone"
    say "    crashed: \"$crashed\""
  elif grep -q 'test case CRASHED' "$LOGS/$name.log"; then
    what="the whole program"
    say "    crashed in a case doctest did not name (no \"TEST CASE:\" line before its \"test case CRASHED\")"
  else
    what="the whole program"
    say "    crashed outside a test case (no doctest \"test case CRASHED\" line): at start-up or at exit"
  fi
  debugger=$(command -v cuda-gdb || command -v gdb)
  limit=$(left)
  [ "$limit" -gt 60 ] && limit=60
  if [ -z "$debugger" ]; then
    say "    backtrace: no cuda-gdb or gdb here"
  elif [ "$limit" -lt 5 ]; then
    say "    backtrace: not taken, the ${BUDGET_S}s budget is spent"
  else
    timeout --kill-after=5 "$limit" "$debugger" -q -batch -ex 'set pagination off' -ex run \
      -ex 'bt 30' -ex 'thread apply all bt 20' --args "$@" "${only[@]}" \
      >"$LOGS/$name-backtrace.log" 2>&1
    drc=$?
    { echo "===== $name-backtrace (exit $drc): $debugger, $what"; tail -n 300 "$LOGS/$name-backtrace.log"; } >>"$RESULTS/logs.txt"
    # The stop at the signal, then the crashing thread's frames (bt 30), up to the first blank.
    if grep -q 'received signal' "$LOGS/$name-backtrace.log"; then
      say "    backtrace ($(basename "$debugger")$([ -n "$crashed" ] || echo ", $what"), the crashing thread; every thread's: $LOGS/$name-backtrace.log):"
      sed -n '/received signal/,/^$/p' "$LOGS/$name-backtrace.log" | grep -E '^(#|Thread|Program|.*received signal)' |
        head -n 32 | cut -c1-240 | sed 's/^/      /' | tee -a "$SUMMARY"
      { [ $drc -eq 124 ] || [ $drc -eq 137 ]; } && say "      ($(basename "$debugger") was cut at ${limit}s after the stop)"
    elif [ $drc -eq 124 ] || [ $drc -eq 137 ]; then  # no stop, no exit: still running at the cut
      say "    backtrace: none, $(basename "$debugger") running $what was cut at ${limit}s before a crash or an exit ($LOGS/$name-backtrace.log)"
    elif grep -q -E 'exited normally|exited with code' "$LOGS/$name-backtrace.log"; then
      # gdb's "[Inferior 1 (process N) exited ...]", and doctest's totals where it printed them
      say "    backtrace: none, $what did not crash again under $(basename "$debugger"): $(
        grep -m 1 -o -E 'exited (normally|with code [0-9]+)' "$LOGS/$name-backtrace.log")$(
        grep -m 1 -E '^\[doctest\] test cases' "$LOGS/$name-backtrace.log" | sed 's/^\[doctest\] /; /')"
    else
      say "    backtrace: none, $(basename "$debugger") failed: no crash and no exit of $what in its log" \
        "(exit $drc); its last lines:"
      tail -n 8 "$LOGS/$name-backtrace.log" | cut -c1-240 | sed 's/^/      | /' | tee -a "$SUMMARY"
    fi
  fi
  if [ -z "$crashed" ]; then  # no case to leave out or to run alone
    say "    not run: $name-rest, $name-asan-build, $name-asan (no case to leave out or to run alone)"
    return 0
  fi
  step "$name-rest" 60 "${rest[@]}"
  # The program once more, its host code built with AddressSanitizer (nvcc's device code as it
  # is), which names a bad access where it happens: glibc's heap checks stop the program later,
  # in whatever allocates next, so the write may have come in a case before the crashed one, and
  # the whole program runs (ASan stops at its first report). In $BUILD-asan, made once; the CUDA
  # driver maps memory where ASan keeps its shadow gap, hence protect_shadow_gap=0.
  local asan=$BUILD-asan program=${1#"$BUILD"/} setup=(true)  # (true: already set up)
  if [ ! -f "$asan/build.ninja" ]; then
    setup=("${MESON_CMD[@]}" setup "$asan" -Dbuildtype=debugoptimized -Dmpi=disabled)
    if [ $emulated -eq 1 ]; then setup+=(-Dcuda=emulated -Db_sanitize=address -Db_lundef=false)
    else setup+=(-Dcuda=enabled "-Dgpu_arch=$arch" "-Dcpp_args=-fsanitize=address -fno-omit-frame-pointer"
                 -Dcuda_args=-Xcompiler=-fsanitize=address -Dcuda_link_args=-Xcompiler=-fsanitize=address); fi
  fi
  # shellcheck disable=SC2016  # expanded by the child bash: the setup, then the program's build
  step "$name-asan-build" 150 bash -c 'dir=$0 jobs=$1 target=$2; shift 2; "$@" && ninja -C "$dir" -j "$jobs" "$target"' \
    "$asan" "$JOBS" "$program" "${setup[@]}" || return 0
  ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0:halt_on_error=1:print_legend=0 \
    step "$name-asan" 90 "$asan/$program" "${@:2}"
  # AddressSanitizer's report: what was touched, where, and where that memory was freed.
  grep -A 40 -m 1 'ERROR: AddressSanitizer' "$LOGS/$name-asan.log" | grep -E '^(==|    #|[A-Za-z])' |
    head -n 40 | cut -c1-240 | sed 's/^/      /' | tee -a "$SUMMARY"
}
# The steps a run reports, each in exactly one RESULT line; a run that ends without failing
# but misses one (a script error that skipped it) does not pass.
if [ $build_only -eq 1 ]; then STEPS="preflight configure build build-rest"
else STEPS="preflight configure build kernels-cuda kernels-emu memcheck racecheck parity-vendor parity-handwritten
  train bench-brigade bench-pytorch bench-brigade-tf32 bench-pytorch-tf32 bench-ops multi-gpu nccl
  build-rest suite"; fi
finish() {  # the last line, then exit: $1 overrides the status
  local s unreported=()
  if [ $FAILED -eq 0 ] && [ -z "${1:-}" ]; then
    for s in $STEPS; do
      [ "$(grep -c "^RESULT [A-Z-]* ${s}[ (]" "$SUMMARY")" = 1 ] || unreported+=("$s")
    done
    [ ${#unreported[@]} -eq 0 ] || result gpu-check FAIL "steps without exactly one RESULT line: ${unreported[*]}"
  fi
  say "gpu-check: $([ $FAILED -eq 0 ] && echo 'ALL PASSED' || echo 'FAILURES (RESULT FAIL or NOT-RUN above)') in $(elapsed)s; summary $SUMMARY"
  exit "${1:-$FAILED}"
}
prepend() { [ -d "$2" ] && export "$1=$2${!1:+:${!1}}"; return 0; }  # VAR DIR
on_path() { case " $CUDA_PATHS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }  # PATH-NAME

# The commit, and whether the tree differs from it: only where git can say (a tree copied
# without .git has no commit; git refuses a repository another user owns, and says why).
if commit=$(git rev-parse --short HEAD 2>/dev/null); then
  git diff --quiet HEAD 2>/dev/null
  case $? in 0) ;; 1) commit+=" + uncommitted changes" ;; *) commit+=" (uncommitted changes unknown: git diff failed)" ;; esac
elif ! command -v git >/dev/null; then commit="unknown (no git here)"
elif git rev-parse --git-dir >/dev/null 2>&1; then commit="unknown (a git repository whose HEAD names no commit)"
else
  commit=$(git rev-parse --short HEAD 2>&1 | head -n 1 | cut -c1-120)
  case $commit in
    *"not a git repository"*) commit="unknown (no git repository)" ;;
    *) commit="unknown (git: ${commit#fatal: })" ;;
  esac
fi
say "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), commit $commit, budget ${BUDGET_S}s$([ $build_only -eq 1 ] && echo ', --build-only')$([ $emulated -eq 1 ] && echo ', --emulated')"

# ---- the kit, CUDA, cuDNN and NCCL on every search path ------------------------------------
if [ -f "$KIT/MANIFEST" ]; then
  k=$KIT/usr t=x86_64-linux-gnu
  prepend CPATH "$k/include/$t/openblas-pthread"
  prepend CPATH "$k/include"
  for d in "$k/lib/$t/openblas-pthread" "$k/lib/$t"; do prepend LIBRARY_PATH "$d"; prepend LD_LIBRARY_PATH "$d"; done
  prepend PKG_CONFIG_PATH "$k/share/pkgconfig"
  prepend PKG_CONFIG_PATH "$k/lib/$t/pkgconfig"
  say "kit: $KIT: $(cat "$KIT/MANIFEST")"
else
  say "kit: none at $KIT (tools/gpu-kit.sh makes it): the machine's own packages are used"
fi
if ! command -v pkg-config >/dev/null && [ -x "$KIT/usr/bin/pkgconf" ]; then
  export PKG_CONFIG=$KIT/usr/bin/pkgconf  # Meson reads PKG_CONFIG
fi
[ -d "$CUDA_HOME/bin" ] && PATH=$CUDA_HOME/bin:$PATH
prepend LD_LIBRARY_PATH "$CUDA_HOME/lib64"  # NVRTC, which cuDNN 9's runtime-compiled engines load
[ -d "$CUDA_HOME/compute-sanitizer" ] && PATH=$PATH:$CUDA_HOME/compute-sanitizer
# vendor NAME HEADER: cuDNN or NCCL from $CUDA_HOME, else from the pip wheel nvidia-NAME-cu13,
# whose lib/ holds only libNAME.so.<major>: the link Meson and the linker look for goes in
# $BUILD/vendor-links. Sets VENDOR_AT.
vendor() {
  local name=$1 header=$2 root inc so
  VENDOR_AT=
  if [ -f "$CUDA_HOME/include/$header" ] && [ -e "$CUDA_HOME/lib64/lib$name.so" ]; then
    VENDOR_AT=$CUDA_HOME; return 0
  fi
  root=$(python3 -c "import nvidia.$name as m; print(list(m.__path__)[0])" 2>/dev/null) || return 1
  inc=$(find "$root" -name "$header" -printf '%h\n' -quit)
  so=$(find "$root" -name "lib$name.so*" | awk '{ print length($0), $0 }' | sort -n | head -1 | cut -d' ' -f2-)
  [ -n "$inc" ] && [ -n "$so" ] || return 1
  mkdir -p "$BUILD/vendor-links"
  [ "${so##*/}" = "lib$name.so" ] || ln -sfn "$so" "$BUILD/vendor-links/lib$name.so"
  prepend CPATH "$inc"
  prepend LIBRARY_PATH "${so%/*}"
  prepend LIBRARY_PATH "$BUILD/vendor-links"
  prepend LD_LIBRARY_PATH "${so%/*}"
  VENDOR_AT="$root (pip wheel; link $BUILD/vendor-links/lib$name.so)"
}
vendor cudnn cudnn.h && say "cuDNN: $VENDOR_AT"
vendor nccl nccl.h && say "NCCL: $VENDOR_AT"

# ---- the GPUs and their architecture ---------------------------------------------------------
gpus=0 smi=0 query=
if [ $emulated -eq 1 ]; then  # one GPU, as on the machine the real run expects; multi-gpu has more
  export BRIGADE_EMULATED_GPUS=1
  gpus=1
  say "gpu: emulated (-Dcuda=emulated, kernels/emu/cudart): BRIGADE_EMULATED_GPUS=1, every stage on cuda:0; $EMULATED_MULTI_GPUS for multi-gpu; ${BRIGADE_EMULATED_GPU_MEMORY:-4GiB} each"
elif command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  smi=1
  gpus=$(nvidia-smi -L | grep -c '^GPU ')
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,compute_cap --format=csv,noheader |
    sed 's/^/gpu: /' | tee -a "$SUMMARY"
elif command -v __nvcc_device_query >/dev/null && query=$(__nvcc_device_query 2>/dev/null); then
  # No nvidia-smi (or one that fails): the toolkit's __nvcc_device_query, which nvcc -arch=native
  # runs, prints each GPU's compute capability ("90,90": two) and fails without a GPU; that it
  # ran is one GPU at least.
  # shellcheck disable=SC2020  # both separators become line breaks
  gpus=$(tr ', ' '\n\n' <<<"$query" | grep -c -E '^[0-9]+$')
  [ "$gpus" -gt 0 ] || gpus=1
  say "gpu: count $gpus, compute capability ${query:-not printed} (__nvcc_device_query; no working nvidia-smi)"
else
  query=  # a failed query's output names no architecture
fi
arch=${GPU_ARCH:-}
if [ -z "$arch" ] && [ $smi -eq 1 ]; then  # "9.0" -> "90"
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | tr -d ' .' | sort -un | paste -sd, -)
fi
if [ -z "$arch" ] && [ -n "$query" ]; then
  # shellcheck disable=SC2020  # both separators become line breaks
  arch=$(tr ', ' '\n\n' <<<"$query" | grep -E '^[0-9]+$' | sort -un | paste -sd, -)
fi
ptx=$(echo "$arch" | tr , '\n' | sort -n | tail -1)  # PTX of the highest, for a newer GPU's JIT

# ---- preflight: everything missing, listed at once --------------------------------------------
missing=() found=() cuda_missing=()
miss() { missing+=("$1"); }
# A piece of the CUDA toolkit, cuBLAS or cuDNN: missing, except to the emulated build (which
# compiles no device code and links none of them): there it is only said.
cuda_miss() { if [ $emulated -eq 1 ]; then cuda_missing+=("$1"); else miss "$1"; fi; }
have() { command -v "$1" >/dev/null; }
have nvcc || cuda_miss "nvcc: the CUDA toolkit (its bin/ on PATH, or CUDA_HOME=...)"
CXX=${CXX:-c++}
have "$CXX" || { have g++ && CXX=g++; } || miss "a C++ compiler (c++ or g++; CXX=...)"
export CXX
have ninja || miss "ninja (pip install ninja, or Debian's ninja-build)"
have python3 || miss "python3"
if [ -n "${MESON:-}" ]; then
  [ -f "$MESON" ] || miss "MESON=$MESON: no such file"
  pkgdir=$(cd "$(dirname "$MESON")/.." 2>/dev/null && pwd)/lib/python3/dist-packages  # Debian's, dpkg -x'd
  [ -d "$pkgdir/mesonbuild" ] && export PYTHONPATH="$pkgdir${PYTHONPATH:+:$PYTHONPATH}"
  MESON_CMD=(python3 "$MESON")
elif have meson; then MESON_CMD=(meson)
elif python3 -c 'import mesonbuild' 2>/dev/null; then MESON_CMD=(python3 -m mesonbuild.mesonmain)
else miss "Meson (pip install meson, or MESON=path/to/meson.py)"; fi
PC=${PKG_CONFIG:-pkg-config}
have "$PC" || miss "pkg-config (the machine has none and $KIT has none: run tools/gpu-kit.sh and copy .gpu-kit/ here)"
[ -n "$arch" ] || [ $emulated -eq 1 ] || miss "the GPU architecture: no GPU found (nvidia-smi, __nvcc_device_query); GPU_ARCH=90 builds without one"
# Headers: in the compiler's own search list (CPATH included), or the toolkit's include/.
inc_dirs=("$CUDA_HOME/include")
have "$CXX" && mapfile -t -O 1 inc_dirs < <(echo | "$CXX" -xc++ -E -v - 2>&1 |
  sed -n '/#include <...> search starts here:/,/End of search list./{//!p}' | sed 's/^ *//')
header() {  # HEADER WHAT [cuda]
  local d
  for d in "${inc_dirs[@]}"; do [ -f "$d/$1" ] && { found+=("$1: $d"); return 0; }; done
  if [ "${3:-}" = cuda ]; then cuda_miss "$1 ($2)"; else miss "$1 ($2)"; fi
}
header doctest/doctest.h "doctest-dev: in the kit (tools/gpu-kit.sh)"
header nlohmann/json.hpp "nlohmann-json3-dev: in the kit"
header CLI/CLI.hpp "libcli11-dev: in the kit"
header zlib.h "zlib1g-dev: in the kit"
header cblas.h "libopenblas-pthread-dev: in the kit"
header cuda_runtime_api.h "the CUDA toolkit" cuda
header cublas_v2.h "cuBLAS, with the CUDA toolkit" cuda
header cudnn.h "cuDNN: $CUDA_HOME/include or the pip wheel nvidia-cudnn-cu13" cuda
# Libraries: where Meson's CUDA dependency looks first, then the compiler's list (LIBRARY_PATH).
library() {  # NAME WHAT [cuda]
  local p=$CUDA_HOME/lib64/lib$1.so
  [ -e "$p" ] || p=$(have "$CXX" && "$CXX" -print-file-name="lib$1.so")
  if [ "${p#/}" != "$p" ] && [ -e "$p" ]; then found+=("lib$1.so: $p")
  elif [ "${3:-}" = cuda ]; then cuda_miss "lib$1.so ($2)"
  else miss "lib$1.so ($2)"; fi
}
library openblas "libopenblas0-pthread + libopenblas-pthread-dev: in the kit"
library z "zlib1g-dev: in the kit"
library cudart "the CUDA toolkit" cuda
library cublas "cuBLAS" cuda
library cublasLt "cuBLAS" cuda
library cudnn "cuDNN: $CUDA_HOME/lib64, or the pip wheel nvidia-cudnn-cu13 (linked as libcudnn.so here)" cuda
# What Meson asks pkg-config for (kernels/cpu asks for openblas only without Debian's own).
# Where pkg-config has no module, Meson asks CMake next: Debian's doctest-dev ships only a
# CMake package (/usr/lib/cmake/doctest/doctestConfig.cmake), found when cmake is installed.
cmake_package() {  # NAME: its <NAME>Config.cmake where Meson's CMake lookup finds it
  have cmake || return 1
  local d
  for d in /usr/lib/cmake /usr/share /usr/lib/x86_64-linux-gnu/cmake /usr/local/lib/cmake /usr/local/share; do
    [ -f "$d/$1/$1Config.cmake" ] && { echo "$d/$1/$1Config.cmake"; return 0; }
  done
  return 1
}
if have "$PC"; then
  mods=(doctest nlohmann_json CLI11 zlib)
  [ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so ] || mods+=(openblas)
  for m in "${mods[@]}"; do
    if "$PC" --exists "$m"; then found+=("pkg-config $m $("$PC" --modversion "$m")")
    elif cfg=$(cmake_package "$m"); then found+=("cmake package $m: $cfg")
    else miss "pkg-config module $m (its .pc file: in the kit)"; fi
  done
fi
# OpenBLAS's own needs (libgfortran5, a recent enough glibc) must load here.
blas=$(have "$CXX" && readlink -f "$("$CXX" -print-file-name=libopenblas.so)")
if [ -f "$blas" ] && ldd "$blas" 2>&1 | grep -q 'not found'; then
  miss "what $blas needs: $(ldd "$blas" 2>&1 | grep 'not found' | tr -s ' \t' ' ' | paste -sd';' -)"
fi
# Two probes where their parts were found: nvcc with this host compiler in C++20, linked with
# cuDNN and cuBLAS, and run (cudnnGetVersion needs no GPU); the kit's headers with OpenBLAS and zlib.
probe() {  # NAME COMPILE-CMD...: compiles $BUILD/probe-NAME.*, then runs $BUILD/probe-NAME
  local name=$1 log=$BUILD/probe-$1.log
  shift
  local rc
  (cd "$BUILD" && timeout 300 "$@" -o "probe-$name" && timeout 30 "./probe-$name") >"$log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then found+=("probe-$name: $(tail -n 1 "$log")")
  elif [ $rc -eq 124 ]; then miss "a working probe-$name ($*): timed out (300 s to compile, 30 s to run)"
  else miss "a working probe-$name ($*): $(grep -m 3 -iE 'error|undefined|not found|cannot' "$log" | paste -sd' ' - | cut -c1-400)"; fi
}
if [ ${#missing[@]} -eq 0 ]; then
  printf '%s\n' '#include <cublas_v2.h>' '#include <cudnn.h>' '#include <cstdio>' '#include <span>' \
    '__global__ void fill(float* x) { x[threadIdx.x] = 1.0f; }' \
    'int main() { std::printf("nvcc C++20, cuDNN %zu (headers %d), cuBLAS headers %d\n",' \
    '  cudnnGetVersion(), CUDNN_VERSION, CUBLAS_VERSION); }' >"$BUILD/probe-cuda.cu"
  printf '%s\n' '#define DOCTEST_CONFIG_IMPLEMENT' '#include <doctest/doctest.h>' '#include <CLI/CLI.hpp>' '#include <cblas.h>' \
    '#include <nlohmann/json.hpp>' '#include <zlib.h>' '#include <cstdio>' \
    'int main() { float a = 2, b = 3, c = 0;' \
    '  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1, &a, 1, &b, 1, 0, &c, 1);' \
    '  std::printf("C++20, OpenBLAS 2*3=%g, zlib %s, CLI11 %s, nlohmann_json %d.%d, doctest %s\n", c,' \
    '    zlibVersion(), CLI11_VERSION, NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR,' \
    '    DOCTEST_VERSION_STR); }' >"$BUILD/probe-kit.cpp"
  # --emulated: nothing of it is needed, and the probe's minute of nvcc would come off the budget.
  [ $emulated -eq 0 ] &&
    probe cuda nvcc -std=c++20 -ccbin "$CXX" -gencode "arch=compute_$ptx,code=sm_$ptx" probe-cuda.cu -lcudnn -lcublas
  probe kit "$CXX" -std=c++20 probe-kit.cpp -lopenblas -lz
fi
for f in "${found[@]}"; do echo "    found $f" >>"$SUMMARY"; done
for m in "${cuda_missing[@]}"; do say "preflight: not needed by the emulated build: $m"; done
[ $emulated -eq 1 ] && echo "    not probed: nvcc, cuDNN, cuBLAS (the emulated build compiles no device code and links neither)" >>"$SUMMARY"
if [ $build_only -eq 0 ] && [ $emulated -eq 0 ]; then  # what only later steps need: said, but no reason to stop
  have compute-sanitizer || say "preflight: missing for steps memcheck, racecheck: compute-sanitizer"
  python3 -c 'import torch' 2>/dev/null || say "preflight: missing for step bench-pytorch: python3's torch"
fi
if [ ${#missing[@]} -gt 0 ]; then
  for m in "${missing[@]}"; do say "preflight: missing: $m"; done
  result preflight FAIL "${#missing[@]} missing (above); stopped before building"
  [ -z "$arch" ] && [ $emulated -eq 0 ] && [ ${#missing[@]} -eq 1 ] && finish 3
  finish 2
fi
result preflight PASS "nvcc $(have nvcc && nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p' || echo none), $("$CXX" --version | head -1), ninja $(ninja --version), meson $("${MESON_CMD[@]}" --version), $(python3 --version 2>&1), $([ $emulated -eq 1 ] && echo "emulated GPUs" || echo "SASS $arch + PTX $ptx")"

# ---- configure, build ---------------------------------------------------------------------------
mpi=disabled  # MPI only where two GPUs can hold NCCL ranks
[ "$gpus" -ge 2 ] && have mpirun && mpi=auto
# meson.build compiles SASS for each of gpu_arch, PTX for the highest and -lineinfo. The
# emulated build leaves MPI as it was (reusing build-emu as it is: nothing to rebuild).
if [ $emulated -eq 1 ]; then setup=(setup "$BUILD" -Dcuda=emulated -Dbuildtype=release)
else setup=(setup "$BUILD" -Dcuda=enabled "-Dgpu_arch=$arch" -Dbuildtype=release "-Dmpi=$mpi"); fi
[ -f "$BUILD/build.ninja" ] && setup+=(--reconfigure)
step configure 60 "${MESON_CMD[@]}" "${setup[@]}" || finish
gpu_targets=(tests/kernels/cuda/test_cuda_vendor tests/kernels/emu/test_emu tests/pipeline/runtime/test_runtime
             tools/brigade-train tools/brigade-bench)
# --build-only: nothing after the build to keep time for, so it may take the whole budget.
# build-rest and suite come last and take what the steps before them leave ("rest"); but for
# the suite of a rehearsal (--emulated), whose suites CI runs whole on their own: 120 s check
# its command and how its results are read, without the rest of the budget.
build_share=240 suite_share=rest
[ $build_only -eq 1 ] && build_share=$BUDGET_S
[ $emulated -eq 1 ] && suite_share=120
step build "$build_share" ninja -C "$BUILD" -k 0 -j "$JOBS" "${gpu_targets[@]}"
if [ $build_only -eq 1 ] || [ "$gpus" -eq 0 ]; then
  step build-rest rest ninja -C "$BUILD" -k 0 -j "$JOBS"
  python3 - "$BUILD/compile_commands.json" <<'EOF' | tee -a "$SUMMARY"
import json, sys
cmd = next((c["command"] for c in json.load(open(sys.argv[1])) if c["file"].endswith(".cu")), "")
print("    nvcc code generation:", " ".join(w for w in cmd.split() if "arch=" in w or w == "-lineinfo"))
EOF
  [ $build_only -eq 1 ] && finish
  say "gpu-check: no GPU here: built for $arch, stopped before the GPU steps"
  finish 3
fi
bin() { [ -x "$BUILD/$1" ] && return 0; result "$2" NOT-RUN "$1 was not built"; return 1; }

# ---- the CPU reference of `train`, in the background while the GPU steps run ---------------------
export TRAIN_DIR=$BUILD/gpu-check-train TRAIN_ARGS="--model tools/models/seed_cnn.model --data synthetic
  --synthetic-count $((TRAIN_STEPS * TRAIN_BATCH)) --steps $TRAIN_STEPS --batch $TRAIN_BATCH --optimizer sgd --lr 0.01 --momentum 0.9 --seed 1 --print-every 50"
rm -rf "$TRAIN_DIR" && mkdir -p "$TRAIN_DIR"
if [ -x "$BUILD/tools/brigade-train" ]; then
  # shellcheck disable=SC2086
  ( trap 'kill $run 2>/dev/null' TERM
    "$BUILD/tools/brigade-train" $TRAIN_ARGS --devices cpu:0 --threads-per-device $((JOBS > 8 ? 8 : JOBS)) \
      --metrics "$TRAIN_DIR/cpu.jsonl" >"$LOGS/train-cpu.log" 2>&1 &
    run=$!
    wait $run
    echo $? >"$TRAIN_DIR/cpu.rc" ) &
  cpu_reference=$!
  trap 'kill $cpu_reference 2>/dev/null' EXIT
fi

# ---- kernels, sanitizers, parity ------------------------------------------------------------------
bin tests/kernels/cuda/test_cuda_vendor kernels-cuda && step kernels-cuda 60 "$BUILD/tests/kernels/cuda/test_cuda_vendor"
bin tests/kernels/emu/test_emu kernels-emu && step kernels-emu 30 "$BUILD/tests/kernels/emu/test_emu"
# Only Brigade's kernels are instrumented (all in namespace brigade): cuBLAS's and cuDNN's run as
# they are, so the check takes seconds, not minutes; the API calls are checked either way, and
# an error such a call returns inside cuDNN or cuBLAS (they try and drop what a GPU lacks) is not
# reported: each status Brigade gets back is checked by Brigade.
ours=(--kernel-name kns=brigade)
if have compute-sanitizer; then
  help=$(compute-sanitizer --help 2>&1)
  if grep -q -- '--kernel-name ' <<<"$help"; then ours=(--kernel-name kns=brigade)
  elif grep -q -- '--filter ' <<<"$help"; then ours=(--filter kns=brigade)
  else ours=(); fi
fi
san=(compute-sanitizer --error-exitcode 1 --print-limit 20 "${ours[@]}")
memcheck=("${san[@]}" --tool memcheck --report-api-errors no "$BUILD/tests/kernels/cuda/test_cuda_vendor")
# shellcheck disable=SC2016  # expanded by the child bash: "$@" is compute-sanitizer's command
racecheck=(bash -c '"$@" "$BUILD/tests/kernels/cuda/test_cuda_vendor" && "$@" "$BUILD/tests/kernels/emu/test_emu" -tc="native lesson kernels*"'
           racecheck "${san[@]}" --tool racecheck)
if [ $emulated -eq 1 ]; then  # the emulated GPUs run every kernel as host code: nothing to instrument
  result memcheck SKIP "compute-sanitizer instruments native kernels on a GPU; here it would run: ${memcheck[*]}"
  result racecheck SKIP "compute-sanitizer needs a GPU; here it would run: ${san[*]} --tool racecheck on tests/kernels/cuda/test_cuda_vendor, then on tests/kernels/emu/test_emu -tc='native lesson kernels*'"
elif have compute-sanitizer; then
  bin tests/kernels/cuda/test_cuda_vendor memcheck && step memcheck 120 "${memcheck[@]}"
  bin tests/kernels/cuda/test_cuda_vendor racecheck && bin tests/kernels/emu/test_emu racecheck &&
    step racecheck 90 "${racecheck[@]}"
else
  result memcheck FAIL "no compute-sanitizer (CUDA_HOME/compute-sanitizer or on PATH)"
  result racecheck FAIL "no compute-sanitizer"
fi
for path in vendor handwritten; do
  if ! on_path $path; then result "parity-$path" SKIP "CUDA_PATHS=\"$CUDA_PATHS\" leaves it out"; continue; fi
  bin tests/pipeline/runtime/test_runtime "parity-$path" &&
    BRIGADE_CUDA_PATH=$path BRIGADE_TEST_DEVICES=cuda step "parity-$path" 60 "$BUILD/tests/pipeline/runtime/test_runtime" "${runtime_args[@]}"
done

# ---- train: cuda:0 (each path) against cpu:0 -----------------------------------------------------
# shellcheck disable=SC2317  # run by `step` through bash -c
train_gpu() {  # runs under `step`, in a child bash: the GPU runs, the wait for the CPU run, the table
  local path
  for path in $CUDA_PATHS; do
    # shellcheck disable=SC2086
    BRIGADE_CUDA_PATH=$path "$BUILD/tools/brigade-train" $TRAIN_ARGS --devices cuda:0 \
      --metrics "$TRAIN_DIR/$path.jsonl" || { echo "the cuda:0 run on the $path path failed"; return 1; }
  done
  until [ -f "$TRAIN_DIR/cpu.rc" ]; do sleep 1; done  # the background run's status, once it ends
  [ "$(cat "$TRAIN_DIR/cpu.rc")" = 0 ] || { echo "the cpu:0 run failed:"; tail "$LOGS/train-cpu.log"; return 1; }
  # shellcheck disable=SC2086
  python3 - "$TRAIN_DIR" "$RESULTS/train-losses.tsv" $CUDA_PATHS <<'EOF'
import json, math, os, sys
def losses(name):
    recs = (json.loads(l) for l in open(os.path.join(sys.argv[1], name + ".jsonl")))
    return {r["step"]: r["loss"] for r in recs if r.get("kind") == "step"}
cpu, runs = losses("cpu"), {p: losses(p) for p in sys.argv[3:]}
n = max(cpu)
with open(sys.argv[2], "w") as f:
    f.write("step\tcpu:0\t" + "\t".join(f"cuda:0 {p}" for p in runs) + "\n")
    for s in sorted(cpu):
        f.write(f"{s}\t{cpu[s]:.8g}\t" + "\t".join(f"{r.get(s, float('nan')):.8g}" for r in runs.values()) + "\n")
# float32 rounding differs between the devices' kernels and compounds over the steps. The bound
# is absolute near zero and relative above it: on a loss heading to 1e-3 a relative bound alone
# would judge rounding noise (the CPU against PyTorch: 9.2e-6 at worst over 50 steps). It holds
# step by step while the runs follow one trajectory: the first EXACT steps (100, or the whole run
# if shorter). After the loss's steep descent the runs part: measured on an NVIDIA H200, both
# paths equal the CPU bit for bit for 3 steps, within 3e-6 relative at step 49 and 3e-5 at 74,
# then 1e-3 at 99 and 9 % at 174, where a batch's loss is 0.04 and moves by that much from one
# step to the next. From there on the runs are judged by where they got to: the mean loss of
# the last 50 steps within half the CPU's mean plus 1e-3 (a GPU path that computes wrongly does
# not reach the CPU's loss of about 0.01 at all).
EXACT, TAIL = min(100, n), min(50, n)
def bound(loss): return 1e-4 + 1e-2 * abs(loss)
def tail_mean(run): return sum(run[s] for s in range(n - TAIL + 1, n + 1)) / TAIL
print(f"summary: {n} steps of seed_cnn (batch {os.environ['TRAIN_BATCH']}, SGD lr 0.01 momentum 0.9,"
      f" dropout on, synthetic data); steps 1-{EXACT}: each |cuda:0 - cpu:0| <= 1e-4 + 1e-2 |cpu:0|;"
      f" the mean loss of steps {n - TAIL + 1}-{n} within 0.5 x cpu:0's + 1e-3:")
ok = True
for p, run in runs.items():
    missing = [s for s in cpu if s not in run or not math.isfinite(run[s])]
    d = {s: abs(run[s] - cpu[s]) for s in cpu if s not in missing and s <= EXACT}
    good = not missing and all(d[s] <= bound(cpu[s]) for s in d)
    detail = "no step"
    if d:
        w = max(d, key=lambda s: d[s] / bound(cpu[s]))
        detail = f"steps 1-{EXACT}: largest |d| {max(d.values()):.1e}; nearest its bound at step {w}: {d[w]:.1e} of {bound(cpu[w]):.1e}"
    if not missing:
        mine, theirs = tail_mean(run), tail_mean(cpu)
        tail_good = abs(mine - theirs) <= 0.5 * theirs + 1e-3
        good &= tail_good
        detail += f"; mean loss of the last {TAIL} steps {mine:.6f}, cpu:0 {theirs:.6f} ({'within' if tail_good else 'OVER'})"
    ok &= good
    print(f"summary:   {p:<11} {'within' if good else 'OVER'}: {detail}"
          + (f"; steps missing or not finite: {missing[:5]}" if missing else "")
          + f"; loss at step {n}: {run.get(n, float('nan')):.6f}, cpu:0 {cpu[n]:.6f}")
sys.exit(0 if ok else 1)
EOF
}
export -f train_gpu
export CUDA_PATHS TRAIN_BATCH
if bin tools/brigade-train train; then
  step train 120 bash -c train_gpu
  { sed -n 's/^\(done: .* steps\{0,1\} in .*\)/    time, cpu:0: \1/p' "$LOGS/train-cpu.log"
    sed -n "s/^\(done: .* steps\{0,1\} in .*\)/    time, cuda:0 (${CUDA_PATHS// /, then }): \1/p" "$LOGS/train.log"; } >>"$SUMMARY"
fi
[ -n "${cpu_reference:-}" ] && kill "$cpu_reference" 2>/dev/null

# ---- benchmarks: training samples/s beside PyTorch, per-op hand-written against vendor -------------
# --emulated: an emulated GPU's speed is no GPU's, and the question's network at batches 128 and
# 512 on one would take many minutes. Each command runs with its flags as on a GPU but on CPU devices
# (BRIGADE_EMULATED_GPUS=0), batch 8, one repetition of one step, so that a flag the program no
# longer takes, a JSON it no longer writes, or a table this script cannot read shows here.
bench_batches=128,512 bench_batch=128 bench_reps=5 bench_steps=10 ops_impls=${CUDA_PATHS// /,} on_cpu=() quick=
if [ $emulated -eq 1 ]; then
  on_cpu=(env BRIGADE_EMULATED_GPUS=0)  # and --quick (below): a faster peak, fewer calls per op
  bench_batches=8 bench_batch=8 bench_reps=1 bench_steps=1 ops_impls=cpu quick=--quick
  REHEARSAL="timing needs a real GPU; the command ran on CPU devices (batch 8, 1 repetition) to check it"
fi
# The runtime level's rows: samples/s, the device's peak memory in use in a step and what its
# allocator holds, CUDA graphs on beside off (the graphs' pools against the eager step's
# cache); "-" on a CPU device.
runtime_rows() {  # $1: a brigade-bench --json file
  python3 - "$1" <<'EOF'
import json, os, sys
rows = json.load(open(sys.argv[1])).get("runtime", []) if os.path.exists(sys.argv[1]) else []
if rows:
    print(f"    runtime level ({os.path.basename(sys.argv[1])}): the step brigade-train runs, per CUDA graphs setting")
    print(f"    {'device':<7} {'impl':<12} {'prec':<4} {'graphs':>6} {'batch':>5} {'samples/s':>10} {'peak MiB':>9} {'held MiB':>9}")
    for r in rows:
        graphs = {True: "on", False: "off", None: "-"}[r["cuda_graphs"]]
        print(f"    {r['device']:<7} {r['impl']:<12} {r['precision']:<4} {graphs:>6} {r['batch']:>5}"
              f" {r['samples_per_s']:>10.0f} {r['peak_bytes'] / 2**20:>9.1f} {r['reserved_bytes'] / 2**20:>9.1f}")
EOF
}
# cuDNN's algorithms, one line per convolution shape as brigade-bench logs them: FP32's, then
# TF32's, to read beside their times (TF32 was once slower than FP32 at batch 128).
cudnn_choices() {  # $1: a step's name
  [ -f "$LOGS/$1.log" ] && grep -E '^cuDNN conv2d ' "$LOGS/$1.log" | sort -u | cut -c1-300 | sed 's/^/    /'
}
if bin tools/brigade-bench bench-brigade; then
  step bench-brigade 90 "${on_cpu[@]}" "$BUILD/tools/brigade-bench" ${quick} --level model,runtime --cuda-graphs on,off \
    --precision fp32,bf16 --batches $bench_batches --threads "$JOBS" --reps $bench_reps --steps $bench_steps \
    --json "$RESULTS/bench-model.json"
  runtime_rows "$RESULTS/bench-model.json" | tee -a "$SUMMARY"
  cudnn_choices bench-brigade | tee -a "$SUMMARY"
fi
REHEARSAL=
if [ $emulated -eq 1 ]; then  # no GPU for PyTorch: its script is compiled, not run
  REHEARSAL="PyTorch on a GPU needs a real GPU; tools/compare/pytorch_gpu_bench.py compiles"
  step bench-pytorch 30 python3 -m py_compile tools/compare/pytorch_gpu_bench.py
  REHEARSAL=
else
  LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH step bench-pytorch 60 env NVIDIA_TF32_OVERRIDE=0 python3 tools/compare/pytorch_gpu_bench.py \
    --batches $bench_batches --reps $bench_reps --steps $bench_steps --json "$RESULTS/pytorch-gpu.json" \
    --beside "$RESULTS/bench-model.json"
  [ -f "$LOGS/bench-pytorch.log" ] &&  # none when the budget was spent before the step
    sed -n '/^beside Brigade/,$s/^/    /p' "$LOGS/bench-pytorch.log" | tee -a "$SUMMARY"
fi
# The same two with TF32 on both sides: brigade-bench --math tf32 (the vendor rows and the GPU's
# peak on tensor cores; its CPU and hand-written rows stay FP32) beside PyTorch with allow_tf32.
# --emulated: --math tf32 needs a GPU, so it runs on the
# emulated one (one thread, batch 8, one repetition of one step); PyTorch's script compiles.
tf32_threads=$JOBS
[ $emulated -eq 1 ] && tf32_threads=1 &&
  REHEARSAL="timing needs a real GPU; the command ran on the emulated GPU (batch 8, 1 repetition) to check it"
if bin tools/brigade-bench bench-brigade-tf32; then
  step bench-brigade-tf32 90 "$BUILD/tools/brigade-bench" ${quick} --level model,runtime --math tf32 --cuda-graphs on,off \
    --batches $bench_batches --threads "$tf32_threads" --reps $bench_reps --steps $bench_steps \
    --json "$RESULTS/bench-model-tf32.json"
  runtime_rows "$RESULTS/bench-model-tf32.json" | tee -a "$SUMMARY"
  cudnn_choices bench-brigade-tf32 | tee -a "$SUMMARY"
fi
REHEARSAL=
if [ $emulated -eq 1 ]; then
  REHEARSAL="PyTorch on a GPU needs a real GPU; tools/compare/pytorch_gpu_bench.py compiles"
  step bench-pytorch-tf32 30 python3 -m py_compile tools/compare/pytorch_gpu_bench.py
  REHEARSAL=
else
  LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH step bench-pytorch-tf32 60 python3 tools/compare/pytorch_gpu_bench.py \
    --math tf32 --batches $bench_batches --reps $bench_reps --steps $bench_steps \
    --json "$RESULTS/pytorch-gpu-tf32.json" --beside "$RESULTS/bench-model-tf32.json"
  [ -f "$LOGS/bench-pytorch-tf32.log" ] &&  # none when the budget was spent before the step
    sed -n '/^beside Brigade/,$s/^/    /p' "$LOGS/bench-pytorch-tf32.log" | tee -a "$SUMMARY"
fi
[ $emulated -eq 1 ] && REHEARSAL="timing needs a real GPU; the command ran on CPU devices (--impls cpu, batch 8, 1 repetition) to check it"
if bin tools/brigade-bench bench-ops; then
  step bench-ops 90 "${on_cpu[@]}" "$BUILD/tools/brigade-bench" ${quick} --level ops --impls "$ops_impls" --batch $bench_batch --threads 1 \
    --precision fp32,bf16 --reps $bench_reps --json "$RESULTS/bench-ops.json"
  python3 - "$RESULTS/bench-ops.json" $bench_batch <<'EOF' | tee -a "$SUMMARY"
import collections, json, os, sys
if os.path.exists(sys.argv[1]):
    ops, rows = collections.OrderedDict(), json.load(open(sys.argv[1])).get("ops", [])
    for r in rows:
        ops.setdefault((r["layer"], r["op"], r.get("precision", "fp32")), {})[r["impl"]] = r["ms"]
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    ratio = "handwritten" in impls and "vendor" in impls  # above 1: the hand-written kernel is slower
    print(f"    ms per call on {', '.join(sorted({r['device'] for r in rows}))}, batch {sys.argv[2]} (median)"
          + (": hand-written against cuDNN/cuBLAS" if ratio else ""))
    print(f"    {'layer':<11} {'op':<16} {'prec':<4}" + "".join(f" {i:>12}" for i in impls) + (f" {'ratio':>6}" if ratio else ""))
    for (layer, op, prec), ms in ops.items():
        line = f"    {layer:<11} {op:<16} {prec:<4}" + "".join(f" {ms.get(i, float('nan')):12.3f}" for i in impls)
        if ratio:
            h, v = ms.get("handwritten"), ms.get("vendor")
            line += f" {h / v if h and v else float('nan'):6.2f}"
        print(line)
EOF
fi
REHEARSAL=

# ---- several GPUs ---------------------------------------------------------------------------------
if [ $emulated -eq 1 ]; then  # the parity matrix over more emulated GPUs; NCCL emulated over MPI
  gpus=$EMULATED_MULTI_GPUS
  BRIGADE_EMULATED_GPUS=$gpus BRIGADE_TEST_DEVICES=cuda:all step multi-gpu 60 "$BUILD/tests/pipeline/runtime/test_runtime" "${runtime_args[@]}"
  if [ -x "$BUILD/tests/pipeline/distributed/test_nccl" ] && have mpirun; then
    BRIGADE_EMULATED_GPUS=2 step nccl 120 mpirun --oversubscribe --allow-run-as-root -np 2 "$BUILD/tests/pipeline/distributed/test_nccl"
  else result nccl SKIP "no mpirun or no MPI: test_nccl not built (NCCL is emulated over MPI)"; fi
elif [ "$gpus" -lt 2 ]; then
  result multi-gpu SKIP "$gpus GPU: the parity matrix on cuda:all needs two"
  result nccl SKIP "$gpus GPU: NCCL needs a GPU for each of its 2 ranks"
else
  BRIGADE_TEST_DEVICES=cuda:all step multi-gpu 60 "$BUILD/tests/pipeline/runtime/test_runtime"
  if [ -x "$BUILD/tests/pipeline/distributed/test_nccl" ] && have mpirun; then
    step nccl 120 mpirun --oversubscribe --allow-run-as-root -np 2 "$BUILD/tests/pipeline/distributed/test_nccl"
  else result nccl SKIP "no mpirun or no libnccl: test_nccl not built"; fi
fi

# ---- the rest of the build, the whole suite: as far as the budget goes ------------------------------
AFTER_GPU=1
rm -f "$BUILD/meson-logs/gpu-check-suite.json"
if ! step build-rest rest ninja -C "$BUILD" -k 0 -j "$JOBS"; then  # meson test needs every program
  if budget_skip; then result suite SKIP "the rest of the build did not finish within the budget (every GPU step had passed)"
  else result suite NOT-RUN "the rest of the build did not finish"; fi
# (Emulated: not the nccl_emu suite, which .ci/run runs on its own, and test_nccl ran above.
# Never the docs suite: it runs the pages' commands, some on a whole data set, minutes on a GPU
# box's default devices, where the train suite covers the same code in seconds.)
elif step suite "$suite_share" "${MESON_CMD[@]}" test -C "$BUILD" --no-rebuild --print-errorlogs --num-processes "$JOBS" \
     --no-suite docs $([ $emulated -eq 1 ] && echo --no-suite nccl_emu) --logbase gpu-check-suite; [ -f "$BUILD/meson-logs/gpu-check-suite.json" ]; then
  python3 - "$BUILD/meson-logs/gpu-check-suite.json" <<'EOF' >>"$SUMMARY"
import json, sys
for t in map(json.loads, open(sys.argv[1])):
    print(f"    test {t['result']:<8} {t['name']:<40} {t['duration']:7.1f}s")
EOF
fi
finish
