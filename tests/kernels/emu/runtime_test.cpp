// The emulator's execution model: indices, shared memory, barriers, shuffles, atomics and
// stream order. The kernels here are written against emu.h directly (they are tests of the
// emulator, never compiled by nvcc), inside brigade::emu like an emulated .cu's code.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/stream.h"
#include "kernels/emu/emu.h"
#include "tests/support/deadline.h"
#include "tests/support/gate.h"

using brigade::Device;
using brigade::Stream;
using brigade::testing::Deadline;
using brigade::testing::Gate;

namespace brigade::emu::test_kernels {

// visits[global thread id] += 1, and every thread checks the dimensions it sees.
__global__ void visit_kernel(int* visits, int* wrong_dims, dim3 grid, dim3 block) {
  if (gridDim.x != grid.x || gridDim.y != grid.y || gridDim.z != grid.z ||
      blockDim.x != block.x || blockDim.y != block.y || blockDim.z != block.z)
    atomicAdd(wrong_dims, 1);
  const unsigned block_id = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread_id = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  atomicAdd(&visits[block_id * blockDim.x * blockDim.y * blockDim.z + thread_id], 1);
}

// out = x reversed within each block, through static shared memory (block of 100 threads).
__global__ void reverse_static_kernel(const int* x, int* out) {
  __shared__ int tile[100];
  const unsigned t = threadIdx.x;
  const unsigned base = blockIdx.x * blockDim.x;
  tile[t] = x[base + t];
  __syncthreads();
  out[base + t] = tile[blockDim.x - 1 - t];
}

// The same through dynamic shared memory, any block size; also reports whether the
// memory it reads before any write is the emulator's NaN fill.
__global__ void reverse_dynamic_kernel(const float* x, float* out, int* saw_nan_fill) {
  BRIGADE_DYNAMIC_SHARED(float, tile);  // (blockDim.x)
  const unsigned t = threadIdx.x;
  if (t == 0 && std::isnan(tile[blockDim.x - 1])) atomicAdd(saw_nan_fill, 1);
  __syncthreads();  // the probe above reads before anyone writes
  const unsigned base = blockIdx.x * blockDim.x;
  tile[t] = x[base + t];
  __syncthreads();
  out[base + t] = tile[blockDim.x - 1 - t];
}

// Butterfly all-reduce: after xor-shuffles with 16, 8, 4, 2, 1 every lane holds the sum.
__global__ void butterfly_kernel(const int* x, int* out) {
  int v = x[threadIdx.x];
  for (int mask = 16; mask > 0; mask /= 2) v += __shfl_xor_sync(0xffffffffu, v, mask);
  out[threadIdx.x] = v;
}

// One shuffle of each kind, within segments of `width` lanes.
__global__ void shuffle_kinds_kernel(int* down, int* up, int* idx, int width) {
  const int v = 100 + static_cast<int>(threadIdx.x);
  down[threadIdx.x] = __shfl_down_sync(0xffffffffu, v, 3, width);
  up[threadIdx.x] = __shfl_up_sync(0xffffffffu, v, 2, width);
  idx[threadIdx.x] = __shfl_sync(0xffffffffu, v, 5, width);
}

__global__ void scale_kernel(float* x, int64_t n, float factor) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

// Atomics from every thread of every block; blocks run on several OS threads at once.
struct AtomicResults {
  unsigned count = 0;
  int largest = -1000000, smallest = 1000000;
  int claimed = 0;  // 0 until one thread's atomicCAS claims it
  int claims = 0;   // how many threads saw their CAS succeed
  float total = 0.0f;
  unsigned mixed_min_max = 0;  // sum over threads of max(min(t, 40u), 3): mixed int/unsigned
};
__global__ void atomics_kernel(AtomicResults* r) {
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(&r->count, 1);  // unsigned counter, int literal: converted as in CUDA
  const int value = (t * 37) % 101 - 50;
  atomicMax(&r->largest, value);
  atomicMin(&r->smallest, value);
  if (atomicCAS(&r->claimed, 0, t + 1) == 0) atomicAdd(&r->claims, 1);
  atomicAdd(&r->total, 0.5f);
  atomicAdd(&r->mixed_min_max, max(min(t, 40u), 3));
}

// The "last block" reduction of the CUDA Programming Guide's __threadfence example (what
// gemm_tiled's split-K does): each block writes its value, fences, takes a ticket; the block
// with the last ticket reads every block's value, sums them in block order and resets the
// ticket. Blocks run on several OS threads at once, so the value read is another thread's
// write, ordered only by the fences and the ticket (ThreadSanitizer checks that ordering).
__global__ void last_block_sum_kernel(float* values, unsigned* ticket, float* sum,
                                      unsigned* last_blocks) {
  __shared__ bool last;
  if (threadIdx.x == 0) values[blockIdx.x] = static_cast<float>(blockIdx.x) * 0.25f;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    __threadfence();
  }
  __syncthreads();
  if (!last) return;
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (unsigned b = 0; b < gridDim.x; ++b) total += values[b];
    *sum = total;
    atomicExch(ticket, 0u);  // atomic, as the other blocks' tickets are
    atomicAdd(last_blocks, 1u);
  }
}

}  // namespace brigade::emu::test_kernels

