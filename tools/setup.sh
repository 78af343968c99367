#!/usr/bin/env bash
# Installs what Brigade needs on a fresh Debian 12 machine, then configures and builds build/.
#
#   tools/setup.sh                 packages (only when missing) + meson setup + compile
#   tools/setup.sh --with-pytorch  also Debian's python3-torch, for tools/compare/
#
# Idempotent: when every package is present it asks apt nothing and only rebuilds.
# Environment: BUILD_DIR (default build), MESON_ARGS (extra `meson setup` arguments).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  meson ninja-build g++ pkg-config    # build
  ccache                              # Meson compiles through it when installed: a rebuild, or another build dir, reuses objects
  doctest-dev                         # tests
  libopenblas-pthread-dev             # CPU GEMM; pinned to one thread per call (kernels/cpu/meson.build says why not serial)
  libcli11-dev nlohmann-json3-dev     # command lines; JSON (safetensors headers, traces, metrics)
  zlib1g-dev                          # gzip'd IDX data
  dataset-fashion-mnist               # the training data (gzip'd IDX files)
  librsvg2-bin                        # rsvg-convert: SVG timelines -> PNG for the docs
  clang libclang-rt-14-dev            # tools/fuzz.sh: libFuzzer with ASan/UBSan
  libopenmpi-dev openmpi-bin          # pipeline/distributed: one rank per stage (mpirun)
)
[[ " $* " == *" --with-pytorch "* ]] && packages+=(python3-torch python3-numpy)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The CUDA toolkit is found where NVIDIA installs it; without it the CPU-only engine builds.
[[ -d /usr/local/cuda/bin ]] && export PATH="/usr/local/cuda/bin:$PATH"

build="${BUILD_DIR:-build}"
if [[ ! -f "$build/build.ninja" ]]; then
  # shellcheck disable=SC2086
  meson setup "$build" ${MESON_ARGS:-}
fi
meson compile -C "$build"
