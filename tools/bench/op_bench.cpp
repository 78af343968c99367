#include "tools/bench/cuda_impl.h"
#include "tools/bench/op_bench.h"

#include <cstdio>
#include <functional>
#include <sstream>

#include "engine/device.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/cuda/path.h"
#include "kernels/ops.h"
#include "kernels/reference/conv2d.h"
#include "kernels/reference/dense.h"
#include "kernels/reference/maxpool2d.h"
#include "tools/bench/timing.h"

namespace brigade::bench {
namespace {

// A call to time; it may only enqueue work (sync() then waits for it).
using Call = std::function<void()>;

// One op of one layer, ready to be set up for any implementation at any batch.
struct OpCase {
  std::string layer, op;
  std::function<std::string(int64_t N)> shape;
  std::function<double(int64_t N)> flops;
  std::function<Call(int64_t N)> reference;             // owns its host buffers
  std::function<Call(int64_t N, const Stream&)> device;  // owns its tensors
};

// Deterministic values in [-1, 1): a 32-bit LCG, enough for timing.
std::vector<float> values(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 1;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>(x >> 8) / 8388608.0f - 1.0f;
  }
  return v;
}

Tensor tensor(const Shape& shape, const Stream& s, uint32_t seed) {
  return Tensor::from_vector(values(shape.numel(), seed), shape, s);
}

std::string dims(std::initializer_list<int64_t> d) {
  std::ostringstream os;
  os << '(';
  bool first = true;
  for (int64_t v : d) os << (first ? "" : ", ") << v, first = false;
  os << ')';
  return os.str();
}

Conv2dShape conv_shape(const model::LayerSpec& l, const model::LayerShape& sh, int64_t N) {
  Conv2dShape s{};
  s.N = N;
  s.C = sh.input[1], s.H = sh.input[2], s.W = sh.input[3];
  s.K = l.filters, s.R = l.kernel_h, s.S = l.kernel_w;
  s.stride = sh.stride_h;
  s.pad_h = sh.pad_top, s.pad_w = sh.pad_left;
  s.P = sh.output[2], s.Q = sh.output[3];
  return s;
}

void add_conv(std::vector<OpCase>& cases, const model::LayerSpec& l, const model::LayerShape& sh) {
  const ops::Conv2dArgs args{sh.stride_h, l.padding == model::Padding::same ? Padding::same
                                                                              : Padding::valid};
  auto S = [=](int64_t N) { return conv_shape(l, sh, N); };
  auto shape = [=](int64_t N) {
    const Conv2dShape s = S(N);
    return "x " + dims({s.N, s.C, s.H, s.W}) + " w " + dims({s.K, s.C, s.R, s.S});
  };
  auto flops = [=](int64_t N) { return static_cast<double>(S(N).flops_forward()); };
  auto X = [=](int64_t N) { const Conv2dShape s = S(N); return Shape({s.N, s.C, s.H, s.W}); };
  auto W = [=](int64_t) { const Conv2dShape s = S(1); return Shape({s.K, s.C, s.R, s.S}); };
  auto Y = [=](int64_t N) { const Conv2dShape s = S(N); return Shape({s.N, s.K, s.P, s.Q}); };

  cases.push_back({l.name, "conv fwd", shape, flops,
      [=](int64_t N) -> Call {
        const Conv2dShape s = S(N);
        auto x = values(s.x_size(), 1), w = values(s.w_size(), 2), b = values(s.K, 3);
        std::vector<float> y(static_cast<size_t>(s.y_size()));
        return [=]() mutable { ref::conv2d_forward(x.data(), w.data(), b.data(), y.data(), s); };
      },
      [=](int64_t N, const Stream& st) -> Call {
        Tensor x = tensor(X(N), st, 1), w = tensor(W(N), st, 2), b = tensor(Shape({S(N).K}), st, 3);
        return [=] { ops::conv2d_forward(x, w, b, args, /*relu=*/true, st); };
      }});
  cases.push_back({l.name, "conv bwd-data", shape, flops,
      [=](int64_t N) -> Call {
        const Conv2dShape s = S(N);
        auto dy = values(s.y_size(), 4), w = values(s.w_size(), 2);
        std::vector<float> dx(static_cast<size_t>(s.x_size()));
        return [=]() mutable { ref::conv2d_backward_data(dy.data(), w.data(), dx.data(), s); };
      },
      [=](int64_t N, const Stream& st) -> Call {
        Tensor dy = tensor(Y(N), st, 4), w = tensor(W(N), st, 2);
        const Shape xs = X(N);
        return [=] { ops::conv2d_backward_data(dy, w, xs, args, st); };
      }});
  cases.push_back({l.name, "conv bwd-filter", shape, flops,
      [=](int64_t N) -> Call {
        const Conv2dShape s = S(N);
        auto x = values(s.x_size(), 1), dy = values(s.y_size(), 4);
        std::vector<float> dw(static_cast<size_t>(s.w_size())), db(static_cast<size_t>(s.K));
        return [=]() mutable {
          ref::conv2d_backward_filter(x.data(), dy.data(), dw.data(), s);
          ref::conv2d_backward_bias(dy.data(), db.data(), s);
        };
      },
      [=](int64_t N, const Stream& st) -> Call {
        Tensor x = tensor(X(N), st, 1), dy = tensor(Y(N), st, 4);
        Tensor dw = Tensor::zeros(W(N), st), db = Tensor::zeros(Shape({S(N).K}), st);
        return [=] { ops::conv2d_backward_params(x, dy, dw, db, args, st); };
      }});
}

void add_dense(std::vector<OpCase>& cases, const model::LayerSpec& l, const model::LayerShape& sh) {
  const int64_t in = sh.input[1], out = l.units;
  auto shape = [=](int64_t N) { return "x " + dims({N, in}) + " w " + dims({out, in}); };
  auto flops = [=](int64_t N) { return 2.0 * static_cast<double>(N * in * out); };
  cases.push_back({l.name, "gemm fwd", shape, flops,
      [=](int64_t N) -> Call {
        auto x = values(N * in, 1), w = values(out * in, 2), b = values(out, 3);
        std::vector<float> y(static_cast<size_t>(N * out));
        return [=]() mutable { ref::dense_forward(x.data(), w.data(), b.data(), y.data(), N, in, out); };
      },
      [=](int64_t N, const Stream& st) -> Call {
        Tensor x = tensor(Shape({N, in}), st, 1), w = tensor(Shape({out, in}), st, 2),
               b = tensor(Shape({out}), st, 3);
        return [=] { ops::dense_forward(x, w, b, /*relu=*/true, st); };
      }});
  cases.push_back({l.name, "gemm bwd-data", shape, flops,
      [=](int64_t N) -> Call {
        auto dy = values(N * out, 4), w = values(out * in, 2);
        std::vector<float> dx(static_cast<size_t>(N * in));
        return [=]() mutable { ref::dense_backward_data(dy.data(), w.data(), dx.data(), N, in, out); };
      },
      [=](int64_t N, const Stream& st) -> Call {
        Tensor dy = tensor(Shape({N, out}), st, 4), w = tensor(Shape({out, in}), st, 2);
        return [=] { ops::dense_backward_data(dy, w, st); };
      }});
  cases.push_back({l.name, "gemm bwd-weight", shape, flops,
      [=](int64_t N) -> Call {
        auto x = values(N * in, 1), dy = values(N * out, 4);
        std::vector<float> dw(static_cast<size_t>(out * in)), db(static_cast<size_t>(out));
        return [=]() mutable {
          ref::dense_backward_weight(x.data(), dy.data(), dw.data(), N, in, out);
          ref::dense_backward_bias(dy.data(), db.data(), N, out);
        };
      },
      [=](int64_t N, const Stream& st) -> Call {
        Tensor x = tensor(Shape({N, in}), st, 1), dy = tensor(Shape({N, out}), st, 4);
        Tensor dw = Tensor::zeros(Shape({out, in}), st), db = Tensor::zeros(Shape({out}), st);
        return [=] { ops::dense_backward_params(x, dy, dw, db, st); };
      }});
}

void add_pool(std::vector<OpCase>& cases, const model::LayerSpec& l, const model::LayerShape& sh) {
  const int64_t C = sh.input[1], H = sh.input[2], Wd = sh.input[3];
  const int64_t P = sh.output[2], Q = sh.output[3];
  const ops::Pool2dArgs args{l.pool_h, l.pool_w, sh.stride_h};
  auto shape = [=](int64_t N) { return "x " + dims({N, C, H, Wd}); };
  auto none = [](int64_t) { return 0.0; };
  auto ps = [=](int64_t N) {
    return Pool2dShape{N, C, H, Wd, l.pool_h, l.pool_w, sh.stride_h, 0, 0, P, Q};
  };
  cases.push_back({l.name, "pool fwd", shape, none,
      [=](int64_t N) -> Call {
        const Pool2dShape s = ps(N);
        auto x = values(s.x_size(), 1);
        std::vector<float> y(static_cast<size_t>(s.y_size()));
        std::vector<int32_t> am(static_cast<size_t>(s.y_size()));
        return [=]() mutable { ref::maxpool2d_forward(x.data(), y.data(), am.data(), s); };
      },
      [=](int64_t N, const Stream& st) -> Call {
        Tensor x = tensor(Shape({N, C, H, Wd}), st, 1);
        return [=] { ops::maxpool2d_forward(x, args, st); };
      }});
  cases.push_back({l.name, "pool bwd", shape, none,
      [=](int64_t N) -> Call {
        const Pool2dShape s = ps(N);
        auto x = values(s.x_size(), 1), dy = values(s.y_size(), 4);
        std::vector<float> y(static_cast<size_t>(s.y_size())), dx(static_cast<size_t>(s.x_size()));
        std::vector<int32_t> am(static_cast<size_t>(s.y_size()));
        ref::maxpool2d_forward(x.data(), y.data(), am.data(), s);
        return [=]() mutable { ref::maxpool2d_backward(dy.data(), am.data(), dx.data(), s); };
      },
      [=](int64_t N, const Stream& st) -> Call {
        Tensor x = tensor(Shape({N, C, H, Wd}), st, 1), dy = tensor(Shape({N, C, P, Q}), st, 4);
        const ops::PoolResult fwd = ops::maxpool2d_forward(x, args, st);
        return [=] { ops::maxpool2d_backward(dy, fwd, args, st); };
      }});
}

std::vector<OpCase> cases_of(const model::ModelSpec& spec) {
  const model::ModelShapes shapes = model::infer_shapes(spec.input, spec.layers);
  std::vector<OpCase> cases;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const model::LayerSpec& l = spec.layers[i];
    if (l.kind == model::LayerKind::conv2d) add_conv(cases, l, shapes.layers[i]);
    if (l.kind == model::LayerKind::dense) add_dense(cases, l, shapes.layers[i]);
    if (l.kind == model::LayerKind::maxpool2d) add_pool(cases, l, shapes.layers[i]);
  }
  return cases;
}