namespace tk = brigade::emu::test_kernels;
using Dim3 = brigade::emu::dim3;  // (not `dim3`: a CUDA build also has CUDA's ::dim3)

TEST_CASE("3-D grids and blocks: every (block, thread) runs exactly once") {
  Deadline deadline("emulated 3-D indexing");
  brigade::configure_cpu_device(5, {.threads = 3});
  Stream stream = Stream::create(Device::cpu(5));
  struct Case {
    Dim3 grid, block;
  };
  for (Case c : {Case{Dim3(3, 2, 2), Dim3(4, 3, 2)}, Case{Dim3(1, 1, 1), Dim3(1, 1, 1)},
                 Case{Dim3(2, 3, 1), Dim3(33, 1, 3)}, Case{Dim3(1, 1, 5), Dim3(1, 7, 1)}}) {
    const unsigned threads = c.grid.x * c.grid.y * c.grid.z * c.block.x * c.block.y * c.block.z;
    std::vector<int> visits(threads, 0);
    int wrong_dims = 0;
    BRIGADE_LAUNCH(tk::visit_kernel, c.grid, c.block, 0, stream, visits.data(), &wrong_dims,
                   c.grid, c.block);
    stream.synchronize();
    CHECK(wrong_dims == 0);
    for (unsigned i = 0; i < threads; ++i) CHECK_MESSAGE(visits[i] == 1, "global thread " << i);
  }
}

TEST_CASE("static __shared__ memory and __syncthreads exchange values within each block") {
  Deadline deadline("emulated static shared memory");
  const int blocks = 3, block = 100;  // 100: not a multiple of the warp size
  std::vector<int> x(blocks * block), out(blocks * block, -1);
  for (int i = 0; i < blocks * block; ++i) x[i] = i * 7 + 1;
  brigade::emu::run_kernel("reverse_static_kernel", blocks, block, 0, tk::reverse_static_kernel,
                           x.data(), out.data());
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < block; ++t) CHECK(out[b * block + t] == x[b * block + block - 1 - t]);
}

TEST_CASE("dynamic shared memory has the launch's size and starts as NaN") {
  Deadline deadline("emulated dynamic shared memory");
  for (unsigned block : {1u, 37u, 256u, 1024u}) {
    const unsigned blocks = 2;
    std::vector<float> x(blocks * block), out(blocks * block, -1.0f);
    for (unsigned i = 0; i < blocks * block; ++i) x[i] = static_cast<float>(i) * 0.5f;
    int saw_nan_fill = 0;
    brigade::emu::run_kernel("reverse_dynamic_kernel", blocks, block, block * sizeof(float),
                             tk::reverse_dynamic_kernel, x.data(), out.data(), &saw_nan_fill);
    CHECK(saw_nan_fill == static_cast<int>(blocks));
    for (unsigned i = 0; i < blocks * block; ++i) {
      const unsigned b = i / block, t = i % block;
      CHECK(out[i] == x[b * block + block - 1 - t]);
    }
  }
}

TEST_CASE("__shfl_xor_sync butterfly leaves the warp's sum in every lane, warp by warp") {
  Deadline deadline("emulated butterfly");
  const int threads = 96;  // three warps, each with its own sum
  std::vector<int> x(threads), out(threads, 0);
  for (int i = 0; i < threads; ++i) x[i] = i * i + 1;
  brigade::emu::run_kernel("butterfly_kernel", 1, threads, 0, tk::butterfly_kernel, x.data(),
                           out.data());
  for (int i = 0; i < threads; ++i) {
    int warp_sum = 0;
    for (int l = i / 32 * 32; l < i / 32 * 32 + 32; ++l) warp_sum += x[l];
    CHECK_MESSAGE(out[i] == warp_sum, "thread " << i);
  }
}

