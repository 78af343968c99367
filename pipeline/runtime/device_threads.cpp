#include "pipeline/runtime/device_threads.h"

#include <utility>

namespace brigade::pipeline {

DeviceThreads::DeviceThreads(const std::vector<int>& devices) {
  threads_.reserve(devices.size());
  for (int d : devices) threads_.emplace_back([this, d] { serve(d); });
}

DeviceThreads::~DeviceThreads() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ending_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void DeviceThreads::run(const std::function<void(int)>& work) {
  std::unique_lock<std::mutex> lock(mutex_);
  work_ = &work;
  running_ = threads_.size();
  first_error_ = nullptr;
  ++run_number_;
  wake_.notify_all();
  done_.wait(lock, [this] { return running_ == 0; });
  work_ = nullptr;
  if (first_error_) std::rethrow_exception(std::exchange(first_error_, nullptr));
}

void DeviceThreads::serve(int device) {
  uint64_t done_runs = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return ending_ || run_number_ != done_runs; });
    if (ending_) return;
    done_runs = run_number_;
    const std::function<void(int)>& work = *work_;
    lock.unlock();
    std::exception_ptr error;
    try {
      work(device);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !first_error_) first_error_ = error;
    if (--running_ == 0) done_.notify_one();
  }
}

}  // namespace brigade::pipeline
