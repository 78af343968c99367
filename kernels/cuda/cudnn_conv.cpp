// Conv2D through cuDNN: forward, backward-data, backward-filter, backward-bias.
//
// cuDNN describes each operand with a descriptor (its layout and sizes); a convolution
// descriptor holds padding, stride and the arithmetic; an algorithm is chosen per pass, and
// may need scratch memory (the workspace) which the caller provides.
//
//   descriptors   NCHW float tensors x, y, bias (1, K, 1, 1); KCRS filter w;
//                 cross-correlation (what frameworks call convolution); the math of the
//                 math mode (kernels/math_mode.h): CUDNN_FMA_MATH in fp32 (no TF32),
//                 CUDNN_TENSOR_OP_MATH in tf32 — made once per (shape, mode) and kept
//                 (descriptors_for, vendor_handles.h). The heuristics list (algorithm, math)
//                 pairs, and a pass computes in the math of the convolution descriptor it is
//                 given, not the pair's: in tf32 a pair runs on a descriptor of its own math
//                 (conv_for), so that the math the log names is the math that runs.
//   algorithms    cuDNN's heuristics (cudnnGet*Algorithm_v7: no trial runs, so listing is
//                 cheap and allocates nothing), keeping those that are deterministic — a
//                 training run is then reproducible — and of the mode's math: FMA only in
//                 fp32, tensor-op (TF32) or FMA in tf32. The first execution of a pass
//                 tries them best-ranked first until one runs (cuDNN may refuse one only
//                 then); the one that ran is kept per (device, shape, mode). One line on
//                 stderr per shape and mode names the best-ranked algorithms (in tf32, with
//                 each one's math), and one more each pass that had to fall back.
//                 The workspace is sized for each pass's best-ranked algorithm.
//   forward       with a bias and a ReLU, one call (cudnnConvolutionBiasActivationForward)
//                 over the forward candidates; where cuDNN refuses it for every one, the
//                 convolution, cudnnAddTensor and cudnnActivationForward: three calls.
//
// This uses cuDNN's legacy API (cudnn_cnn.h), which cuDNN 9 keeps but marks deprecated in
// favour of the graph API; it is the readable one.
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/error.h"
#include "engine/stream.h"
#include "kernels/cuda/vendor.h"
#include "kernels/cuda/vendor_handles.h"
#include "kernels/math_mode.h"

namespace brigade::cuda::vendor {
namespace {

// A convolution shape and the math mode its descriptors and algorithms are for.
struct ConvProblem : Conv2dShape {
  MathMode math;
};

// Every size of the shape, and the mode: what the descriptors are made from, and so the key
// of the caches below.
using ShapeKey = std::array<int64_t, 13>;
ShapeKey shape_key(const ConvProblem& s) {
  return {s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.stride, s.pad_h, s.pad_w, s.P, s.Q,
          static_cast<int64_t>(s.math)};
}

// cuDNN takes int sizes; the constructor below has checked that they fit.
int as_int(int64_t v) { return static_cast<int>(v); }

// A float NCHW tensor descriptor of n × c × h × w.
void set_nchw(cudnnTensorDescriptor_t t, int64_t n, int64_t c, int64_t h, int64_t w) {
  BRIGADE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, as_int(n),
                                                 as_int(c), as_int(h), as_int(w)));
}

