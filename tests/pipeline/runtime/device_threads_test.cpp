// DeviceThreads (pipeline/runtime/device_threads.h): each device's part of a run on that
// device's own thread, the same thread in every run, all parts at once, and an exception of one
// part carried to the caller once every part has finished.
#include <doctest/doctest.h>

#include <atomic>
#include <latch>
#include <map>
#include <stdexcept>
#include <thread>

#include "engine/error.h"
#include "pipeline/runtime/device_threads.h"
#include "tests/support/deadline.h"

namespace brigade::pipeline {
namespace {

TEST_CASE("device threads: one per device, the same in every run, all running at once") {
  testing::Deadline deadline("device threads");  // a part that ran alone would wait forever
  DeviceThreads threads({0, 2, 5});
  std::map<int, std::thread::id> first_run, second_run;
  std::mutex mutex;
  for (auto* seen : {&first_run, &second_run}) {
    std::latch all_started(3);  // each part waits for the other two: only a parallel run ends
    threads.run([&](int d) {
      all_started.arrive_and_wait();
      std::lock_guard<std::mutex> lock(mutex);
      (*seen)[d] = std::this_thread::get_id();
    });
  }
  REQUIRE(first_run.size() == 3);
  CHECK(first_run.count(0) == 1);
  CHECK(first_run.count(2) == 1);
  CHECK(first_run.count(5) == 1);
  CHECK(first_run == second_run);  // the threads live across runs
  CHECK(first_run[0] != first_run[2]);
  CHECK(first_run[2] != first_run[5]);
  CHECK(first_run[0] != std::this_thread::get_id());
}

TEST_CASE("device threads: a part's exception reaches the caller after every part finished") {
  testing::Deadline deadline("device threads' exceptions");
  DeviceThreads threads({0, 1});
  std::atomic<int> finished{0};
  CHECK_THROWS_WITH_AS(threads.run([&](int d) {
                         if (d == 1) throw Error("device 1 failed");
                         finished.fetch_add(1);
                       }),
                       "device 1 failed", Error);
  CHECK(finished.load() == 1);  // device 0's part ran to its end before run() threw
  threads.run([&](int) { finished.fetch_add(1); });  // and the threads still serve
  CHECK(finished.load() == 3);
}

}  // namespace
}  // namespace brigade::pipeline
