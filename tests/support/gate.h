// Gate: hold a stream provably busy until the test says so.
//
//   Gate gate;
//   a.enqueue(gate.blocker());   // a's worker blocks here...
//   ...enqueue work elsewhere, check it has not run...
//   gate.open();                 // ...until now.
//
// This is how the tests order events without sleeping: the interleaving is forced, not
// made likely. gate.wait_entered() blocks until the blocker has started to run.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

namespace brigade::testing {

class Gate {
 public:
  // A task that blocks its stream until open(). Safe to run after the Gate is gone only
  // if open() was called first (the state is shared).
  std::function<void()> blocker() const {
    return [s = state_] {
      std::unique_lock<std::mutex> lock(s->mutex);
      s->entered = true;
      s->cv.notify_all();
      s->cv.wait(lock, [&] { return s->open; });
    };
  }
  void open() const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->open = true;
    state_->cv.notify_all();
  }
  void wait_entered() const {
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->cv.wait(lock, [&] { return state_->entered; });
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    bool open = false;
    bool entered = false;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace brigade::testing
