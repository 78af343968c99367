// The CPU backend of Stream and Event: a worker thread per stream draining a FIFO.
//
// Every item in the FIFO gets a position 1, 2, 3, ...; `completed` is the position of the
// last item that has run. An event record is just a marker item: its position, plus the
// steady-clock time read when the worker reaches it. So
//   query()        = completed >= position
//   synchronize()  = wait on the stream's `progress` condition until that holds
//   s.wait(record) = a wait item in s's FIFO: when s's worker reaches it, it blocks on the
//                    other stream's `progress` until the position has run. The thread that
//                    called wait() is never blocked: only s's later items are.
// A wait can never form a cycle: it captures a record that already exists, i.e. a position
// already enqueued, which cannot depend on work enqueued later.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/error.h"
#include "engine/stream.h"
#include "engine/stream_impl.h"

namespace brigade::detail {

namespace {

using Clock = std::chrono::steady_clock;

struct CpuRecord;

// How a stream failed: where the error began, and the event waits that passed it on to this
// stream. The message says the cause first: in a pipeline a failure travels through several
// streams before anyone synchronizes, and a message built by wrapping each hop around the
// last ("X: waited on event#7 whose work failed: Y: waited on ...") put the one line that
// matters after seven of plumbing.
struct Failure {
  std::string cause;               // "cpu:1 stream#3: task failed: <what>"
  std::vector<std::string> route;  // oldest first: "cpu:2 stream#5 on event#7", ...

  // "<cause> [passed on by the waits of cpu:2 stream#5 on event#7, cpu:0 stream#4 on event#9]"
  std::string message() const {
    std::string text = cause;
    for (size_t i = 0; i < route.size(); ++i)
      text += (i == 0 ? " [passed on by the waits of " : ", ") + route[i];
    return route.empty() ? text : text + "]";
  }
};

// The state shared by a stream's handle, its worker thread and its event records (a record
// may outlive the stream: it keeps this alive, not the worker).
struct CpuQueue {
  struct Item {
    enum class Kind { task, marker, wait } kind = Kind::task;
    uint64_t position = 0;
    std::function<void()> task;            // Kind::task
    std::shared_ptr<CpuRecord> marker;     // Kind::marker
    std::shared_ptr<EventRecord> wait_on;  // Kind::wait
  };

  std::string name;  // "cpu:1 stream#3"
  std::mutex mutex;
  std::condition_variable work;      // the worker waits here for items or for stop
  std::condition_variable progress;  // anyone waits here for `completed` to move
  std::deque<Item> items;
  uint64_t enqueued = 0;                // position of the last item enqueued
  std::atomic<uint64_t> completed{0};   // position of the last item run (written under mutex)
  bool stopping = false;

  // The sticky error: the first task failure, and its position (0 = none).
  std::exception_ptr error;
  Failure failure;
  uint64_t error_position = 0;

  // What the worker is doing, for describe(): the item being run (0 = idle).
  uint64_t running_position = 0;
  std::shared_ptr<EventRecord> blocked_on;

  // Blocks until `position` has run.
  void wait_for(uint64_t position) {
    std::unique_lock<std::mutex> lock(mutex);
    progress.wait(lock, [&] { return completed.load() >= position; });
  }
  // Blocks until `position` has run or `deadline` has passed; whether it has run.
  bool wait_until(uint64_t position, Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex);
    return progress.wait_until(lock, deadline, [&] { return completed.load() >= position; });
  }
  // True if the sticky error covers `position`: a task at or before it failed.
  bool failed_before(uint64_t position) {
    std::lock_guard<std::mutex> lock(mutex);
    return error_position != 0 && error_position <= position;
  }
  [[noreturn]] void throw_error() {
    std::lock_guard<std::mutex> lock(mutex);
    throw StreamError(failure.message(), error);
  }
};

struct CpuRecord final : EventRecord {
  CpuRecord(uint64_t event_id, Device device, uint64_t stream_id,
            std::shared_ptr<CpuQueue> queue, uint64_t position)
      : EventRecord(event_id, device, stream_id), queue(std::move(queue)), position(position) {}

