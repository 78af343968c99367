// See winograd.h; the per-band transforms are in winograd_tiles.h. Layouts, for
// a group of nb samples holding T = nb · tiles tiles (tile t = sample · tiles + tile row · tw
// + tile column):
//   U  (16, K, C)   the transformed filters (forward, backward-data), shared by the threads
//   V  (16, C, T)   the transformed input patches of the group
//   M  (16, K, T)   the 16 products (forward), or the gradient flowing into them (filter)
//   dU (16, K, C)   one chunk's sum of the filter gradient in the transformed domain
// so that every transform runs along a row of tiles with unit stride.
#include "kernels/cpu/conv2d/winograd.h"

#include <algorithm>

#include "kernels/cpu/chunks.h"
#include "kernels/cpu/conv2d/winograd_tiles.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/gemm.h"

namespace brigade::cpu::winograd {
namespace {

constexpr int64_t kXi = 16;  // positions ξ of a 4x4 transformed tile

// Tiles per group, at least: several of a small image's samples per SGEMM, but few enough
// that V and M stay in L2. On the question's conv2d_3 (25 tiles a sample), groups of ~64
// tiles ran its three passes ~12 % faster than ~128, and ~512 slower still; conv2d_2 (144
// tiles a sample) takes one sample per group at any of these.
constexpr int64_t kTargetTiles = 64;
// Backward-filter cuts the batch into kChunks chunks (fewer with fewer samples) whatever the
// thread count: each chunk sums into its own dU, chunks go to whichever thread is free, and
// their sums are added in chunk order (chunks.h). The forward's groups are cut from the shape
// alone too: at least kChunks of them where the batch allows.

struct Geometry {
  int64_t th, tw;   // tile rows, tile columns of one sample's output
  int64_t tiles;    // th · tw
  int64_t nb;       // samples per group
  int64_t T;        // tiles per group: nb · tiles, the SGEMMs' N (and leading dimension)
  int64_t workers;  // threads taking part (chunks.h)
  int64_t chunks;   // backward-filter's chunks (0 for the forward)
  int64_t u;        // floats of U (the forward's, shared)
  int64_t v, m;     // floats of one worker's V and M
  int64_t du;       // floats of one chunk's dU
  int64_t worker_floats() const { return v + m; }  // one worker's V and M
  int64_t total() const { return u + workers * worker_floats() + chunks * du; }
};

// The forward's geometry, or backward-filter's. Group sizes do not depend on the thread
// count (the SGEMMs' shapes, hence their sums, must not); only the number of workers does.
Geometry geometry(const Conv2dShape& s, const ThreadPool& pool, bool for_filter = false) {
  Geometry g{};
  g.th = (s.P + 1) / 2;
  g.tw = (s.Q + 1) / 2;
  g.tiles = g.th * g.tw;
  g.nb = std::clamp<int64_t>((kTargetTiles + g.tiles - 1) / g.tiles, 1, s.N);
  if (!for_filter) g.nb = std::min(g.nb, std::max<int64_t>(1, s.N / kChunks));
  g.T = g.nb * g.tiles;
  g.chunks = for_filter ? std::min(kChunks, s.N) : 0;
  g.workers = chunk_workers(pool, for_filter ? g.chunks : (s.N + g.nb - 1) / g.nb);
  g.u = for_filter ? 0 : kXi * s.K * s.C;
  g.v = kXi * s.C * g.T;
  g.m = kXi * s.K * g.T;
  g.du = kXi * s.K * s.C;
  return g;
}

// One worker's buffers inside the workspace.
struct WorkerBuffers {
  float *V, *M;
};
WorkerBuffers buffers_of(float* workspace, const Geometry& g, int64_t worker) {
  float* base = workspace + g.u + worker * g.worker_floats();
  return {base, base + g.v};
}

// Chunk ch's dU inside the workspace, after the workers' buffers.
float* chunk_sum(float* workspace, const Geometry& g, int64_t ch) {
  return workspace + g.u + g.workers * g.worker_floats() + ch * g.du;
}

// U[ξ][k][c] = (G g Gᵀ)[ξ] for every filter g (3x3); turned 180° with K and C swapped when
// `for_data`: then U is (16, C, K) and g = w[k][c] read backwards.
//   G = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1]
void transform_filters(const float* w, float* U, int64_t K, int64_t C, bool for_data,
                       ThreadPool& pool) {
  const int64_t KC = K * C;
  pool.parallel_for(KC, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t k = i / C, c = i % C;
      const float* src = w + i * 9;
      float g[3][3];
      for (int r = 0; r < 3; ++r)
        for (int t = 0; t < 3; ++t)
          g[r][t] = for_data ? src[(2 - r) * 3 + (2 - t)] : src[r * 3 + t];
      float Gg[4][3];  // G g
      for (int t = 0; t < 3; ++t) {
        Gg[0][t] = g[0][t];
        Gg[1][t] = 0.5f * (g[0][t] + g[1][t] + g[2][t]);
        Gg[2][t] = 0.5f * (g[0][t] - g[1][t] + g[2][t]);
        Gg[3][t] = g[2][t];
      }
      const int64_t at = for_data ? c * K + k : k * C + c;  // U[ξ][out][in]
      for (int a = 0; a < 4; ++a) {  // (G g) Gᵀ
        const float u[4] = {Gg[a][0], 0.5f * (Gg[a][0] + Gg[a][1] + Gg[a][2]),
                            0.5f * (Gg[a][0] - Gg[a][1] + Gg[a][2]), Gg[a][2]};
        for (int b = 0; b < 4; ++b) U[(a * 4 + b) * KC + at] = u[b];
      }
    }
  }, 64);
}

