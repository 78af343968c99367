// Which cuDNN algorithm runs each pass of a convolution shape, and how a pass runs with it
// (run_pass): what cudnn_conv.cpp's passes call between the descriptors and cuDNN.
//
//   listing    cuDNN's heuristics (cudnnGet*Algorithm_v7: no trial runs, so listing is cheap
//              and allocates nothing), keeping those that are deterministic — a training run
//              is then reproducible — and of the mode's math: FMA only in fp32, tensor-op
//              (TF32) or FMA in tf32; listed once per (device, shape, mode) and kept. One line
//              on stderr per shape and mode names the best-ranked algorithms (in tf32, with
//              each one's math). The workspace is sized for each pass's best-ranked algorithm.
//   choosing   the first execution of a pass tries them best-ranked first until one runs
//              (cuDNN may refuse one only then); the one that ran is kept, and one more line
//              on stderr says so for each pass that had to fall back. The forward pass fused
//              with its bias and ReLU is chosen the same way over the forward candidates, and
//              given up for the shape (said once) where cuDNN refuses it for every one.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "engine/error.h"
#include "kernels/cuda/cudnn_conv_descriptors.h"
#include "kernels/math_mode.h"

namespace brigade::cuda::vendor::cudnn_conv {

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

// Guards the cache of algorithms_for and every Candidates::chosen and fused_declined in it.
extern std::mutex algorithms_mutex;

// The algorithms of s on `device`, listed by the heuristics at the first call (on `handle`, a
// handle of that device) and kept for the process.
ConvAlgorithms& algorithms_for(const ConvProblem& s, const ConvDescriptors& d,
                               cudnnHandle_t handle, int device);

// The math a pair runs in (ConvDescriptors::conv_for): cuDNN's default math allows TF32 on
// GPUs since the A100.
const char* math_name(cudnnMathType_t math, MathMode mode);

// cuDNN's name of an algorithm, its enumerator without the prefix ("IMPLICIT_PRECOMP_GEMM" for
// CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM), which the log prints beside its number: the
// number alone says nothing to a reader without cudnn.h at hand. "unnamed" for a number a
// later cuDNN may add.
const char* algorithm_name(cudnnConvolutionFwdAlgo_t algo);
const char* algorithm_name(cudnnConvolutionBwdDataAlgo_t algo);
const char* algorithm_name(cudnnConvolutionBwdFilterAlgo_t algo);

// "cuDNN conv2d input (N, C, H, W), K filters RxS, stride s on cuda:d": how the log names a
// shape.
std::string describe(const Conv2dShape& s, int device);

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
          std::fprintf(stderr, "%s: %s algorithm %d (%s, %s) runs instead%s%s\n",
                       describe(s, device).c_str(), pass, static_cast<int>(algo),
                       algorithm_name(algo), math_name(math, math_mode()),
                       refused.str().c_str(),
                       refused.tellp() == 0 ? " (the better ones need more workspace)" : ")");
      }
      return true;
    }
    const bool not_supported =
        status >= CUDNN_STATUS_NOT_SUPPORTED && status < CUDNN_STATUS_INTERNAL_ERROR;
    if (!not_supported) BRIGADE_CUDNN_CHECK(status);  // throws, naming the status
    refused << (refused.tellp() == 0 ? " (refused: " : ", ") << "algorithm "
            << static_cast<int>(algo) << " " << cudnnGetErrorString(status);
  }
  if (refused.tellp() != 0) refused << ")";
  if (may_decline) return false;
  BRIGADE_CHECK(false, op << " (cuDNN): no " << pass << " algorithm ran for input (" << s.N << ", "
                          << s.C << ", " << s.H << ", " << s.W << "), " << s.K << " filters "
                          << s.R << "x" << s.S << " with a workspace of " << workspace_bytes
                          << " bytes" << refused.str());
}

// Whether cuDNN has refused the fused forward for every algorithm of a (an earlier call's
// decline_fused): the forward runs as three calls then.
bool fused_declined(const ConvAlgorithms& a);
// Gives the fused forward up for a's shape, said once on stderr.
void decline_fused(ConvAlgorithms& a, const Conv2dShape& s, int device);

}  // namespace brigade::cuda::vendor::cudnn_conv
