// Emulated cuDNN's convolution algorithms: the heuristic lists (cudnnGet*Algorithm_v7), the
// workspace each algorithm asks for (cudnnGet*WorkspaceSize), and the checks a pass makes of
// its algorithm and workspace (check_pass, for cudnn_conv.cpp).
//
// The algorithms (the emulation's ranking, fixed; a real GPU ranks by its own measurements):
//   forward          IMPLICIT_PRECOMP_GEMM* (workspace: y's bytes), IMPLICIT_GEMM (none),
//                    GEMM (y's bytes), DIRECT (listed as not supported for any shape)
//   backward-data    ALGO_1* (dx's bytes), ALGO_0 (none, non-deterministic), FFT_TILING (none)
//   backward-filter  ALGO_1* (dw's bytes), ALGO_0 (none, non-deterministic), FFT (none),
//                    ALGO_3 (none, non-deterministic)
// The algorithms marked * are tensor-op ones: with a convolution descriptor in
// CUDNN_TENSOR_OP_MATH the heuristics list each of them twice, as cuDNN lists (algorithm, math)
// pairs: with tensor-op math, then with FMA math (BRIGADE_EMU_CUDNN_FMA_FIRST=1: the FMA pair
// first, as a GPU's own ranking may put it). A pass computes in the math of the descriptor it
// is given, whatever pair its algorithm was listed in: a tensor-op algorithm on a descriptor
// in CUDNN_TENSOR_OP_MATH reads both inputs as tensor cores do, rounded to TF32
// (kernels/reference/tf32.h), accumulating in FP32. In any other math type, and for every
// other algorithm, the passes compute in FP32.
// A workspace smaller than the query said is refused at the call (CUDNN_STATUS_BAD_PARAM).
// BRIGADE_EMU_CUDNN_REFUSE_FIRST=1 makes each list's first algorithm fail at execution with
// CUDNN_STATUS_NOT_SUPPORTED, as cuDNN may for an engine the GPU cannot run.
#include "kernels/emu/vendor/cudnn_algorithms.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/vendor/cudnn_internal.h"

using namespace brigade;
using namespace brigade::emu::vendor;

