// A grid launched on a CPU stream: checked at the launch, run in stream order.
#include "kernels/emu/cpu_launch.h"

#include <utility>

#include "engine/error.h"
#include "engine/stream.h"
#include "engine/thread_pool.h"

namespace brigade::emu {

void enqueue_grid(const Stream& stream, LaunchConfig config, ThreadBody body) {
  BRIGADE_CHECK(stream.device().is_cpu(),
                "kernel " << config.kernel << ": an emulated launch needs a CPU stream, got "
                          << stream.str()
                          << " (a CUDA stream runs the nvcc-compiled kernel, brigade::cuda::...)");
  check_launch(config);  // reported at the launch, as cudaGetLastError() does after <<<>>>
  ThreadPool* pool = &stream.thread_pool();
  stream.enqueue([config = std::move(config), body = std::move(body), pool] {
    run_grid(config, body, pool);
  });
}

}  // namespace brigade::emu
