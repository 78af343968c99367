// Deadline: no test may hang CI. A test that could block puts one at its top:
//
//   TEST_CASE("...") {
//     brigade::testing::Deadline deadline("cross-stream wait");   // default: 120 s
//     ...
//   }
//
// A watchdog thread waits (on a condition variable, not a sleep) for the Deadline to be
// destroyed. If the time runs out first, it prints what the test was, then
// brigade::describe_streams() — what every live stream is running or blocked on — and
// aborts the process: a hang becomes a failure with a report instead of a stuck CI job.
// The limit is generous on purpose (sanitizer builds are slow): it is a hang detector, not
// a timing assertion.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "engine/stream.h"

namespace brigade::testing {

class Deadline {
 public:
  explicit Deadline(std::string what, std::chrono::seconds limit = std::chrono::seconds(120))
      : what_(std::move(what)) {
    watchdog_ = std::thread([this, limit] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (done_cv_.wait_for(lock, limit, [this] { return done_; })) return;
      std::fprintf(stderr,
                   "\nDEADLINE EXPIRED after %lld s in \"%s\": the test is hung.\n"
                   "Live streams:\n%s",
                   static_cast<long long>(limit.count()), what_.c_str(),
                   describe_streams().c_str());
      std::fflush(stderr);
      std::abort();
    });
  }

  ~Deadline() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_one();
    watchdog_.join();
  }

  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread watchdog_;
};

// Runs `body` under a Deadline.
template <class Body>
void with_deadline(const std::string& what, Body&& body,
                   std::chrono::seconds limit = std::chrono::seconds(120)) {
  Deadline deadline(what, limit);
  body();
}

}  // namespace brigade::testing
