// Bounds over a kernel's whole access: a hand-written launcher declares, per pointer argument,
// how many elements its kernel touches (BRIGADE_EXTENT), and an emulated GPU's launch checks
// them against the allocation each pointer starts in (kernels/emu/cudart/launch.h). A kernel
// that would write one element past a tensor faults its GPU with a message naming the kernel,
// the argument, the allocation and the overrun; so does a tensor it reaches through a table
// (BRIGADE_INDIRECT). The engine's allocator tells the emulator how
// much of each block its tensor asked for (cuda_emulation.h's lend), so the same holds for a
// tensor in a rounded-up block of the allocator's cache, and for a block back in the cache.
// Emulated builds only, with 6 GPUs (meson.build): a fault is sticky, so each case that makes
// one has a GPU of its own.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/stream.h"
#include "kernels/cuda/launchers.h"
#include "tests/kernels/emu/cudart/cudart_support.h"
#include "tests/support/deadline.h"

using brigade::Allocator;
using brigade::Block;
using brigade::Device;
using brigade::Stream;
using brigade::testing::allocation_name;
using brigade::testing::Deadline;
using brigade::testing::device_floats;

namespace {

constexpr int64_t kElements = 1000;  // not a multiple of the block: the grid's tail is partial

// The message the stream's synchronisation throws, or "" when it does not throw.
std::string synchronize_error(const Stream& stream) {
  try {
    stream.synchronize();
  } catch (const brigade::Error& e) {
    return e.what();
  }
  return "";
}

void fill_on_host(float* device, int64_t n, float value) {
  const std::vector<float> host(static_cast<size_t>(n), value);
  REQUIRE(cudaMemcpy(device, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice) ==
          cudaSuccess);
  // A pageable copy lands late, on the legacy stream; the engine's streams are not ordered
  // with it, so the host waits for it to land.
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
}

// What a case launches with: x (filled with 3) and y on one GPU, and an engine stream there.
struct Arrays {
  Arrays(int device, int64_t x_elements, int64_t y_elements)
      : x(device_floats(device, x_elements)),
        y(device_floats(device, y_elements)),
        stream(Stream::create(Device::cuda(device))) {
    fill_on_host(x, x_elements, 3.0f);
  }
  float* x;
  float* y;
  Stream stream;
};

}  // namespace

