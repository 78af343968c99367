#!/usr/bin/env bash
# tools/gpu-kit-proof.sh: shows on this machine (Debian 12, no GPU, as root) that .gpu-kit alone
# brings what the GPU machine lacks. In a private mount namespace whose /usr is an overlay that
# hides every file of those Debian packages, and with cuDNN and NCCL moved out of /usr/local/cuda
# into a folder laid out like their pip wheels (only libcudnn.so.9, no libcudnn.so), it runs
#
#   tools/gpu-kit.sh && GPU_ARCH=90 OUT=/tmp/gc tools/gpu-check.sh --build-only
#
# and checks that /tmp/gc/summary.txt says the build passed. Then, with the kit and the wheels
# hidden as well and no GPU_ARCH, it runs gpu-check.sh again and checks that its preflight names
# every missing piece at once and stops before building (exit 2).
#
#   tools/gpu-kit-proof.sh         # ~20-40 min on 2 cores (the whole CUDA build); ~45 MiB of downloads
#
# Environment: OUT (/tmp/gc), WORK (/tmp/gpu-kit-proof: the wheels, and the build, which a
# second run reuses). gpu-check.sh --build-only's budget is an hour (BUDGET_S): its 8 minutes
# are for a GPU machine's 16 cores.
# Exit status: 0 both shown; 1 not.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
REPO=$PWD
OUT=${OUT:-/tmp/gc}
WORK=${WORK:-/tmp/gpu-kit-proof}
CUDA=$(readlink -f /usr/local/cuda)
[ "$(id -u)" = 0 ] || { echo "gpu-kit-proof: needs root (mount namespaces)"; exit 1; }

# What the GPU machine lacks: every file of these packages is hidden (zlib1g's libz.so.1 stays:
# the GPU machine has it), and the links that Debian's alternatives add for OpenBLAS.
packages=(doctest-dev nlohmann-json3-dev libcli11-dev libopenblas0-pthread libopenblas-pthread-dev
          libgfortran5 libquadmath0 zlib1g-dev pkgconf pkgconf-bin libpkgconf3)
t=x86_64-linux-gnu
alternatives=(/usr/lib/"$t"/libopenblas.* /usr/lib/"$t"/libblas.* /usr/lib/"$t"/liblapack.*
              /usr/lib/"$t"/pkgconfig/{openblas,blas,lapack}.pc /usr/include/"$t"/{cblas,f77blas,openblas_config}.h)
vendor=("$CUDA"/include/cudnn*.h "$CUDA"/include/nccl* "$CUDA"/lib64/libcudnn* "$CUDA"/lib64/libnccl*)

# The pip wheels' layout (nvidia/cudnn/{include,lib}, nvidia/nccl/...), by hard links.
rm -rf "$WORK/site" "$WORK/build-hidden" && mkdir -p "$WORK/site/nvidia" || exit 1
touch "$WORK/site/nvidia/__init__.py"
for name in cudnn nccl; do
  mkdir -p "$WORK/site/nvidia/$name/include" "$WORK/site/nvidia/$name/lib"
  touch "$WORK/site/nvidia/$name/__init__.py"
  cp -rlL "$CUDA"/include/"$name"* "$WORK/site/nvidia/$name/include/" || exit 1
  for so in "$CUDA"/lib64/lib"$name"*.so.[0-9]; do cp -lL "$so" "$WORK/site/nvidia/$name/lib/" || exit 1; done
done

