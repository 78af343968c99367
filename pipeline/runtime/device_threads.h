// The host threads of a Runtime (runtime.h): one per device this process runs, started with
// the Runtime and living as long as it does, so that a step starts no thread. Each step wakes
// every thread to walk its device's list (executor.cpp, run_device) and waits until all are
// done; the destructor wakes them to end, and joins them.
//
//   DeviceThreads threads({0, 2});                      // devices 0 and 2 run here
//   threads.run([&](int d) { run_device(d, step); });   // returns when both have returned
//
// An exception thrown by the work on a thread is carried to run()'s caller: the first one,
// rethrown once every thread has finished its part (none is left running behind it).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace brigade::pipeline {

class DeviceThreads {
 public:
  explicit DeviceThreads(const std::vector<int>& devices);
  ~DeviceThreads();
  DeviceThreads(const DeviceThreads&) = delete;
  DeviceThreads& operator=(const DeviceThreads&) = delete;

  // Runs work(d) on the thread of each device d, in parallel; returns when all have returned.
  // One run at a time (the Runtime's steps are sequential).
  void run(const std::function<void(int)>& work);

 private:
  void serve(int device);  // a thread's loop: wait for a run, do its part, say so

  std::mutex mutex_;
  std::condition_variable wake_;  // a run started, or the end
  std::condition_variable done_;  // a thread finished its part of a run
  const std::function<void(int)>* work_ = nullptr;  // the current run's, while it lasts
  uint64_t run_number_ = 0;  // counts runs: a thread does each one once
  size_t running_ = 0;       // threads still in the current run
  bool ending_ = false;
  std::exception_ptr first_error_;
  std::vector<std::thread> threads_;  // last: started once everything above is ready
};

}  // namespace brigade::pipeline
