// What brigade-bench's tests (bench_test.cpp, bench_refusals_test.cpp) put before and after
// the program on a command line: the flags of its smallest measurement, and the GPU it may use.
#pragma once

#include <string>

namespace brigade::bench::test {

// The smallest measurement: one thread, one repetition of one step at batch 4, for the levels
// that read each size: every level asked for reads the flags given (or they are refused).
inline const std::string kQuickAny = " --quick --threads 1 --reps 1";
inline const std::string kQuickOps = kQuickAny + " --batch 4";                // ops, gemm
inline const std::string kQuickSteps = kQuickAny + " --steps 1 --batches 4";  // model, runtime
inline const std::string kQuick = kQuickSteps + " --batch 4";                 // both (the default)

// Before a command, the GPU it may use: one emulated GPU in the emulated build, whatever the
// environment says; elsewhere the machine's, if it has one.
#if defined(BRIGADE_CUDA_EMULATED)
inline const std::string kOneGpu = "BRIGADE_EMULATED_GPUS=1 ";
#else
inline const std::string kOneGpu;
#endif

}  // namespace brigade::bench::test
