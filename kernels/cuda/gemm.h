// The hand-written SGEMM (gemm_tiled.cu), the matrix product every Dense and Conv2D of
// kernels/cuda is built on. Same contract as brigade::cpu::sgemm, plus a stream:
//
//   C (M, N) = alpha · op(A) · op(B) + beta · C,   op(A): (M, K), op(B): (K, N), row-major;
//   op(X) = Xᵀ when trans_x. lda/ldb/ldc: the row pitch of A, B, C as stored. beta == 0 means
//   C is not read (it may hold garbage or NaN), as in BLAS.
//
// Two compilations of one source (kernels/emu/README.md): brigade::cuda (nvcc, CUDA streams)
// and brigade::emu (the emulator, CPU streams). Pointers are memory of the stream's device.
// Plain declarations: launchers.h includes this list into brigade::emu and brigade::cuda
// (include that header, not this file).

void gemm_tiled(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                float* C, int64_t ldc, const Stream& stream);
// The same kernel over a batch of products (gemm_args.h: one C per product, or all summed
// into one C) with the bias and ReLU fused into the store. One launch whatever the batch.
void gemm_tiled_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                        float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                        float beta, float* C, int64_t ldc, const GemmBatch& batch,
                        const GemmEpilogue& epilogue, const Stream& stream);
// Split-K's choice for a product of this shape (gemm_split_k.cuh derives it): how many
// blocks share each 128×128 tile of C, each reducing a contiguous range of the K slices, the
// partial sums then added in split order. 1: no split. From the shape alone, never the GPU, so
// every device gives the same bits for the same shape.
int64_t gemm_split_k(int64_t M, int64_t N, int64_t K, const GemmBatch& batch);
