// The happens-before check of the emulated CUDA runtime (kernels/emu/cudart/hb.h) through the
// CUDA API: each way CUDA orders two operations on one allocation is shown to order them, and
// each missing order is shown to stop the run with a text naming both operations, their
// streams and the allocation and its bytes. Emulated builds only, with 10 GPUs
// (tests/kernels/emu/cudart/meson.build):
// a race faults its GPU for the rest of the process (sticky, as every fault), so each case that
// makes one has a GPU of its own; the cases that must pass share cuda:0.
#include <doctest/doctest.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/emu/emulated_gpu.h"
#include "tests/kernels/emu/cudart/cudart_support.h"
#include "tests/support/deadline.h"

using brigade::testing::allocation_name;
using brigade::testing::Deadline;
using brigade::testing::device_floats;
using brigade::testing::stream_on;

namespace {

// The kernels, with the parameter types the check reads: `out` is written, `in` read.
void store_seven(float* out) { *out = 7.0f; }
void copy_first(const float* in, float* out) { *out = *in; }
void copy_first_through_mutable(float* in, float* out) { *out = *in; }  // reads, but may write

// Launches as BRIGADE_LAUNCH does on an emulated GPU: one block of one thread.
template <class... Params, class... Args>
cudaError_t launch(cudaStream_t stream, const char* name, void (*kernel)(Params...), Args... args) {
  return brigade::emu::launch_native(stream, name, brigade::emu::dim3(1), brigade::emu::dim3(1), 0,
                                     kernel, args...);
}

float value_at(const float* device) {
  float host = 0.0f;
  REQUIRE(cudaMemcpy(&host, device, sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}

// The text of the thread's last error, which it resets.
std::string last_error_text() { return cudaGetErrorString(cudaGetLastError()); }

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a consumer on another stream waits for the producer's event: no race") {
  Deadline deadline("event-ordered producer and consumer");
  float* value = device_floats(0, 1);
  float* result = device_floats(0, 1);
  cudaStream_t producer = stream_on(0), consumer = stream_on(0);
  cudaEvent_t produced = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&produced, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(launch(producer, "store_seven", store_seven, value) == cudaSuccess);
  REQUIRE(cudaEventRecord(produced, producer) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(consumer, produced, 0) == cudaSuccess);
  REQUIRE(launch(consumer, "copy_first", copy_first, value, result) == cudaSuccess);
  CHECK(cudaStreamSynchronize(consumer) == cudaSuccess);
  CHECK(value_at(result) == 7.0f);
  CHECK(cudaEventDestroy(produced) == cudaSuccess);
  for (cudaStream_t s : {producer, consumer}) CHECK(cudaStreamDestroy(s) == cudaSuccess);
  for (float* p : {value, result}) CHECK(cudaFree(p) == cudaSuccess);
}

TEST_CASE("the same program without cudaStreamWaitEvent stops, naming both kernels and the memory") {
  Deadline deadline("a missing cudaStreamWaitEvent");
  float* value = device_floats(1, 1);
  float* result = device_floats(1, 1);
  cudaStream_t producer = stream_on(1), consumer = stream_on(1);
  REQUIRE(launch(producer, "store_seven", store_seven, value) == cudaSuccess);
  // Nothing orders the consumer after the producer: on a GPU it may read before the store.
  // The launch succeeds, as a launch does; the fault surfaces at the next synchronising call.
  CHECK(launch(consumer, "copy_first", copy_first, value, result) == cudaSuccess);
  CHECK(cudaStreamSynchronize(consumer) == cudaErrorLaunchFailure);
  const std::string text = last_error_text();
  CHECK(contains(text, "a data race on " + allocation_name(1, value, sizeof(float))));
  CHECK(contains(text, "kernel copy_first on emulated cuda:1 non-blocking stream #"));
  CHECK(contains(text, "reads it while kernel store_seven on emulated cuda:1 non-blocking stream #"));
  CHECK(contains(text, "writes it, and nothing orders the two"));
  CHECK(contains(text, "[emulated GPU: "));  // NVIDIA's text first, as every emulated error
  // Sticky, as any fault: cuda:1 refuses everything after it.
  void* more = nullptr;
  CHECK(cudaMalloc(&more, 4) == cudaErrorLaunchFailure);
  (void)cudaGetLastError();
}

TEST_CASE("reads of one allocation on two streams need no order between them") {
  Deadline deadline("read-read");
  float* value = device_floats(0, 1);
  float* first_result = device_floats(0, 1);  // one allocation each: the check's unit
  float* second_result = device_floats(0, 1);
  cudaStream_t first = stream_on(0), second = stream_on(0);
  REQUIRE(launch(first, "store_seven", store_seven, value) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(first) == cudaSuccess);  // the host orders the store first
  REQUIRE(launch(first, "copy_first", copy_first, value, first_result) == cudaSuccess);
  REQUIRE(launch(second, "copy_first", copy_first, value, second_result) == cudaSuccess);
  CHECK(cudaStreamSynchronize(first) == cudaSuccess);
  CHECK(cudaStreamSynchronize(second) == cudaSuccess);
  CHECK(value_at(first_result) == 7.0f);
  CHECK(value_at(second_result) == 7.0f);
  for (cudaStream_t s : {first, second}) CHECK(cudaStreamDestroy(s) == cudaSuccess);
  for (float* p : {value, first_result, second_result}) CHECK(cudaFree(p) == cudaSuccess);
}

TEST_CASE("a kernel parameter that is not pointer-to-const is a write, even if it only reads") {
  Deadline deadline("non-const parameter");
  float* value = device_floats(4, 1);
  float* first_result = device_floats(4, 1);
  float* second_result = device_floats(4, 1);
  cudaStream_t first = stream_on(4), second = stream_on(4);
  REQUIRE(launch(first, "store_seven", store_seven, value) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(first) == cudaSuccess);
  REQUIRE(launch(first, "copy_first_through_mutable", copy_first_through_mutable, value,
                 first_result) == cudaSuccess);
  REQUIRE(launch(second, "copy_first_through_mutable", copy_first_through_mutable, value,
                 second_result) == cudaSuccess);
  CHECK(cudaStreamSynchronize(second) == cudaErrorLaunchFailure);
  const std::string text = last_error_text();
  CHECK(contains(text, "a data race on " + allocation_name(4, value, sizeof(float))));
  CHECK(contains(text, "kernel copy_first_through_mutable on emulated cuda:4 non-blocking stream #"));
}

TEST_CASE("the host's synchronisation orders the work it issues after it") {
  Deadline deadline("host synchronisation");
  float* value = device_floats(0, 1);
  cudaStream_t first = stream_on(0), second = stream_on(0);
  cudaEvent_t done = nullptr;
  REQUIRE(cudaEventCreate(&done) == cudaSuccess);
  // Write-write on two streams, each ordered by one kind of host synchronisation.
  REQUIRE(launch(first, "store_seven", store_seven, value) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(first) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(value, 0, sizeof(float), second) == cudaSuccess);
  REQUIRE(cudaEventRecord(done, second) == cudaSuccess);
  REQUIRE(cudaEventSynchronize(done) == cudaSuccess);
  REQUIRE(launch(first, "store_seven", store_seven, value) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaMemsetAsync(value, 0, sizeof(float), second) == cudaSuccess);
  CHECK(cudaStreamSynchronize(second) == cudaSuccess);
  CHECK(value_at(value) == 0.0f);
  CHECK(cudaEventDestroy(done) == cudaSuccess);
  for (cudaStream_t s : {first, second}) CHECK(cudaStreamDestroy(s) == cudaSuccess);
  CHECK(cudaFree(value) == cudaSuccess);
}

TEST_CASE("the legacy stream orders blocking streams before and after it") {
  Deadline deadline("legacy stream ordering");
  float* value = device_floats(0, 1);
  float* result = device_floats(0, 1);
  cudaStream_t before = stream_on(0, cudaStreamDefault), after = stream_on(0, cudaStreamDefault);
  REQUIRE(launch(before, "store_seven", store_seven, value) == cudaSuccess);
  // The legacy stream waits for the blocking stream's store; the next blocking stream's
  // write waits for the legacy stream's read.
  REQUIRE(launch(nullptr, "copy_first", copy_first, value, result) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(value, 0, sizeof(float), after) == cudaSuccess);
  CHECK(cudaStreamSynchronize(after) == cudaSuccess);
  CHECK(value_at(result) == 7.0f);
  CHECK(value_at(value) == 0.0f);
  for (cudaStream_t s : {before, after}) CHECK(cudaStreamDestroy(s) == cudaSuccess);
  for (float* p : {value, result}) CHECK(cudaFree(p) == cudaSuccess);
}

TEST_CASE("a copy on one stream racing a kernel's store on another stops the run") {
  Deadline deadline("copy against kernel");
  float* value = device_floats(2, 1);
  float* copy = device_floats(2, 1);
  cudaStream_t kernels = stream_on(2), copies = stream_on(2);
  REQUIRE(launch(kernels, "store_seven", store_seven, value) == cudaSuccess);
  CHECK(cudaMemcpyAsync(copy, value, sizeof(float), cudaMemcpyDeviceToDevice, copies) == cudaSuccess);
  CHECK(cudaStreamSynchronize(copies) == cudaErrorLaunchFailure);
  const std::string text = last_error_text();
  CHECK(contains(text, "a data race on " + allocation_name(2, value, sizeof(float))));
  CHECK(contains(text, "cudaMemcpyAsync (its source) on emulated cuda:2 non-blocking stream #"));
  CHECK(contains(text, "reads it while kernel store_seven on emulated cuda:2 non-blocking stream #"));
}

TEST_CASE("a non-blocking stream is not ordered after a pageable cudaMemcpy to the device") {
  Deadline deadline("pageable copy against a non-blocking stream");
  const std::vector<float> values(64, 3.5f);
  float* p = device_floats(3, 64);
  cudaStream_t fast = stream_on(3);
  REQUIRE(cudaMemcpy(p, values.data(), 64 * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
  // On a GPU it may read before the data lands (cudart_test shows the blocking stream in time).
  std::vector<float> early(64, 0.0f);
  CHECK(cudaMemcpyAsync(early.data(), p, 64 * sizeof(float), cudaMemcpyDeviceToHost, fast) ==
        cudaErrorLaunchFailure);
  const std::string text = last_error_text();
  CHECK(contains(text, "a data race on " + allocation_name(3, p, 64 * sizeof(float))));
  CHECK(contains(text, "cudaMemcpyAsync (its source) on emulated cuda:3 non-blocking stream #"));
  CHECK(contains(text, "reads it while cudaMemcpy (its destination) on emulated cuda:3 legacy "
                       "stream writes it"));
}

TEST_CASE("an emulated cuBLAS call's output is a write: a copy racing it stops the run") {
  Deadline deadline("cuBLAS against a copy");
  float* a = device_floats(6, 4);
  float* c = device_floats(6, 4);
  float* copy = device_floats(6, 4);
  cudaStream_t math = stream_on(6), copies = stream_on(6);
  REQUIRE(cudaMemsetAsync(a, 0, 4 * sizeof(float), math) == cudaSuccess);
  cublasHandle_t blas = nullptr;
  REQUIRE(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasSetStream(blas, math) == CUBLAS_STATUS_SUCCESS);
  const float one = 1.0f, zero = 0.0f;
  REQUIRE(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a, 2, a, 2, &zero, c, 2) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(cudaMemcpyAsync(copy, c, 4 * sizeof(float), cudaMemcpyDeviceToDevice, copies) == cudaSuccess);
  CHECK(cudaStreamSynchronize(copies) == cudaErrorLaunchFailure);
  const std::string text = last_error_text();
  CHECK(contains(text, "a data race on " + allocation_name(6, c, 4 * sizeof(float))));
  CHECK(contains(text, "reads it while cublasSgemm (C) on emulated cuda:6 non-blocking stream #"));
}

TEST_CASE("an event orders streams of two devices") {
  Deadline deadline("cross-device event");
  float* on0 = device_floats(0, 1);
  cudaStream_t s0 = stream_on(0), s5 = stream_on(5);
  REQUIRE(cudaSetDevice(5) == cudaSuccess);
  REQUIRE(cudaDeviceEnablePeerAccess(0, 0) == cudaSuccess);
  cudaEvent_t stored = nullptr;
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&stored, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(launch(s0, "store_seven", store_seven, on0) == cudaSuccess);
  REQUIRE(cudaEventRecord(stored, s0) == cudaSuccess);
  REQUIRE(cudaSetDevice(5) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(s5, stored, 0) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(on0, 0, sizeof(float), s5) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s5) == cudaSuccess);
  CHECK(value_at(on0) == 0.0f);
  // The host's synchronisations order the two devices' writes as well as an event does.
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(launch(s0, "store_seven", store_seven, on0) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s0) == cudaSuccess);  // the host synchronised with s5 above
  REQUIRE(cudaSetDevice(5) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(on0, 0, sizeof(float), s5) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s5) == cudaSuccess);  // and with s0 since: still ordered
  CHECK(cudaEventDestroy(stored) == cudaSuccess);
}

// ---- by bytes: one allocation, several ranges --------------------------------------------

TEST_CASE("operations on different bytes of one allocation need no order between them") {
  Deadline deadline("disjoint ranges");
  float* value = device_floats(0, 4);  // [0, 1] written by one stream, [2, 3] by the other
  float* copy = device_floats(0, 2);
  cudaStream_t first = stream_on(0), second = stream_on(0);
  REQUIRE(cudaMemsetAsync(value, 0, 2 * sizeof(float), first) == cudaSuccess);
  REQUIRE(launch(second, "store_seven", store_seven, BRIGADE_EXTENT(value + 2, 1)) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(value + 3, 0, sizeof(float), second) == cudaSuccess);
  // A read of the first half on the second stream, while the first stream writes it again:
  // ordered by an event, so no race; the second half stays the second stream's.
  cudaEvent_t zeroed = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&zeroed, cudaEventDisableTiming) == cudaSuccess);
  REQUIRE(cudaEventRecord(zeroed, first) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(second, zeroed, 0) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(copy, value, 2 * sizeof(float), cudaMemcpyDeviceToDevice, second) ==
          cudaSuccess);
  CHECK(cudaStreamSynchronize(first) == cudaSuccess);
  CHECK(cudaStreamSynchronize(second) == cudaSuccess);
  std::vector<float> host(4, -1.0f);
  REQUIRE(cudaMemcpy(host.data(), value, 4 * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(host == std::vector<float>{0.0f, 0.0f, 7.0f, 0.0f});
  CHECK(value_at(copy) == 0.0f);
  CHECK(cudaEventDestroy(zeroed) == cudaSuccess);
  for (cudaStream_t s : {first, second}) CHECK(cudaStreamDestroy(s) == cudaSuccess);
  for (float* p : {value, copy}) CHECK(cudaFree(p) == cudaSuccess);
}

TEST_CASE("writes of overlapping bytes on two streams stop the run, naming the bytes they share") {
  Deadline deadline("overlapping ranges");
  float* value = device_floats(7, 4);
  cudaStream_t first = stream_on(7), second = stream_on(7);
  REQUIRE(cudaMemsetAsync(value, 0, 2 * sizeof(float), first) == cudaSuccess);      // bytes 0-7
  CHECK(cudaMemsetAsync(value + 1, 0, 2 * sizeof(float), second) == cudaSuccess);  // bytes 4-11
  CHECK(cudaStreamSynchronize(second) == cudaErrorLaunchFailure);
  const std::string text = last_error_text();
  CHECK(contains(text, "a data race on " + allocation_name(7, value, 4 * sizeof(float)) +
                           ", its bytes 4 to 7: cudaMemsetAsync on emulated cuda:7 non-blocking "
                           "stream #"));
  CHECK(contains(text, "writes it while cudaMemsetAsync on emulated cuda:7 non-blocking stream #"));
}

TEST_CASE("a kernel argument without a declared extent is taken to touch its whole allocation") {
  Deadline deadline("undeclared extent");
  float* value = device_floats(8, 4);
  cudaStream_t first = stream_on(8), second = stream_on(8);
  // The kernel writes value[0] only, but nothing tells the check so: the memset of the last
  // two floats on another stream races with it, as it would with a kernel that wrote them.
  REQUIRE(cudaMemsetAsync(value + 2, 0, 2 * sizeof(float), first) == cudaSuccess);
  CHECK(launch(second, "store_seven", store_seven, value) == cudaSuccess);
  CHECK(cudaStreamSynchronize(second) == cudaErrorLaunchFailure);
  const std::string text = last_error_text();
  CHECK(contains(text, "a data race on " + allocation_name(8, value, 4 * sizeof(float)) +
                           ", its bytes 8 to 15: kernel store_seven on emulated cuda:8"));
}

// cudaFree waits for its device's work here (and on a GPU it usually does), but CUDA says only
// that it may: a consumer ordered after its producer by nothing but a cudaFree between them is
// a race, as without it.
TEST_CASE("a cudaFree between a producer and its consumer orders nothing") {
  Deadline deadline("cudaFree orders nothing");
  float* value = device_floats(9, 1);
  float* result = device_floats(9, 1);
  float* unrelated = device_floats(9, 1);
  cudaStream_t producer = stream_on(9), consumer = stream_on(9);
  REQUIRE(launch(producer, "store_seven", store_seven, value) == cudaSuccess);
  CHECK(cudaFree(unrelated) == cudaSuccess);
  CHECK(launch(consumer, "copy_first", copy_first, value, result) == cudaSuccess);
  CHECK(cudaStreamSynchronize(consumer) == cudaErrorLaunchFailure);
  const std::string text = last_error_text();
  CHECK(contains(text, "a data race on " + allocation_name(9, value, sizeof(float))));
  CHECK(contains(text, "writes it, and nothing orders the two"));
}