// The descriptors of one convolution shape, destroyed with the object.
class ConvDescriptors {
 public:
  explicit ConvDescriptors(const ConvProblem& s) {
    for (int64_t v : shape_key(s))  // before anything is created: a throw here leaks nothing
      BRIGADE_CHECK(v >= 0 && v <= INT_MAX, "conv2d (cuDNN): a size of the shape exceeds int: " << v);
    BRIGADE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    BRIGADE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    BRIGADE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bias));
    BRIGADE_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    for (cudnnConvolutionDescriptor_t* c : {&conv, &conv_fma, &conv_default})
      BRIGADE_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(c));
    set_nchw(x, s.N, s.C, s.H, s.W);  // (N, C, H, W)
    set_nchw(y, s.N, s.K, s.P, s.Q);  // (N, K, P, Q)
    set_nchw(bias, 1, s.K, 1, 1);     // (1, K, 1, 1)
    BRIGADE_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,  // KCRS
                                                   as_int(s.K), as_int(s.C), as_int(s.R),
                                                   as_int(s.S)));
    for (cudnnConvolutionDescriptor_t c : {conv, conv_fma, conv_default})
      BRIGADE_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
          c, as_int(s.pad_h), as_int(s.pad_w), as_int(s.stride), as_int(s.stride), 1, 1,
          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    BRIGADE_CUDNN_CHECK(cudnnSetConvolutionMathType(
        conv, s.math == MathMode::tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    BRIGADE_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_fma, CUDNN_FMA_MATH));
    BRIGADE_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_default, CUDNN_DEFAULT_MATH));
    math = s.math;
    BRIGADE_CUDNN_CHECK(cudnnCreateActivationDescriptor(&relu));
    // NaN stays NaN through the ReLU, as in the hand-written kernels and on the CPU.
    BRIGADE_CUDNN_CHECK(
        cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
  }

  ~ConvDescriptors() {  // destroying a descriptor cannot usefully fail; errors are ignored
    cudnnDestroyActivationDescriptor(relu);
    cudnnDestroyConvolutionDescriptor(conv_default);
    cudnnDestroyConvolutionDescriptor(conv_fma);
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(bias);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
  }

  // cuDNN pads pad_h rows on BOTH sides; our shape may have one more at the bottom
  // (TensorFlow's "same"). Then cuDNN's output size differs: refuse, naming the reason.
  // (A method, not part of the constructor, so that the destructor runs when it throws.)
  void check_output(const Conv2dShape& s) const {
    int n = 0, k = 0, p = 0, q = 0;
    BRIGADE_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &n, &k, &p, &q));
    BRIGADE_CHECK(p == s.P && q == s.Q,
                  "conv2d (cuDNN): input (" << s.N << ", " << s.C << ", " << s.H << ", " << s.W
                      << ") with " << s.R << "x" << s.S << " filters, stride " << s.stride
                      << " needs asymmetric 'same' padding (output " << s.P << "x" << s.Q
                      << ", cuDNN's symmetric padding gives " << p << "x" << q
                      << "); cuDNN cannot express it: use the hand-written path "
                         "(set_cuda_path(CudaPath::handwritten) or BRIGADE_CUDA_PATH=handwritten)");
  }

  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;

  // The convolution a pair of the heuristics' lists runs on: in fp32 `conv`, FMA only,
  // whatever the pair says (TF32 is never allowed there); in tf32 the descriptor of the pair's
  // own math. (Each descriptor is set once, here, and only read after: every thread shares
  // them.)
  cudnnConvolutionDescriptor_t conv_for(cudnnMathType_t pair_math) const {
    if (math == MathMode::fp32 || pair_math == CUDNN_TENSOR_OP_MATH) return conv;
    return pair_math == CUDNN_DEFAULT_MATH ? conv_default : conv_fma;
  }

  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  // `conv` in the mode's math, which the heuristics are asked with; the same convolution in
  // FMA and in cuDNN's default math, for the pairs of those maths in tf32.
  cudnnConvolutionDescriptor_t conv = nullptr, conv_fma = nullptr, conv_default = nullptr;
  cudnnActivationDescriptor_t relu = nullptr;
  MathMode math = MathMode::fp32;
};

// The descriptors of s, checked, from the per-process cache.
const ConvDescriptors& descriptors(const ConvProblem& s) {
  return descriptors_for<ConvDescriptors>(s, shape_key(s));
}

// An algorithm of one pass, the workspace it needs and the math it computes in.
template <class Algo>
struct Candidate {
  Algo algo;
  size_t workspace;
  cudnnMathType_t math;
};

// The algorithms of one pass that may run, best-ranked first; `chosen` is the index of the
// one that ran first (-1 until one has).
template <class Algo>
struct Candidates {
  std::vector<Candidate<Algo>> list;
  int chosen = -1;
};

