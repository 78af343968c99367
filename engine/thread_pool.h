// ThreadPool: the worker threads of one virtual CPU device.
//
// A CPU device owns a fixed set of threads; its kernels split their loops over them with
// parallel_for. Two devices of two threads each therefore use four threads in all, never
// more: this is how virtual devices share the machine's cores without oversubscribing them.
//
// parallel_for(n, fn) cuts [0, n) into at most size() contiguous ranges and calls
// fn(begin, end) once per range; the calling thread runs the first range itself and returns
// when every range is done. Calls from different threads (two streams of one device) are
// serialised: a device runs one parallel loop at a time, like an SM array runs one grid at a
// time when grids fill it. Nested calls from inside fn run inline, serially. If fn throws
// in any range, every range still completes and the first exception is rethrown.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace brigade {

class ThreadPool {
 public:
  using RangeFn = std::function<void(int64_t begin, int64_t end)>;

  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(helpers_.size()) + 1; }

  // Runs fn over [0, n) in up to size() ranges of at least `grain` items each.
  void parallel_for(int64_t n, const RangeFn& fn, int64_t grain = 1);

 private:
  void helper_loop(int index);
  void run_range(const RangeFn& fn, int64_t begin, int64_t end);

  std::vector<std::thread> helpers_;   // size() - 1 threads; the caller is the last worker
  std::mutex loop_mutex_;              // one parallel loop at a time
  std::mutex mutex_;                   // guards everything below
  std::condition_variable wake_;       // helpers wait here for a new generation
  std::condition_variable done_;       // the caller waits here for helpers to finish
  uint64_t generation_ = 0;            // bumped once per parallel_for
  const RangeFn* job_ = nullptr;       // the current loop body
  std::vector<std::pair<int64_t, int64_t>> ranges_;  // ranges_[i]: helper i's share
  int pending_ = 0;                    // helpers still running the current generation
  bool stopping_ = false;
  std::exception_ptr error_;           // the first exception thrown by a range
};

}  // namespace brigade