# hide_all: runs inside the namespace; /usr becomes an overlay, the files above are removed there.
hide_all() {
  mount -t tmpfs proof "$WORK/overlay" && mkdir -p "$WORK/overlay/upper" "$WORK/overlay/work" &&
    mount -t overlay overlay -o "lowerdir=/usr,upperdir=$WORK/overlay/upper,workdir=$WORK/overlay/work" /usr ||
    return 1
  local files
  mapfile -t files < <(dpkg -L "${packages[@]}" 2>/dev/null)
  for f in "${files[@]}" "${alternatives[@]}" "${vendor[@]}"; do
    [ -n "$f" ] || continue
    [ -d "$f" ] && [ ! -L "$f" ] && continue
    rm -f "/usr/${f#/usr/}" 2>/dev/null  # a file or a link; /lib/... is /usr/lib/... (usrmerge)
  done
  rm -rf /usr/include/{doctest,nlohmann,CLI} /usr/include/$t/openblas-pthread /usr/lib/$t/openblas-pthread \
         "$CUDA"/include/nccl_device
  local left=()
  for f in "${files[@]}" "${alternatives[@]}" "${vendor[@]}"; do
    [ -d "$f" ] && [ ! -L "$f" ] && continue
    { [ -e "$f" ] || [ -L "$f" ]; } && left+=("$f")
  done
  [ ${#left[@]} -eq 0 ] || { echo "gpu-kit-proof: still visible: ${left[*]}"; return 1; }
  echo "gpu-kit-proof: hidden: ${#files[@]} files of ${packages[*]}, OpenBLAS's alternatives," \
       "cuDNN and NCCL in $CUDA; pkg-config is $(command -v pkg-config || echo gone)"
}
export -f hide_all
export WORK CUDA t OUT REPO
export PACKAGES="${packages[*]}" ALTERNATIVES="${alternatives[*]}" VENDOR="${vendor[*]}"
mkdir -p "$WORK/overlay"

# ---- 1. the kit alone: gpu-kit.sh, then the whole CUDA build -------------------------------------
rm -rf "$OUT"
echo "gpu-kit-proof: 1. $REPO: tools/gpu-kit.sh && GPU_ARCH=90 OUT=$OUT tools/gpu-check.sh --build-only"
start=$(date +%s)
unshare --mount --propagation private bash -c '
  read -ra packages <<<"$PACKAGES"; read -ra alternatives <<<"$ALTERNATIVES"; read -ra vendor <<<"$VENDOR"
  hide_all || exit 1
  export PYTHONPATH=$WORK/site BUILD=$WORK/build
  tools/gpu-kit.sh && GPU_ARCH=90 OUT=$OUT tools/gpu-check.sh --build-only'
rc1=$?
echo "gpu-kit-proof: 1. exit $rc1 after $(($(date +%s) - start)) s; $OUT/summary.txt:"
sed 's/^/  | /' "$OUT/summary.txt"
ok1=0
[ $rc1 -eq 0 ] && grep -q '^RESULT PASS build ' "$OUT/summary.txt" && grep -q '^RESULT PASS build-rest ' "$OUT/summary.txt" &&
  grep -q '^kit: ' "$OUT/summary.txt" && grep -q 'cuDNN: .*pip wheel' "$OUT/summary.txt" && ok1=1

# ---- 2. the kit and the wheels hidden too: the preflight names every missing piece ---------------
echo "gpu-kit-proof: 2. the same, with .gpu-kit and the wheels hidden and no GPU_ARCH: preflight only"
unshare --mount --propagation private bash -c '
  read -ra packages <<<"$PACKAGES"; read -ra alternatives <<<"$ALTERNATIVES"; read -ra vendor <<<"$VENDOR"
  hide_all >/dev/null || exit 1
  mount -t tmpfs hidden "$REPO/.gpu-kit" || exit 1
  BUILD=$WORK/build-hidden OUT=$OUT-hidden tools/gpu-check.sh --build-only'
rc2=$?
echo "gpu-kit-proof: 2. exit $rc2 (2 expected); its preflight said:"
grep -E '^(preflight|RESULT)' "$OUT-hidden/summary.txt" | sed 's/^/  | /'
ok2=1
for piece in doctest/doctest.h nlohmann/json.hpp CLI/CLI.hpp zlib.h cblas.h cudnn.h libopenblas.so \
             libz.so libcudnn.so pkg-config 'GPU architecture'; do
  grep -q "^preflight: missing: .*$piece" "$OUT-hidden/summary.txt" || { echo "  not named: $piece"; ok2=0; }
done
[ $rc2 -eq 2 ] && ! grep -q 'RESULT .* configure' "$OUT-hidden/summary.txt" || ok2=0

echo "gpu-kit-proof: the kit alone builds with CUDA: $([ $ok1 = 1 ] && echo SHOWN || echo 'NOT shown');" \
     "the preflight names every missing piece at once: $([ $ok2 = 1 ] && echo SHOWN || echo 'NOT shown')"
[ $ok1 = 1 ] && [ $ok2 = 1 ]
