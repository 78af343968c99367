// Kernels of different streams of one emulated GPU run at the same time, as on a GPU, whatever
// BRIGADE_EMULATED_GPU_THREADS says (tests/kernels/emu/cudart/meson.build runs this file with 1
// and with 3 threads per GPU). Each case is a rendezvous: a kernel waits, with a deadline, for
// a flag that a kernel of another stream sets, so it passes only if both run at once, and a
// GPU that ran one grid at a time fails it when the deadline passes (never hangs). The last case
// is the host side's concurrency: a cudaDeviceSynchronize waiting while another thread creates
// streams.
//
// The flags live in globals, which is what a `__device__` variable is to an emulated kernel:
// module memory, not an allocation, so the happens-before check (hb.h) does not see them, just
// as it cannot see a `__device__` variable a real program shares between two streams.
#include <doctest/doctest.h>

#include <cuda_emulation.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kernels/emu/emulated_gpu.h"
#include "tests/kernels/emu/cudart/cudart_support.h"
#include "tests/support/deadline.h"

using brigade::testing::Deadline;
using brigade::testing::device_floats;
using brigade::testing::stream_on;

namespace {

// How long a kernel waits for its partner before it gives up: a hang detector, not a timing
// assertion (a partner that runs at all sets the flag within microseconds).
constexpr auto kPartnerDeadline = std::chrono::seconds(20);

// Spins until `flag` is set or the deadline passes; says whether it was set.
bool wait_for_flag(const std::atomic<bool>& flag) {
  const auto until = std::chrono::steady_clock::now() + kPartnerDeadline;
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > until) return false;
  }
  return true;
}

// ---- two kernels that meet --------------------------------------------------------------
std::atomic<bool> left_arrived{false}, right_arrived{false};
std::atomic<bool> left_met{false}, right_met{false};

// Grids of several blocks, as real ones are (a one-block grid needs no thread but its
// stream's); block 0 does the meeting, the others only occupy the GPU's threads.
constexpr unsigned kBlocks = 8;

void meet_left() {
  if (brigade::emu::blockIdx.x != 0) return;
  left_arrived = true;
  left_met = wait_for_flag(right_arrived);
}
void meet_right() {
  if (brigade::emu::blockIdx.x != 0) return;
  right_arrived = true;
  right_met = wait_for_flag(left_arrived);
}

// ---- a producer and a consumer that nothing orders ----------------------------------------
// The consumer reads the value, then says so; the producer stores it only once the consumer
// has read (or its deadline passed). Run one grid at a time, the producer's store would land
// before a consumer that came second: the missing order would give the right answer and stay
// hidden. Run at once, the consumer reads what was there before the producer.
std::atomic<float> shared_value{0.0f};
std::atomic<bool> consumer_read{false};

void produce_after_consumer() {
  if (brigade::emu::blockIdx.x != 0) return;
  (void)wait_for_flag(consumer_read);
  shared_value = 7.0f;
}
void consume(float* out) {
  if (brigade::emu::blockIdx.x != 0) return;
  *out = shared_value.load();
  consumer_read = true;
}

template <class... Params, class... Args>
cudaError_t launch(cudaStream_t stream, const char* name, unsigned blocks,
                   void (*kernel)(Params...), Args... args) {
  return brigade::emu::launch_native(stream, name, brigade::emu::dim3(blocks),
                                     brigade::emu::dim3(1), 0, kernel, args...);
}

}  // namespace

TEST_CASE("kernels of two streams of one GPU run at the same time") {
  Deadline deadline("two streams' kernels meeting");
  cudaStream_t left = stream_on(0), right = stream_on(0);
  REQUIRE(launch(left, "meet_left", kBlocks, meet_left) == cudaSuccess);
  REQUIRE(launch(right, "meet_right", kBlocks, meet_right) == cudaSuccess);
  CHECK(cudaStreamSynchronize(left) == cudaSuccess);
  CHECK(cudaStreamSynchronize(right) == cudaSuccess);
  CHECK(left_met.load());
  CHECK(right_met.load());
  for (cudaStream_t s : {left, right}) CHECK(cudaStreamDestroy(s) == cudaSuccess);
}