struct ConvAlgorithms {
  Candidates<cudnnConvolutionFwdAlgo_t> forward;
  Candidates<cudnnConvolutionBwdDataAlgo_t> backward_data;
  Candidates<cudnnConvolutionBwdFilterAlgo_t> backward_filter;
  size_t workspace_bytes = 0;  // the largest of the three passes' best-ranked candidates'
  // The forward pass fused with its bias and ReLU (cudnnConvolutionBiasActivationForward):
  // the forward candidates, tried on their own, since cuDNN may refuse the fused call for an
  // algorithm it runs unfused; `fused_declined` once it refused every one (three calls then).
  Candidates<cudnnConvolutionFwdAlgo_t> fused;
  bool fused_declined = false;
};

// Whether an algorithm computing in `math` may run in math mode `mode`: FMA math always; a
// tensor-op math type (its inputs rounded through TF32) only in tf32. (Never
// CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: that one rounds FP32 through FP16.)
bool math_allowed(cudnnMathType_t math, MathMode mode) {
  if (math == CUDNN_FMA_MATH || math == CUDNN_DEFAULT_MATH) return true;
  return math == CUDNN_TENSOR_OP_MATH && mode == MathMode::tf32;
}

// The math a pair runs in (ConvDescriptors::conv_for): cuDNN's default math allows TF32 on
// GPUs since the A100.
const char* math_name(cudnnMathType_t math, MathMode mode) {
  if (mode == MathMode::fp32) return "FMA";
  return math == CUDNN_TENSOR_OP_MATH ? "tensor-op TF32"
         : math == CUDNN_DEFAULT_MATH ? "default math, TF32 allowed"
                                      : "FMA";
}

// The usable algorithms of a heuristic list, in its order: listed as runnable, deterministic
// (a training run is then reproducible) and of a math the mode allows. A list with none is
// refused, naming the pass and the shape.
template <class Perf, class WorkspaceOf>
Candidates<decltype(Perf::algo)> usable(const Perf* perfs, int count, const char* pass,
                                        const ConvProblem& s, WorkspaceOf workspace_of) {
  Candidates<decltype(Perf::algo)> c;
  for (int i = 0; i < count; ++i)
    if (perfs[i].status == CUDNN_STATUS_SUCCESS && perfs[i].determinism == CUDNN_DETERMINISTIC &&
        math_allowed(perfs[i].mathType, s.math))
      c.list.push_back({perfs[i].algo, workspace_of(perfs[i].algo, perfs[i].mathType),
                        perfs[i].mathType});
  BRIGADE_CHECK(!c.list.empty(), "conv2d (cuDNN): no deterministic " << math_mode_name(s.math) << " " << pass
                                     << " algorithm for input (" << s.N << ", " << s.C << ", "
                                     << s.H << ", " << s.W << "), " << s.K << " filters " << s.R
                                     << "x" << s.S);
  return c;
}

// "cuDNN conv2d input (N, C, H, W), K filters RxS, stride s on cuda:d": how the log names a shape.
std::string describe(const Conv2dShape& s, int device) {
  std::ostringstream os;
  os << "cuDNN conv2d input (" << s.N << ", " << s.C << ", " << s.H << ", " << s.W << "), " << s.K
     << " filters " << s.R << "x" << s.S << ", stride " << s.stride << " on cuda:" << device;
  return os.str();
}

// The best-ranked algorithm of each pass, as the log line names them: in fp32
//   forward algorithm 1, backward-data 1, backward-filter 1 (4096 bytes of workspace)
// and in tf32 the same with each one's math:
//   math tf32: forward algorithm 1 (tensor-op TF32), backward-data 1 (tensor-op TF32), ...
std::string describe_choice(const ConvAlgorithms& a, MathMode mode) {
  const auto named = [&](const auto& c) {
    std::string text = std::to_string(static_cast<int>(c.list[0].algo));
    if (mode == MathMode::tf32) text += std::string(" (") + math_name(c.list[0].math, mode) + ")";
    return text;
  };
  return std::string(mode == MathMode::tf32 ? "math tf32: " : "") + "forward algorithm " +
         named(a.forward) + ", backward-data " + named(a.backward_data) + ", backward-filter " +
         named(a.backward_filter) + " (" + std::to_string(a.workspace_bytes) +
         " bytes of workspace)";
}