// Median seconds per call, wall-clock and process CPU: warm-up, one probe to size the
// repetitions, then the repetitions, each `calls` enqueues followed by one sync().
struct PerCall {
  double wall_s, cpu_s;
};
PerCall seconds_per_call(const Call& call, const std::function<void()>& sync,
                         const OpBenchOptions& o) {
  for (int i = 0; i < o.warmup; ++i) call();
  sync();
  double t0 = now_s();
  call();
  sync();
  const int calls = calls_for(now_s() - t0, o.min_repetition_s);
  std::vector<double> per_call, cpu_per_call;
  for (int r = 0; r < o.repetitions; ++r) {
    t0 = now_s();
    const double c0 = process_cpu_s();
    for (int c = 0; c < calls; ++c) call();
    sync();
    per_call.push_back((now_s() - t0) / calls);
    cpu_per_call.push_back((process_cpu_s() - c0) / calls);
  }
  return {summarize(per_call).median_s, summarize(cpu_per_call).median_s};
}

OpRow row_of(const OpCase& c, const std::string& impl, const std::string& device, int threads,
             int64_t N, PerCall t) {
  OpRow r{c.layer, c.op, impl, device, threads, N, c.shape(N), c.flops(N), t.wall_s * 1e3,
          t.cpu_s * 1e3, 0};
  if (r.flops > 0) r.gflops = r.flops / t.wall_s * 1e-9;
  return r;
}

