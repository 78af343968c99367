// The hand-written bf16 GEMM on tensor cores (gemm_mma.cu): precision bf16's matrix product
// (kernels/precision.h) on the hand-written CUDA path. gemm_tiled's contract (gemm.h), with A
// and B in bfloat16 storage (cpu::bf16, what ops::narrow_to_bf16 writes) and C in float:
//
//   C (M, N) = alpha · op(A) · op(B) + beta · C,   op(A): (M, K), op(B): (K, N), row-major;
//
// products exact, sums in float; a batch of products (one C each, or summed) and the bias and
// ReLU fused into the store (gemm_args.h), split-K for a C of few tiles over a deep K
// (gemm_split_k.cuh). Two compilations of one source
// (kernels/emu/README.md): brigade::cuda and brigade::emu.
// Plain declarations: launchers.h includes this list into brigade::emu and brigade::cuda
// (include that header, not this file).

void gemm_mma_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                   const cpu::bf16* A, int64_t lda, const cpu::bf16* B, int64_t ldb, float beta,
                   float* C, int64_t ldc, const GemmBatch& batch, const GemmEpilogue& epilogue,
                   const Stream& stream);
// Split-K's choice for a product of this shape (gemm_split_k.cuh): how many blocks share each
// 64×64 tile of C, each reducing a contiguous range of the 32-deep K slices. 1: no split.
int64_t gemm_mma_split_k(int64_t M, int64_t N, int64_t K, const GemmBatch& batch);
// One m16n8k16 instruction by one warp (mma_bf16.cuh), its fragment layout made observable:
// each lane loads its fragments of a (16, 16) and b (16, 8), both row-major bf16, and c
// (16, 8) float by the PTX layout, runs the instruction and writes its four results to
// lanes[lane][0..3] (32, 4), unscattered. A test checks each lane against the layout.
void mma_bf16_one_warp(const cpu::bf16* a, const cpu::bf16* b, const float* c, float* lanes,
                       const Stream& stream);
