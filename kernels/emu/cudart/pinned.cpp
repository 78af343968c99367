// Copies between device memory and pinned host memory (cudaMallocHost, cudaHostAlloc), as
// asynchronous as a GPU makes them, and stricter: where a GPU's result depends on timing, the
// emulated one fails every time. CUDA: "For all other transfers, the function should be fully
// asynchronous" (Runtime API, API synchronization behavior): the DMA reads a pinned source,
// and writes a pinned destination, at some time after the call returns. The rules enforced
// (README.md quotes the CUDA documentation for each):
//   - a download (device to pinned) makes its destination poison (0xFF, as fresh cudaMalloc
//     memory) at the call, and its data lands there only when the host sees the copy done
//     (its happens-before clock comes to include it: a stream or event synchronisation, a
//     query that answered done, a blocking copy, cudaDeviceSynchronize), so a
//     host that reads the destination before it waited reads NaN, where a GPU would give the
//     old bytes or the new depending on timing;
//   - an upload (pinned to device) reads its source when its stream runs it, as the DMA does,
//     and compares it with the bytes there at the call: a host that wrote them in between
//     faults the GPU (cudaErrorLaunchFailure, sticky), naming the copy, the memory and the
//     bytes, where a GPU would send the old bytes or the new depending on timing.
// Device work ordered after a download sees its data whether it has landed or not: a later
// upload of the same bytes sends what the download wrote, a later download into them lands
// after it. The emulator's own writes into pinned memory (the poison, a landing) are not the
// host's: each pending upload follows them in what it expects to find there.
//
// Not modelled: copies between pinned memory and pageable or pinned host memory (they are
// host to host), kernels that read or write pinned memory themselves (mapped memory), and
// copies captured into a CUDA graph (a replay runs them as plain copies at its position).
#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/emu/cudart/gpu.h"

