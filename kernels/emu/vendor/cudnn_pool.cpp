// Emulated cuDNN max pooling, forward and backward.
//
// Forward: the largest x of each window (padding cells never win). The NaN option decides
// what a NaN in the window does: CUDNN_PROPAGATE_NAN makes the window's maximum NaN,
// CUDNN_NOT_PROPAGATE_NAN skips it (a window of NaN only gives NaN: there is nothing else).
// Backward keeps no argmax, as cuDNN: it is given x, y and dy and routes each dy to the cell
// of the window equal to y again — the first such cell in row-major window order, every
// time (CUDNN_POOLING_MAX_DETERMINISTIC), then scatters with the reference kernel
// (kernels/reference/maxpool2d.h's backward). A y that is not the maximum of its window of x
// (x and y from different forwards) fails the task, faulting the GPU: on a GPU the gradient
// would silently go nowhere.
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/vendor/cudnn_internal.h"
#include "kernels/reference/maxpool2d.h"

using namespace brigade;
using namespace brigade::emu::vendor;

namespace {

// The shape x and y describe through `pool`, or a reason they do not.
std::string pool_shape(const cudnnPoolingStruct* pool, const cudnnTensorStruct* x,
                       const cudnnTensorStruct* y, Pool2dShape* s) {
  std::string why = first_reason({why_unusable(pool, "poolingDesc"), why_unusable(x, "xDesc"),
                                  why_unusable(y, "yDesc")});
  if (!why.empty()) return why;
  if (pool->stride_h != pool->stride_w) return "the emulation has one stride for both directions";
  const int p = 1 + (x->h + 2 * pool->pad_h - pool->r) / pool->stride_h;
  const int q = 1 + (x->w + 2 * pool->pad_w - pool->s) / pool->stride_w;
  if (y->n != x->n || y->c != x->c || y->h != p || y->w != q)
    return "y " + dims(*y) + " is not the pooling of x " + dims(*x) + " (" + std::to_string(x->n) +
           ", " + std::to_string(x->c) + ", " + std::to_string(p) + ", " + std::to_string(q) + ")";
  *s = Pool2dShape{x->n, x->c, x->h, x->w, pool->r, pool->s, pool->stride_h, pool->pad_h, pool->pad_w, p, q};
  return "";
}

// Calls f(index in the plane) for each input cell of output (p, q)'s window, row-major.
template <class F>
void for_window(const Pool2dShape& s, int64_t p, int64_t q, F f) {
  for (int64_t r = 0; r < s.R; ++r) {
    const int64_t h = p * s.stride - s.pad_h + r;
    if (h < 0 || h >= s.H) continue;
    for (int64_t t = 0; t < s.S; ++t) {
      const int64_t v = q * s.stride - s.pad_w + t;
      if (v >= 0 && v < s.W) f(h * s.W + v);
    }
  }
}

}  // namespace

extern "C" {

cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t* d) {
  brigade::emu::gpu::count_call("cudnnCreatePoolingDescriptor");
  if (d == nullptr) return cudnn_fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreatePoolingDescriptor: null");
  auto* made = new cudnnPoolingStruct();
  made->kind = "pooling";
  register_descriptor(made);
  *d = made;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t d) {
  brigade::emu::gpu::count_call("cudnnDestroyPoolingDescriptor");
  if (d == nullptr) return CUDNN_STATUS_SUCCESS;
  if (const std::string why = why_unusable(d, "poolingDesc", false); !why.empty())
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, "cudnnDestroyPoolingDescriptor: " + why);
  d->destroyed = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d, cudnnPoolingMode_t mode,
                                          cudnnNanPropagation_t nan, int window_h, int window_w,
                                          int pad_h, int pad_w, int stride_h, int stride_w) {
  brigade::emu::gpu::count_call("cudnnSetPooling2dDescriptor");
  const std::string call = "cudnnSetPooling2dDescriptor";
  if (const std::string why = why_unusable(d, "poolingDesc", false); !why.empty())
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, call + ": " + why);
  // "CUDNN_STATUS_BAD_PARAM: At least one of the parameters windowHeight, windowWidth,
  // verticalStride, horizontalStride is negative or mode or maxpoolingNanOpt has an invalid
  // enumerate value."
  if (window_h <= 0 || window_w <= 0 || stride_h <= 0 || stride_w <= 0 || pad_h < 0 || pad_w < 0 ||
      (nan != CUDNN_PROPAGATE_NAN && nan != CUDNN_NOT_PROPAGATE_NAN))
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, call + ": a window, stride or padding out of range, or an unknown NaN option");
  if (mode != CUDNN_POOLING_MAX && mode != CUDNN_POOLING_MAX_DETERMINISTIC)
    return cudnn_fail(CUDNN_STATUS_NOT_SUPPORTED, call + ": the emulation has max pooling only");
  d->mode = mode, d->nan = nan;
  d->r = window_h, d->s = window_w, d->pad_h = pad_h, d->pad_w = pad_w;
  d->stride_h = stride_h, d->stride_w = stride_w;
  d->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetPooling2dForwardOutputDim(const cudnnPoolingDescriptor_t pool,
                                                const cudnnTensorDescriptor_t x, int* n, int* c,
                                                int* h, int* w) {
  brigade::emu::gpu::count_call("cudnnGetPooling2dForwardOutputDim");
  if (const std::string why = first_reason({why_unusable(pool, "poolingDesc"), why_unusable(x, "inputTensorDesc")});
      !why.empty())
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, "cudnnGetPooling2dForwardOutputDim: " + why);
  // "outputDim = 1 + (inputDim + 2*padding - windowDim)/poolingStride"
  *n = x->n;
  *c = x->c;
  *h = 1 + (x->h + 2 * pool->pad_h - pool->r) / pool->stride_h;
  *w = 1 + (x->w + 2 * pool->pad_w - pool->s) / pool->stride_w;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t pool,
                                  const void* alpha, const cudnnTensorDescriptor_t xDesc,
                                  const void* x, const void* beta,
                                  const cudnnTensorDescriptor_t yDesc, void* y) {
  brigade::emu::gpu::count_call("cudnnPoolingForward");
  const std::string call = "cudnnPoolingForward";
  Pool2dShape s{};
  if (const std::string why = pool_shape(pool, xDesc, yDesc, &s); !why.empty())
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, call + ": " + why);
  if (!alpha || !beta) return cudnn_fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, call + ": null alpha or beta");
  const float al = scalar(alpha), be = scalar(beta);
  const bool propagate = pool->nan == CUDNN_PROPAGATE_NAN;
  const auto* in = static_cast<const float*>(x);
  auto* out = static_cast<float*>(y);
  return cudnn_refused(run_on_stream(
      handle, call, {{x, xDesc->bytes(), "x"}, {y, yDesc->bytes(), "y", true}}, [=] {
        for (int64_t plane = 0; plane < s.N * s.C; ++plane)
          for (int64_t p = 0; p < s.P; ++p)
            for (int64_t q = 0; q < s.Q; ++q) {
              float best = NAN;
              bool any = false, saw_nan = false;
              for_window(s, p, q, [&](int64_t i) {
                const float v = in[plane * s.H * s.W + i];
                if (std::isnan(v)) saw_nan = true;
                else if (!any || v > best) best = v, any = true;
              });
              const float m = (propagate && saw_nan) || !any ? NAN : best;
              float& o = out[(plane * s.P + p) * s.Q + q];
              o = blend(al, m, be, o);
            }
      }));
}

