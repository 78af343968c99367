// Fiber: one emulated CUDA thread's own stack and saved registers.
//
// A block's CUDA threads must be able to stop in the middle of the kernel (at
// __syncthreads() or a warp shuffle) and let the others catch up. Each one therefore runs on
// its own stack, and the OS thread running the block switches between those stacks:
// cooperative, on one OS thread, so a switch happens only where the emulator decides (a
// barrier, the end of the kernel).
//
//   scheduler (the OS thread's own stack)        fiber (its FiberStack)
//   fiber.resume()  ──────── switch ───────────▶ runs entry(arg) ...
//                   ◀─────── switch ──────────── fiber.yield()   (at a barrier)
//   fiber.resume()  ───────────────────────────▶ ... returns from yield()
//                   ◀─────────────────────────── entry returns: finished()
//
// On x86-64 a switch is two dozen instructions of our own (fiber.cpp, brigade_emu_switch):
// push the callee-saved registers on the current stack, store the stack pointer, load the
// other one, pop. Elsewhere it is ucontext's swapcontext, which also saves and restores the
// signal mask: two system calls per switch, about 30 times slower.
//
// Sanitizers must be told about every switch, or they see a stack pointer jump into
// memory they do not know (ASan reports false stack-buffer-overflows; TSan loses track of
// which "thread" is running). The annotations live in fiber.cpp, one place per switch.
#pragma once

// The hand-written switch: x86-64 (System V), unless the build enforces CET shadow stacks
// (-fcf-protection=return), which a switch of stacks by hand would break; ucontext knows them.
#if defined(__x86_64__) && !(defined(__CET__) && (__CET__ & 2))
#define BRIGADE_EMU_FIBER_ASM 1
#else
#include <ucontext.h>
#endif

#include <cstddef>
#include <exception>

namespace brigade::emu {

// A fiber's stack: an mmap'd region with an inaccessible guard page below it, so that a
// kernel that overflows its stack stops with SIGSEGV on the guard page instead of silently
// writing over a neighbouring fiber's stack. Pages are committed lazily by the OS, so a
// generous size costs address space, not memory.
class FiberStack {
 public:
  static constexpr size_t kDefaultBytes = 256 * 1024;  // usable bytes, guard page not counted

  explicit FiberStack(size_t bytes = kDefaultBytes);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;

  void* bottom() const { return bottom_; }  // lowest usable address
  size_t size() const { return size_; }

  // Before handing the stack to a new fiber: forget what an abandoned fiber left there
  // (ASan poisoning of frames that never returned). A no-op without ASan.
  void reset_for_reuse();

 private:
  void* mapping_ = nullptr;  // guard page + usable stack
  size_t mapping_bytes_ = 0;
  void* bottom_ = nullptr;
  size_t size_ = 0;
};

class Fiber {
 public:
  using Entry = void (*)(void* arg);

  Fiber() = default;
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Prepares the fiber to run entry(arg) on `stack` at the first resume(). The fiber may
  // be started again (with a new entry) once it has finished or been abandoned.
  void start(FiberStack& stack, Entry entry, void* arg);

  // From the scheduler: runs the fiber until it yields or its entry returns.
  void resume();
  // From inside the fiber: switches back to the scheduler; returns at the next resume().
  void yield();

  bool finished() const { return finished_; }
  // An exception that escaped entry(arg) (it cannot cross the switch), or null.
  std::exception_ptr error() const { return error_; }

 private:
  // The fiber's first frame: runs entry_, hands over an escaping exception, then makes the
  // final switch back (it never returns).
  [[noreturn]] static void trampoline(Fiber* self);
  void release_sanitizer_state();

#if defined(BRIGADE_EMU_FIBER_ASM)
  // A switched-out side's registers are on its own stack; all it leaves here is where.
  void* sp_ = nullptr;         // the fiber's saved stack pointer
  void* caller_sp_ = nullptr;  // the scheduler's
#else
  static void ucontext_entry();  // makecontext's entry (int arguments only): calls trampoline
  ucontext_t context_{};         // the fiber's saved registers
  ucontext_t caller_{};          // the scheduler's saved registers
#endif
  FiberStack* stack_ = nullptr;
  Entry entry_ = nullptr;
  void* arg_ = nullptr;
  bool finished_ = true;
  std::exception_ptr error_;

  // Sanitizer bookkeeping (unused without sanitizers).
  void* asan_fake_stack_ = nullptr;     // the fiber's fake stack while it is switched out
  const void* caller_bottom_ = nullptr;  // the scheduler's stack, told to ASan on yield
  size_t caller_size_ = 0;
  void* tsan_fiber_ = nullptr;   // TSan's handle for this fiber
  void* tsan_caller_ = nullptr;  // TSan's handle for the scheduler
};

}  // namespace brigade::emu
