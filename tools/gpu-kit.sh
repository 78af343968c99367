#!/usr/bin/env bash
# tools/gpu-kit.sh: the Debian packages a GPU machine without network lacks, unpacked (not
# installed) into the git-ignored .gpu-kit/ at the repository root, to be copied there beside
# the working tree; tools/gpu-check.sh finds it and puts it on every search path.
#
#   tools/gpu-kit.sh          # on a Debian 12 amd64 machine with apt (no GPU needed); ~10 s
#
# What is in it, and why (each package's files under .gpu-kit/usr/...):
#   doctest-dev                       tests/: every suite is a doctest executable
#   nlohmann-json3-dev                layers/model/, pipeline/, tools/: JSON (safetensors, traces, metrics)
#   libcli11-dev                      tools/: the command lines
#   libopenblas0-pthread, -pthread-dev kernels/cpu: SGEMM (the pthread build: kernels/cpu/meson.build)
#   libgfortran5, libquadmath0        what libopenblas.so.0 needs at link and run time
#   zlib1g-dev, zlib1g                tools/data: gzip'd IDX files (zlib1g only for libz.so's target)
#   pkgconf, pkgconf-bin, libpkgconf3 pkg-config, Meson's way to every dependency above, in case
#                                     the GPU machine has none
# Not in it: MPI (tools/gpu-check.sh configures -Dmpi=disabled; one GPU runs no NCCL ranks),
# cuDNN and NCCL (the GPU machine has them as pip wheels; gpu-check.sh finds them there).
#
# Made relocatable: every .pc file names its paths from ${pcfiledir}, doctest (which ships only
# CMake files) gets a doctest.pc, OpenBLAS's .pc moves to the common pkgconfig folder, absolute
# symbolic links become relative. Left out: docs, man pages, static libraries, LAPACK, CMake files.
# libz.so.1 is left out too, so that programs run with the machine's own zlib.
#
# Output: .gpu-kit/ (under 48 MiB, or this script fails) with .gpu-kit/MANIFEST, one line of
# package=version entries. Exit status: 0 made, 1 failed (what failed is said).
set -euo pipefail
cd "$(dirname "$0")/.."

KIT=.gpu-kit
MAX_MIB=48
packages=(doctest-dev nlohmann-json3-dev libcli11-dev
          libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0
          zlib1g-dev zlib1g pkgconf pkgconf-bin libpkgconf3)
triplet=x86_64-linux-gnu

die() { echo "gpu-kit: $*" >&2; exit 1; }
for tool in apt-get dpkg-deb; do command -v $tool >/dev/null || die "needs $tool (a Debian machine)"; done
[ "$(dpkg --print-architecture)" = amd64 ] || die "this is $(dpkg --print-architecture); the GPU machine is amd64"

work=$(mktemp -d /tmp/gpu-kit.XXXXXX)
trap 'rm -rf "$work"' EXIT
# apt-get download fails on a machine whose package lists were never fetched: fetch them once.
if ! (cd "$work" && apt-get download -q "${packages[@]}" >"$work/download.log" 2>&1); then
  echo "gpu-kit: apt-get download failed; running apt-get update once"
  apt-get update -q >"$work/update.log" 2>&1 || { cat "$work/update.log"; die "apt-get update failed"; }
  (cd "$work" && apt-get download -q "${packages[@]}" >"$work/download.log" 2>&1) ||
    { cat "$work/download.log"; die "apt-get download failed"; }
fi

root=$work/root
manifest=()
for p in "${packages[@]}"; do
  deb=$(ls "$work"/"${p}"_*.deb)
  dpkg-deb -x "$deb" "$root"
  manifest+=("$p=$(dpkg-deb -f "$deb" Version)")
done

# ---- prune: only what a build and its tests read -------------------------------------------
lib=$root/usr/lib/$triplet
rm -rf "$root"/usr/share/{doc,man,lintian,aclocal} "$root"/usr/share/cmake "$root"/usr/lib/cmake \
       "$lib"/cmake "$lib"/openblas-pthread/cmake