cudnnStatus_t cudnnPoolingBackward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t pool,
                                   const void* alpha, const cudnnTensorDescriptor_t yDesc, const void* y,
                                   const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                   const cudnnTensorDescriptor_t xDesc, const void* x,
                                   const void* beta, const cudnnTensorDescriptor_t dxDesc, void* dx) {
  brigade::emu::gpu::count_call("cudnnPoolingBackward");
  const std::string call = "cudnnPoolingBackward";
  Pool2dShape s{};
  std::string why = first_reason({pool_shape(pool, xDesc, yDesc, &s), why_unusable(dyDesc, "dyDesc"),
                                  why_unusable(dxDesc, "dxDesc")});
  if (why.empty() && (dyDesc->size() != yDesc->size() || dxDesc->size() != xDesc->size() ||
                      dyDesc->h != yDesc->h || dxDesc->h != xDesc->h))
    why = "dy " + dims(*dyDesc) + " must have y's shape " + dims(*yDesc) + " and dx " +
          dims(*dxDesc) + " x's " + dims(*xDesc);
  if (!why.empty()) return cudnn_fail(CUDNN_STATUS_BAD_PARAM, call + ": " + why);
  if (!alpha || !beta) return cudnn_fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, call + ": null alpha or beta");
  const float al = scalar(alpha), be = scalar(beta);
  const auto* xs = static_cast<const float*>(x);
  const auto* ys = static_cast<const float*>(y);
  const auto* grad = static_cast<const float*>(dy);
  auto* out = static_cast<float*>(dx);
  return cudnn_refused(run_on_stream(
      handle, call,
      {{y, yDesc->bytes(), "y"}, {dy, dyDesc->bytes(), "dy"}, {x, xDesc->bytes(), "x"},
       {dx, dxDesc->bytes(), "dx", true}},
      [=] {
        // Where each window's maximum is: the first cell equal to y (NaN matching NaN).
        std::vector<int32_t> argmax(static_cast<size_t>(s.y_size()));
        for (int64_t plane = 0; plane < s.N * s.C; ++plane)
          for (int64_t p = 0; p < s.P; ++p)
            for (int64_t q = 0; q < s.Q; ++q) {
              const int64_t o = (plane * s.P + p) * s.Q + q;
              const float m = ys[o];
              int64_t found = -1;
              for_window(s, p, q, [&](int64_t i) {
                const float v = xs[plane * s.H * s.W + i];
                if (found < 0 && (v == m || (std::isnan(v) && std::isnan(m)))) found = i;
              });
              if (found < 0)
                throw std::runtime_error("y[" + std::to_string(o) + "] = " + std::to_string(m) +
                                         " is in no cell of its window of x: x and y are not "
                                         "from one cudnnPoolingForward");
              argmax[static_cast<size_t>(o)] = static_cast<int32_t>(found);
            }
        std::vector<float> scattered(static_cast<size_t>(s.x_size()));
        ref::maxpool2d_backward<float>(grad, argmax.data(), scattered.data(), s);
        for (int64_t i = 0; i < s.x_size(); ++i) out[i] = blend(al, scattered[static_cast<size_t>(i)], be, out[i]);
      }));
}

}  // extern "C"