using Key = std::pair<int, ShapeKey>;  // (device, shape and mode)
std::mutex algorithms_mutex;  // guards the cache below and every Candidates::chosen in it

ConvAlgorithms& algorithms_for(const ConvProblem& s, const ConvDescriptors& d,
                               cudnnHandle_t handle, int device) {
  static auto* cache = new std::map<Key, ConvAlgorithms>();  // never freed, like the handles
  const Key key{device, shape_key(s)};
  std::lock_guard<std::mutex> lock(algorithms_mutex);
  if (auto it = cache->find(key); it != cache->end()) return it->second;

  ConvAlgorithms a;
  int count = 0;
  std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> fwd{};
  BRIGADE_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, d.x, d.w, d.conv, d.y,
                                                             static_cast<int>(fwd.size()), &count,
                                                             fwd.data()));
  a.forward = usable(fwd.data(), count, "forward", s,
                     [&](cudnnConvolutionFwdAlgo_t algo, cudnnMathType_t math) {
    size_t bytes = 0;
    BRIGADE_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv_for(math),
                                                                d.y, algo, &bytes));
    return bytes;
  });
  std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> bwd_data{};
  BRIGADE_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
      handle, d.w, d.y, d.conv, d.x, static_cast<int>(bwd_data.size()), &count, bwd_data.data()));
  a.backward_data = usable(bwd_data.data(), count, "backward-data", s,
                           [&](cudnnConvolutionBwdDataAlgo_t algo, cudnnMathType_t math) {
    size_t bytes = 0;
    BRIGADE_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
        handle, d.w, d.y, d.conv_for(math), d.x, algo, &bytes));
    return bytes;
  });
  std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> bwd_filter{};
  BRIGADE_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
      handle, d.x, d.y, d.conv, d.w, static_cast<int>(bwd_filter.size()), &count,
      bwd_filter.data()));
  a.backward_filter = usable(bwd_filter.data(), count, "backward-filter", s,
                             [&](cudnnConvolutionBwdFilterAlgo_t algo, cudnnMathType_t math) {
    size_t bytes = 0;
    BRIGADE_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        handle, d.x, d.y, d.conv_for(math), d.w, algo, &bytes));
    return bytes;
  });
  a.fused = a.forward;
  a.workspace_bytes = std::max({a.forward.list[0].workspace, a.backward_data.list[0].workspace,
                                a.backward_filter.list[0].workspace});
  std::fprintf(stderr, "%s: %s\n", describe(s, device).c_str(), describe_choice(a, s.math).c_str());
  return cache->emplace(key, std::move(a)).first->second;
}

