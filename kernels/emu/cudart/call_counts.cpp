// The table behind call_counts.h and cuda_emulation.h's call_counts().
#include "kernels/emu/cudart/call_counts.h"

#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "kernels/emu/cudart/include/cuda_emulation.h"

namespace brigade::emu::gpu {

namespace {

struct Table {
  std::mutex mutex;
  CallCounts counts;  // by_entry_point compares with std::less<>: found by a string_view
};

Table& table() {
  static Table* t = new Table;  // never destroyed: stream workers may count after main returns
  return *t;
}

// One more of a class of call.
void add_one(uint64_t CallCounts::*kind) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  ++(t.counts.*kind);
}

}  // namespace

void count_call(const char* entry_point) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  const auto it = t.counts.by_entry_point.find(std::string_view(entry_point));
  if (it != t.counts.by_entry_point.end())
    ++it->second;
  else
    t.counts.by_entry_point.emplace(entry_point, 1);
}

void count_kernel_launch() {
  count_call("cudaLaunchKernel");
  add_one(&CallCounts::kernel_launches);
}

void count_library_call() { add_one(&CallCounts::library_calls); }

void count_graph_launch() { add_one(&CallCounts::graph_launches); }

void count_host_block() { add_one(&CallCounts::host_blocking); }

CallCounts call_counts() {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  return t.counts;
}

CallCounts CallCounts::since(const CallCounts& before) const {
  CallCounts d;
  d.kernel_launches = kernel_launches - before.kernel_launches;
  d.library_calls = library_calls - before.library_calls;
  d.graph_launches = graph_launches - before.graph_launches;
  d.host_blocking = host_blocking - before.host_blocking;
  for (const auto& [name, n] : by_entry_point) {
    const auto old = before.by_entry_point.find(name);
    const uint64_t added = n - (old == before.by_entry_point.end() ? 0 : old->second);
    if (added > 0) d.by_entry_point.emplace(name, added);
  }
  return d;
}

}  // namespace brigade::emu::gpu
