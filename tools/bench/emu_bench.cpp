// bench_emu: what one emulated CUDA thread costs (kernels/emu), with and without barriers.
//
// Three kernels of 2^20 threads (4096 blocks of 256), run on the calling OS thread
// (run_grid without a pool, so the figure is one core's):
//
//   scale     y = 2·x                       no barrier: 2 switches per thread (in, out)
//   reduce    block sum in shared memory    9 __syncthreads(): 20 switches per thread
//   shuffle   warp sum by xor-shuffles      5 shuffles: 12 switches per thread
//
// Each prints the median CPU seconds per launch (the process's CPU time: on a shared machine
// it counts what the launch ran, not what it waited for a core), nanoseconds per thread, and
// nanoseconds per switch (seconds / (threads · switches per thread)), the emulator's unit of
// cost that kernels/emu/README.md's "Speed" budget quotes. Every launch's result is checked,
// so a fast wrong emulator does not pass for a fast one.
//
//   build/tools/bench_emu                          every kernel, 5 repetitions each
//   build/tools/bench_emu --reps 9 --kernels reduce
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "kernels/emu/emu.h"
#include "tools/bench/timing.h"
#include "tools/command_line.h"

namespace brigade::emu::bench_kernels {

constexpr int kBlock = 256;

__global__ void scale_kernel(const float* x /* (n) */, float* y /* (n) */) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  y[i] = 2.0f * x[i];
}

__global__ void reduce_kernel(const float* x /* (n) */, float* sums /* (blocks) */) {
  __shared__ float part[kBlock];
  const unsigned t = threadIdx.x;
  part[t] = x[static_cast<int64_t>(blockIdx.x) * blockDim.x + t];
  __syncthreads();
  for (unsigned half = kBlock / 2; half > 0; half /= 2) {  // 8 halvings, 8 barriers
    if (t < half) part[t] += part[t + half];
    __syncthreads();
  }
  if (t == 0) sums[blockIdx.x] = part[0];
}

__global__ void shuffle_kernel(const float* x /* (n) */, float* sums /* (n / 32) */) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float v = x[i];
  for (int mask = 16; mask > 0; mask /= 2) v += __shfl_xor_sync(0xffffffffu, v, mask);
  if (threadIdx.x % warpSize == 0) sums[i / warpSize] = v;
}

}  // namespace brigade::emu::bench_kernels

namespace {

using namespace brigade::emu;
using namespace brigade::emu::bench_kernels;

constexpr int64_t kThreads = int64_t{1} << 20;
constexpr unsigned kBlocks = kThreads / kBlock;

// CPU seconds per call of fn: one untimed call, then the median of `reps`.
template <class Fn>
brigade::bench::Timing cpu_time(Fn&& fn, int reps) {
  fn();
  std::vector<double> seconds;
  for (int r = 0; r < reps; ++r) {
    const double t0 = brigade::bench::process_cpu_s();
    fn();
    seconds.push_back(brigade::bench::process_cpu_s() - t0);
  }
  return brigade::bench::summarize(std::move(seconds));
}

void report(const char* name, int switches_per_thread, const brigade::bench::Timing& t) {
  const double per_thread_ns = t.median_s * 1e9 / kThreads;
  std::printf("%-8s %9d %15d %13.3f %11.1f %11.1f\n", name, static_cast<int>(kThreads),
              switches_per_thread, t.median_s, per_thread_ns, per_thread_ns / switches_per_thread);
}

bool check(const char* name, bool ok) {
  if (!ok) std::fprintf(stderr, "bench_emu: %s computed a wrong result\n", name);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  std::vector<std::string> kernels = {"scale", "reduce", "shuffle"};
  CLI::App app{"bench_emu: what one emulated CUDA thread costs, with and without barriers"};
  brigade::cli::show_defaults(app);
  app.add_option("--reps", reps, "launches per kernel (the median is reported)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--kernels", kernels, "which kernels to time")
      ->delimiter(',')
      ->check(CLI::IsMember({"scale", "reduce", "shuffle"}));
  if (const auto status = brigade::cli::parse_or_exit_status(app, argc, argv, "bench_emu"))
    return *status;
  const auto wanted = [&](const char* name) {
    return std::find(kernels.begin(), kernels.end(), name) != kernels.end();
  };

  std::vector<float> x(kThreads), y(kThreads), sums(kThreads / warpSize);
  for (int64_t i = 0; i < kThreads; ++i) x[i] = static_cast<float>(i % 7);  // exact sums

  std::printf("%-8s %9s %15s %13s %11s %11s\n", "kernel", "threads", "switches/thread",
              "cpu s/launch", "ns/thread", "ns/switch");
  const float* in = x.data();
  bool ok = true;

  if (wanted("scale")) {
    auto scale = [&] { run_kernel("scale_kernel", kBlocks, kBlock, 0, scale_kernel, in, y.data()); };
    report("scale", 2, cpu_time(scale, reps));
    bool doubled = true;
    for (int64_t i = 0; i < kThreads; ++i) doubled &= y[i] == 2.0f * x[i];
    ok &= check("scale", doubled);
  }

  // Sums of `group` consecutive x: small integers, exact in float whatever the order.
  auto sums_right = [&](const char* name, int64_t group) {
    bool right = true;
    for (int64_t g = 0; g < kThreads / group; ++g) {
      float expect = 0;
      for (int64_t i = g * group; i < (g + 1) * group; ++i) expect += x[i];
      right &= sums[g] == expect;
    }
    return check(name, right);
  };
  if (wanted("reduce")) {
    auto reduce = [&] {
      run_kernel("reduce_kernel", kBlocks, kBlock, 0, reduce_kernel, in, sums.data());
    };
    report("reduce", 2 + 2 * 9, cpu_time(reduce, reps));
    ok &= sums_right("reduce", kBlock);
  }
  if (wanted("shuffle")) {
    auto shuffle = [&] {
      run_kernel("shuffle_kernel", kBlocks, kBlock, 0, shuffle_kernel, in, sums.data());
    };
    report("shuffle", 2 + 2 * 5, cpu_time(shuffle, reps));
    ok &= sums_right("shuffle", warpSize);
  }
  return ok ? 0 : 1;
}
