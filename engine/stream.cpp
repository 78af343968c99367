// Stream handles, the default stream of each device, and the list of live streams.
#include "engine/stream.h"

#include <atomic>
#include <map>
#include <mutex>
#include <set>

#include "engine/event.h"
#include "engine/host_wait.h"
#include "engine/stream_impl.h"
#include "engine/thread_pool.h"

namespace brigade {

namespace detail {

namespace {
std::atomic<uint64_t> next_stream_id{1};

struct LiveStreams {
  std::mutex mutex;
  std::set<StreamImpl*> streams;
};
// Never destroyed: streams may outlive static destruction (see device.cpp's registry).
LiveStreams& live_streams() {
  static LiveStreams* live = new LiveStreams;
  return *live;
}
}  // namespace

StreamImpl::StreamImpl(Device device) : device(device), id(next_stream_id.fetch_add(1)) {}

std::string StreamImpl::name() const { return device.str() + " stream#" + std::to_string(id); }

void StreamImpl::drop_kept() {
  std::map<const void*, std::shared_ptr<void>> dropped;
  {
    std::lock_guard<std::mutex> lock(kept_mutex);
    dropped.swap(kept);
  }
}  // destroyed here, outside the lock: a destructor may take locks of its own (a pool's)

void register_stream(StreamImpl* stream) {
  auto& live = live_streams();
  std::lock_guard<std::mutex> lock(live.mutex);
  live.streams.insert(stream);
}

void unregister_stream(StreamImpl* stream) {
  auto& live = live_streams();
  std::lock_guard<std::mutex> lock(live.mutex);
  live.streams.erase(stream);
}

}  // namespace detail

Stream Stream::create(const Device& device) {
  check_device_available(device);
#if defined(BRIGADE_HAVE_CUDA)
  if (device.is_cuda()) return Stream(detail::make_cuda_stream(device));
#endif
  return Stream(detail::make_cpu_stream(device));
}

Stream Stream::default_for(const Device& device) {
  // One per device, never destroyed (like CUDA's per-device default streams).
  static std::mutex* mutex = new std::mutex;
  static auto* defaults = new std::map<Device, Stream>;
  std::lock_guard<std::mutex> lock(*mutex);
  auto it = defaults->find(device);
  if (it == defaults->end()) it = defaults->emplace(device, create(device)).first;
  return it->second;
}

Device Stream::device() const { return impl_->device; }
uint64_t Stream::id() const { return impl_->id; }
std::string Stream::str() const { return impl_->name(); }
void Stream::enqueue(std::function<void()> task) const { impl_->enqueue(std::move(task)); }
void Stream::synchronize() const {
  if (const auto listener = detail::host_wait_listener())  // host_wait.h
    detail::wait_listening(*listener, [&] { return impl_->query(); }, [&] { return str(); });
  impl_->synchronize();
}
bool Stream::query() const { return impl_->query(); }

bool Stream::unless_capturing(const std::function<void()>& enqueue) const {
  std::lock_guard<std::mutex> lock(impl_->capture_mutex);
  if (impl_->capturing) return false;
  enqueue();
  return true;
}

void Stream::set_capturing(bool capturing) const {
  std::lock_guard<std::mutex> lock(impl_->capture_mutex);
  impl_->capturing = capturing;
}

bool Stream::capturing() const {
  std::lock_guard<std::mutex> lock(impl_->capture_mutex);
  return impl_->capturing;
}

void Stream::wait(const Event& event) const {
  auto record = event.current_record();
  BRIGADE_CHECK(record, str() << ": wait on " << event.str()
                              << ", which was never recorded (record it on its producer "
                                 "stream before waiting: waiting on nothing would silently "
                                 "drop the ordering)");
  impl_->wait(std::move(record));
}

std::shared_ptr<void> Stream::kept(const void* key,
                                   const std::function<std::shared_ptr<void>()>& make) const {
  std::lock_guard<std::mutex> lock(impl_->kept_mutex);
  std::shared_ptr<void>& slot = impl_->kept[key];
  if (!slot) slot = make();  // may throw (out of memory): then nothing is kept
  return slot;
}

ThreadPool& Stream::thread_pool() const {
  BRIGADE_CHECK(impl_->device.is_cpu(),
                str() << ": thread_pool() is only for streams of CPU devices");
  return cpu_thread_pool(impl_->device);
}

#if defined(BRIGADE_HAVE_CUDA)
cudaStream_t Stream::cuda_handle() const {
  BRIGADE_CHECK(impl_->device.is_cuda(), str() << ": cuda_handle() of a CPU stream");
  // The one place that makes a stream's device current: a kernel launch (and an event
  // record) fails unless the stream's device is the calling thread's current one, and any
  // call on another GPU (an allocation for a neighbour, a copy) changes it.
  BRIGADE_CUDA_CHECK(cudaSetDevice(impl_->device.index));
  return static_cast<cudaStream_t>(impl_->native_handle());
}
#endif

std::string describe_streams() {
  auto& live = detail::live_streams();
  std::lock_guard<std::mutex> lock(live.mutex);
  std::string text;
  for (auto* stream : live.streams) text += stream->describe() + "\n";
  if (text.empty()) text = "(no live streams)\n";
  return text;
}

}  // namespace brigade
