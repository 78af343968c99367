#!/usr/bin/env bash
# Fuzzes every parser of hostile input (tests/fuzz/README.md) for a bounded time each.
#
#   tools/fuzz.sh                 every target, FUZZ_TIME seconds each (default 45), FUZZ_JOBS
#                                 at a time (default: one per core)
#   tools/fuzz.sh idx cli         only these targets
#
# Builds FUZZ_BUILD_DIR (default build-fuzz) with clang, libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer, then runs each target on its seed corpus tests/fuzz/corpus/T
# (read only: the checkout stays clean) plus what it finds, kept in BUILD/fuzz-work/T/new.
# A crash, a leak, a timeout (> 10 s on one input), an out-of-memory (> 2 GiB, or one
# allocation above it) or any UBSan report fails the run, leaves the reproducer in
# BUILD/fuzz-artifacts/T/ and prints the command that replays it. Exit 0 when all ran clean.
set -euo pipefail
cd "$(dirname "$0")/.."

build="${FUZZ_BUILD_DIR:-build-fuzz}"
seconds="${FUZZ_TIME:-45}"

# target -> the largest input worth trying: a few KiB holds a model file, a header, an IDX
# file of a few images; a command line is short.
declare -A max_len=([model_file]=4096 [safetensors]=4096 [idx]=4096 [cli]=1024 [checkpoint]=8192)
all=(model_file safetensors idx cli checkpoint)

# The set-up and the build are quiet when they work; when one fails, its log's end is printed
# with what failed, so a CI run never ends in a bare non-zero exit with nothing said.
quietly() {  # what, log, command...
  local what=$1 log=$2; shift 2
  "$@" >"$log" 2>&1 && return 0
  echo "fuzz: $what FAILED; the end of its log ($log):" >&2
  grep -E 'error|FAILED' "$log" | head -n 20 >&2
  tail -n 30 "$log" >&2
  exit 1
}
mkdir -p "$build"
if [[ ! -f "$build/build.ninja" ]]; then
  # Meson compiles through ccache when it finds it, but not for a compiler named in CC/CXX:
  # named here with ccache in front, as Meson then takes it.
  cc=clang cxx=clang++
  if command -v ccache >/dev/null; then cc="ccache clang" cxx="ccache clang++"; fi
  CC=$cc CXX=$cxx quietly "meson setup of $build" "$build/meson-setup.log" \
    meson setup "$build" -Dfuzz=true -Dcuda=disabled \
    -Db_sanitize=address,undefined -Db_lundef=false -Dcpp_args=-fsanitize=fuzzer-no-link
fi

# The targets asked for, or every one this checkout builds (cli and checkpoint need tools/train).
targets=("$@")
if ((${#targets[@]} == 0)); then
  known="$(ninja -C "$build" -t targets all 2>/dev/null)"
  for t in "${all[@]}"; do
    grep -q "^tests/fuzz/fuzz_$t:" <<<"$known" && targets+=("$t")
  done
fi
quietly "the build of the fuzz targets (clang)" "$build/fuzz-build.log" \
  ninja -C "$build" -j"${FUZZ_BUILD_JOBS:-2}" "${targets[@]/#/tests/fuzz/fuzz_}"

# UBSan reports abort (so libFuzzer keeps the input); leaks are checked after every input
# that leaked memory (libFuzzer's -detect_leaks, on by default under ASan).
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=1"

# One target per core at a time (FUZZ_JOBS, default: every core): each still gets its
# FUZZ_TIME seconds of one core, as alone; the run takes a core's share of the wall time.
fuzz_one() {  # target: fuzzes it, its output in its work folder's log, its exit code in rc
  local t=$1
  local work="$build/fuzz-work/$t" artifacts="$build/fuzz-artifacts/$t"
  rm -rf "$work" "$artifacts"
  mkdir -p "$work/new" "$artifacts"
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048
              -max_len="${max_len[$t]:-4096}" -artifact_prefix="$artifacts/" -print_final_stats=1)
  [[ -f "tests/fuzz/$t.dict" ]] && args+=(-dict="tests/fuzz/$t.dict")
  [[ $t == cli ]] && args+=(-close_fd_mask=1)  # --help prints to stdout
  local rc=0
  "$build/tests/fuzz/fuzz_$t" "${args[@]}" "$work/new" "tests/fuzz/corpus/$t" >"$work/log" 2>&1 || rc=$?
  echo "$rc" >"$work/rc"
}
jobs_at_once="${FUZZ_JOBS:-$(nproc)}"
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs_at_once)); do wait -n || true; done
  echo "fuzz: $t for ${seconds}s"
  fuzz_one "$t" &
done
wait

status=0
summary=()
for t in "${targets[@]}"; do
  work="$build/fuzz-work/$t"
  artifacts="$build/fuzz-artifacts/$t"
  rc="$(cat "$work/rc" 2>/dev/null || echo "none: the target did not run")"

  stat() { sed -n "s/^stat::$1: *//p" "$work/log" | tail -1; }
  cov="$(grep -o 'cov: [0-9]* ft: [0-9]*' "$work/log" | tail -1)"
  found=("$artifacts"/*)
  [[ -e "${found[0]}" ]] || found=()
  line="$(printf '%-12s %10s execs %8s exec/s  %-22s %3d new inputs  %d crashes' "$t" \
    "$(stat number_of_executed_units)" "$(stat average_exec_per_sec)" "${cov:-cov: ? ft: ?}" \
    "$(find "$work/new" -type f | wc -l)" "${#found[@]}")"
  summary+=("$line")
  if [[ $rc != 0 ]] || ((${#found[@]} > 0)); then
    status=1
    echo "fuzz: $t FAILED (exit $rc); the end of its log ($work/log):" >&2
    tail -n 40 "$work/log" >&2
    for f in "${found[@]}"; do
      echo "fuzz: reproducer $f — replay with: $build/tests/fuzz/fuzz_$t $f" >&2
      echo "      then copy it into tests/fuzz/corpus/$t/ as a regression input" >&2
    done
  fi
done

echo
echo "target            executions   exec/s  coverage               finds       crashes"
printf '%s\n' "${summary[@]}"
exit "$status"