namespace brigade::emu::vendor {

const std::vector<Algorithm> kForward{{CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, true, Scratch::output, true, true},
                                      {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, true, Scratch::none, true, false},
                                      {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, true, Scratch::output, true, false},
                                      {CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, true, Scratch::none, false, false}};
const std::vector<Algorithm> kBackwardData{{CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, true, Scratch::output, true, true},
                                           {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, false, Scratch::none, true, false},
                                           {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, true, Scratch::none, true, false}};
const std::vector<Algorithm> kBackwardFilter{{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, true, Scratch::output, true, true},
                                             {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, false, Scratch::none, true, false},
                                             {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, true, Scratch::none, true, false},
                                             {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, false, Scratch::none, true, false}};

namespace {

const Algorithm* find(const std::vector<Algorithm>& list, int algo) {
  for (const Algorithm& a : list)
    if (a.algo == algo) return &a;
  return nullptr;
}

uint64_t scratch_bytes(const Algorithm& a, uint64_t output_bytes) {
  return a.scratch == Scratch::output ? output_bytes : 0;
}

}  // namespace

std::string conv_shape(const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                       const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y,
                       Conv2dShape* s) {
  std::string why = first_reason({why_unusable(x, "the input descriptor"), why_unusable(w, "the filter descriptor"),
                                  why_unusable(conv, "the convolution descriptor"),
                                  why_unusable(y, "the output descriptor")});
  if (!why.empty()) return why;
  if (w->c != x->c)
    return "input " + dims(*x) + " has " + std::to_string(x->c) + " channels, the filters " +
           std::to_string(w->c);
  const int p = (x->h + 2 * conv->pad_h - w->r) / conv->u + 1;
  const int q = (x->w + 2 * conv->pad_w - w->s) / conv->v + 1;
  if (y->n != x->n || y->c != w->k || y->h != p || y->w != q)
    return "output " + dims(*y) + " is not the convolution's (" + std::to_string(x->n) + ", " +
           std::to_string(w->k) + ", " + std::to_string(p) + ", " + std::to_string(q) + ")";
  *s = Conv2dShape{x->n, x->c, x->h, x->w, w->k, w->r, w->s, conv->u, conv->pad_h, conv->pad_w, p, q};
  return "";
}

bool tensor_op(const std::vector<Algorithm>& list, int algo, cudnnMathType_t math) {
  const Algorithm* a = find(list, algo);
  return math == CUDNN_TENSOR_OP_MATH && a != nullptr && a->tensor_op;
}

cudnnStatus_t check_pass(const char* call, const std::string& why_not, const std::vector<Algorithm>& list,
                         int algo, void* workspace, size_t workspace_bytes, uint64_t output_bytes,
                         const void* alpha, const void* beta, float** scratch) {
  if (!why_not.empty()) return cudnn_fail(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": " + why_not);
  if (alpha == nullptr || beta == nullptr)
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, std::string(call) + ": null alpha or beta");
  const Algorithm* a = find(list, algo);
  if (a == nullptr)
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": unknown algorithm " + std::to_string(algo));
  if (!a->supported || (refuse_first_algorithm() && algo == list.front().algo))
    return cudnn_fail(CUDNN_STATUS_NOT_SUPPORTED,
                      std::string(call) + ": algorithm " + std::to_string(algo) +
                          (a->supported ? " refused (BRIGADE_EMU_CUDNN_REFUSE_FIRST=1: the first "
                                          "algorithm of each heuristic list fails)"
                                        : " is not supported for this shape"));
  const uint64_t needed = scratch_bytes(*a, output_bytes);
  // "workSpaceSizeInBytes: Specifies the size in bytes of the provided workSpace."
  // CUDNN_STATUS_BAD_PARAM when it is smaller than the algorithm's query said.
  if (workspace_bytes < needed || (needed > 0 && workspace == nullptr))
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM,
                      std::string(call) + ": a workspace of " + std::to_string(workspace_bytes) +
                          " bytes, algorithm " + std::to_string(algo) + " needs " +
                          std::to_string(needed) + " (its *WorkspaceSize query)");
  *scratch = needed > 0 ? static_cast<float*>(workspace) : nullptr;
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace brigade::emu::vendor

