#include "tools/bench/gemm_bf16_bench.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "tools/bench/timing.h"

namespace brigade::bench {
namespace {

struct GemmShape {
  std::string layer, op;
  bool trans_a, trans_b;
  int64_t M, N, K;
};

std::vector<GemmShape> shapes_of(const model::ModelSpec& spec, int64_t batch) {
  const model::ModelShapes shapes = model::infer_shapes(spec.input, spec.layers);
  std::vector<GemmShape> out;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const model::LayerSpec& l = spec.layers[i];
    const model::LayerShape& sh = shapes.layers[i];
    if (l.kind == model::LayerKind::conv2d) {
      const int64_t crs = sh.input[1] * l.kernel_h * l.kernel_w;
      const int64_t cols = batch * sh.output[2] * sh.output[3];  // N·P·Q
      out.push_back({l.name, "conv fwd", false, false, l.filters, cols, crs});
      out.push_back({l.name, "conv bwd-data", true, false, crs, cols, l.filters});
      out.push_back({l.name, "conv bwd-filter", false, true, l.filters, crs, cols});
    }
    if (l.kind == model::LayerKind::dense) {
      const int64_t in = sh.input[1], units = l.units;
      out.push_back({l.name, "gemm fwd", false, true, batch, units, in});
      out.push_back({l.name, "gemm bwd-data", false, false, batch, in, units});
      out.push_back({l.name, "gemm bwd-weight", true, false, units, in, batch});
    }
  }
  return out;
}

// Reproducible values in [-1, 1).
std::vector<float> values(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = u(gen);
  return v;
}

// Median CPU seconds of the calling thread per call (timing.h: thread_cpu_s), after a warm-up
// call, with enough calls per repetition to last ~50 ms. CPU time, not wall-clock: both GEMMs
// run on this thread alone, and on a shared machine the wall-clock counts the other work too.
template <class Fn>
double seconds_per_call(Fn&& fn, int repetitions) {
  const double t0 = thread_cpu_s();
  fn();
  const double once = std::max(thread_cpu_s() - t0, 1e-7);
  const int calls = static_cast<int>(std::clamp(0.05 / once, 1.0, 1000.0));
  std::vector<double> per_call;
  for (int r = 0; r < repetitions; ++r) {
    const double start = thread_cpu_s();
    for (int c = 0; c < calls; ++c) fn();
    per_call.push_back((thread_cpu_s() - start) / calls);
  }
  return summarize(std::move(per_call)).median_s;
}

}  // namespace

std::vector<GemmRow> bench_gemm_bf16(const model::ModelSpec& spec, int64_t batch,
                                     int repetitions) {
  std::vector<GemmRow> rows;
  for (const GemmShape& g : shapes_of(spec, batch)) {
    std::fprintf(stderr, "  %s %s\n", g.layer.c_str(), g.op.c_str());
    // Row-major, tight: op(A) (M, K) is stored (K, M) when transposed, op(B) likewise.
    const int64_t lda = g.trans_a ? g.M : g.K, ldb = g.trans_b ? g.K : g.N;
    const std::vector<float> a = values(g.M * g.K, 1), b = values(g.K * g.N, 2);
    std::vector<cpu::bf16> a16(a.size()), b16(b.size());
    cpu::float_to_bf16(a.data(), a16.data(), static_cast<int64_t>(a.size()));
    cpu::float_to_bf16(b.data(), b16.data(), static_cast<int64_t>(b.size()));
    std::vector<float> c(static_cast<size_t>(g.M * g.N));
    const double fp32_s = seconds_per_call([&] {
      cpu::sgemm(g.trans_a, g.trans_b, g.M, g.N, g.K, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                 c.data(), g.N);
    }, repetitions);
    const double bf16_s = seconds_per_call([&] {
      cpu::gemm_bf16(g.trans_a, g.trans_b, g.M, g.N, g.K, 1.0f, a16.data(), lda, b16.data(), ldb,
                     0.0f, c.data(), g.N);
    }, repetitions);
    const double flops = 2.0 * static_cast<double>(g.M * g.N * g.K);
    GemmRow r{g.layer, g.op, std::string(g.trans_a ? "T" : "N") + (g.trans_b ? "T" : "N"),
              g.M, g.N, g.K, 1e3 * fp32_s, 1e3 * bf16_s, flops / fp32_s * 1e-9,
              flops / bf16_s * 1e-9};
    rows.push_back(r);
  }
  return rows;
}

}  // namespace brigade::bench
