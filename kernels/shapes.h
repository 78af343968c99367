// The shapes of the kernels' operands, shared by kernels/reference, kernels/cpu and
// kernels/cuda. Plain structs of integers (usable in CUDA device code, passed by value to
// kernels); the make_* functions are host-only and check everything a user can get wrong.
//
// Layouts: activations NCHW, convolution weights KCRS (PyTorch's OIHW), all contiguous.
// Padding follows Keras/TensorFlow: "valid" = no padding, P = floor((H - R) / stride) + 1;
// "same" = P = ceil(H / stride), with the total padding split so that the top/left side gets
// the smaller half (TensorFlow's rule; the bottom/right side gets the extra row/column).
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace brigade {

enum class Padding { valid, same };

inline const char* padding_name(Padding p) { return p == Padding::valid ? "valid" : "same"; }

// x: (N, C, H, W)  w: (K, C, R, S)  b: (K)  y: (N, K, P, Q)
// Output pixel (p, q) reads input rows p*stride - pad_h + r, r in [0, R) (likewise columns);
// rows outside [0, H) are zeros.
struct Conv2dShape {
  int64_t N, C, H, W;   // input
  int64_t K, R, S;      // filters: K output channels, R x S window
  int64_t stride;       // the same in both directions
  int64_t pad_h, pad_w; // zero rows above / columns left of the input
  int64_t P, Q;         // output height, width

  constexpr int64_t x_size() const { return N * C * H * W; }
  constexpr int64_t w_size() const { return K * C * R * S; }
  constexpr int64_t y_size() const { return N * K * P * Q; }
  constexpr int64_t flops_forward() const { return 2 * N * K * P * Q * C * R * S; }
};

// x: (N, C, H, W)  y, argmax: (N, C, P, Q). Windows R x S; padded cells never win.
struct Pool2dShape {
  int64_t N, C, H, W;
  int64_t R, S;
  int64_t stride;
  int64_t pad_h, pad_w;
  int64_t P, Q;

  constexpr int64_t x_size() const { return N * C * H * W; }
  constexpr int64_t y_size() const { return N * C * P * Q; }
};

// Output size of a convolution or pooling window along one axis, Keras rules: valid:
// floor((in - k) / stride) + 1, needs in >= k; same: ceil(in / stride), padded with
// max((out - 1) * stride + k - in, 0) zeros, the smaller half before (*pad_before). Returns 0
// when the window does not fit ("valid" with in < k). Inputs must be positive. Written so
// that no intermediate overflows for any positive in, k and stride (the model-file parser,
// which calls it on what a file says, is fuzzed).
inline int64_t window_output_size(int64_t in, int64_t k, int64_t stride, Padding padding,
                                  int64_t* pad_before = nullptr) {
  if (pad_before) *pad_before = 0;
  if (padding == Padding::valid) return in < k ? 0 : (in - k) / stride + 1;
  const int64_t out = in / stride + (in % stride != 0);  // ceil(in / stride)
  // Padding needed = (out - 1) * stride + k - in = k - r, where r = in - (out - 1) * stride
  // lies in [1, stride].
  const int64_t r = in - (out - 1) * stride;
  const int64_t total = k > r ? k - r : 0;
  if (pad_before) *pad_before = total / 2;
  return out;
}

namespace shapes_detail {
// window_output_size, throwing naming `what` where the window does not fit.
inline void output_extent(const char* what, int64_t in, int64_t window, int64_t stride,
                          Padding padding, int64_t& out, int64_t& pad_before) {
  out = window_output_size(in, window, stride, padding, &pad_before);
  if (out == 0) {
    std::ostringstream m;
    m << what << ": window " << window << " is larger than the input extent " << in
      << " with 'valid' padding";
    throw std::invalid_argument(m.str());
  }
}

inline std::string dims(int64_t a, int64_t b, int64_t c, int64_t d) {
  std::ostringstream m;
  m << "(" << a << ", " << b << ", " << c << ", " << d << ")";
  return m.str();
}
}  // namespace shapes_detail

// The shape of a convolution of an (N, C, H, W) input with K filters of R x S.
inline Conv2dShape make_conv2d_shape(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K,
                                     int64_t R, int64_t S, int64_t stride, Padding padding) {
  if (N < 1 || C < 1 || H < 1 || W < 1 || K < 1 || R < 1 || S < 1 || stride < 1) {
    std::ostringstream m;
    m << "conv2d: every size must be positive: input " << shapes_detail::dims(N, C, H, W)
      << ", " << K << " filters of " << R << "x" << S << ", stride " << stride;
    throw std::invalid_argument(m.str());
  }
  Conv2dShape s{N, C, H, W, K, R, S, stride, 0, 0, 0, 0};
  try {
    shapes_detail::output_extent("height", H, R, stride, padding, s.P, s.pad_h);
    shapes_detail::output_extent("width", W, S, stride, padding, s.Q, s.pad_w);
  } catch (const std::invalid_argument& e) {
    std::ostringstream m;
    m << "conv2d: a " << R << "x" << S << " kernel does not fit the input "
      << shapes_detail::dims(N, C, H, W) << " (" << e.what() << ")";
    throw std::invalid_argument(m.str());
  }
  return s;
}

// The shape of an R x S max pooling of an (N, C, H, W) input.
inline Pool2dShape make_pool2d_shape(int64_t N, int64_t C, int64_t H, int64_t W, int64_t R,
                                     int64_t S, int64_t stride, Padding padding) {
  if (N < 1 || C < 1 || H < 1 || W < 1 || R < 1 || S < 1 || stride < 1) {
    std::ostringstream m;
    m << "maxpool2d: every size must be positive: input " << shapes_detail::dims(N, C, H, W)
      << ", pool " << R << "x" << S << ", stride " << stride;
    throw std::invalid_argument(m.str());
  }
  Pool2dShape s{N, C, H, W, R, S, stride, 0, 0, 0, 0};
  try {
    shapes_detail::output_extent("height", H, R, stride, padding, s.P, s.pad_h);
    shapes_detail::output_extent("width", W, S, stride, padding, s.Q, s.pad_w);
  } catch (const std::invalid_argument& e) {
    std::ostringstream m;
    m << "maxpool2d: a " << R << "x" << S << " pool does not fit the input "
      << shapes_detail::dims(N, C, H, W) << " (" << e.what() << ")";
    throw std::invalid_argument(m.str());
  }
  return s;
}

}  // namespace brigade
