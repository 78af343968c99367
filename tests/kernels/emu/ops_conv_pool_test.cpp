// Conv2D (im2col + gemm_tiled) and MaxPooling2D with argmax (kernels/cuda/conv2d.cu,
// maxpool2d.cu) through the emulator, against brigade::ref. Shapes cover batch 1, odd sizes,
// stride 2, "same" padding (symmetric and TensorFlow's asymmetric split), 1×1 kernels,
// extents that are not multiples of the GEMM's tile, and workspaces that hold every sample's
// share (one pass) or one sample's (a pass per sample).
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cuda/launchers.h"
#include "kernels/reference/conv2d.h"
#include "kernels/reference/maxpool2d.h"
#include "tests/kernels/emu/ops_check.h"
#include "tests/support/deadline.h"

using namespace brigade;
using namespace brigade::test;

namespace {

struct ConvCase {
  int64_t N, C, H, W, K, R, S, stride;
  Padding padding;
};

// Small on purpose: every CUDA thread is a fiber in the emulator.
const ConvCase kConvCases[] = {
    {1, 1, 3, 3, 1, 3, 3, 1, Padding::valid},   // batch 1, one output pixel
    {2, 3, 7, 7, 5, 3, 3, 1, Padding::valid},   // odd sizes, the question's 3×3
    {1, 3, 7, 5, 4, 3, 3, 2, Padding::same},    // stride 2, "same": pad 1 on both sides
    {2, 2, 6, 6, 3, 2, 2, 1, Padding::same},    // even kernel: TF pads bottom/right only
    {3, 4, 9, 9, 7, 1, 1, 2, Padding::valid},   // 1×1 kernel, stride 2
    {1, 5, 10, 9, 33, 3, 3, 1, Padding::same},  // K = 33 > one GEMM tile
    {2, 2, 8, 5, 3, 5, 3, 1, Padding::same},    // 5×3 kernel: pad_h 2 != pad_w 1
    {4, 3, 10, 10, 5, 3, 3, 1, Padding::valid},  // backward-filter's N·P·Q = 256: split-K
};

std::string describe(const Conv2dShape& s) {
  std::ostringstream m;
  m << "conv input (" << s.N << ", " << s.C << ", " << s.H << ", " << s.W << "), " << s.K
    << " filters " << s.R << "x" << s.S << ", stride " << s.stride << ", pad (" << s.pad_h
    << ", " << s.pad_w << "), output " << s.P << "x" << s.Q;
  return m.str();
}

}  // namespace

