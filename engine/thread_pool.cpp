#include "engine/thread_pool.h"

#include <algorithm>
#include <utility>

namespace brigade {

namespace {
// True on a thread that is currently inside a parallel_for body: nested loops run inline.
thread_local bool inside_parallel_loop = false;
}  // namespace

ThreadPool::ThreadPool(int threads) {
  const int helpers = std::max(threads, 1) - 1;
  ranges_.resize(static_cast<size_t>(helpers));
  for (int i = 0; i < helpers; ++i) helpers_.emplace_back([this, i] { helper_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : helpers_) t.join();
}

void ThreadPool::parallel_for(int64_t n, const RangeFn& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t parts = std::min<int64_t>(size(), (n + grain - 1) / grain);
  if (parts <= 1 || inside_parallel_loop) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> one_loop(loop_mutex_);
  // Range k of `parts` is [k*n/parts, (k+1)*n/parts): sizes differ by at most one.
  auto bounds = [&](int64_t k) { return std::pair<int64_t, int64_t>{k * n / parts, (k + 1) * n / parts}; };
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    for (size_t i = 0; i < ranges_.size(); ++i) {
      const auto k = static_cast<int64_t>(i) + 1;
      ranges_[i] = k < parts ? bounds(k) : std::pair<int64_t, int64_t>{0, 0};
    }
    pending_ = static_cast<int>(helpers_.size());
    ++generation_;
  }
  wake_.notify_all();

  const auto [begin, end] = bounds(0);
  run_range(fn, begin, end);

  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadPool::run_range(const RangeFn& fn, int64_t begin, int64_t end) {
  inside_parallel_loop = true;
  try {
    fn(begin, end);
  } catch (...) {
    // Keep the first error; every range still finishes before parallel_for rethrows it,
    // so no helper is left running a body whose caller has unwound.
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
  inside_parallel_loop = false;
}

void ThreadPool::helper_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    std::pair<int64_t, int64_t> range;
    const RangeFn* job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      range = ranges_[static_cast<size_t>(index)];
      job = job_;
    }
    if (range.first < range.second) run_range(*job, range.first, range.second);
    std::lock_guard<std::mutex> lock(mutex_);
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace brigade
