// Inverted dropout (dropout.cu) with the mask of kernels/reference/dropout.h: element e of
// mini-batch sample i is kept iff dropout_keep(key, i, e, rate) — a pure function of (seed,
// step, layer, i, e), the same bits on the CPU and the GPU. Kept elements are scaled by
// 1 / (1 - rate). Results are bit-identical to brigade::ref::dropout_forward<float>.
// Two compilations: brigade::cuda (nvcc) and brigade::emu (the emulator).
// Plain declarations: launchers.h includes this list into brigade::emu and brigade::cuda
// (include that header, not this file).

// x, y: (batch, per_sample); row b is mini-batch sample sample_offset + b; y may alias
// x. Throws unless 0 <= rate < 1. `step_on_device`: null, or one word in device memory that
// the kernel reads key.step from instead (a CUDA graph replayed at every step reads the
// step's number there, written before the launch: pipeline/runtime/device_graphs.h).
// `round_bf16`: each y rounded to bf16 values as it is written (bf16_bits.cuh).
void dropout_forward(const float* x, float* y, int64_t batch, int64_t per_sample,
                     int64_t sample_offset, float rate, const DropoutKey& key,
                     const uint32_t* step_on_device, const Stream& stream,
                     bool round_bf16 = false);
// dy, dx: (batch, per_sample); the forward's mask, recomputed.
void dropout_backward(const float* dy, float* dx, int64_t batch, int64_t per_sample,
                      int64_t sample_offset, float rate, const DropoutKey& key,
                      const uint32_t* step_on_device, const Stream& stream,
                      bool round_bf16 = false);