namespace {

// The heuristic list; `math` is the convolution descriptor's math type: in
// CUDNN_TENSOR_OP_MATH each tensor-op algorithm is listed twice, with each math (the file's
// header says in which order).
template <class Perf>
cudnnStatus_t rank(const char* call, cudnnHandle_t handle, const std::string& why_not,
                   const std::vector<Algorithm>& list, uint64_t output_bytes,
                   cudnnMathType_t math, int requested, int* returned, Perf* perf) {
  if (const Refusal r = check_cudnn_handle(handle, call); r.failure != Failure::none)
    return cudnn_refused(r);
  if (!why_not.empty()) return cudnn_fail(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": " + why_not);
  if (returned == nullptr || perf == nullptr || requested < 1)
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": no room for results");
  struct Pair {
    const Algorithm* algorithm;
    cudnnMathType_t math;
  };
  std::vector<Pair> pairs;
  const bool fma_first = fma_pairs_first();
  for (const Algorithm& a : list) {
    if (!tensor_op(list, a.algo, math)) {
      pairs.push_back({&a, CUDNN_FMA_MATH});
      continue;
    }
    pairs.push_back({&a, fma_first ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH});
    pairs.push_back({&a, fma_first ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH});
  }
  const int count = std::min<int>(requested, static_cast<int>(pairs.size()));
  for (int i = 0; i < count; ++i) {
    const Algorithm& a = *pairs[static_cast<size_t>(i)].algorithm;
    perf[i] = Perf{};
    perf[i].algo = static_cast<decltype(perf[i].algo)>(a.algo);
    perf[i].status = a.supported ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
    perf[i].time = -1.0f;  // heuristics: nothing was timed
    perf[i].memory = scratch_bytes(a, output_bytes);
    perf[i].determinism = a.deterministic ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
    perf[i].mathType = pairs[static_cast<size_t>(i)].math;
  }
  *returned = count;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t workspace_size(const char* call, cudnnHandle_t handle, const std::string& why_not,
                             const std::vector<Algorithm>& list, int algo, uint64_t output_bytes,
                             size_t* bytes) {
  if (const Refusal r = check_cudnn_handle(handle, call); r.failure != Failure::none)
    return cudnn_refused(r);
  if (!why_not.empty()) return cudnn_fail(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": " + why_not);
  const Algorithm* a = find(list, algo);
  if (a == nullptr || bytes == nullptr)
    return cudnn_fail(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": unknown algorithm " + std::to_string(algo));
  if (!a->supported)
    return cudnn_fail(CUDNN_STATUS_NOT_SUPPORTED, std::string(call) + ": algorithm " +
                                                      std::to_string(algo) + " is not supported");
  *bytes = scratch_bytes(*a, output_bytes);
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t y, const int requested,
    int* returned, cudnnConvolutionFwdAlgoPerf_t* perf) {
  brigade::emu::gpu::count_call("cudnnGetConvolutionForwardAlgorithm_v7");
  Conv2dShape s{};
  const std::string why = conv_shape(x, w, conv, y, &s);
  return rank("cudnnGetConvolutionForwardAlgorithm_v7", handle, why, kForward,
              why.empty() ? y->bytes() : 0, why.empty() ? conv->math : CUDNN_FMA_MATH, requested,
              returned, perf);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t dx, const int requested,
    int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
  brigade::emu::gpu::count_call("cudnnGetConvolutionBackwardDataAlgorithm_v7");
  Conv2dShape s{};
  const std::string why = conv_shape(dx, w, conv, dy, &s);
  return rank("cudnnGetConvolutionBackwardDataAlgorithm_v7", handle, why, kBackwardData,
              why.empty() ? dx->bytes() : 0, why.empty() ? conv->math : CUDNN_FMA_MATH, requested,
              returned, perf);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t conv, const cudnnFilterDescriptor_t dw, const int requested,
    int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
  brigade::emu::gpu::count_call("cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  Conv2dShape s{};
  const std::string why = conv_shape(x, dw, conv, dy, &s);
  return rank("cudnnGetConvolutionBackwardFilterAlgorithm_v7", handle, why, kBackwardFilter,
              why.empty() ? dw->bytes() : 0, why.empty() ? conv->math : CUDNN_FMA_MATH, requested,
              returned, perf);
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
                                                      const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t conv,
                                                      const cudnnTensorDescriptor_t y,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
  brigade::emu::gpu::count_call("cudnnGetConvolutionForwardWorkspaceSize");
  Conv2dShape s{};
  const std::string why = conv_shape(x, w, conv, y, &s);
  return workspace_size("cudnnGetConvolutionForwardWorkspaceSize", handle, why, kForward, algo,
                        why.empty() ? y->bytes() : 0, bytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle, const cudnnFilterDescriptor_t w,
                                                           const cudnnTensorDescriptor_t dy,
                                                           const cudnnConvolutionDescriptor_t conv,
                                                           const cudnnTensorDescriptor_t dx,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
  brigade::emu::gpu::count_call("cudnnGetConvolutionBackwardDataWorkspaceSize");
  Conv2dShape s{};
  const std::string why = conv_shape(dx, w, conv, dy, &s);
  return workspace_size("cudnnGetConvolutionBackwardDataWorkspaceSize", handle, why, kBackwardData,
                        algo, why.empty() ? dx->bytes() : 0, bytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
                                                             const cudnnTensorDescriptor_t dy,
                                                             const cudnnConvolutionDescriptor_t conv,
                                                             const cudnnFilterDescriptor_t dw,
                                                             cudnnConvolutionBwdFilterAlgo_t algo,
                                                             size_t* bytes) {
  brigade::emu::gpu::count_call("cudnnGetConvolutionBackwardFilterWorkspaceSize");
  Conv2dShape s{};
  const std::string why = conv_shape(x, dw, conv, dy, &s);
  return workspace_size("cudnnGetConvolutionBackwardFilterWorkspaceSize", handle, why,
                        kBackwardFilter, algo, why.empty() ? dw->bytes() : 0, bytes);
}

}  // extern "C"
