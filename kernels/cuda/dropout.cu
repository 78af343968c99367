// Inverted dropout with a counter-based mask (Philox4x32-10, engine/philox.h).
//
// There is no random state to carry: thread t computes the mask of ITS elements directly
// from (seed, step, layer, sample, element) by calling dropout_keep, the very function the
// reference calls (it is __host__ __device__). That is what makes the mask independent of
// the launch shape, of how the batch is cut into micro-batches, and of the device.
//
// Indexing: the (batch, per_sample) array is walked by a grid-stride loop over its
// batch·per_sample elements; element i is sample b = i / per_sample (mini-batch sample
// sample_offset + b) and element e = i % per_sample of it.
// (One Philox call gives the words of four consecutive elements; this readable version calls
// it once per element and uses one word — 4× the arithmetic, the same mask.)
#include <cstdint>

#include "kernels/emu/kernel.h"
#include "engine/error.h"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/bf16_bits.cuh"
#include "kernels/cuda/launch.cuh"

namespace brigade::BRIGADE_KERNEL_NAMESPACE {

__global__ void dropout_kernel(const float* x /* (batch, per_sample) */,
                               float* y /* (batch, per_sample) */, int64_t total,
                               int64_t per_sample, int64_t sample_offset, float rate,
                               float scale, DropoutKey key,
                               const uint32_t* step_on_device /* (1) or null */,
                               bool round_bf16) {
  if (step_on_device != nullptr) key.step = *step_on_device;
  for (int64_t i = grid_first(); i < total; i += grid_stride()) {
    const int64_t b = i / per_sample, e = i % per_sample;
    const bool keep = dropout_keep(key, static_cast<uint32_t>(sample_offset + b),
                                   static_cast<uint32_t>(e), rate);
    y[i] = keep ? bf16_value_if(round_bf16, x[i] * scale) : 0.0f;
  }
}

void dropout_forward(const float* x, float* y, int64_t batch, int64_t per_sample,
                     int64_t sample_offset, float rate, const DropoutKey& key,
                     const uint32_t* step_on_device, const Stream& stream, bool round_bf16) {
  BRIGADE_CHECK(batch >= 0 && per_sample >= 0 && sample_offset >= 0,
                "dropout: invalid sizes batch " << batch << ", per_sample " << per_sample
                                                << ", sample_offset " << sample_offset);
  check_dropout_args(rate, sample_offset + batch, per_sample);  // throws like the reference
  if (batch == 0 || per_sample == 0) return;  // nothing to launch
  // The scale exactly as the reference computes it in float: 1 / (1 - rate), on the host.
  const float scale = 1.0f / (1.0f - rate);
  const int64_t total = batch * per_sample;
  BRIGADE_LAUNCH(dropout_kernel, elementwise_blocks(total), kElementwiseBlock, 0, stream,
                 BRIGADE_EXTENT(x, total), BRIGADE_EXTENT(y, total), total, per_sample,
                 sample_offset, rate, scale, key,
                 BRIGADE_EXTENT(step_on_device, step_on_device != nullptr ? 1 : 0), round_bf16);
}

void dropout_backward(const float* dy, float* dx, int64_t batch, int64_t per_sample,
                      int64_t sample_offset, float rate, const DropoutKey& key,
                      const uint32_t* step_on_device, const Stream& stream, bool round_bf16) {
  dropout_forward(dy, dx, batch, per_sample, sample_offset, rate, key, step_on_device, stream,
                  round_bf16);  // the same mask
}

}  // namespace brigade::BRIGADE_KERNEL_NAMESPACE
