// Emulated cuDNN convolution: the four passes and the forward fused with its bias and
// activation, computed by the reference kernels (kernels/reference/conv2d.h). Which
// algorithms there are, their workspaces and the checks of both before a pass is enqueued are
// in cudnn_algorithms.cpp; the convolution descriptor is with the others, in
// cudnn_tensors.cpp.
//
// A pass on a tensor-op algorithm under CUDNN_TENSOR_OP_MATH reads both inputs rounded to
// TF32 (kernels/reference/tf32.h), accumulating in FP32; every other pass computes in FP32.
// An algorithm with a workspace forms its result there before scaling it into the output, so
// a workspace smaller than the query said, or shared by two streams at once, corrupts the
// result as it would on a GPU.
#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/vendor/cudnn_algorithms.h"
#include "kernels/emu/vendor/cudnn_internal.h"
#include "kernels/emu/vendor/include/vendor_emulation.h"
#include "kernels/reference/conv2d.h"
#include "kernels/reference/tf32.h"

using namespace brigade;
using namespace brigade::emu::vendor;

namespace {

std::mutex runs_mutex;
AlgorithmRuns runs;

// An input as the pass reads it: rounded to TF32 into `copy` when the pass runs on tensor
// cores, else the input itself.
const float* as_read(const float* in, int64_t count, bool tf32, std::vector<float>& copy) {
  if (!tf32) return in;
  copy.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) copy[static_cast<size_t>(i)] = ref::round_to_tf32(in[i]);
  return copy.data();
}

// out = alpha · result + beta · out over `count` values; result formed in `scratch` when the
// algorithm has one, else in host memory of the task.
template <class Compute>
void form_and_blend(float* scratch, float* out, int64_t count, float alpha, float beta,
                    bool zero_first, Compute compute) {
  std::vector<float> own;
  float* result = scratch;
  if (result == nullptr) {
    own.resize(static_cast<size_t>(count));
    result = own.data();
  }
  if (zero_first) std::fill(result, result + count, 0.0f);
  compute(result);
  for (int64_t i = 0; i < count; ++i) out[i] = blend(alpha, result[i], beta, out[i]);
}

void count_run(uint64_t* table, int algo) {
  std::lock_guard l(runs_mutex);
  ++table[algo];
}

}  // namespace

namespace brigade::emu::vendor {
AlgorithmRuns cudnn_algorithm_runs() {
  std::lock_guard l(runs_mutex);
  return runs;
}
}  // namespace brigade::emu::vendor

extern "C" {

// y = alpha · (x ⋆ w) + beta · y
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc,
                                      const void* x, const cudnnFilterDescriptor_t wDesc, const void* w,
                                      const cudnnConvolutionDescriptor_t conv, cudnnConvolutionFwdAlgo_t algo,
                                      void* workspace, size_t workspace_bytes, const void* beta,
                                      const cudnnTensorDescriptor_t yDesc, void* y) {
  brigade::emu::gpu::count_call("cudnnConvolutionForward");
  const char* call = "cudnnConvolutionForward";
  Conv2dShape s{};
  const std::string why = conv_shape(xDesc, wDesc, conv, yDesc, &s);
  float* scratch = nullptr;
  if (const cudnnStatus_t st = check_pass(call, why, kForward, algo, workspace, workspace_bytes,
                                          why.empty() ? yDesc->bytes() : 0, alpha, beta, &scratch);
      st != CUDNN_STATUS_SUCCESS)
    return st;
  const float al = scalar(alpha), be = scalar(beta);
  const bool tf32 = tensor_op(kForward, algo, conv->math);
  const auto* in = static_cast<const float*>(x);
  const auto* filters = static_cast<const float*>(w);
  auto* out = static_cast<float*>(y);
  return cudnn_refused(run_on_stream(
      handle, call,
      {{x, xDesc->bytes(), "x"}, {w, wDesc->bytes(), "w"}, {y, yDesc->bytes(), "y", true},
       {scratch, scratch ? yDesc->bytes() : 0, "workSpace", true}},
      [=] {
        std::vector<float> x_read, w_read;
        const float* xr = as_read(in, s.x_size(), tf32, x_read);
        const float* wr = as_read(filters, s.w_size(), tf32, w_read);
        form_and_blend(scratch, out, s.y_size(), al, be, false,
                       [&](float* r) { ref::conv2d_forward<float>(xr, wr, nullptr, r, s); });
        count_run(runs.forward, algo);
      }));
}