TEST_CASE("conv2d forward, backward-data, -filter, -bias match the reference") {
  testing::Deadline deadline("emulated conv2d");
  const Stream stream = emu_stream();
  for (const ConvCase& c : kConvCases) {
    const Conv2dShape s =
        make_conv2d_shape(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.padding);
    INFO(describe(s));
    for (bool one_sample_per_pass : {false, true}) {
      INFO("one sample per pass: " << one_sample_per_pass);
      const std::vector<double> x = random_vector(s.x_size(), 20), w = random_vector(s.w_size(), 21),
                                b = random_vector(s.K, 22), dy = random_vector(s.y_size(), 23);
      const std::vector<float> xf = to_float(x), wf = to_float(w), bf = to_float(b),
                               dyf = to_float(dy);
      // One pass over every sample, or one pass per sample (a sample's share: its columns
      // (C·R·S, P·Q)).
      const int64_t workspace_floats = one_sample_per_pass ? s.C * s.R * s.S * s.P * s.Q
                                                           : emu::conv2d_workspace_floats(s);
      std::vector<float> workspace = nan_vector(workspace_floats);
      const int64_t CRS = s.C * s.R * s.S;

      // Forward, and forward with the fused ReLU.
      std::vector<double> y(s.y_size()), y_mag(s.y_size());
      ref::conv2d_forward(x.data(), w.data(), b.data(), y.data(), s);
      ref::conv2d_forward(abs_of(x).data(), abs_of(w).data(), abs_of(b).data(), y_mag.data(), s);
      std::vector<float> yf = nan_vector(s.y_size()), yr = nan_vector(s.y_size());
      emu::conv2d_forward(xf.data(), wf.data(), bf.data(), yf.data(), s, workspace.data(), workspace_floats, stream);
      emu::conv2d_forward(xf.data(), wf.data(), bf.data(), yr.data(), s, workspace.data(), workspace_floats, stream,
                          true);
      // Backward-data into a NaN-filled dx: every element must be overwritten.
      std::vector<double> dx(s.x_size()), dx_mag(s.x_size());
      ref::conv2d_backward_data(dy.data(), w.data(), dx.data(), s);
      ref::conv2d_backward_data(abs_of(dy).data(), abs_of(w).data(), dx_mag.data(), s);
      std::vector<float> dxf = nan_vector(s.x_size());
      emu::conv2d_backward_data(dyf.data(), wf.data(), dxf.data(), s, workspace.data(), workspace_floats, stream);
      // Backward-filter and -bias accumulate onto non-zero starting values.
      const std::vector<double> dw0 = random_vector(s.w_size(), 24), db0 = random_vector(s.K, 25);
      std::vector<float> dwf = to_float(dw0), dbf = to_float(db0);
      emu::conv2d_backward_filter(xf.data(), dyf.data(), dwf.data(), s, workspace.data(), workspace_floats, stream);
      emu::conv2d_backward_bias(dyf.data(), dbf.data(), s, stream);
      stream.synchronize();

      const std::vector<double> y_tol = sum_tolerance(y_mag, CRS + 1);
      CHECK(all_close("y", yf.data(), y, y_tol));
      for (double& v : y) v = v > 0 ? v : 0;
      CHECK(all_close("relu(y)", yr.data(), y, y_tol));
      // dx[c,h,w] sums over k and the (r, s) taps that reach it: at most K·R·S terms.
      CHECK(all_close("dx", dxf.data(), dx, sum_tolerance(dx_mag, s.K * s.R * s.S)));
      std::vector<double> dw = to_double(to_float(dw0)), db = to_double(to_float(db0));
      std::vector<double> dw_mag = abs_of(dw), db_mag = abs_of(db);
      ref::conv2d_backward_filter(x.data(), dy.data(), dw.data(), s);
      ref::conv2d_backward_filter(abs_of(x).data(), abs_of(dy).data(), dw_mag.data(), s);
      ref::conv2d_backward_bias(dy.data(), db.data(), s);
      ref::conv2d_backward_bias(abs_of(dy).data(), db_mag.data(), s);
      CHECK(all_close("dw", dwf.data(), dw, sum_tolerance(dw_mag, s.N * s.P * s.Q + 1)));
      CHECK(all_close("db", dbf.data(), db, sum_tolerance(db_mag, s.N * s.P * s.Q + 1)));
    }
  }
}

TEST_CASE("conv2d backward-filter: one GEMM summed over the samples, split along N·P·Q") {
  // The last case above, by hand: dw (5, 27) is one tile; its K, N·P·Q = 4 · 64, is 32 slices
  // of 8 (64 of K each at least): min(128 / 1, 32 / 8) = 4 splits in one pass, none in a pass
  // of one sample (8 slices).
  const Conv2dShape s = make_conv2d_shape(4, 3, 10, 10, 5, 3, 3, 1, Padding::valid);
  const int64_t CRS = s.C * s.R * s.S, PQ = s.P * s.Q;
  CHECK(emu::gemm_split_k(s.K, CRS, PQ, GemmBatch{s.N, 0, 0, 0, true}) == 4);
  CHECK(emu::gemm_split_k(s.K, CRS, PQ, GemmBatch{1, 0, 0, 0, true}) == 1);
  CHECK(emu::gemm_mma_split_k(s.K, CRS, PQ, GemmBatch{s.N, 0, 0, 0, true}) == 4);
}

TEST_CASE("conv2d im2col and col2im are adjoint: <im2col(x), c> == <x, col2im(c)>") {
  // col2im gathers where a scatter would be natural; the adjoint identity checks the gather
  // visits exactly the taps im2col reads (with integer data the two dots are exact).
  testing::Deadline deadline("emulated im2col/col2im");
  const Stream stream = emu_stream();
  const Conv2dShape s = make_conv2d_shape(2, 2, 7, 6, 1, 3, 2, 2, Padding::same);  // 2 samples
  std::vector<float> x(s.x_size()), c(s.N * s.C * s.R * s.S * s.P * s.Q);  // (N, C·R·S, P·Q)
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(int(i * 7 % 11) - 5);
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(int(i * 5 % 13) - 6);
  std::vector<float> col = nan_vector(c.size()), back = nan_vector(x.size());
  emu::im2col(x.data(), col.data(), s, stream);
  emu::col2im(c.data(), back.data(), s, stream);
  stream.synchronize();
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < c.size(); ++i) lhs += double{col[i]} * c[i];
  for (size_t i = 0; i < x.size(); ++i) rhs += double{x[i]} * back[i];
  CHECK(lhs == rhs);
}