// Runs a pass with the algorithm chosen for it, choosing first when none has run yet: the
// candidates in their order, skipping those that need more workspace than the caller's,
// until one runs. cuDNN may refuse an algorithm only at execution (CUDNN_STATUS_NOT_SUPPORTED
// and its refinements, 3000-3999: an engine this GPU, driver or shape cannot run); that is a
// reason to try the next one, any other failure is an error. The choice is kept per (device,
// shape); a fallback is said once, on stderr. When every algorithm is refused: an error, or,
// `may_decline`, false (the caller has another way).
template <class Algo, class Run>
bool run_pass(const char* op, const char* pass, Candidates<Algo>& c, size_t workspace_bytes,
              const Conv2dShape& s, int device, Run run, bool may_decline = false) {
  int chosen = -1;
  {
    std::lock_guard<std::mutex> lock(algorithms_mutex);
    chosen = c.chosen;
  }
  if (chosen >= 0) {
    BRIGADE_CUDNN_CHECK(run(c.list[static_cast<size_t>(chosen)]));
    return true;
  }
  std::ostringstream refused;
  for (size_t i = 0; i < c.list.size(); ++i) {
    const auto [algo, needs, math] = c.list[i];
    if (needs > workspace_bytes) continue;
    const cudnnStatus_t status = run(c.list[i]);
    if (status == CUDNN_STATUS_SUCCESS) {
      std::lock_guard<std::mutex> lock(algorithms_mutex);
      if (c.chosen < 0) {
        c.chosen = static_cast<int>(i);
        if (i > 0)  // not the best-ranked, which algorithms_for has said: say why
          std::fprintf(stderr, "%s: %s algorithm %d (%s) runs instead%s%s\n",
                       describe(s, device).c_str(), pass, static_cast<int>(algo),
                       math_name(math, math_mode()),
                       refused.str().c_str(),
                       refused.tellp() == 0 ? " (the better ones need more workspace)" : ")");
      }
      return true;
    }
    const bool not_supported = status >= CUDNN_STATUS_NOT_SUPPORTED && status < CUDNN_STATUS_INTERNAL_ERROR;
    if (!not_supported) BRIGADE_CUDNN_CHECK(status);  // throws, naming the status
    refused << (refused.tellp() == 0 ? " (refused: " : ", ") << "algorithm " << static_cast<int>(algo)
            << " " << cudnnGetErrorString(status);
  }
  if (refused.tellp() != 0) refused << ")";
  if (may_decline) return false;
  BRIGADE_CHECK(false, op << " (cuDNN): no " << pass << " algorithm ran for input (" << s.N << ", "
                          << s.C << ", " << s.H << ", " << s.W << "), " << s.K << " filters "
                          << s.R << "x" << s.S << " with a workspace of " << workspace_bytes
                          << " bytes" << refused.str());
}

// The algorithms for s, after checking the caller's workspace is large enough.
ConvAlgorithms& prepare(const char* op, const ConvProblem& s, const ConvDescriptors& d,
                        const CudnnLease& dnn, const Stream& stream, const void* workspace,
                        size_t workspace_bytes) {
  ConvAlgorithms& a = algorithms_for(s, d, dnn.handle(), stream.device().index);
  BRIGADE_CHECK(workspace_bytes >= a.workspace_bytes && (a.workspace_bytes == 0 || workspace),
                op << " (cuDNN): workspace of " << workspace_bytes << " bytes at " << workspace
                   << ", this shape needs " << a.workspace_bytes
                   << " (conv2d_workspace_bytes)");
  return a;
}

// What a pass with an algorithm needs, in this order: the descriptors of the shape in the math
// mode (read once, for both), a cuDNN handle of the stream's device bound to the stream (held
// for the pass), and the algorithms.
struct ConvPass {
  ConvPass(const char* op, const Conv2dShape& shape, const Stream& stream, const void* workspace,
           size_t workspace_bytes)
      : s{shape, math_mode()},
        d(descriptors(s)),
        dnn(stream),
        a(prepare(op, s, d, dnn, stream, workspace, workspace_bytes)),
        device(stream.device().index) {}

  const ConvProblem s;
  const ConvDescriptors& d;
  const CudnnLease dnn;
  ConvAlgorithms& a;
  const int device;
};

constexpr float kOne = 1.0f, kZero = 0.0f;  // cuDNN's alpha/beta scalars, in host memory

bool fused_declined(const ConvAlgorithms& a) {
  std::lock_guard<std::mutex> lock(algorithms_mutex);
  return a.fused_declined;
}

void decline_fused(ConvAlgorithms& a, const Conv2dShape& s, int device) {
  std::lock_guard<std::mutex> lock(algorithms_mutex);
  if (a.fused_declined) return;
  a.fused_declined = true;
  std::fprintf(stderr, "%s: cuDNN refused the fused convolution + bias + ReLU for every "
               "algorithm; three calls instead\n", describe(s, device).c_str());
}

}  // namespace

size_t conv2d_workspace_bytes(const Conv2dShape& shape, const Stream& stream) {
  const ConvProblem s{shape, math_mode()};
  const ConvDescriptors& d = descriptors(s);
  const CudnnLease dnn(stream);
  return algorithms_for(s, d, dnn.handle(), stream.device().index).workspace_bytes;
}