  bool query() const override { return queue->completed.load() >= position; }

  void synchronize() const override {
    queue->wait_for(position);
    if (queue->failed_before(position)) queue->throw_error();
  }

  bool wait_until(Clock::time_point deadline) const override {
    return queue->wait_until(position, deadline);
  }

  double elapsed_ms_since(const EventRecord& start) const override {
    auto* s = dynamic_cast<const CpuRecord*>(&start);
    BRIGADE_CHECK(s, "elapsed_ms: records of different backends");
    // `when` was written by the worker before it published `completed`; the caller has
    // seen `completed` (query() is true), so reading it here is ordered after the write.
    return std::chrono::duration<double, std::milli>(when - s->when).count();
  }

  std::string where() const override {
    return queue->name + ", position " + std::to_string(position) + "; that stream is at " +
           std::to_string(queue->completed.load());
  }

  std::shared_ptr<CpuQueue> queue;
  uint64_t position;
  Clock::time_point when;  // written by the worker when it reaches the marker
};

// Runs one item; sets *error and *failure if it failed (a thrown task, a failed wait).
void run_item(CpuQueue& q, CpuQueue::Item& item, bool failed,
              std::exception_ptr* error, Failure* failure) {
  using Kind = CpuQueue::Item::Kind;
  switch (item.kind) {
    case Kind::marker:  // markers run even on a failed stream: waiters must not hang
      item.marker->when = Clock::now();
      return;
    case Kind::task:
      if (failed) return;  // skipped: the stream has failed
      try {
        item.task();
      } catch (...) {
        *error = std::current_exception();
        failure->cause = q.name + ": task failed: " + what_of(*error);
      }
      return;
    case Kind::wait:
      if (failed) return;
      if (auto* cpu = dynamic_cast<CpuRecord*>(item.wait_on.get())) {
        cpu->queue->wait_for(cpu->position);
        if (cpu->queue.get() != &q && cpu->queue->failed_before(cpu->position)) {
          std::lock_guard<std::mutex> lock(cpu->queue->mutex);
          *error = cpu->queue->error;
          *failure = cpu->queue->failure;
          failure->route.push_back(q.name + " on event#" + std::to_string(cpu->event_id));
        }
        return;
      }
      // A record of another backend (a CUDA event): this worker blocks on it.
      try {
        item.wait_on->synchronize();
      } catch (...) {
        *error = std::current_exception();
        failure->cause = q.name + ": waiting on event#" + std::to_string(item.wait_on->event_id) +
                         " failed: " + what_of(*error);
      }
      return;
  }
}

// The queue whose items this thread runs (a worker's, for its whole life).
thread_local const CpuQueue* worker_of_this_thread = nullptr;

void worker_loop(const std::shared_ptr<CpuQueue>& queue) {
  CpuQueue& q = *queue;
  worker_of_this_thread = &q;
  for (;;) {
    CpuQueue::Item item;
    bool failed;
    {
      std::unique_lock<std::mutex> lock(q.mutex);
      q.work.wait(lock, [&] { return q.stopping || !q.items.empty(); });
      if (q.items.empty()) return;  // stopping, and everything has run
      item = std::move(q.items.front());
      q.items.pop_front();
      failed = q.error_position != 0;
      q.running_position = item.position;
      if (item.kind == CpuQueue::Item::Kind::wait) q.blocked_on = item.wait_on;
    }
    std::exception_ptr error;
    Failure failure;
    run_item(q, item, failed, &error, &failure);
    const uint64_t position = item.position;
    item = {};  // destroy the task's captures here, before the position counts as run
    {
      std::lock_guard<std::mutex> lock(q.mutex);
      if (error && q.error_position == 0) {
        q.error = error;
        q.failure = std::move(failure);
        q.error_position = position;
      }
      q.running_position = 0;
      q.blocked_on.reset();
      q.completed.store(position);
    }
    q.progress.notify_all();
  }
}

class CpuStream final : public StreamImpl {
 public:
  explicit CpuStream(Device device)
      : StreamImpl(device), queue_(std::make_shared<CpuQueue>()) {
    queue_->name = name();
    worker_ = std::thread([q = queue_] { worker_loop(q); });
    register_stream(this);
  }

