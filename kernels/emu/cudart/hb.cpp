// The happens-before check (hb.h): vector clocks, and each allocation's access history.
#include "kernels/emu/cudart/hb.h"

#include <algorithm>
#include <string>

#include "kernels/emu/cudart/gpu.h"

namespace brigade::emu::gpu {

void VectorClock::advance(uint32_t stream, uint64_t position) {
  if (stream >= at_.size()) at_.resize(stream + 1, 0);
  at_[stream] = std::max(at_[stream], position);
}

void VectorClock::set(uint32_t stream, uint64_t position) {
  if (stream >= at_.size()) at_.resize(stream + 1, 0);
  at_[stream] = position;
}

bool VectorClock::join(const VectorClock& other) {
  if (other.at_.size() > at_.size()) at_.resize(other.at_.size(), 0);
  bool changed = false;
  for (size_t i = 0; i < other.at_.size(); ++i)
    if (other.at_[i] > at_[i]) {
      at_[i] = other.at_[i];
      changed = true;
    }
  return changed;
}

void host_observes(const VectorClock& completed) {
  Emulation& e = Emulation::get();
  if (e.host_clock.join(completed)) ++e.host_version;
}

void inherit_host(StreamState& stream) {
  const Emulation& e = Emulation::get();
  if (stream.host_version_seen == e.host_version) return;
  stream.clock.join(e.host_clock);
  stream.host_version_seen = e.host_version;
}

std::string memory_name(const Allocation& a, uintptr_t start) {
  std::string lent;
  if (a.lent == uint64_t{0})
    lent = ", none of them lent (back in the allocator's cache, or an empty tensor's block)";
  else if (a.lent)
    lent = ", " + std::to_string(*a.lent) + " of them lent to a tensor";
  return (a.gpu != nullptr ? name_of(*a.gpu) + " memory " : std::string("pinned host memory ")) +
         hex(reinterpret_cast<const void*>(start)) + " (an allocation of " +
         std::to_string(a.bytes) + " bytes" + lent + ")";
}

namespace {

// The text of a race between an earlier access and the one being recorded.
std::string race_text(const Access& earlier, bool earlier_wrote, const Access& now, bool now_writes,
                      const std::string& memory) {
  std::string text = "a data race on " + memory + ": " + now.what + " on " + *now.stream_name +
                     (now_writes ? " writes it" : " reads it") + " while " + earlier.what +
                     " on " + *earlier.stream_name + (earlier_wrote ? " writes it" : " reads it");
  if (now.graph_launch != 0 && now.graph_launch == earlier.graph_launch)
    return text + ", and they are unordered branches of one graph (captured on two streams, and "
                  "no event recorded after the first was waited for by the second's stream "
                  "before the capture ended): a GPU may run them at once";
  return text + ", and nothing orders the two (the same stream, cudaEventRecord then "
                "cudaStreamWaitEvent, the legacy stream's implicit synchronisation, or the host "
                "synchronising with the first before issuing the second)";
}

}  // namespace

void record_access(StreamState& stream, const void* pointer, bool write, const std::string& what,
                   uint64_t position) {
  if (stream.capture) {  // checked at each replay instead (graphs.cpp; recorded by capture.cpp)
    capture_access(stream, pointer, write, what);
    return;
  }
  const uint64_t at = position != 0 ? position : stream.clock.at(stream.id);
  check_access(*stream.gpu, stream.clock, Access{stream.id, at, what, stream.name}, pointer, write);
}

void check_access(Gpu& gpu, const VectorClock& now, Access access, const void* pointer,
                  bool write) {
  if (pointer == nullptr) return;
  Emulation& e = Emulation::get();
  uintptr_t start = 0;
  Allocation* a = e.find(pointer, 0, &start);
  if (a == nullptr) return;
  auto ordered = [&](const Access& before) { return now.at(before.stream) >= before.position; };
  AccessHistory& h = a->history;
  std::string race;
  if (h.last_write.position != 0 && !ordered(h.last_write))
    race = race_text(h.last_write, true, access, write, memory_name(*a, start));
  if (write && race.empty())
    for (const Access& read : h.reads)
      if (!ordered(read)) {
        race = race_text(read, false, access, true, memory_name(*a, start));
        break;
      }
  if (!race.empty()) set_fault(gpu, cudaErrorLaunchFailure, race);
  if (write) {
    h.last_write = std::move(access);
    h.reads.clear();
    return;
  }
  // A read ordered before this one adds nothing: a later write unordered with it is unordered
  // with this one too. What stays is a set of mutually unordered reads.
  std::erase_if(h.reads, ordered);
  h.reads.push_back(std::move(access));
}

}  // namespace brigade::emu::gpu
