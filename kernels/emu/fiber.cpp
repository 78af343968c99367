// Fiber switching with ucontext, annotated for AddressSanitizer and ThreadSanitizer.
#include "kernels/emu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/error.h"

// Which sanitizer is compiled in: GCC defines __SANITIZE_*__, Clang answers __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define BRIGADE_EMU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define BRIGADE_EMU_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BRIGADE_EMU_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define BRIGADE_EMU_TSAN 1
#endif
#endif

#if defined(BRIGADE_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(BRIGADE_EMU_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace brigade::emu {

// ---- FiberStack -------------------------------------------------------------------------

FiberStack::FiberStack(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_ = (bytes + page - 1) / page * page;
  mapping_bytes_ = size_ + page;  // one guard page below the stack (stacks grow down)
  mapping_ = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  BRIGADE_CHECK(mapping_ != MAP_FAILED, "CUDA emulator: cannot map a fiber stack of "
                                            << format_bytes(mapping_bytes_) << ": "
                                            << std::strerror(errno));
  if (mprotect(mapping_, page, PROT_NONE) != 0) {
    const int err = errno;
    munmap(mapping_, mapping_bytes_);
    BRIGADE_CHECK(false, "CUDA emulator: cannot protect a fiber stack's guard page: "
                             << std::strerror(err));
  }
  bottom_ = static_cast<char*>(mapping_) + page;
}

FiberStack::~FiberStack() { munmap(mapping_, mapping_bytes_); }

void FiberStack::reset_for_reuse() {
#if defined(BRIGADE_EMU_ASAN)
  // Frames of a fiber that was abandoned (its block failed) never returned, so their
  // redzones are still poisoned; the next fiber's frames land on the same addresses.
  ASAN_UNPOISON_MEMORY_REGION(bottom_, size_);
#endif
}

// ---- Fiber ------------------------------------------------------------------------------

namespace {
// The fiber being started on this OS thread: makecontext passes int arguments only, so the
// trampoline finds its Fiber here. Read once, right after the first switch into it.
thread_local Fiber* starting_fiber = nullptr;
}  // namespace

Fiber::~Fiber() { release_sanitizer_state(); }

void Fiber::release_sanitizer_state() {
#if defined(BRIGADE_EMU_TSAN)
  if (tsan_fiber_ != nullptr) __tsan_destroy_fiber(tsan_fiber_);
#endif
  tsan_fiber_ = nullptr;
  asan_fake_stack_ = nullptr;
}

void Fiber::start(FiberStack& stack, Entry entry, void* arg) {
  // TSan's fiber state is costly to create (it maps memory), so a Fiber keeps it from one
  // run to the next; only a run that was abandoned mid-kernel leaves state to throw away.
  if (!finished_) release_sanitizer_state();
  stack.reset_for_reuse();
  stack_ = &stack;
  entry_ = entry;
  arg_ = arg;
  finished_ = false;
  error_ = nullptr;
  BRIGADE_CHECK(getcontext(&context_) == 0,
                "CUDA emulator: getcontext failed: " << std::strerror(errno));
  context_.uc_stack.ss_sp = stack.bottom();
  context_.uc_stack.ss_size = stack.size();
  context_.uc_link = nullptr;  // the trampoline never returns: it switches back itself
  makecontext(&context_, &Fiber::trampoline, 0);
#if defined(BRIGADE_EMU_TSAN)
  if (tsan_fiber_ == nullptr) tsan_fiber_ = __tsan_create_fiber(0);
#endif
}

void Fiber::resume() {
  starting_fiber = this;
#if defined(BRIGADE_EMU_TSAN)
  tsan_caller_ = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(tsan_fiber_, 0);  // flags 0: the switch orders memory, like a barrier
#endif
#if defined(BRIGADE_EMU_ASAN)
  void* scheduler_fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&scheduler_fake_stack, stack_->bottom(), stack_->size());
#endif
  swapcontext(&caller_, &context_);
#if defined(BRIGADE_EMU_ASAN)
  __sanitizer_finish_switch_fiber(scheduler_fake_stack, nullptr, nullptr);
#endif
}

void Fiber::yield() {
#if defined(BRIGADE_EMU_TSAN)
  __tsan_switch_to_fiber(tsan_caller_, 0);
#endif
#if defined(BRIGADE_EMU_ASAN)
  __sanitizer_start_switch_fiber(&asan_fake_stack_, caller_bottom_, caller_size_);
#endif
  swapcontext(&context_, &caller_);
#if defined(BRIGADE_EMU_ASAN)
  // Back in the fiber: the scheduler that resumed us may be on a different stack position,
  // so record its bounds again for the next yield.
  __sanitizer_finish_switch_fiber(asan_fake_stack_, &caller_bottom_, &caller_size_);
#endif
}

// Not instrumented by TSan: the trampoline never returns, so an instrumented one would leave
// one frame on the TSan fiber's shadow stack per run, and the fiber is reused for every block.
__attribute__((no_sanitize("thread"))) void Fiber::trampoline() {
  Fiber* self = starting_fiber;
#if defined(BRIGADE_EMU_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &self->caller_bottom_, &self->caller_size_);
#endif
  try {
    self->entry_(self->arg_);
  } catch (...) {
    self->error_ = std::current_exception();  // cannot unwind past the switch: hand it over
  }
  self->finished_ = true;
#if defined(BRIGADE_EMU_TSAN)
  __tsan_switch_to_fiber(self->tsan_caller_, 0);
#endif
#if defined(BRIGADE_EMU_ASAN)
  // Leaving for good: a null save slot tells ASan to free this fiber's fake stack.
  __sanitizer_start_switch_fiber(nullptr, self->caller_bottom_, self->caller_size_);
#endif
  setcontext(&self->caller_);  // never returns
}

}  // namespace brigade::emu