namespace brigade::emu::gpu {

struct PinnedDownload {
  uint64_t number = 0;       // Emulation::pinned_copies: the order of issue
  unsigned char* dst = nullptr;
  std::vector<unsigned char> staged;  // what the copy read from the device, when it ran
  bool ran = false;
  uint32_t stream = 0;    // the stream and position the host's clock must reach (hb.h)
  uint64_t position = 0;
  Gpu* gpu = nullptr;
  std::weak_ptr<StreamState> on;  // expired: destroyed, and its worker has run all it held
};

struct PinnedUpload {
  uint64_t number = 0;
  const unsigned char* src = nullptr;
  // What the DMA sends: the source at the call, then what the earlier downloads into it wrote.
  std::vector<unsigned char> data;
  // What the host left there: the source at the call, then what the emulator has written into
  // it since (poison, landings); any other difference when the copy runs is the host's write.
  std::vector<unsigned char> expected;
};

namespace {

constexpr unsigned char kPoison = 0xFF;  // memory.cpp's: fresh device memory

// Copies the part of [from, from + n) that falls in [base, base + into.size()) to its place in
// `into`; `from_bytes` holds the bytes at `from` (null: poison).
void overlay(const unsigned char* from, const unsigned char* from_bytes, uint64_t n,
             const unsigned char* base, std::vector<unsigned char>& into) {
  const unsigned char* begin = std::max(from, base);
  const unsigned char* end = std::min(from + n, base + into.size());
  if (begin >= end) return;
  unsigned char* to = into.data() + (begin - base);
  if (from_bytes == nullptr)
    std::memset(to, kPoison, end - begin);
  else
    std::memcpy(to, from_bytes + (begin - from), end - begin);
}

// The emulator writes `n` bytes of pinned memory at `dst` (`bytes`; null: poison). Each upload
// still pending expects them there: they are not the host's.
void emulator_writes(unsigned char* dst, const unsigned char* bytes, uint64_t n) {
  if (bytes == nullptr)
    std::memset(dst, kPoison, n);
  else
    std::memcpy(dst, bytes, n);
  for (const auto& upload : Emulation::get().pending_uploads)
    overlay(dst, bytes, n, upload->src, upload->expected);
}

// The first and last byte where the host changed an upload's source since the call, as a
// report names them: "pinned host memory 0x... (an allocation of 64 bytes), its bytes 4 to 7";
// "" when it changed none.
std::string changed_bytes(const PinnedUpload& upload) {
  const std::vector<unsigned char>& was = upload.expected;
  uint64_t first = was.size(), last = 0;
  for (uint64_t i = 0; i < was.size(); ++i)
    if (upload.src[i] != was[i]) {
      first = std::min(first, i);
      last = i;
    }
  if (first == was.size()) return "";
  uintptr_t start = 0;
  const Allocation* a = Emulation::get().find(upload.src, 0, &start);
  const uint64_t offset = reinterpret_cast<uintptr_t>(upload.src) - start;
  return (a != nullptr ? memory_name(*a, start) : hex(upload.src)) + ", its bytes " +
         std::to_string(offset + first) + " to " + std::to_string(offset + last);
}

}  // namespace

uint64_t enqueue_pinned_copy(StreamState& stream, void* dst, const void* src, uint64_t bytes,
                             bool into_pinned, const std::string& call) {
  Emulation& e = Emulation::get();
  if (into_pinned) {
    auto download = std::make_shared<PinnedDownload>();
    download->number = ++e.pinned_copies;
    download->dst = static_cast<unsigned char*>(dst);
    download->staged.resize(bytes);
    // "Fully asynchronous": from the call on, the destination holds nothing the host may read.
    emulator_writes(download->dst, nullptr, bytes);
    const uint64_t position = enqueue(
        stream, Task{[download, src] {
                       std::memcpy(download->staged.data(), src, download->staged.size());
                       std::lock_guard lock(Emulation::get().mutex);
                       download->ran = true;
                     },
                     call + " into pinned host memory"});
    download->stream = stream.id;
    download->position = position;
    download->gpu = stream.gpu;
    for (const auto& weak : stream.gpu->streams)
      if (auto live = weak.lock(); live.get() == &stream) download->on = live;
    e.unlanded_downloads.push_back(std::move(download));
    return position;
  }
  auto upload = std::make_shared<PinnedUpload>();
  upload->number = ++e.pinned_copies;
  upload->src = static_cast<const unsigned char*>(src);
  upload->data.assign(upload->src, upload->src + bytes);
  upload->expected = upload->data;
  e.pending_uploads.push_back(upload);
  return enqueue(
      stream,
      Task{[upload, dst, call] {
             std::string changed;
             {
               Emulation& em = Emulation::get();
               std::lock_guard lock(em.mutex);
               std::erase(em.pending_uploads, upload);
               changed = changed_bytes(*upload);
               // The downloads into the source issued before this copy have run (they are
               // ordered before it, or the happens-before check has faulted the GPU): what
               // they wrote is what a GPU's DMA reads, landed or not.
               for (const auto& download : em.unlanded_downloads)
                 if (download->number < upload->number && download->ran)
                   overlay(download->dst, download->staged.data(), download->staged.size(),
                           upload->src, upload->data);
             }
             if (!changed.empty())
               throw std::runtime_error(
                   "the host wrote the pinned source of a " + call + " before the copy ran: " +
                   changed + " changed between the call and the copy (a GPU's DMA reads the "
                   "source when it runs, and would send the old bytes or the new depending on "
                   "timing: write the source after the host has seen the copy done)");
             std::memcpy(dst, upload->data.data(), upload->data.size());
           },
           call + " from pinned host memory"});
}

void land_pinned_downloads() {
  Emulation& e = Emulation::get();
  bool landed = false;
  // In the order of issue: two downloads into the same bytes are ordered (or a race the check
  // reported), and the host seeing the later done has seen the earlier too.
  std::erase_if(e.unlanded_downloads, [&](const std::shared_ptr<PinnedDownload>& download) {
    if (e.host_clock.at(download->stream) < download->position) return false;
    landed = true;
    if (!download->ran) return true;  // its GPU faulted first: the poison stays
    const std::vector<unsigned char>& staged = download->staged;
    emulator_writes(download->dst, staged.data(), staged.size());
    // An upload of these bytes issued after the download sends what it wrote.
    for (const auto& upload : e.pending_uploads)
      if (upload->number > download->number)
        overlay(download->dst, staged.data(), staged.size(), upload->src, upload->data);
    return true;
  });
  // A later download into the same bytes, not yet seen done: its destination is poison again.
  if (landed)
    for (const auto& download : e.unlanded_downloads)
      emulator_writes(download->dst, nullptr, download->staged.size());
}

void finished_downloads(const Gpu& gpu, VectorClock& drained) {
  for (const auto& download : Emulation::get().unlanded_downloads)
    if (download->gpu == &gpu && download->on.expired())
      drained.advance(download->stream, download->position);
}

void forget_pinned_copies(const void* memory, uint64_t bytes) {
  Emulation& e = Emulation::get();
  const auto* begin = static_cast<const unsigned char*>(memory);
  std::erase_if(e.pending_uploads, [&](const std::shared_ptr<PinnedUpload>& u) {
    return u->src >= begin && u->src < begin + bytes;
  });
  std::erase_if(e.unlanded_downloads, [&](const std::shared_ptr<PinnedDownload>& d) {
    return d->dst >= begin && d->dst < begin + bytes;
  });
}

}  // namespace brigade::emu::gpu
