// The happens-before check (hb.h): vector clocks, and each allocation's access history.
#include "kernels/emu/cudart/hb.h"

#include <algorithm>
#include <iterator>
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
  if (!e.host_clock.join(completed)) return;
  ++e.host_version;
  land_pinned_downloads();  // the copies into pinned memory the host now knows done (pinned.cpp)
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

bool ordered_before(const Access& before, const VectorClock& now) {
  return now.at(before.stream) >= before.position;
}

const Access* first_unordered(const AccessHistory& history, const VectorClock& now) {
  for (const auto& [begin, range] : history.ranges) {
    const RangeHistory& h = range.history;
    if (h.last_write.position != 0 && !ordered_before(h.last_write, now)) return &h.last_write;
    for (const Access& read : h.reads)
      if (!ordered_before(read, now)) return &read;
  }
  return nullptr;
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

void record_access(StreamState& stream, const void* pointer, uint64_t bytes, bool write,
                   const std::string& what, uint64_t position) {
  if (stream.capture) {  // checked at each replay instead (graphs.cpp; recorded by capture.cpp)
    capture_access(stream, pointer, bytes, write, what);
    return;
  }
  const uint64_t at = position != 0 ? position : stream.clock.at(stream.id);
  check_access(*stream.gpu, stream.clock, Access{stream.id, at, what, stream.name}, pointer, bytes,
               write);
}

namespace {

using Ranges = std::map<uint64_t, AccessHistory::Range>;

// Makes `offset` the first byte of a range or of a gap (cuts the range across it in two).
void split_at(Ranges& ranges, uint64_t offset) {
  auto after = ranges.upper_bound(offset);
  if (after == ranges.begin()) return;
  auto holding = std::prev(after);
  if (holding->first == offset || holding->second.end <= offset) return;
  ranges.emplace_hint(after, offset, holding->second);  // the same history, from `offset`
  holding->second.end = offset;
}

// The earlier access of `h` that `now` is not ordered after and that conflicts with a read
// (write = false) or a write, or null.
const Access* unordered(const RangeHistory& h, const VectorClock& now, bool write,
                        bool* earlier_wrote) {
  auto ordered = [&](const Access& before) { return ordered_before(before, now); };
  *earlier_wrote = true;
  if (h.last_write.position != 0 && !ordered(h.last_write)) return &h.last_write;
  *earlier_wrote = false;
  if (write)
    for (const Access& read : h.reads)
      if (!ordered(read)) return &read;
  return nullptr;
}

}  // namespace

void check_access(Gpu& gpu, const VectorClock& now, Access access, const void* pointer,
                  uint64_t bytes, bool write) {
  if (pointer == nullptr || bytes == 0) return;
  Emulation& e = Emulation::get();
  uintptr_t start = 0;
  Allocation* a = e.find(pointer, 0, &start);
  if (a == nullptr) return;
  // [begin, end): the bytes touched, from the allocation's start, within it.
  const uint64_t offset = reinterpret_cast<uintptr_t>(pointer) - start;
  const uint64_t begin = bytes == kWholeAllocation ? 0 : offset;
  const uint64_t end = bytes == kWholeAllocation ? a->bytes : std::min(a->bytes, offset + bytes);
  if (begin >= end) return;
  Ranges& ranges = a->history.ranges;
  split_at(ranges, begin);
  split_at(ranges, end);
  const auto first = ranges.lower_bound(begin);
  const auto last = ranges.lower_bound(end);

  // The first race, over the consecutive ranges that race with the same earlier access.
  const Access* earlier = nullptr;
  bool earlier_wrote = false;
  uint64_t race_begin = 0, race_end = 0;
  for (auto r = first; r != last; ++r) {
    bool wrote = false;
    const Access* other = unordered(r->second.history, now, write, &wrote);
    if (earlier == nullptr && other != nullptr) {
      earlier = other;
      earlier_wrote = wrote;
      race_begin = r->first;
      race_end = r->second.end;
    } else if (earlier != nullptr) {
      const bool same = other != nullptr && other->stream == earlier->stream &&
                        other->position == earlier->position && r->first == race_end;
      if (!same) break;
      race_end = r->second.end;
    }
  }
  if (earlier != nullptr) {
    const std::string memory = memory_name(*a, start) + ", its bytes " +
                               std::to_string(race_begin) + " to " + std::to_string(race_end - 1);
    set_fault(gpu, cudaErrorLaunchFailure,
              race_text(*earlier, earlier_wrote, access, write, memory));
  }

  if (write) {  // the range's earlier accesses are ordered before this one, or reported
    ranges.erase(first, last);
    ranges.emplace(begin, AccessHistory::Range{end, RangeHistory{std::move(access), {}}});
    return;
  }
  // A read ordered before this one adds nothing: a later write unordered with it is unordered
  // with this one too. What stays in each range is a set of mutually unordered reads. The
  // gaps between the ranges become ranges holding this read alone.
  auto ordered = [&](const Access& before) { return ordered_before(before, now); };
  uint64_t covered = begin;  // bytes before it are in a range already
  for (auto r = first; r != last; ++r) {
    if (r->first > covered)
      ranges.emplace_hint(r, covered, AccessHistory::Range{r->first, RangeHistory{{}, {access}}});
    std::erase_if(r->second.history.reads, ordered);
    r->second.history.reads.push_back(access);
    covered = r->second.end;
  }
  if (covered < end)
    ranges.emplace_hint(last, covered, AccessHistory::Range{end, RangeHistory{{}, {access}}});
}

}  // namespace brigade::emu::gpu