TEST_CASE("a launch whose declared extents fit its allocations runs") {
  Deadline deadline("extents that fit");
  const Arrays a(0, kElements, kElements);
  brigade::cuda::copy(a.x, a.y, kElements, a.stream);  // every element, up to the last byte
  CHECK(synchronize_error(a.stream).empty());
  std::vector<float> back(kElements);
  REQUIRE(cudaMemcpy(back.data(), a.y, back.size() * sizeof(float), cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  CHECK(back.front() == 3.0f);
  CHECK(back.back() == 3.0f);
  for (float* p : {a.x, a.y}) CHECK(cudaFree(p) == cudaSuccess);
}

TEST_CASE("a kernel that would write one element past a tensor stops, naming all of it") {
  Deadline deadline("one element past a tensor");
  const Arrays a(1, kElements + 1, kElements);  // y: one element short of what the launch says
  brigade::cuda::copy(a.x, a.y, kElements + 1, a.stream);  // the launch returns, as one does
  const std::string text = synchronize_error(a.stream);
  INFO(text);
  CHECK(text.find("kernel copy_kernel on emulated cuda:1: argument 2 (y) is declared to touch "
                  "1001 elements of 4 bytes from byte 0 of " +
                  allocation_name(1, a.y, kElements * sizeof(float)) +
                  ", which runs 4 bytes (1 element) past its end") != std::string::npos);
  // The fault is sticky, as an illegal access is on a GPU: cuda:1 refuses every later call.
  CHECK(cudaSetDevice(1) == cudaSuccess);
  float first = -1.0f;
  CHECK(cudaMemcpy(&first, a.y, sizeof(float), cudaMemcpyDeviceToHost) == cudaErrorIllegalAddress);
  (void)cudaGetLastError();
}

TEST_CASE("an extent that starts inside an allocation is checked from where it starts") {
  Deadline deadline("an offset pointer");
  const Arrays a(2, kElements, kElements);
  // The last kElements - 1 elements of x are fine; kElements of them are not.
  brigade::cuda::relu_forward(a.x + 1, a.y, kElements, a.stream);
  const std::string text = synchronize_error(a.stream);
  INFO(text);
  CHECK(text.find("kernel relu_forward_kernel on emulated cuda:2: argument 1 (x) is declared to "
                  "touch 1000 elements of 4 bytes from byte 4 of " +
                  allocation_name(2, a.x, kElements * sizeof(float)) +
                  ", which runs 4 bytes (1 element) past its end") != std::string::npos);
}

// The allocator rounds 4,000 bytes up to a 4,096-byte block (its bins: engine/allocator.h), so
// the allocation alone would let a kernel run 96 bytes past the tensor unseen.
TEST_CASE("an extent past a tensor in a rounded-up block of the allocator stops at the tensor") {
  Deadline deadline("one element past a tensor in a cached block");
  const Device gpu = Device::cuda(3);
  const Stream stream = Stream::create(gpu);
  float* x = device_floats(3, kElements + 1);
  fill_on_host(x, kElements + 1, 3.0f);
  const uint64_t tensor_bytes = kElements * sizeof(float);
  const std::shared_ptr<Block> y = Allocator::of(gpu).allocate(tensor_bytes, stream);
  const uint64_t block_bytes = Allocator::block_size(tensor_bytes);
  brigade::cuda::copy(x, static_cast<float*>(y->data()), kElements + 1, stream);
  const std::string text = synchronize_error(stream);
  INFO(text);
  // The allocation as the emulator names it, with what the allocator lent of it.
  std::string memory = allocation_name(3, y->data(), block_bytes);
  memory.insert(memory.size() - 1, ", " + std::to_string(tensor_bytes) + " of them lent to a tensor");
  CHECK(text.find("kernel copy_kernel on emulated cuda:3: argument 2 (y) is declared to touch "
                  "1001 elements of 4 bytes from byte 0 of " + memory +
                  ", which runs 4 bytes (1 element) past the end of the tensor in it") !=
        std::string::npos);
}

// A launch on memory whose tensor is gone, as a kernel given a raw pointer kept after its
// tensor died would be: on a real GPU it reads the next tensor's data, or the poison.
TEST_CASE("a launch on a block given back to the allocator stops at the launch") {
  Deadline deadline("a launch on a freed block");
  const Device gpu = Device::cuda(4);
  const Stream stream = Stream::create(gpu);
  float* x = device_floats(4, kElements);
  fill_on_host(x, kElements, 3.0f);
  float* freed = nullptr;
  {
    const std::shared_ptr<Block> y = Allocator::of(gpu).allocate(kElements * sizeof(float), stream);
    freed = static_cast<float*>(y->data());
  }
  brigade::cuda::copy(x, freed, kElements, stream);
  const std::string text = synchronize_error(stream);
  INFO(text);
  // Back in the cache, or (BRIGADE_NO_MEMORY_CACHING=1) waiting for its poisoning to finish
  // before its cudaFree: either way the emulator knows none of it is lent.
  std::string memory = allocation_name(4, freed, Allocator::block_size(kElements * sizeof(float)));
  memory.insert(memory.size() - 1,
                ", none of them lent (back in the allocator's cache, or an empty tensor's block)");
  const bool named_freed_block =
      text.find("kernel copy_kernel on emulated cuda:4: argument 2 (y) is declared to touch "
                "1000 elements of 4 bytes from byte 0 of " + memory +
                ", which runs 4000 bytes (1000 elements) past the end of the tensor in it") !=
      std::string::npos;
  // Without the cache the block may also be gone already, given back with cudaFree.
  const bool named_unknown_memory =
      !Allocator::caching() &&
      text.find("kernel copy_kernel on emulated cuda:4: pointer argument 2 is not device or "
                "pinned memory") != std::string::npos;
  CHECK((named_freed_block || named_unknown_memory));
}

// A multi-tensor kernel finds its tensors in a table in device memory, not among its arguments:
// the launcher declares each (BRIGADE_INDIRECT, kernels/emu/emu.h), and a tensor of the table
// that runs past its allocation stops the launch as an argument's extent does.
TEST_CASE("a tensor a kernel reaches through its table is checked as an argument is") {
  Deadline deadline("a table's tensor past its end");
  const Arrays a(5, kElements, kElements - 1);  // y: one element short of what its slot says
  brigade::TensorSlot slot;
  slot.p = a.y;
  slot.n = kElements;
  brigade::TensorSlot* table = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&table), sizeof(slot)) == cudaSuccess);
  REQUIRE(cudaMemcpy(table, &slot, sizeof(slot), cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  brigade::cuda::fill_all(table, {slot}, 0.0f, a.stream);
  const std::string text = synchronize_error(a.stream);
  INFO(text);
  CHECK(text.find("kernel fill_all_kernel on emulated cuda:5: memory reached through its table "
                  "(t.p) is declared to touch 1000 elements of 4 bytes from byte 0 of " +
                  allocation_name(5, a.y, (kElements - 1) * sizeof(float)) +
                  ", which runs 4 bytes (1 element) past its end") != std::string::npos);
}