TEST_CASE("a missing event wait between two streams reads the value from before the producer") {
  Deadline deadline("an unordered producer and consumer");
  float* result = device_floats(0, 1);
  cudaStream_t producer = stream_on(0), consumer = stream_on(0);
  REQUIRE(launch(producer, "produce_after_consumer", kBlocks, produce_after_consumer) == cudaSuccess);
  // The defect: no cudaEventRecord on `producer` and cudaStreamWaitEvent on `consumer` here.
  REQUIRE(launch(consumer, "consume", kBlocks, consume, result) == cudaSuccess);
  CHECK(cudaStreamSynchronize(consumer) == cudaSuccess);
  CHECK(cudaStreamSynchronize(producer) == cudaSuccess);
  float seen = -1.0f;
  REQUIRE(cudaMemcpy(&seen, result, sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(seen == 0.0f);                   // the consumer ran before the store: a wrong result
  CHECK(shared_value.load() == 7.0f);    // and the producer did store, afterwards
  for (cudaStream_t s : {producer, consumer}) CHECK(cudaStreamDestroy(s) == cudaSuccess);
  CHECK(cudaFree(result) == cudaSuccess);
}

namespace {
// Counts the blocks that ran; block 5 fails, as a kernel whose block faults.
std::atomic<int> blocks_run{0};
void fail_in_block_five(float* out) {
  if (brigade::emu::threadIdx.x == 0) ++blocks_run;
  if (brigade::emu::blockIdx.x == 5) throw std::runtime_error("block five gives up");
  out[brigade::emu::blockIdx.x] = 1.0f;
}
}  // namespace

TEST_CASE("a block that fails while the GPU's threads share its grid faults the GPU, once") {
  Deadline deadline("a failing block");
  float* out = device_floats(1, 64);  // cuda:1: the fault is sticky
  cudaStream_t stream = stream_on(1);
  REQUIRE(launch(stream, "fail_in_block_five", 64, fail_in_block_five, out) == cudaSuccess);
  CHECK(cudaStreamSynchronize(stream) == cudaErrorLaunchFailure);
  const std::string text = cudaGetErrorString(cudaGetLastError());
  INFO(text);
  CHECK(text.find("kernel fail_in_block_five") != std::string::npos);
  CHECK(text.find("block five gives up") != std::string::npos);
  // Blocks start in order and every block started runs to its end: 0 to 5 at least.
  CHECK(blocks_run.load() >= 6);
}

// cudaDeviceSynchronize waits for each stream of its GPU in turn, and waiting lets go of the
// emulation's lock: another host thread may create streams meanwhile, growing the GPU's list of
// streams under the wait (the engine's blocking copies make a stream per call). The drain must
// not walk that list across a wait (it did: AddressSanitizer reported the list's old storage
// read after its reallocation).
TEST_CASE("streams created while cudaDeviceSynchronize waits do not disturb its drain") {
  Deadline deadline("a device synchronize beside stream creations");
  cudaStream_t held_stream = stream_on(0);
  cudaStream_t next_stream = stream_on(0);  // after the held one: the drain reads on past it
  brigade::emu::gpu::StreamHold hold(held_stream);
  const uint64_t synchronizes = brigade::emu::gpu::api_counts().device_synchronize;
  std::vector<cudaStream_t> created;
  int creation_errors = 0;
  std::thread creator([&] {
    // The count grows under the lock the drain lets go of only once it waits: seen here, the
    // drain is waiting for the held stream.
    while (brigade::emu::gpu::api_counts().device_synchronize == synchronizes)
      std::this_thread::yield();
    cudaSetDevice(0);  // each of its calls checked below, on the test's thread
    for (int i = 0; i < 64; ++i) {  // enough to reallocate the list several times
      cudaStream_t s = nullptr;
      creation_errors += cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess;
      created.push_back(s);
    }
    hold.release();
  });
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  creator.join();
  CHECK(creation_errors == 0);
  for (cudaStream_t s : created) CHECK(cudaStreamDestroy(s) == cudaSuccess);
  for (cudaStream_t s : {held_stream, next_stream}) CHECK(cudaStreamDestroy(s) == cudaSuccess);
}
