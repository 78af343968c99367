// The algorithms of a convolution shape, listed by cuDNN's heuristics and kept; the log lines
// that name them (cudnn_conv_algorithms.h says how they are chosen).
#include "kernels/cuda/cudnn_conv_algorithms.h"

#include <algorithm>
#include <array>
#include <map>
#include <utility>

namespace brigade::cuda::vendor::cudnn_conv {

std::mutex algorithms_mutex;

namespace {

// Whether an algorithm computing in `math` may run in math mode `mode`: FMA math always; a
// tensor-op math type (its inputs rounded through TF32) only in tf32. (Never
// CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: that one rounds FP32 through FP16.)
bool math_allowed(cudnnMathType_t math, MathMode mode) {
  if (math == CUDNN_FMA_MATH || math == CUDNN_DEFAULT_MATH) return true;
  return math == CUDNN_TENSOR_OP_MATH && mode == MathMode::tf32;
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
  BRIGADE_CHECK(!c.list.empty(), "conv2d (cuDNN): no deterministic " << math_mode_name(s.math)
                                     << " " << pass << " algorithm for input (" << s.N << ", "
                                     << s.C << ", " << s.H << ", " << s.W << "), " << s.K
                                     << " filters " << s.R << "x" << s.S);
  return c;
}

// The best-ranked algorithm of each pass, as the log line names them: in fp32
//   forward algorithm 1 (IMPLICIT_PRECOMP_GEMM), backward-data 1 (ALGO_1), backward-filter 1
//   (ALGO_1) (4096 bytes of workspace)
// and in tf32 the same with each one's math:
//   math tf32: forward algorithm 1 (IMPLICIT_PRECOMP_GEMM, tensor-op TF32), backward-data ...
std::string describe_choice(const ConvAlgorithms& a, MathMode mode) {
  const auto named = [&](const auto& c) {
    std::string text = std::to_string(static_cast<int>(c.list[0].algo)) + " (" +
                       algorithm_name(c.list[0].algo);
    if (mode == MathMode::tf32) text += std::string(", ") + math_name(c.list[0].math, mode);
    return text + ")";
  };
  return std::string(mode == MathMode::tf32 ? "math tf32: " : "") + "forward algorithm " +
         named(a.forward) + ", backward-data " + named(a.backward_data) + ", backward-filter " +
         named(a.backward_filter) + " (" + std::to_string(a.workspace_bytes) +
         " bytes of workspace)";
}

using Key = std::pair<int, ShapeKey>;  // (device, shape and mode)

}  // namespace

namespace {

// names[algo], or "unnamed" past the list.
template <size_t N, class Algo>
const char* name_in(const std::array<const char*, N>& names, Algo algo) {
  const auto index = static_cast<size_t>(algo);
  return index < N ? names[index] : "unnamed";
}

}  // namespace

// In cudnn.h's order (the enumerators' values are 0, 1, 2, ...).
const char* algorithm_name(cudnnConvolutionFwdAlgo_t algo) {
  static constexpr std::array<const char*, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> names = {
      "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
      "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  return name_in(names, algo);
}

const char* algorithm_name(cudnnConvolutionBwdDataAlgo_t algo) {
  static constexpr std::array<const char*, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> names = {
      "ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  return name_in(names, algo);
}

const char* algorithm_name(cudnnConvolutionBwdFilterAlgo_t algo) {
  static constexpr std::array<const char*, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> names = {
      "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  return name_in(names, algo);
}

const char* math_name(cudnnMathType_t math, MathMode mode) {
  if (mode == MathMode::fp32) return "FMA";
  return math == CUDNN_TENSOR_OP_MATH ? "tensor-op TF32"
         : math == CUDNN_DEFAULT_MATH ? "default math, TF32 allowed"
                                      : "FMA";
}

std::string describe(const Conv2dShape& s, int device) {
  std::ostringstream os;
  os << "cuDNN conv2d input (" << s.N << ", " << s.C << ", " << s.H << ", " << s.W << "), " << s.K
     << " filters " << s.R << "x" << s.S << ", stride " << s.stride << " on cuda:" << device;
  return os.str();
}

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
  std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>
      bwd_filter{};
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
  std::fprintf(stderr, "%s: %s\n", describe(s, device).c_str(),
               describe_choice(a, s.math).c_str());
  return cache->emplace(key, std::move(a)).first->second;
}

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

}  // namespace brigade::cuda::vendor::cudnn_conv