TEST_CASE("conv2d launchers reject a missing workspace and a malformed shape") {
  const Stream stream = emu_stream();
  const Conv2dShape s = make_conv2d_shape(1, 1, 5, 5, 2, 3, 3, 1, Padding::valid);
  float v = 0.0f;
  CHECK_THROWS_WITH(emu::conv2d_forward(&v, &v, nullptr, &v, s, nullptr, 0, stream),
                    doctest::Contains("conv2d_forward: workspace is null; pass 81 floats"));
  CHECK_THROWS_WITH(emu::conv2d_backward_filter(&v, &v, &v, s, &v, 80, stream),
                    doctest::Contains("conv2d_backward_filter: a workspace of 80 floats is "
                                      "smaller than one sample's share, 81; pass 81 floats"));
  Conv2dShape bad = s;
  bad.P = 7;  // the last window would start past the input
  CHECK_THROWS_WITH(emu::conv2d_backward_bias(&v, &v, bad, stream),
                    doctest::Contains("conv2d_backward_bias: invalid shape: input (1, 1, 5, 5)"));
}

TEST_CASE("maxpool2d forward (values, argmax, ties, NaNs) and backward are bit-identical to the reference") {
  testing::Deadline deadline("emulated maxpool2d");
  const Stream stream = emu_stream();
  struct PoolCase {
    int64_t N, C, H, W, R, S, stride;
    Padding padding;
  };
  for (PoolCase c : {PoolCase{1, 1, 2, 2, 2, 2, 2, Padding::valid},
                     PoolCase{2, 3, 7, 7, 2, 2, 2, Padding::valid},    // odd: last row unused
                     PoolCase{1, 2, 7, 5, 3, 3, 2, Padding::same},     // overlapping windows
                     PoolCase{2, 1, 5, 6, 2, 2, 2, Padding::same},     // padded bottom/right
                     PoolCase{1, 33, 3, 3, 3, 3, 1, Padding::same}}) { // stride 1, heavy overlap
    const Pool2dShape s = make_pool2d_shape(c.N, c.C, c.H, c.W, c.R, c.S, c.stride, c.padding);
    INFO("pool input (" << s.N << ", " << s.C << ", " << s.H << ", " << s.W << "), " << s.R
                        << "x" << s.S << " stride " << s.stride << ", output " << s.P << "x" << s.Q);
    for (std::string_view values : {"distinct", "ties", "NaNs"}) {
      INFO(values << " values");
      // ties: values from {-1, 0, 1}, so most windows hold several equal maxima. NaNs: a
      // quarter of the cells and more are NaNs, each with its own payload, so windows hold
      // none, one or several (the first wins: maxpool2d.h's NaN rule).
      std::vector<float> x = to_float(random_vector(s.x_size(), 30, -1.0, 1.0));
      if (values != "distinct")
        for (float& v : x) v = v < -0.33f ? -1.0f : (v < 0.33f ? 0.0f : 1.0f);
      if (values == "NaNs")
        for (size_t i = 0; i < x.size(); ++i)
          if (i % 4 == 1 || i % 7 == 3)
            x[i] = std::bit_cast<float>(0x7FC00000u | static_cast<uint32_t>(i));
      const std::vector<float> dy = to_float(random_vector(s.y_size(), 31));
      std::vector<float> y_ref(s.y_size()), dx_ref(s.x_size());
      std::vector<int32_t> arg_ref(s.y_size());
      ref::maxpool2d_forward(x.data(), y_ref.data(), arg_ref.data(), s);
      ref::maxpool2d_backward(dy.data(), arg_ref.data(), dx_ref.data(), s);

      std::vector<float> y = nan_vector(s.y_size()), dx = nan_vector(s.x_size());
      std::vector<int32_t> arg(s.y_size(), -7);
      emu::maxpool2d_forward(x.data(), y.data(), arg.data(), s, stream);
      emu::maxpool2d_backward(dy.data(), arg.data(), dx.data(), s, stream);
      stream.synchronize();
      CHECK(all_equal("y", y.data(), y_ref.data(), s.y_size()));
      CHECK(all_equal("argmax", arg, arg_ref));
      CHECK(all_equal("dx", dx.data(), dx_ref.data(), s.x_size()));
    }
  }
}
