// Fiber switching: a hand-written stack switch on x86-64, ucontext elsewhere; every switch
// annotated for AddressSanitizer and ThreadSanitizer.
#include "kernels/emu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
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

// The shadow is cleared before the memory goes back: the frames of a fiber that was abandoned
// (its block failed) never returned, nor does the trampoline's, so their redzones are still
// poisoned, and the AddressSanitizer of GCC 12 (compiler-rt before it cleared the shadow in
// its munmap interceptor) leaves an unmapped range's shadow as it was. Whatever the kernel
// maps at these addresses next would start with stale redzones in it. A Fiber's stacks go when
// its OS thread exits (block.cpp's runner is thread_local); a new thread's stack mapped there
// has its frames' shadow cleared by ASan at thread start, but not necessarily all of the
// static TLS that glibc keeps at the top of that mapping: a first write to a thread_local
// there is then reported as a stack-buffer-underflow in frames that are not that thread's.
FiberStack::~FiberStack() {
  reset_for_reuse();
  munmap(mapping_, mapping_bytes_);
}

void FiberStack::reset_for_reuse() {
#if defined(BRIGADE_EMU_ASAN)
  // Frames of a fiber that was abandoned (its block failed) never returned, so their
  // redzones are still poisoned; the next fiber's frames land on the same addresses.
  ASAN_UNPOISON_MEMORY_REGION(bottom_, size_);
#endif
}

// ---- the switch --------------------------------------------------------------------------
//
// brigade_emu_switch(save_sp, load_sp, arg) stops the code that calls it and continues
// whatever was stopped with its stack pointer at load_sp. It is a function call that
// returns on another stack. The calling side's state is its callee-saved registers (the
// System V ABI lets a callee clobber every other one, so the compiler has saved those
// already), and they go on its own stack, in a SwitchFrame that ends with the return address
// the call pushed; *save_sp then says where that frame is. Loading the other side is the
// reverse: pop its SwitchFrame and jump to its return address, leaving rsp as a `ret` would
// (a jump, as fcontext does: the CPU predicts a `ret` to go back to this side's caller, and
// it never does). The same path starts a fiber: start() builds a SwitchFrame by hand whose
// "return address" is the trampoline. `arg` is put in rdi on the way, the first argument
// register: the trampoline's parameter on the first switch into a fiber, a dead register on
// every other.
//
// The frame is Boost.Context's fcontext frame (jump_x86_64_sysv_elf_gas.S), which also
// keeps the MXCSR (SSE rounding, flush-to-zero) and the x87 control word: both callee-saved
// by the ABI, so a kernel that changes its rounding mode does not change the scheduler's.
#if defined(BRIGADE_EMU_FIBER_ASM)

namespace {
struct SwitchFrame {  // at a switched-out side's saved stack pointer, lowest address first
  uint32_t mxcsr;
  uint16_t x87_control;
  uint16_t unused;
  uint64_t r12, r13, r14, r15, rbx, rbp;
  void* return_address;  // pushed by the call to brigade_emu_switch, or set by start()
};
static_assert(sizeof(SwitchFrame) == 0x40, "the offsets below are written for this layout");
}  // namespace

extern "C" void brigade_emu_switch(void** save_sp, void* load_sp, void* arg);

// rdi = save_sp, rsi = load_sp, rdx = arg. Offsets are SwitchFrame's.
asm(R"(
  .pushsection .text
  .p2align 4
  .globl brigade_emu_switch
  .hidden brigade_emu_switch
  .type brigade_emu_switch, @function
brigade_emu_switch:
  leaq -0x38(%rsp), %rsp    # below the return address: room for the SwitchFrame
  stmxcsr (%rsp)
  fnstcw 0x4(%rsp)
  movq %r12, 0x8(%rsp)
  movq %r13, 0x10(%rsp)
  movq %r14, 0x18(%rsp)
  movq %r15, 0x20(%rsp)
  movq %rbx, 0x28(%rsp)
  movq %rbp, 0x30(%rsp)
  movq %rsp, (%rdi)         # *save_sp: this side is now switched out
  movq %rsi, %rsp           # the other side's stack, at its SwitchFrame
  ldmxcsr (%rsp)
  fldcw 0x4(%rsp)
  movq 0x8(%rsp), %r12
  movq 0x10(%rsp), %r13
  movq 0x18(%rsp), %r14
  movq 0x20(%rsp), %r15
  movq 0x28(%rsp), %rbx
  movq 0x30(%rsp), %rbp
  movq 0x38(%rsp), %rcx     # its return address (caller-saved, free to use)
  leaq 0x40(%rsp), %rsp     # as after a ret: rsp % 16 == 0 again
  movq %rdx, %rdi           # arg: the trampoline's parameter on a fiber's first switch
  jmp *%rcx
  .size brigade_emu_switch, .-brigade_emu_switch
  .popsection
)");