bool wanted(const OpBenchOptions& o, const std::string& impl) {
  for (const std::string& i : o.impls)
    if (i == impl) return true;
  return false;
}

}  // namespace

std::vector<OpRow> bench_ops(const model::ModelSpec& spec, const OpBenchOptions& o) {
  const std::vector<OpCase> cases = cases_of(spec);
  std::vector<OpRow> rows;
  auto progress = [](const OpRow& r) {
    std::fprintf(stderr, "  %-10s %-16s %-12s %2d thr  %9.3f ms  (%.3f ms CPU)\n",
                 r.layer.c_str(), r.op.c_str(), r.impl.c_str(), r.threads, r.ms, r.cpu_ms);
  };
  if (wanted(o, "reference"))
    for (const OpCase& c : cases) {
      const Call call = c.reference(o.reference_batch);
      rows.push_back(row_of(c, "reference", "host", 1, o.reference_batch,
                            seconds_per_call(call, [] {}, o)));
      progress(rows.back());
    }
  if (wanted(o, "cpu"))
    for (int threads : o.threads) {
      configure_cpu_device(o.cpu_device, {.threads = threads});
      const Device device = Device::cpu(o.cpu_device);
      const Stream st = Stream::default_for(device);
      for (const OpCase& c : cases) {
        const Call call = c.device(o.batch, st);
        rows.push_back(row_of(c, "cpu", device.str(), threads, o.batch,
                              seconds_per_call(call, [&] { st.synchronize(); }, o)));
        progress(rows.back());
      }
    }
  if (cuda_device_count() > 0)
    for (const std::string impl : {"handwritten", "vendor"}) {
      if (!wanted(o, impl)) continue;
      const CudaImpl measured(impl, o.math);
      const Device device = Device::cuda(0);
      const Stream st = Stream::default_for(device);
      for (const OpCase& c : cases) {
        const Call call = c.device(o.batch, st);
        rows.push_back(row_of(c, impl, device.str(), 0, o.batch,
                              seconds_per_call(call, [&] { st.synchronize(); }, o)));
        progress(rows.back());
      }
    }
  return rows;
}

double gpu_sgemm_peak_gflops(int n, int repetitions, MathMode math) {
  const CudaImpl measured("vendor", math);
  const Stream st = Stream::default_for(Device::cuda(0));
  const Tensor x = tensor(Shape({n, n}), st, 1), w = tensor(Shape({n, n}), st, 2),
               b = tensor(Shape({n}), st, 3);
  const Call call = [&] { ops::dense_forward(x, w, b, false, st); };
  const double s = seconds_per_call(call, [&] { st.synchronize(); },
                                    {.warmup = 2, .repetitions = repetitions, .min_repetition_s = 0.1})
                       .wall_s;
  return 2.0 * n * static_cast<double>(n) * n / s * 1e-9;
}

}  // namespace brigade::bench