find "$root" -name '*.a' -delete
rm -f "$lib"/openblas-pthread/{libblas,liblapack}.* "$lib"/openblas-pthread/pkgconfig/{blas,lapack}-openblas.pc
# zlib1g unpacks to /lib (Debian's usrmerge): the real file joins the dev link in usr/lib, and
# libz.so (absolute in the package) points at it relatively. No libz.so.1: see above.
mv "$root"/lib/$triplet/libz.so.1.* "$lib"/
rm -rf "${root:?}"/lib
ln -sfn "$(basename "$lib"/libz.so.1.*)" "$lib"/libz.so

# ---- pkg-config: relocatable -----------------------------------------------------------------
mkdir -p "$lib"/pkgconfig "$root"/usr/share/pkgconfig
mv "$lib"/openblas-pthread/pkgconfig/openblas.pc "$lib"/pkgconfig/openblas.pc
rmdir "$lib"/openblas-pthread/pkgconfig
doctest_version=$(dpkg-deb -f "$work"/doctest-dev_*.deb Version)  # 2.4.9~ds-1 -> 2.4.9
doctest_version=${doctest_version%%[~+-]*}
printf 'Name: doctest\nDescription: doctest headers (written by tools/gpu-kit.sh)\nVersion: %s\nCflags: -I/usr/include\n' \
  "$doctest_version" >"$root"/usr/share/pkgconfig/doctest.pc
# /usr/... -> ${pcfiledir}/<up to the kit's root>/usr/...; "-I/usr/include" stays a kit path.
for pc in "$lib"/pkgconfig/*.pc "$root"/usr/share/pkgconfig/*.pc; do
  dir=$(dirname "${pc#"$root"/}")                     # usr/lib/x86_64-linux-gnu/pkgconfig
  up=$(echo "$dir" | sed 's#[^/][^/]*#..#g')            # ../../../..
  sed -i "s#\([=I ]\)/usr\([/ ]\|\$\)#\1\${pcfiledir}/$up/usr\2#g" "$pc"
done
grep -l '[= I]/usr' "$lib"/pkgconfig/*.pc "$root"/usr/share/pkgconfig/*.pc && die "a .pc file still names /usr"
# Absolute links would point into the machine's own /usr: none may be left.
if find "$root" -type l -lname '/*' | grep .; then die "absolute symbolic links left (above)"; fi

printf '%s\n' "${manifest[*]}" >"$root"/MANIFEST
size_kib=$(du -sk "$root" | cut -f1)
[ "$size_kib" -le $((MAX_MIB * 1024)) ] || die "the kit is $((size_kib / 1024)) MiB, over ${MAX_MIB} MiB"

rm -rf "$KIT.old"
[ -d "$KIT" ] && mv "$KIT" "$KIT.old"
mv "$root" "$KIT"
rm -rf "$KIT.old"
# The newest GLIBC symbol version the kit's binaries ask for: what the GPU machine's glibc must
# be at least. Said, not checked, and the kit is already in place: objdump missing (binutils,
# which a plain Debian image lacks), or failing on a file that is no ELF, must not end this run.
if command -v objdump >/dev/null; then
  glibc=$(find "$KIT" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec objdump -T {} + 2>/dev/null |
          grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1 || true)
  need="its libraries need $glibc or newer"
  [ -n "$glibc" ] || need="the GLIBC version its libraries need could not be read (objdump -T found none)"
else
  need="the GLIBC version its libraries need could not be read (no objdump here: Debian's binutils has it)"
fi
echo "gpu-kit: $KIT: $(du -sh "$KIT" | cut -f1), $(find "$KIT" -type f | wc -l) files; $need"
echo "gpu-kit: $(cat "$KIT"/MANIFEST)"
echo "gpu-kit: copy .gpu-kit/ with the working tree to the GPU machine, then run tools/gpu-check.sh there"