#endif  // BRIGADE_EMU_FIBER_ASM

// ---- Fiber ------------------------------------------------------------------------------

#if !defined(BRIGADE_EMU_FIBER_ASM)
namespace {
// The fiber being started on this OS thread: makecontext passes int arguments only, so the
// entry finds its Fiber here. Read once, right after the first switch into it.
thread_local Fiber* starting_fiber = nullptr;
}  // namespace

void Fiber::ucontext_entry() { trampoline(starting_fiber); }
#endif

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
#if defined(BRIGADE_EMU_FIBER_ASM)
  // The top of the new stack, as the first switch into it finds it:
  //
  //   top (page-aligned)      ─┐
  //   top - 8:  0              │ the trampoline's "return address": ends every unwinder's
  //                            │ and debugger's walk up the fiber's stack
  //   top - 16: &trampoline    │ SwitchFrame::return_address, where the switch jumps to;
  //                            │ rsp is then top - 8: rsp % 16 == 8, as on entry to any
  //                            │ function (a call pushed 8 bytes onto a 16-aligned rsp)
  //   top - 72: SwitchFrame   ─┘ the scheduler's MXCSR and x87 control word (inherited,
  //                              as getcontext would), zero registers (rbp = 0 ends
  //                              frame-pointer walks too); sp_ points here
  const uintptr_t top = reinterpret_cast<uintptr_t>(stack.bottom()) + stack.size();
  auto* end_of_frames = reinterpret_cast<void**>(top - 8);
  *end_of_frames = nullptr;
  auto* frame = reinterpret_cast<SwitchFrame*>(top - 8 - sizeof(SwitchFrame));
  *frame = SwitchFrame{};
  asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(frame->mxcsr), "=m"(frame->x87_control));
  frame->return_address = reinterpret_cast<void*>(&Fiber::trampoline);
  sp_ = frame;
#else
  BRIGADE_CHECK(getcontext(&context_) == 0,
                "CUDA emulator: getcontext failed: " << std::strerror(errno));
  context_.uc_stack.ss_sp = stack.bottom();
  context_.uc_stack.ss_size = stack.size();
  context_.uc_link = nullptr;  // the trampoline never returns: it switches back itself
  makecontext(&context_, &Fiber::ucontext_entry, 0);
#endif
#if defined(BRIGADE_EMU_TSAN)
  if (tsan_fiber_ == nullptr) tsan_fiber_ = __tsan_create_fiber(0);
#endif
}

void Fiber::resume() {
#if defined(BRIGADE_EMU_TSAN)
  tsan_caller_ = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(tsan_fiber_, 0);  // flags 0: the switch orders memory, like a barrier
#endif
#if defined(BRIGADE_EMU_ASAN)
  void* scheduler_fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&scheduler_fake_stack, stack_->bottom(), stack_->size());
#endif
#if defined(BRIGADE_EMU_FIBER_ASM)
  brigade_emu_switch(&caller_sp_, sp_, this);
#else
  starting_fiber = this;
  swapcontext(&caller_, &context_);
#endif
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
#if defined(BRIGADE_EMU_FIBER_ASM)
  brigade_emu_switch(&sp_, caller_sp_, nullptr);
#else
  swapcontext(&context_, &caller_);
#endif
#if defined(BRIGADE_EMU_ASAN)
  // Back in the fiber: the scheduler that resumed us may be on a different stack position,
  // so record its bounds again for the next yield.
  __sanitizer_finish_switch_fiber(asan_fake_stack_, &caller_bottom_, &caller_size_);
#endif
}

// Not instrumented by TSan: the trampoline never returns, so an instrumented one would leave
// one frame on the TSan fiber's shadow stack per run, and the fiber is reused for every block.
__attribute__((no_sanitize("thread"))) void Fiber::trampoline(Fiber* self) {
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
#if defined(BRIGADE_EMU_FIBER_ASM)
  brigade_emu_switch(&self->sp_, self->caller_sp_, nullptr);  // never returns
#else
  setcontext(&self->caller_);  // never returns
#endif
  __builtin_unreachable();
}

}  // namespace brigade::emu