TEST_CASE("shuffles read the lane PTX names, and keep their own value past a segment's edge") {
  Deadline deadline("emulated shuffle kinds");
  for (int width : {32, 8}) {
    std::vector<int> down(32), up(32), idx(32);
    brigade::emu::run_kernel("shuffle_kinds_kernel", 1, 32, 0, tk::shuffle_kinds_kernel,
                             down.data(), up.data(), idx.data(), width);
    for (int lane = 0; lane < 32; ++lane) {
      const int segment = lane / width * width;  // first lane of this lane's segment
      const int d = lane + 3 < segment + width ? lane + 3 : lane;
      const int u = lane - 2 >= segment ? lane - 2 : lane;
      INFO("width " << width << ", lane " << lane);
      CHECK(down[lane] == 100 + d);
      CHECK(up[lane] == 100 + u);
      CHECK(idx[lane] == 100 + segment + 5);
    }
  }
}

TEST_CASE("atomics are atomic across blocks running on several OS threads") {
  Deadline deadline("emulated atomics");
  brigade::configure_cpu_device(6, {.threads = 3});
  Stream stream = Stream::create(Device::cpu(6));
  const int blocks = 8, block = 64, threads = blocks * block;
  tk::AtomicResults r;
  BRIGADE_LAUNCH(tk::atomics_kernel, blocks, block, 0, stream, &r);
  stream.synchronize();
  int largest = -1000000, smallest = 1000000;
  unsigned mixed = 0;
  for (int t = 0; t < threads; ++t) {
    const int value = (t * 37) % 101 - 50;
    largest = std::max(largest, value);
    smallest = std::min(smallest, value);
    mixed += static_cast<unsigned>(std::max(std::min(t, 40), 3));
  }
  CHECK(r.count == static_cast<unsigned>(threads));
  CHECK(r.largest == largest);
  CHECK(r.smallest == smallest);
  CHECK(r.claims == 1);
  CHECK(r.claimed >= 1);
  CHECK(r.total == 0.5f * threads);  // multiples of 0.5 below 2^24 add exactly
  CHECK(r.mixed_min_max == mixed);
}

TEST_CASE("__threadfence and a ticket: the last block reads every block's write") {
  Deadline deadline("emulated last-block reduction");
  brigade::configure_cpu_device(5, {.threads = 3});
  Stream stream = Stream::create(Device::cpu(5));
  const unsigned blocks = 40;
  std::vector<float> values(blocks, NAN);
  unsigned ticket = 0, last_blocks = 0;
  float sums[2] = {NAN, NAN};
  // Twice: the first launch's last block leaves the ticket at zero for the second.
  for (float& sum : sums)
    BRIGADE_LAUNCH(tk::last_block_sum_kernel, blocks, 32, 0, stream, values.data(), &ticket,
                   &sum, &last_blocks);
  stream.synchronize();
  CHECK(sums[0] == 0.25f * (blocks - 1) * blocks / 2);  // quarters below 2^24 add exactly
  CHECK(sums[1] == sums[0]);
  CHECK(ticket == 0);
  CHECK(last_blocks == 2);
}

TEST_CASE("a launch on a CPU stream runs in stream order, after earlier tasks, before later") {
  Deadline deadline("emulated launch in stream order");
  Stream stream = Stream::create(Device::cpu(0));
  const int64_t n = 1000;
  std::vector<float> x(n, 0.0f), snapshot;
  Gate gate;
  stream.enqueue(gate.blocker());
  stream.enqueue([&] {
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i);
  });
  BRIGADE_LAUNCH(tk::scale_kernel, (n + 127) / 128, 128, 0, stream, x.data(), n, 2.0f);
  stream.enqueue([&] { snapshot = x; });
  BRIGADE_LAUNCH(tk::scale_kernel, (n + 127) / 128, 128, 0, stream, x.data(), n, 3.0f);
  gate.wait_entered();
  CHECK(x[n - 1] == 0.0f);  // the stream is held at the gate: nothing ran, launch included
  gate.open();
  stream.synchronize();
  REQUIRE(snapshot.size() == static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    CHECK(snapshot[i] == 2.0f * static_cast<float>(i));
    CHECK(x[i] == 6.0f * static_cast<float>(i));
  }
}
