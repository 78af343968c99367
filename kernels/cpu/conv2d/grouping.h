// How an im2col convolution cuts its batch, from the shape alone (chunks.h: never from the
// thread count), shared by the float path (conv2d.cpp) and the bf16 one (bf16.cpp). Groups of
// nb samples, each lowered into one col matrix (C·R·S, nb·P·Q): several samples per GEMM keep
// its N dimension wide where P·Q is small (the question's conv4 has P·Q = 9). Forward and
// backward-data hand the groups to whichever thread is free; backward-filter cuts the batch
// into up to 8 fixed chunks, each summed group by group into its own (K, CRS) partial, and
// adds the partials in chunk order. Internal to kernels/cpu/conv2d.
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine/thread_pool.h"
#include "kernels/cpu/chunks.h"
#include "kernels/shapes.h"

namespace brigade::cpu::conv2d_grouping {

// The GEMM's N: wide enough to run near full speed. On the question's conv3/conv4, 192..384
// measured alike (within noise) and 768 slower (the col buffer outgrows L2).
inline constexpr int64_t kTargetColumns = 256;
inline constexpr int64_t kMaxColFloats = 1 << 20;  // 4 MiB of float col per worker at most

struct Grouping {
  int64_t nb;      // samples per GEMM
  int64_t groups;  // ceil(N / nb)
  int64_t chunks;  // backward-filter's chunks of samples
};

inline Grouping group_samples(const Conv2dShape& s) {
  const int64_t PQ = s.P * s.Q, CRS = s.C * s.R * s.S;
  Grouping g{};
  g.nb = std::max<int64_t>(1, (kTargetColumns + PQ - 1) / PQ);
  // At least kChunks groups where the batch allows, so that handing them out as threads come
  // free evens out a thread that runs slower than the others.
  g.nb = std::min(g.nb, std::max<int64_t>(1, s.N / kChunks));
  g.nb = std::max<int64_t>(1, std::min(g.nb, kMaxColFloats / std::max<int64_t>(1, CRS * PQ)));
  g.groups = (s.N + g.nb - 1) / g.nb;
  // Backward-filter's chunks: up to kChunks, each at least kTargetColumns deep, so that its
  // own (K, CRS) partial, written and read back once, costs little beside its products (8
  // chunks of 16 samples of conv4 ran 5-10 % slower than 4 of 32).
  g.chunks = std::clamp<int64_t>(s.N * PQ / kTargetColumns, 1,
                                 std::max<int64_t>(1, std::min(kChunks, s.N)));
  return g;
}

// Runs body(worker, n0, nbk) for the groups [g·nb, (g+1)·nb) of the batch, handed out one at
// a time to whichever thread is free, `worker` numbering that thread (and its scratch). For
// work whose result per sample does not depend on who computes it (forward, backward-data).
template <class Body>
void for_each_group(const Conv2dShape& s, const Grouping& g, ThreadPool& pool, Body&& body) {
  for_each_chunk(pool, g.groups, [&](int64_t worker, int64_t group) {
    body(worker, group * g.nb, std::min(g.nb, s.N - group * g.nb));
  });
}

}  // namespace brigade::cpu::conv2d_grouping
