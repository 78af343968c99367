#!/usr/bin/env python3
"""Checks every CUDA kernel's resources, as ptxas allocates them, against the GPUs built for.

A kernel that needs more registers per block than an SM has, or more static shared memory
than a block may use, compiles without a word and then fails at its launch on the GPU
(cudaErrorLaunchOutOfResources), a failure no emulated GPU can show. This asks ptxas:

    tools/ptxas-check.py build        # a build directory configured with CUDA (nvcc)

It recompiles each .cu of the build with the build's own command plus --resource-usage, so
every architecture of -Dgpu_arch is checked, and reads per kernel and architecture:

  registers per thread   at most 255;
  registers per block    at most 65,536: each warp takes its threads' registers rounded up to
                         256, and a kernel launches with at most 1,024 threads per block unless
                         it declares fewer with __launch_bounds__(N), which it must when
                         1,024 threads would not fit (more than 64 registers per thread);
  static shared memory   at most 48 KiB per block (more needs dynamic shared memory and
                         cudaFuncSetAttribute, which Brigade does not use).

Spills to local memory are reported, not refused. Exits 1 naming each kernel that does not
fit, 2 when the build cannot be checked (no compile_commands.json, no .cu, nvcc failing).
"""
import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

# The same on sm_80 and sm_90 (CUDA C Programming Guide, "Compute Capabilities", table 21).
MAX_REGISTERS_PER_THREAD = 255
MAX_REGISTERS_PER_BLOCK = 65536
REGISTER_ALLOCATION_UNIT = 256  # registers, per warp
MAX_THREADS_PER_BLOCK = 1024
MAX_STATIC_SHARED_BYTES = 48 * 1024
WARP = 32

KERNEL = re.compile(
    r"__global__\s+(?:void\s+)?(?:__launch_bounds__\(\s*(\d+)[^)]*\)\s+)?(?:void\s+)?(\w+)\s*\(")
ENTRY = re.compile(r"Compiling entry function '(\w+)' for '(sm_\d+)'")
SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers(?:.*?, (\d+) bytes smem)?")


def die(message):
    print(f"ptxas-check: {message}", file=sys.stderr)
    sys.exit(2)


def resource_usage(entry):
    """ptxas's report for one compile command: (kernel symbol, arch) -> {registers, smem, spills}."""
    args = shlex.split(entry["command"])
    if os.path.basename(args[0]) == "ccache":
        args = args[1:]
    out = args.index("-o")
    args[out + 1] = os.devnull
    run = subprocess.run(args + ["--resource-usage"], cwd=entry["directory"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        die(f"nvcc failed on {entry['file']}:\n{run.stderr}")
    report, current = {}, None
    for line in run.stderr.splitlines():
        if m := ENTRY.search(line):
            current = (m.group(1), m.group(2))
            report[current] = {"registers": 0, "smem": 0, "spills": 0}
        elif current and (m := SPILLS.search(line)):
            report[current]["spills"] = int(m.group(1)) + int(m.group(2))
        elif current and (m := USED.search(line)):
            report[current]["registers"] = int(m.group(1))
            report[current]["smem"] = int(m.group(2) or 0)
    return entry["file"], report


def kernels_in(path):
    """Kernel name -> its __launch_bounds__ (threads per block), or None, from the source."""
    with open(path, encoding="utf-8") as f:
        return {m.group(2): int(m.group(1)) if m.group(1) else None for m in KERNEL.finditer(f.read())}


def source_name(symbol, names):
    """The kernel of the source a mangled symbol is (the longest name it spells), or None."""
    found = [n for n in names if f"{len(n)}{n}" in symbol or symbol == n]
    return max(found, key=len) if found else None


def registers_per_block(registers, threads):
    warps = (threads + WARP - 1) // WARP
    per_warp = (registers * WARP + REGISTER_ALLOCATION_UNIT - 1) // REGISTER_ALLOCATION_UNIT
    return warps * per_warp * REGISTER_ALLOCATION_UNIT


def main():
    if len(sys.argv) != 2:
        die("usage: tools/ptxas-check.py BUILD_DIR (a build configured with CUDA)")
    database = os.path.join(sys.argv[1], "compile_commands.json")
    if not os.path.isfile(database):
        die(f"{database}: not found; configure the build first (meson setup {sys.argv[1]})")
    with open(database, encoding="utf-8") as f:
        entries = [e for e in json.load(f) if e["file"].endswith(".cu")]
    if not entries:
        die(f"{database}: no .cu file; the build was configured without CUDA (-Dcuda=enabled)")

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        reports = list(pool.map(resource_usage, entries))

    problems, rows = [], []
    for file, report in sorted(reports):
        source = os.path.normpath(os.path.join(
            next(e["directory"] for e in entries if e["file"] == file), file))
        names = kernels_in(source)
        for (symbol, arch), use in sorted(report.items()):
            name = source_name(symbol, names) or symbol
            bound = names.get(name)
            threads = bound or MAX_THREADS_PER_BLOCK
            per_block = registers_per_block(use["registers"], threads)
            where = f"{os.path.relpath(source)}: {name} on {arch}"
            if use["registers"] > MAX_REGISTERS_PER_THREAD:
                problems.append(f"{where}: {use['registers']} registers per thread "
                                f"(at most {MAX_REGISTERS_PER_THREAD})")
            if per_block > MAX_REGISTERS_PER_BLOCK:
                fix = ("declare __launch_bounds__(N) with the block size it is launched with"
                       if bound is None else "launch fewer threads, or use fewer registers")
                problems.append(f"{where}: {use['registers']} registers x {threads} threads = "
                                f"{per_block} registers per block (at most "
                                f"{MAX_REGISTERS_PER_BLOCK}): {fix}")
            if use["smem"] > MAX_STATIC_SHARED_BYTES:
                problems.append(f"{where}: {use['smem']} bytes of static shared memory "
                                f"(at most {MAX_STATIC_SHARED_BYTES})")
            note = f", spills {use['spills']} bytes" if use["spills"] else ""
            rows.append(f"  {arch}  {use['registers']:3d} regs  {use['smem']:6d} B smem  "
                        f"{threads:4d} threads{'' if bound else ' (any)'}  {name}{note}")

    print(f"ptxas-check: {len(rows)} kernel builds in {len(entries)} files")
    print("\n".join(rows))
    for p in problems:
        print(f"ptxas-check: {p}", file=sys.stderr)
    print(f"ptxas-check: {'FAILED' if problems else 'every kernel fits'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