// y = act(alpha1 · (x ⋆ w) + alpha2 · z + bias): the convolution, a residual input z and the
// bias, then the activation, in one call. cuDNN's rules, as the emulation enforces them:
// - the activation is CUDNN_ACTIVATION_RELU or CUDNN_ACTIVATION_IDENTITY, and the identity
//   "must use CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM" (cudnnActivationMode_t):
//   another algorithm is CUDNN_STATUS_NOT_SUPPORTED, at execution, as cuDNN refuses it;
// - z has y's shape (it may be y itself); with alpha2 = 0 it is not read, as a zero scaling
//   factor never reads its tensor (garbage, NaN included, is ignored);
// - the bias is (1, K, 1, 1): one value per output channel;
// - the workspace and the algorithms are the forward pass's (cudnnGetConvolutionForward*).
// The sum is formed as the three calls it replaces form it (alpha1 · conv, then + alpha2 · z,
// then + bias), so the fused call's bits are theirs.
cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void* alpha1, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnFilterDescriptor_t wDesc, const void* w, const cudnnConvolutionDescriptor_t conv,
    cudnnConvolutionFwdAlgo_t algo, void* workspace, size_t workspace_bytes, const void* alpha2,
    const cudnnTensorDescriptor_t zDesc, const void* z, const cudnnTensorDescriptor_t biasDesc,
    const void* bias, const cudnnActivationDescriptor_t act, const cudnnTensorDescriptor_t yDesc,
    void* y) {
  brigade::emu::gpu::count_call("cudnnConvolutionBiasActivationForward");
  const char* call = "cudnnConvolutionBiasActivationForward";
  Conv2dShape s{};
  std::string why = first_reason({conv_shape(xDesc, wDesc, conv, yDesc, &s),
                                  why_unusable(zDesc, "zDesc"), why_unusable(biasDesc, "biasDesc"),
                                  why_unusable(act, "activationDesc")});
  if (why.empty() && (zDesc->n != yDesc->n || zDesc->c != yDesc->c || zDesc->h != yDesc->h ||
                      zDesc->w != yDesc->w))
    why = "z " + dims(*zDesc) + " is not y's shape " + dims(*yDesc);
  if (why.empty() && (biasDesc->n != 1 || biasDesc->c != yDesc->c || biasDesc->h != 1 || biasDesc->w != 1))
    why = "bias " + dims(*biasDesc) + " is not (1, " + std::to_string(yDesc->c) + ", 1, 1)";
  float* scratch = nullptr;
  if (const cudnnStatus_t st = check_pass(call, why, kForward, algo, workspace, workspace_bytes,
                                          why.empty() ? yDesc->bytes() : 0, alpha1, alpha2, &scratch);
      st != CUDNN_STATUS_SUCCESS)
    return st;
  if (act->mode == CUDNN_ACTIVATION_IDENTITY && algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
    return cudnn_fail(CUDNN_STATUS_NOT_SUPPORTED,
                      std::string(call) + ": CUDNN_ACTIVATION_IDENTITY needs algorithm " +
                          std::to_string(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) +
                          " (IMPLICIT_PRECOMP_GEMM), got " + std::to_string(algo));
  if (!x || !w || !bias || !y || (scalar(alpha2) != 0.0f && !z))
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, std::string(call) + ": a null pointer");
  const float a1 = scalar(alpha1), a2 = scalar(alpha2);
  const bool tf32 = tensor_op(kForward, algo, conv->math);
  const cudnnActivationStruct activation = *act;
  const auto* in = static_cast<const float*>(x);
  const auto* filters = static_cast<const float*>(w);
  const auto* residual = static_cast<const float*>(z);
  const auto* b = static_cast<const float*>(bias);
  auto* out = static_cast<float*>(y);
  std::vector<Operand> operands{{x, xDesc->bytes(), "x"}, {w, wDesc->bytes(), "w"},
                                {bias, biasDesc->bytes(), "bias"}, {y, yDesc->bytes(), "y", true},
                                {scratch, scratch ? yDesc->bytes() : 0, "workSpace", true}};
  if (a2 != 0.0f) operands.push_back({z, zDesc->bytes(), "z"});
  return cudnn_refused(run_on_stream(handle, call, operands, [=] {
    std::vector<float> own;
    float* r = scratch;
    if (r == nullptr) {
      own.resize(static_cast<size_t>(s.y_size()));
      r = own.data();
    }
    std::vector<float> x_read, w_read;
    ref::conv2d_forward<float>(as_read(in, s.x_size(), tf32, x_read),
                               as_read(filters, s.w_size(), tf32, w_read), nullptr, r, s);
    const int64_t plane = int64_t{s.P} * s.Q;
    for (int64_t i = 0; i < s.y_size(); ++i) {
      float v = a1 * r[i];
      if (a2 != 0.0f) v += a2 * residual[i];
      v += b[(i / plane) % s.K];
      out[i] = activate(v, activation);
    }
    count_run(runs.forward, algo);
  }));
}

