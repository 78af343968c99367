// The lesson kernels: the textbook's first CUDA lessons, which exercise every feature of the
// emulator (kernels/emu/). Each .cu is compiled twice, so each launcher exists twice:
//
//   brigade::cuda::f   nvcc's compilation; needs a CUDA stream (BRIGADE_HAVE_CUDA builds)
//   brigade::emu::f    the emulator's; needs a CPU stream (every build)
//
// Pointers are device memory of the stream's device (host memory for a CPU stream). All
// launchers are asynchronous: the result is ready once the stream has run the work.
// Plain declarations: launchers.h includes this list into brigade::emu and brigade::cuda
// (include that header, not this file).

// Floats of scratch reduce_sum_shared needs for n inputs (the block sums).
int64_t reduce_sum_shared_workspace(int64_t n);
// out[0] = sum of x (n), by shared-memory tree reductions, pass after pass.
void reduce_sum_shared(const float* x, int64_t n, float* workspace, float* out,
                       const Stream& stream);
// out[0] = sum of x (n), by warp shuffles and one atomicAdd per block.
void reduce_sum_warp(const float* x, int64_t n, float* out, const Stream& stream);
// C (M, N) = A (M, K) · B (K, N), row-major, by 16×16 shared-memory tiles.
void matmul_tiled(const float* a, const float* b, float* c, int64_t m, int64_t n,
                  int64_t k, const Stream& stream);