void conv2d_forward(const float* x, const float* w, const float* b, float* y,
                    const Conv2dShape& s, void* workspace, size_t workspace_bytes,
                    const Stream& stream, bool relu) {
  const ConvPass pass("conv2d_forward", s, stream, workspace, workspace_bytes);
  const ConvDescriptors& d = pass.d;
  const cudnnHandle_t dnn = pass.dnn.handle();
  // With a bias and a ReLU: one call, y = relu(1 · (x ⋆ w) + 0 · z + bias), z = y unread (its
  // factor is 0). ReLU runs with any forward algorithm (only the identity activation is tied
  // to IMPLICIT_PRECOMP_GEMM), but cuDNN may still refuse the fused call for a shape: then
  // the three calls below, for good, said once.
  if (b && relu && !fused_declined(pass.a)) {
    if (run_pass("conv2d_forward", "fused forward", pass.a.fused, workspace_bytes, s, pass.device,
                 [&](const Candidate<cudnnConvolutionFwdAlgo_t>& pick) {
                   return cudnnConvolutionBiasActivationForward(
                       dnn, &kOne, d.x, x, d.w, w, d.conv_for(pick.math), pick.algo, workspace,
                       workspace_bytes, &kZero, d.y, y, d.bias, b, d.relu, d.y, y);
                 },
                 /*may_decline=*/true))
      return;
    decline_fused(pass.a, s, pass.device);
  }
  run_pass("conv2d_forward", "forward", pass.a.forward, workspace_bytes, s, pass.device,
           [&](const Candidate<cudnnConvolutionFwdAlgo_t>& pick) {
             return cudnnConvolutionForward(dnn, &kOne, d.x, x, d.w, w, d.conv_for(pick.math),
                                            pick.algo, workspace, workspace_bytes, &kZero, d.y,
                                            y);
           });
  if (b) BRIGADE_CUDNN_CHECK(cudnnAddTensor(dnn, &kOne, d.bias, b, &kOne, d.y, y));
  if (relu) BRIGADE_CUDNN_CHECK(cudnnActivationForward(dnn, d.relu, &kOne, d.y, y, &kZero, d.y, y));
}

void conv2d_backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                          void* workspace, size_t workspace_bytes, const Stream& stream) {
  const ConvPass pass("conv2d_backward_data", s, stream, workspace, workspace_bytes);
  const ConvDescriptors& d = pass.d;
  // beta = 0: dx is overwritten.
  run_pass("conv2d_backward_data", "backward-data", pass.a.backward_data, workspace_bytes, s,
           pass.device, [&](const Candidate<cudnnConvolutionBwdDataAlgo_t>& pick) {
             return cudnnConvolutionBackwardData(pass.dnn.handle(), &kOne, d.w, w, d.y, dy,
                                                 d.conv_for(pick.math), pick.algo, workspace,
                                                 workspace_bytes, &kZero, d.x, dx);
           });
}

void conv2d_backward_filter(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                            void* workspace, size_t workspace_bytes, const Stream& stream) {
  const ConvPass pass("conv2d_backward_filter", s, stream, workspace, workspace_bytes);
  const ConvDescriptors& d = pass.d;
  // beta = 1: dw += the batch's gradient (micro-batches accumulate in place).
  run_pass("conv2d_backward_filter", "backward-filter", pass.a.backward_filter, workspace_bytes,
           s, pass.device, [&](const Candidate<cudnnConvolutionBwdFilterAlgo_t>& pick) {
             return cudnnConvolutionBackwardFilter(pass.dnn.handle(), &kOne, d.x, x, d.y, dy,
                                                   d.conv_for(pick.math), pick.algo, workspace,
                                                   workspace_bytes, &kOne, d.w, dw);
           });
}

void conv2d_backward_bias(const float* dy, float* db, const Conv2dShape& s, const Stream& stream) {
  const ConvDescriptors& d = descriptors({s, math_mode()});  // a sum: no math mode in it
  const CudnnLease dnn(stream);
  BRIGADE_CUDNN_CHECK(cudnnConvolutionBackwardBias(dnn.handle(), &kOne, d.y, dy, &kOne, d.bias, db));
}

}  // namespace brigade::cuda::vendor
