#include "engine/event.h"

#include <atomic>
#include <mutex>

#include "engine/error.h"
#include "engine/host_wait.h"
#include "engine/stream.h"
#include "engine/stream_impl.h"

namespace brigade {

namespace detail {
struct EventState {
  uint64_t id = 0;
  bool timed = false;
  mutable std::mutex mutex;
  std::shared_ptr<EventRecord> current;  // null until the first record()
};
}  // namespace detail

namespace {
std::atomic<uint64_t> next_event_id{1};

std::shared_ptr<detail::EventRecord> recorded_or_throw(const Event& event, const char* use) {
  auto record = event.current_record();
  BRIGADE_CHECK(record, event.str() << "." << use << "(): the event was never recorded "
                                    << "(record it on a stream before using it)");
  return record;
}
}  // namespace

Event::Event() : state_(std::make_shared<detail::EventState>()) {
  state_->id = next_event_id.fetch_add(1);
}

Event Event::timed() {
  Event e;
  e.state_->timed = true;
  return e;
}

void Event::record(const Stream& stream) {
  auto record = stream.impl()->record(state_->id, state_->timed);
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->current = std::move(record);
}

std::shared_ptr<detail::EventRecord> Event::current_record() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->current;
}

bool Event::recorded() const { return current_record() != nullptr; }
bool Event::query() const { return recorded_or_throw(*this, "query")->query(); }
void Event::synchronize() const {
  const auto record = recorded_or_throw(*this, "synchronize");
  if (const auto listener = detail::host_wait_listener())  // host_wait.h
    detail::wait_listening(*listener, [&] { return record->query(); },
                           [&] { return str() + " (" + record->where() + ")"; });
  record->synchronize();  // at once, if the polls ran; throws the work's error
}
bool Event::wait_until(std::chrono::steady_clock::time_point deadline) const {
  const auto record = recorded_or_throw(*this, "wait_until");
  if (const auto listener = detail::host_wait_listener())  // host_wait.h
    detail::wait_listening(
        *listener,
        [&] { return record->query() || std::chrono::steady_clock::now() >= deadline; },
        [&] { return str() + " (" + record->where() + ")"; });
  return record->wait_until(deadline);  // at once, if the polls ran
}
uint64_t Event::id() const { return state_->id; }
std::string Event::str() const { return "event#" + std::to_string(state_->id); }

float elapsed_ms(const Event& start, const Event& end) {
  for (const Event* e : {&start, &end})
    BRIGADE_CHECK(e->state_->timed, "elapsed_ms(" << start.str() << ", " << end.str() << "): "
                                                  << e->str()
                                                  << " was not made by Event::timed()");
  auto a = recorded_or_throw(start, "elapsed_ms");
  auto b = recorded_or_throw(end, "elapsed_ms");
  BRIGADE_CHECK(a->query() && b->query(),
                "elapsed_ms(" << start.str() << ", " << end.str()
                              << "): both events must have completed (synchronize them first)");
  BRIGADE_CHECK(a->device.kind == b->device.kind,
                "elapsed_ms(" << start.str() << ", " << end.str() << "): recorded on "
                              << a->device << " and " << b->device
                              << "; CPU and CUDA clocks cannot be compared");
  return static_cast<float>(b->elapsed_ms_since(*a));
}

}  // namespace brigade
