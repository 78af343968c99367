// How brigade-bench measures a level: one pass per precision named (the process's setting made
// that precision for it), and within a timed level one part per device kind and CUDA path, so
// that a part that fails is said and the others still measured.
#pragma once

#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "kernels/precision.h"
#include "tools/bench/op_bench.h"

namespace brigade::bench {

// bench(p) once per precision named, in order (the process's setting made p for it, fp32
// again after), its rows tagged with the precision's name.
template <class Bench>
auto in_each_precision(const std::vector<std::string>& names, Bench bench) {
  decltype(bench(Precision::fp32)) rows;
  for (const std::string& name : names) {
    const Precision p = parse_precision(name);
    set_precision(p);
    for (auto& r : bench(p)) rows.push_back(std::move(r)), rows.back().precision = name;
  }
  set_precision(Precision::fp32);
  return rows;
}

// A timed level's rows in parts — the CPU's, then each CUDA path's, each measured alone — so
// that a part that fails (a kernel a GPU refuses) is said on stderr and kept in `failures`,
// and the parts after it are still measured: a GPU run is too rare to lose every figure to
// one path. For the model and runtime levels' options (cpu, cuda_impls).
template <class Options, class Bench>
auto in_parts(const Options& o, const char* level, std::vector<std::string>* failures,
              Bench bench) {
  decltype(bench(o)) rows;
  std::vector<std::pair<std::string, Options>> parts;
  if (o.cpu) {
    Options cpu = o;
    cpu.cuda_impls.clear();
    parts.emplace_back("cpu", cpu);
  }
  for (const std::string& impl : o.cuda_impls) {
    Options gpu = o;
    gpu.cpu = false;
    gpu.cuda_impls = {impl};
    parts.emplace_back(impl, gpu);
  }
  for (const auto& [name, part] : parts) try {
      for (auto& r : bench(part)) rows.push_back(std::move(r));
    } catch (const std::exception& e) {
      failures->push_back(std::string(level) + " level, " + name + ", " +
                          precision_name(precision()) + ": " + e.what());
      std::fprintf(stderr, "brigade-bench: %s\n", failures->back().c_str());
    }
  return rows;
}

// The options of one precision's pass: bf16's pass measures every row asked for but the
// reference's, which are the same in any precision (kernels/precision.h: the CPU's bf16 GEMM,
// the hand-written path's tensor-core GEMM, cuBLAS's bf16 GEMM on the vendor path).
inline OpBenchOptions for_precision(OpBenchOptions o, Precision p) {
  if (p == Precision::bf16) std::erase(o.impls, "reference");
  return o;
}

}  // namespace brigade::bench
