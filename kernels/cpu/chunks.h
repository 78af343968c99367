// Fixed chunks, handed to whichever thread is free: how kernels/cpu splits a loop so that
// its result does not depend on the thread count.
//
// A kernel cuts its work into chunks from the shape alone, never from pool.size(), and
// for_each_chunk runs fn(worker, c) once for every chunk c, each on some thread of the device,
// the next chunk going to whichever thread comes free. `worker` (< chunk_workers(pool, chunks))
// numbers that thread, and so picks its scratch (im2col's col buffer); what is summed across
// chunks goes into one partial per chunk, added in chunk order afterwards (add_in_chunk_order).
// So the same inputs give the same bits on 1, 2 or 3 threads, and a thread the machine slows
// down takes fewer chunks instead of holding the others up.
//
// Shapes, not only sums: OpenBLAS picks its kernel by the (M, N, K) of each call (a direct
// kernel for small products, a K-blocked one for large), and with the kernel the order of
// its sums. A split that changed an SGEMM's shape with the thread count would change bits
// even where nothing is summed across calls.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "engine/thread_pool.h"

namespace brigade::cpu {

// Chunks per split, at most: enough that two or three threads even out (each takes several),
// few enough that the partial sums stay cheap to add.
inline constexpr int64_t kChunks = 8;

// Chunk c of `chunks` near-equal ranges of [0, n) begins here; it ends where c + 1 begins.
inline int64_t chunk_begin(int64_t n, int64_t chunks, int64_t c) { return c * n / chunks; }

// The chunks of a loop over n items, at least `grain` to a chunk, at most kChunks.
inline int64_t chunk_count(int64_t n, int64_t grain) {
  return std::clamp<int64_t>((n + grain - 1) / grain, 1, kChunks);
}

// Threads that take part in for_each_chunk (its workers), hence how many workers' scratch a
// caller provides.
inline int64_t chunk_workers(const ThreadPool& pool, int64_t chunks) {
  return std::clamp<int64_t>(chunks, 1, pool.size());
}

// fn(worker, c) for c in [0, chunks), chunks going to whichever thread (worker) is free.
template <class Fn>
void for_each_chunk(ThreadPool& pool, int64_t chunks, Fn&& fn) {
  std::atomic<int64_t> next{0};
  pool.parallel_for(chunk_workers(pool, chunks), [&](int64_t worker0, int64_t worker1) {
    for (int64_t worker = worker0; worker < worker1; ++worker)
      for (int64_t c = next++; c < chunks; c = next++) fn(worker, c);
  });
}

// fn(begin, end) for each of chunk_count(n, grain) fixed ranges of [0, n).
template <class Fn>
void for_each_range(ThreadPool& pool, int64_t n, int64_t grain, Fn&& fn) {
  const int64_t chunks = chunk_count(n, grain);
  for_each_chunk(pool, chunks, [&](int64_t, int64_t c) {
    fn(chunk_begin(n, chunks, c), chunk_begin(n, chunks, c + 1));
  });
}

// out[i] += part_0[i], then += part_1[i], ... for i < n, part_c at parts + c·stride: the
// chunks' partial sums in chunk order, split over the threads by element (no element's sum
// depends on the split).
inline void add_in_chunk_order(float* out, const float* parts, int64_t stride, int64_t chunks,
                               int64_t n, ThreadPool& pool) {
  pool.parallel_for(n, [&](int64_t i0, int64_t i1) {
    for (int64_t c = 0; c < chunks; ++c) {
      const float* part = parts + c * stride;
      for (int64_t i = i0; i < i1; ++i) out[i] += part[i];
    }
  }, 4096);
}

}  // namespace brigade::cpu
