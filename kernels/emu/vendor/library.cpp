// The checks every emulated cuBLAS / cuDNN call makes, and how its work reaches the stream.
#include "kernels/emu/vendor/library.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>

#include "kernels/emu/cudart/call_counts.h"
#include "kernels/emu/cudart/gpu.h"
#include "kernels/emu/vendor/include/vendor_emulation.h"

namespace brigade::emu::vendor {

namespace {

std::mutex hook_mutex;
std::function<void(const char*)> hook;  // under hook_mutex

std::string hex(const void* p) {
  std::ostringstream s;
  s << p;
  return s.str();
}

// Why `operands` may not be touched by a task on `g`, or "" (with the emulation's lock held).
std::string illegal_access(const gpu::Gpu& g, const std::string& call,
                           const std::vector<Operand>& operands) {
  const gpu::Emulation& e = gpu::Emulation::get();
  for (const Operand& o : operands) {
    if (o.bytes == 0) continue;  // nothing read or written (an empty tensor, no workspace)
    const std::string what = call + " on " + gpu::name_of(g) + ": " + o.name + " (" +
                             hex(o.pointer) + ", " + std::to_string(o.bytes) + " bytes) ";
    const gpu::Allocation* a = e.find(o.pointer, o.bytes);
    if (a == nullptr)
      return what + (e.find(o.pointer, 1) != nullptr ? "runs past the end of its allocation"
                                                     : "is not device memory (host memory?)");
    if (a->gpu != nullptr && a->gpu != &g && !g.peer_enabled[static_cast<size_t>(a->gpu->index)])
      return what + "is in " + gpu::name_of(*a->gpu) +
             " memory, and peer access to it was not enabled (cudaDeviceEnablePeerAccess)";
  }
  return "";
}

// The stream a checked handle's call runs on, or null after setting `refusal`; with the
// emulation's lock held.
std::shared_ptr<gpu::StreamState> target_of(const Handle* h, const std::string& call,
                                            Refusal* refusal) {
  *refusal = check_handle(h, call);
  if (refusal->failure != Failure::none) return nullptr;
  if (!h->stream_set) {
    *refusal = {Failure::stream_not_set,
                call + ": the handle's stream was never set: its work would run on the legacy "
                       "stream, unordered with Brigade's non-blocking streams (stricter than a "
                       "GPU, where this is a silent race)"};
    return nullptr;
  }
  auto s = gpu::stream_of(h->stream, call.c_str());
  if (!s) {
    *refusal = {Failure::dead_stream, call + ": the handle's stream: " +
                                          cudaGetErrorString(cudaGetLastError())};
    return nullptr;
  }
  if (s->gpu->index != h->device) {
    *refusal = {Failure::stream_device,
                call + ": the handle belongs to cuda:" + std::to_string(h->device) +
                    " and its stream to " + gpu::name_of(*s->gpu)};
    return nullptr;
  }
  return s;
}

}  // namespace

namespace {
std::set<const Handle*>& handles() {
  static auto* all = new std::set<const Handle*>();  // never freed: handles outlive main
  return *all;
}
}  // namespace

void register_handle(const Handle* handle) { handles().insert(handle); }

Refusal check_handle(const Handle* h, const std::string& call) {
  if (h == nullptr || handles().count(h) == 0 || h->destroyed)
    return {Failure::dead_handle, call + ": the handle was never created, or was destroyed"};
  if (gpu::current_device() != h->device)
    return {Failure::wrong_device,
            call + ": the handle belongs to cuda:" + std::to_string(h->device) +
                " (current at its create) and the calling thread's current device is cuda:" +
                std::to_string(gpu::current_device()) + " (cudaSetDevice)"};
  return {};
}

Refusal set_stream(Handle* h, cudaStream_t stream, const std::string& call) {
  Refusal r = check_handle(h, call);
  if (r.failure == Failure::dead_handle) return r;
  const auto special = [](cudaStream_t s) {
    return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
  };
  const gpu::Emulation& e = gpu::Emulation::get();
  const auto live = [&](cudaStream_t s, uint32_t id) {
    return e.live_streams.count(s) != 0 && s->state->id == id;
  };
  if (h->stream_set && !special(h->stream) && !live(h->stream, h->stream_id))
    return {Failure::dead_stream,
            call + ": the handle is still set to a stream destroyed since (stream #" +
                std::to_string(h->stream_id) + "); changing its stream may touch the old one, "
                "freed with it: set the handle's stream to 0 before destroying its stream "
                "(stricter than a GPU, where this is undefined)"};
  h->stream = stream;
  h->stream_id = special(stream) || e.live_streams.count(stream) == 0 ? 0 : stream->state->id;
  h->stream_set = true;
  return {};
}

void enqueue_call(gpu::StreamState& s, const std::string& call,
                  const std::vector<Operand>& operands, std::function<void()> work) {
  gpu::count_library_call();
  gpu::Gpu* g = s.gpu;
  std::string illegal = illegal_access(*g, call, operands);
  gpu::enqueue(s, gpu::Task{[g, illegal = std::move(illegal), work = std::move(work)] {
                               if (!illegal.empty()) {
                                 std::lock_guard l(gpu::Emulation::get().mutex);
                                 gpu::set_fault(*g, cudaErrorIllegalAddress, illegal);
                                 return;
                               }
                               work();
                             },
                             call});
  for (const Operand& o : operands)
    if (o.bytes > 0)
      gpu::record_access(s, o.pointer, o.bytes, o.written, call + " (" + o.name + ")");
}

Refusal run_on_stream(const Handle* h, const std::string& call,
                      const std::vector<Operand>& operands, std::function<void()> work) {
  {
    std::function<void(const char*)> f;
    {
      std::lock_guard l(hook_mutex);
      f = hook;
    }
    if (f) f(call.c_str());
  }
  gpu::Emulation& e = gpu::Emulation::get();
  std::lock_guard lock(e.mutex);
  Refusal refusal;
  auto s = target_of(h, call, &refusal);
  if (!s) return refusal;
  enqueue_call(*s, call, operands, std::move(work));
  return {};
}

namespace {
struct ThreadDetail {
  int code = 0;
  std::string text;
};
thread_local ThreadDetail detail_of[3];
}  // namespace

int remember(Library library, int code, const char* nvidia_text, const std::string& detail) {
  ThreadDetail& d = detail_of[static_cast<int>(library)];
  d.code = code;
  d.text = std::string(nvidia_text) + (detail.empty() ? "" : " [emulated GPU: " + detail + "]");
  return code;
}

const char* text_of(Library library, int code, const char* nvidia_text) {
  const ThreadDetail& d = detail_of[static_cast<int>(library)];
  return code != 0 && code == d.code ? d.text.c_str() : nvidia_text;
}

bool refuse_first_algorithm() {
  const char* env = std::getenv("BRIGADE_EMU_CUDNN_REFUSE_FIRST");
  return env != nullptr && std::string(env) == "1";
}

bool fma_pairs_first() {
  const char* env = std::getenv("BRIGADE_EMU_CUDNN_FMA_FIRST");
  return env != nullptr && std::string(env) == "1";
}

void set_library_call_hook(std::function<void(const char* call)> f) {
  std::lock_guard l(hook_mutex);
  hook = std::move(f);
}

}  // namespace brigade::emu::vendor