  ~CpuStream() override {
    unregister_stream(this);
    {
      std::lock_guard<std::mutex> lock(queue_->mutex);
      queue_->stopping = true;
    }
    queue_->work.notify_one();
    // The last handle may be dropped by a task of this very stream: the worker then
    // finishes on its own (it holds the queue) instead of joining itself.
    if (worker_.get_id() == std::this_thread::get_id())
      worker_.detach();
    else
      worker_.join();
  }

  void enqueue(std::function<void()> task) override {
    CpuQueue::Item item;
    item.kind = CpuQueue::Item::Kind::task;
    item.task = std::move(task);
    push(std::move(item));
  }

  // Every CPU record is timed: reading the steady clock costs nothing worth sparing.
  std::shared_ptr<EventRecord> record(uint64_t event_id, bool /*timed*/) override {
    std::shared_ptr<CpuRecord> record;
    {
      std::lock_guard<std::mutex> lock(queue_->mutex);
      record = std::make_shared<CpuRecord>(event_id, device, id, queue_, queue_->enqueued + 1);
      CpuQueue::Item item;
      item.kind = CpuQueue::Item::Kind::marker;
      item.marker = record;
      push_locked(std::move(item));
    }
    queue_->work.notify_one();
    return record;
  }

  void wait(std::shared_ptr<EventRecord> record) override {
    CpuQueue::Item item;
    item.kind = CpuQueue::Item::Kind::wait;
    item.wait_on = std::move(record);
    push(std::move(item));
  }

  void synchronize() override {
    BRIGADE_CHECK(worker_.get_id() != std::this_thread::get_id(),
                  name() << ": synchronize() called from a task of the same stream would "
                            "wait for itself forever");
    uint64_t target;
    {
      std::lock_guard<std::mutex> lock(queue_->mutex);
      target = queue_->enqueued;
    }
    queue_->wait_for(target);
    if (queue_->failed_before(target)) queue_->throw_error();
  }

  bool query() override {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    return queue_->completed.load() >= queue_->enqueued;
  }

  std::string describe() override {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    CpuQueue& q = *queue_;
    std::string text = q.name + ": ";
    if (q.error_position != 0)
      text += "FAILED at position " + std::to_string(q.error_position) + " (" +
              q.failure.message() + "); ";
    if (q.blocked_on)
      text += "blocked on event#" + std::to_string(q.blocked_on->event_id) + " (" +
              q.blocked_on->where() + ")";
    else if (q.running_position != 0)
      text += "running position " + std::to_string(q.running_position);
    else
      text += "idle";
    text += "; done " + std::to_string(q.completed.load()) + " of " +
            std::to_string(q.enqueued) + " enqueued";
    return text;
  }

 private:
  void push(CpuQueue::Item item) {
    {
      std::lock_guard<std::mutex> lock(queue_->mutex);
      push_locked(std::move(item));
    }
    queue_->work.notify_one();
  }
  void push_locked(CpuQueue::Item item) {
    item.position = ++queue_->enqueued;
    queue_->items.push_back(std::move(item));
  }

  std::shared_ptr<CpuQueue> queue_;
  std::thread worker_;
};

}  // namespace

std::string stream_task_of_this_thread() {
  return worker_of_this_thread ? worker_of_this_thread->name : std::string();
}

std::shared_ptr<StreamImpl> make_cpu_stream(Device device) {
  return std::make_shared<CpuStream>(device);
}

}  // namespace brigade::detail
