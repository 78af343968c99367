// Bounds over a kernel's whole access: a hand-written launcher declares, per pointer argument,
// how many elements its kernel touches (BRIGADE_EXTENT), and an emulated GPU's launch checks
// them against the allocation each pointer starts in (kernels/emu/cudart/launch.h). A kernel
// that would write one element past a tensor faults its GPU with a message naming the kernel,
// the argument, the allocation and the overrun; so does a tensor it reaches through a table
// (BRIGADE_INDIRECT). Emulated builds only, with 4 GPUs
// (meson.build): a fault is sticky, so each case that makes one has a GPU of its own.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/stream.h"
#include "kernels/cuda/launchers.h"
#include "tests/kernels/emu/cudart/cudart_support.h"
#include "tests/support/deadline.h"

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

// A multi-tensor kernel finds its tensors in a table in device memory, not among its arguments:
// the launcher declares each (BRIGADE_INDIRECT, kernels/emu/emu.h), and a tensor of the table
// that runs past its allocation stops the launch as an argument's extent does.
TEST_CASE("a tensor a kernel reaches through its table is checked as an argument is") {
  Deadline deadline("a table's tensor past its end");
  const Arrays a(3, kElements, kElements - 1);  // y: one element short of what its slot says
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
  CHECK(text.find("kernel fill_all_kernel on emulated cuda:3: memory reached through its table "
                  "(t.p) is declared to touch 1000 elements of 4 bytes from byte 0 of " +
                  allocation_name(3, a.y, (kElements - 1) * sizeof(float)) +
                  ", which runs 4 bytes (1 element) past its end") != std::string::npos);
}
