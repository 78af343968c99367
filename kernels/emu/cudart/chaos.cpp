// BRIGADE_EMU_CHAOS=SEED: seeded random delays, so that work completes both early and late.
//
// An emulated kernel is far slower than the host code that launches it, so left alone the host
// is almost always ahead: an event is pending when queried, a stream still busy when a block
// is freed. A real GPU inverts that, and a missing wait that the emulator's timing always
// covers fails there. Chaos shakes the timing both ways:
//   - before each task a stream runs (a kernel, a copy, an event's marker, a wait), its worker
//     may pause: the GPU falls behind the host, and work completes late;
//   - after the host calls that enqueue, query or wait, the calling thread may pause: the host
//     falls behind the GPU, and work is already done when the host next looks.
// Three delays in four are zero, the others 1 to 200 µs, so suites stay fast. Each stream and
// each host thread draws from its own generator, seeded from SEED and its identity (the GPU
// and the stream's number on it; the thread's number in order of its first pause), so a seed
// replays the same delays per stream, though the operating system's scheduling still varies.
// Chaos only adds delays: a correct program's results do not change, bit for bit.
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "kernels/emu/cudart/gpu.h"
#include "kernels/emu/cudart/include/cuda_emulation.h"

namespace brigade::emu::gpu {

namespace {

// splitmix64: a tiny generator whose every seed, 0 included, gives a good stream.
uint64_t next(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void pause(uint64_t& state) {
  const uint64_t r = next(state);
  if (r % 4 != 0) return;  // most steps: no delay
  std::this_thread::sleep_for(std::chrono::microseconds(1 + (r >> 8) % 200));
}

// Mixes a seed with the identity of a stream or a thread into a generator's first state.
uint64_t seeded(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t state = seed;
  state = next(state) + a;
  state = next(state) + b;
  return state;
}

}  // namespace

uint64_t chaos_state_for_stream(const Gpu& gpu, uint64_t number) {
  const int64_t seed = Emulation::get().chaos_seed;
  if (seed < 0) return 0;
  return seeded(static_cast<uint64_t>(seed), static_cast<uint64_t>(gpu.index) + 1, number);
}

void chaos_before_task(StreamState& stream) {
  if (Emulation::get().chaos_seed >= 0) pause(stream.chaos_state);
}

ChaosAfterCall::~ChaosAfterCall() {
  const int64_t seed = Emulation::get().chaos_seed;
  if (seed < 0) return;
  static std::atomic<uint64_t> threads{0};
  thread_local int64_t seeded_with = -1;  // the seed this thread's generator started from
  thread_local uint64_t state = 0;
  if (seeded_with != seed) {  // the first pause of this thread, or a new seed (set_chaos_seed)
    seeded_with = seed;
    state = seeded(static_cast<uint64_t>(seed), 0, ++threads);  // "GPU" 0: a host thread
  }
  pause(state);
}

std::optional<uint64_t> set_chaos_seed(std::optional<uint64_t> seed) {
  constexpr uint64_t largest = (uint64_t{1} << 62) - 1;  // BRIGADE_EMU_CHAOS's range
  const int64_t now = seed ? static_cast<int64_t>(*seed & largest) : -1;
  const int64_t before = Emulation::get().chaos_seed.exchange(now);
  return before >= 0 ? std::optional<uint64_t>(static_cast<uint64_t>(before)) : std::nullopt;
}

}  // namespace brigade::emu::gpu