// dw[k][c] += Gᵀ dU[k][c] G for every filter, dU (16, K, C).
//   Gᵀ = [1 ½ ½ 0; 0 ½ -½ 0; 0 ½ ½ 1]
void untransform_filter_gradient(const float* dU, float* dw, int64_t K, int64_t C,
                                 ThreadPool& pool) {
  const int64_t KC = K * C;
  pool.parallel_for(KC, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float u[4][4];
      for (int xi = 0; xi < 16; ++xi) u[xi / 4][xi % 4] = dU[xi * KC + i];
      float Gu[3][4];  // Gᵀ dU
      for (int b = 0; b < 4; ++b) {
        Gu[0][b] = u[0][b] + 0.5f * (u[1][b] + u[2][b]);
        Gu[1][b] = 0.5f * (u[1][b] - u[2][b]);
        Gu[2][b] = 0.5f * (u[1][b] + u[2][b]) + u[3][b];
      }
      float* out = dw + i * 9;
      for (int r = 0; r < 3; ++r) {  // (Gᵀ dU) G
        out[r * 3 + 0] += Gu[r][0] + 0.5f * (Gu[r][1] + Gu[r][2]);
        out[r * 3 + 1] += 0.5f * (Gu[r][1] - Gu[r][2]);
        out[r * 3 + 2] += 0.5f * (Gu[r][1] + Gu[r][2]) + Gu[r][3];
      }
    }
  }, 64);
}

// V (16, C, T) of samples [n0, n0 + nbk) of x (N, C, H, W), s a forward shape.
void transform_inputs(const float* x, const WorkerBuffers& buf, int64_t n0, int64_t nbk,
                      const Conv2dShape& s, const Geometry& g, bool avx512) {
  const int64_t HW = s.H * s.W;
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t j = 0; j < nbk; ++j) {
      const float* xc = x + ((n0 + j) * s.C + c) * HW;
      for (int64_t ti = 0; ti < g.th; ++ti) {
        InputRows in{{}, s.W, s.pad_w};
        for (int64_t a = 0; a < 4; ++a) {  // input row h, or padding
          const int64_t h = 2 * ti - s.pad_h + a;
          in.rows[a] = h >= 0 && h < s.H ? xc + h * s.W : nullptr;
        }
        input_band(in, buf.V + c * g.T + j * g.tiles + ti * g.tw, s.C * g.T, g.tw, avx512);
      }
    }
}

// y[n0 ..] (N, K, P, Q) from M: Aᵀ M A + bias, then the ReLU or relu_x's mask.
void transform_outputs(const WorkerBuffers& buf, float* y, const float* bias, bool relu,
                       const float* relu_x, int64_t n0, int64_t nbk, const Conv2dShape& s,
                       const Geometry& g, bool avx512) {
  const int64_t PQ = s.P * s.Q;
  for (int64_t k = 0; k < s.K; ++k)
    for (int64_t j = 0; j < nbk; ++j)
      for (int64_t ti = 0; ti < g.th; ++ti) {
        const int64_t at = ((n0 + j) * s.K + k) * PQ + 2 * ti * s.Q;  // output row 2·ti
        const OutputRows out{y + at, std::min<int64_t>(2, s.P - 2 * ti), s.Q,
                             bias ? bias[k] : 0.0f, relu, relu_x ? relu_x + at : nullptr};
        output_band(buf.M + k * g.T + j * g.tiles + ti * g.tw, s.K * g.T, g.tw, out, avx512);
      }
}

// M (16, K, T) = A dY Aᵀ for the tiles of dy's samples [n0, n0 + nbk), dy (N, K, P, Q).
void transform_gradients(const float* dy, const WorkerBuffers& buf, int64_t n0, int64_t nbk,
                         const Conv2dShape& s, const Geometry& g, bool avx512) {
  const int64_t PQ = s.P * s.Q;
  for (int64_t k = 0; k < s.K; ++k)
    for (int64_t j = 0; j < nbk; ++j)
      for (int64_t ti = 0; ti < g.th; ++ti)
        gradient_band(dy + ((n0 + j) * s.K + k) * PQ + 2 * ti * s.Q,
                      std::min<int64_t>(2, s.P - 2 * ti), s.Q,
                      buf.M + k * g.T + j * g.tiles + ti * g.tw, s.K * g.T, g.tw, avx512);
}