// dx = alpha · (the adjoint of the convolution applied to dy) + beta · dx
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha, const cudnnFilterDescriptor_t wDesc,
                                           const void* w, const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                           const cudnnConvolutionDescriptor_t conv,
                                           cudnnConvolutionBwdDataAlgo_t algo, void* workspace,
                                           size_t workspace_bytes, const void* beta,
                                           const cudnnTensorDescriptor_t dxDesc, void* dx) {
  brigade::emu::gpu::count_call("cudnnConvolutionBackwardData");
  const char* call = "cudnnConvolutionBackwardData";
  Conv2dShape s{};
  const std::string why = conv_shape(dxDesc, wDesc, conv, dyDesc, &s);
  float* scratch = nullptr;
  if (const cudnnStatus_t st = check_pass(call, why, kBackwardData, algo, workspace, workspace_bytes,
                                          why.empty() ? dxDesc->bytes() : 0, alpha, beta, &scratch);
      st != CUDNN_STATUS_SUCCESS)
    return st;
  const float al = scalar(alpha), be = scalar(beta);
  const bool tf32 = tensor_op(kBackwardData, algo, conv->math);
  const auto* grad = static_cast<const float*>(dy);
  const auto* filters = static_cast<const float*>(w);
  auto* out = static_cast<float*>(dx);
  return cudnn_refused(run_on_stream(
      handle, call,
      {{w, wDesc->bytes(), "w"}, {dy, dyDesc->bytes(), "dy"}, {dx, dxDesc->bytes(), "dx", true},
       {scratch, scratch ? dxDesc->bytes() : 0, "workSpace", true}},
      [=] {
        std::vector<float> dy_read, w_read;
        const float* dyr = as_read(grad, s.y_size(), tf32, dy_read);
        const float* wr = as_read(filters, s.w_size(), tf32, w_read);
        form_and_blend(scratch, out, s.x_size(), al, be, false,
                       [&](float* r) { ref::conv2d_backward_data<float>(dyr, wr, r, s); });
        count_run(runs.backward_data, algo);
      }));
}

// dw = alpha · (the filter gradient of the batch) + beta · dw
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc,
                                             const void* x, const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                             const cudnnConvolutionDescriptor_t conv,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void* workspace,
                                             size_t workspace_bytes, const void* beta,
                                             const cudnnFilterDescriptor_t dwDesc, void* dw) {
  brigade::emu::gpu::count_call("cudnnConvolutionBackwardFilter");
  const char* call = "cudnnConvolutionBackwardFilter";
  Conv2dShape s{};
  const std::string why = conv_shape(xDesc, dwDesc, conv, dyDesc, &s);
  float* scratch = nullptr;
  if (const cudnnStatus_t st = check_pass(call, why, kBackwardFilter, algo, workspace, workspace_bytes,
                                          why.empty() ? dwDesc->bytes() : 0, alpha, beta, &scratch);
      st != CUDNN_STATUS_SUCCESS)
    return st;
  const float al = scalar(alpha), be = scalar(beta);
  const bool tf32 = tensor_op(kBackwardFilter, algo, conv->math);
  const auto* in = static_cast<const float*>(x);
  const auto* grad = static_cast<const float*>(dy);
  auto* out = static_cast<float*>(dw);
  return cudnn_refused(run_on_stream(
      handle, call,
      {{x, xDesc->bytes(), "x"}, {dy, dyDesc->bytes(), "dy"}, {dw, dwDesc->bytes(), "dw", true},
       {scratch, scratch ? dwDesc->bytes() : 0, "workSpace", true}},
      [=] {
        std::vector<float> x_read, dy_read;
        const float* xr = as_read(in, s.x_size(), tf32, x_read);
        const float* dyr = as_read(grad, s.y_size(), tf32, dy_read);
        form_and_blend(scratch, out, s.w_size(), al, be, /*zero_first=*/true,
                       [&](float* r) { ref::conv2d_backward_filter<float>(xr, dyr, r, s); });
        count_run(runs.backward_filter, algo);
      }));
}

// db = alpha · (dy summed over n, p, q) + beta · db; db is (1, K, 1, 1).
cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t dyDesc,
                                           const void* dy, const void* beta,
                                           const cudnnTensorDescriptor_t dbDesc, void* db) {
  brigade::emu::gpu::count_call("cudnnConvolutionBackwardBias");
  const std::string call = "cudnnConvolutionBackwardBias";
  if (const std::string why = first_reason({why_unusable(dyDesc, "dyDesc"), why_unusable(dbDesc, "dbDesc")});
      !why.empty())
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, call + ": " + why);
  if (dbDesc->n != 1 || dbDesc->c != dyDesc->c || dbDesc->h != 1 || dbDesc->w != 1)
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, call + ": db " + dims(*dbDesc) + " is not (1, " +
                                                  std::to_string(dyDesc->c) + ", 1, 1) for dy " + dims(*dyDesc));
  if (!alpha || !beta) return cudnn_fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, call + ": null alpha or beta");
  const float al = scalar(alpha), be = scalar(beta);
  const Conv2dShape s{dyDesc->n, 1, 1, 1, dyDesc->c, 1, 1, 1, 0, 0, dyDesc->h, dyDesc->w};
  const auto* grad = static_cast<const float*>(dy);
  auto* out = static_cast<float*>(db);
  return cudnn_refused(run_on_stream(
      handle, call, {{dy, dyDesc->bytes(), "dy"}, {db, dbDesc->bytes(), "db", true}}, [=] {
        form_and_blend(nullptr, out, s.K, al, be, /*zero_first=*/true,
                       [&](float* r) { ref::conv2d_backward_bias<float>(grad, r, s); });
      }));
}

}  // extern "C"
