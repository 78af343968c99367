// The staging area (tools/train/staging.h) against the host Batcher, computed the other way:
// the floats a step reads are Batcher::fill's, bit for bit, on a CPU device (written in place)
// and on a GPU (the batch sent as its bytes and decoded there by ops::decode_pixels), across
// several micro-batches, an epoch's short last batch and the next epoch's first; and a GPU is
// sent one byte per pixel, never a float's four (bytes_copied), which the step's memory
// estimate counts. The decode op itself is checked for all 256 byte values against the
// division written out here.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/event.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/ops.h"
#include "layers/model/model_file.h"
#include "pipeline/runtime/plan.h"
#include "pipeline/runtime/step_memory.h"
#include "tests/support/deadline.h"
#include "tools/data/batches.h"
#include "tools/data/dataset.h"
#include "tools/train/staging.h"

namespace brigade {
namespace {

// The host's float32 values of a tensor, as their bits.
std::vector<uint32_t> staging_test_bits(const Tensor& t) {
  const std::vector<float> values = t.to_vector();
  std::vector<uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

// Stages two epochs of 70 samples in batches of 32 (32, 32 and a short 6) cut into 3
// micro-batches, images onto `first` and labels onto `last`, and compares every slot with the
// Batcher's own fill. Returns the bytes the area copied to GPUs.
int64_t staging_test_compare(const Device& first, const Device& last) {
  const data::Dataset set = data::make_synthetic(data::Split::train, 5, 70);
  const data::BatchOptions options{32, true, false, 9};
  data::Batcher staged_from(set, options), reference(set, options);
  train::StagingArea area(staged_from, {first, last, 3});
  const Stream reader = Stream::create(first);
  const int64_t sample = set.sample_size();
  int64_t expected_copied = 0;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    for (int64_t k = 0; k < reference.batches_per_epoch(); ++k) {
      area.stage(epoch, k);
      train::StagingArea::Slot& slot = area.take();
      const int64_t rows = reference.batch_rows(k);
      CAPTURE(epoch);
      CAPTURE(k);
      REQUIRE(slot.rows == rows);
      std::vector<float> images(static_cast<size_t>(rows * sample));
      std::vector<int32_t> labels(static_cast<size_t>(rows));
      reference.fill(epoch, k, images, labels);
      std::vector<uint32_t> want(images.size());
      std::memcpy(want.data(), images.data(), images.size() * sizeof(float));

      slot.staged.inputs_ready.synchronize();
      REQUIRE(slot.staged.inputs.size() == 3);
      std::vector<uint32_t> got;
      std::vector<int32_t> got_labels;
      for (size_t i = 0; i < slot.staged.inputs.size(); ++i) {
        const std::vector<uint32_t> part = staging_test_bits(slot.staged.inputs[i]);
        got.insert(got.end(), part.begin(), part.end());
        for (uint32_t word : staging_test_bits(slot.staged.labels[i]))
          got_labels.push_back(static_cast<int32_t>(word));
      }
      CHECK(got == want);
      CHECK(got_labels == labels);
      Event read;
      read.record(reader);
      area.release(slot, read);
      if (first.is_cuda()) expected_copied += rows * sample;  // a byte a pixel
      if (last.is_cuda()) expected_copied += rows * 4;        // int32 labels
    }
  }
  CHECK(area.bytes_copied() == expected_copied);
  return area.bytes_copied();
}

}  // namespace

TEST_CASE("staging: a CPU device's batch is the Batcher's floats, written in place") {
  testing::Deadline deadline("staging to cpu:0");
  CHECK(staging_test_compare(Device::cpu(0), Device::cpu(0)) == 0);
}

TEST_CASE("staging: a GPU's batch crosses as bytes and is the Batcher's floats bit for bit") {
  if (cuda_device_count() == 0) {
    MESSAGE("no GPU (real or emulated): skipped");
    return;
  }
  testing::Deadline deadline("staging to cuda:0");
  // Two epochs of 32 + 32 + 6 rows, each of 784 pixel bytes and a 4-byte label: as floats
  // the images alone would be four times 2 x 70 x 784 bytes.
  const int64_t copied = staging_test_compare(Device::cuda(0), Device::cuda(0));
  CHECK(copied == 2 * 70 * (784 + 4));
  // Labels left on the host: only the images' bytes cross. On two GPUs the labels go to the
  // other one, as a pipeline's last stage reads them.
  CHECK(staging_test_compare(Device::cuda(0), Device::cpu(0)) == 2 * 70 * 784);
  if (cuda_device_count() > 1)
    CHECK(staging_test_compare(Device::cuda(0), Device::cuda(1)) == 2 * 70 * (784 + 4));
}

// The preflight's memory check (pipeline/runtime/step_memory.h) counts what the staging area
// holds on a GPU: two slots of float images, and of their bytes, decoded there; labels.
TEST_CASE("staging: the step's memory estimate counts a GPU's staged bytes and floats") {
  if (cuda_device_count() == 0) {
    MESSAGE("no GPU (real or emulated): skipped");
    return;
  }
  const model::ModelSpec spec = model::parse_model("input 8\ndense units=3\n", "tiny.model");
  const pipeline::Plan plan = pipeline::make_plan(
      spec, {.devices = {Device::cuda(0)}, .schedule = "naive", .microbatches = 1});
  const std::vector<pipeline::DeviceLoad> loads = pipeline::step_loads(spec, plan, 8, 1, 1);
  REQUIRE(loads.size() == 1);
  // 2 slots x 8 rows x 8 pixels: floats (4 bytes) and bytes (1); 2 x 8 int32 labels.
  CHECK(loads[0].staged_bytes == 2 * 8 * 8 * (4 + 1) + 2 * 8 * 4);
}

TEST_CASE("decode_pixels: every byte value to b / 255 on a CPU device and a GPU") {
  std::vector<float> want(256);
  for (int b = 0; b < 256; ++b) want[static_cast<size_t>(b)] = static_cast<float>(b) / 255.0f;
  std::vector<Device> devices = {Device::cpu(0)};
  if (cuda_device_count() > 0) devices.push_back(Device::cuda(0));
  for (const Device& device : devices) {
    const std::string name = device.str();
    CAPTURE(name);
    testing::Deadline deadline("decode_pixels");
    const Stream cpu = Stream::create(Device::cpu(0)), stream = Stream::create(device);
    const Tensor host = Tensor::empty(Shape({2, 128}), cpu, DType::uint8);
    cpu.enqueue([host] {
      for (int b = 0; b < 256; ++b) host.data<uint8_t>()[b] = static_cast<uint8_t>(b);
    });
    cpu.synchronize();
    const Tensor bytes = Tensor::empty(Shape({2, 128}), stream, DType::uint8);
    copy_async(bytes, host, stream);
    const Tensor out = Tensor::empty(Shape({2, 128}), stream);
    ops::decode_pixels(bytes, out, stream);
    stream.synchronize();
    const std::vector<float> got = out.to_vector();
    CHECK(std::memcmp(got.data(), want.data(), 256 * sizeof(float)) == 0);
    // Only bytes go in, and only floats of the same shape come out.
    CHECK_THROWS_WITH(ops::decode_pixels(out, out, stream),
                      doctest::Contains("is not a uint8 tensor"));
    CHECK_THROWS_WITH(ops::decode_pixels(bytes, Tensor::empty(Shape({256}), stream), stream),
                      doctest::Contains("must have the same shape"));
  }
}

}  // namespace brigade