// The forward algorithm on a forward-form shape s, with U already at workspace[0, u).
void run_forward(const float* x, const float* bias, float* y, const Conv2dShape& s,
                 ThreadPool& pool, float* workspace, bool relu, const float* relu_x) {
  const Geometry g = geometry(s, pool);
  const float* U = workspace;
  const bool avx512 = kernel_isa() == Isa::avx512;
  const int64_t groups = (s.N + g.nb - 1) / g.nb;
  // Groups go to whichever thread is free; nothing is summed across groups, so who computes
  // one does not change its bits.
  for_each_chunk(pool, groups, [&](int64_t worker, int64_t grp) {
    const WorkerBuffers buf = buffers_of(workspace, g, worker);
    const int64_t n0 = grp * g.nb, nbk = std::min(g.nb, s.N - n0);
    transform_inputs(x, buf, n0, nbk, s, g, avx512);
    for (int64_t xi = 0; xi < kXi; ++xi)  // M[ξ] (K, T) = U[ξ] (K, C) · V[ξ] (C, T)
      sgemm(false, false, s.K, nbk * g.tiles, s.C, 1.0f, U + xi * s.K * s.C, s.C,
            buf.V + xi * s.C * g.T, g.T, 0.0f, buf.M + xi * s.K * g.T, g.T);
    transform_outputs(buf, y, bias, relu, relu_x, n0, nbk, s, g, avx512);
  });
}

}  // namespace

bool applies(const Conv2dShape& s) {
  if (s.R != 3 || s.S != 3 || s.stride != 1 || s.C < 4 || s.K < 4) return false;
  const int64_t cells = 4 * ((s.P + 1) / 2) * ((s.Q + 1) / 2);
  return 4 * s.P * s.Q >= 3 * cells;
}

Conv2dShape data_shape(const Conv2dShape& s) {
  Conv2dShape d{};
  d.N = s.N;
  d.C = s.K;
  d.H = s.P;
  d.W = s.Q;
  d.K = s.C;
  d.R = s.R;
  d.S = s.S;
  d.stride = 1;
  d.pad_h = s.R - 1 - s.pad_h;
  d.pad_w = s.S - 1 - s.pad_w;
  d.P = s.H;
  d.Q = s.W;
  return d;
}

int64_t workspace_floats(const Conv2dShape& s, const ThreadPool& pool) {
  int64_t floats = 0;
  if (applies(s))
    floats = std::max(geometry(s, pool).total(), geometry(s, pool, /*for_filter=*/true).total());
  if (s.stride == 1 && applies(data_shape(s)))
    floats = std::max(floats, geometry(data_shape(s), pool).total());
  return floats;
}

void forward(const float* x, const float* w, const float* b, float* y, const Conv2dShape& s,
             ThreadPool& pool, float* workspace, bool relu) {
  transform_filters(w, workspace, s.K, s.C, /*for_data=*/false, pool);
  run_forward(x, b, y, s, pool, workspace, relu, nullptr);
}

void backward_data(const float* dy, const float* w, float* dx, const Conv2dShape& s,
                   ThreadPool& pool, float* workspace, const float* relu_x) {
  transform_filters(w, workspace, s.K, s.C, /*for_data=*/true, pool);
  run_forward(dy, nullptr, dx, data_shape(s), pool, workspace, false, relu_x);
}

void backward_filter(const float* x, const float* dy, float* dw, const Conv2dShape& s,
                     ThreadPool& pool, float* workspace) {
  const Geometry g = geometry(s, pool, /*for_filter=*/true);
  const bool avx512 = kernel_isa() == Isa::avx512;
  for_each_chunk(pool, g.chunks, [&](int64_t worker, int64_t ch) {
    // chunk ch: samples [ch·N/chunks, (ch+1)·N/chunks), group by group, into its dU
    const WorkerBuffers buf = buffers_of(workspace, g, worker);
    float* dU = chunk_sum(workspace, g, ch);
    std::fill(dU, dU + g.du, 0.0f);
    const int64_t end = chunk_begin(s.N, g.chunks, ch + 1);
    for (int64_t n0 = chunk_begin(s.N, g.chunks, ch); n0 < end; n0 += g.nb) {
      const int64_t nbk = std::min(g.nb, end - n0);
      transform_inputs(x, buf, n0, nbk, s, g, avx512);
      transform_gradients(dy, buf, n0, nbk, s, g, avx512);
      for (int64_t xi = 0; xi < kXi; ++xi)  // dU[ξ] (K, C) += dM[ξ] (K, T) · V[ξ]ᵀ (T, C)
        sgemm(false, true, s.K, s.C, nbk * g.tiles, 1.0f, buf.M + xi * s.K * g.T, g.T,
              buf.V + xi * s.C * g.T, g.T, 1.0f, dU + xi * s.K * s.C, s.C);
    }
  });
  float* total = chunk_sum(workspace, g, 0);  // + chunk 1 + chunk 2 ..., in that order
  add_in_chunk_order(total, chunk_sum(workspace, g, 1), g.du, g.chunks - 1, g.du, pool);
  untransform_filter_gradient(total, dw, s.K, s.C, pool);
}

}  // namespace brigade::cpu::winograd
