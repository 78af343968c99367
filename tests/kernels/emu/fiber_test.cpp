// Fiber (kernels/emu/fiber.h) on its own, below the block runner: what a switch of stacks
// must keep that the kernels' tests would only notice by luck. Values live across switches
// on both sides, the ABI's stack alignment at a fiber's entry, the SSE/x87 control state
// per side, an exception handed over instead of unwinding across the switch, a fiber
// abandoned mid-run and started again, and the guard page below a stack.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cfenv>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "kernels/emu/fiber.h"
#include "tests/support/deadline.h"

using brigade::emu::Fiber;
using brigade::emu::FiberStack;

namespace {

// A fiber that yields `rounds` times, keeping eight running values (more than the ABI's
// caller-saved registers can hold across a call, so some are in callee-saved ones).
struct Counting {
  Fiber* fiber = nullptr;
  int rounds = 0;
  uint64_t result = 0;
};

void counting_entry(void* arg) {
  auto* c = static_cast<Counting*>(arg);
  uint64_t a = 1, b = 2, d = 3, e = 4, f = 5, g = 6, h = 7, k = 8;
  for (int r = 0; r < c->rounds; ++r) {
    a += b; b ^= d; d += e * 3; e += f; f ^= g << 1; g += h; h += k; k += a;
    c->fiber->yield();
  }
  c->result = a ^ b ^ d ^ e ^ f ^ g ^ h ^ k;
}

uint64_t counting_expected(int rounds) {
  uint64_t a = 1, b = 2, d = 3, e = 4, f = 5, g = 6, h = 7, k = 8;
  for (int r = 0; r < rounds; ++r) {
    a += b; b ^= d; d += e * 3; e += f; f ^= g << 1; g += h; h += k; k += a;
  }
  return a ^ b ^ d ^ e ^ f ^ g ^ h ^ k;
}

}  // namespace

TEST_CASE("a fiber runs to each yield and resumes where it stopped, values intact on both sides") {
  FiberStack stack;
  Fiber fiber;
  Counting c{&fiber, 100, 0};
  fiber.start(stack, counting_entry, &c);
  // The scheduler keeps its own running values across the switches too.
  uint64_t x = 11, y = 13, z = 17;
  int resumes = 0;
  while (!fiber.finished()) {
    fiber.resume();
    ++resumes;
    x = x * 3 + y; y ^= z; z += x;
  }
  CHECK(resumes == 101);  // 100 yields, then the return
  CHECK(c.result == counting_expected(100));
  CHECK(fiber.error() == nullptr);
  uint64_t ex = 11, ey = 13, ez = 17;
  for (int i = 0; i < 101; ++i) { ex = ex * 3 + ey; ey ^= ez; ez += ex; }
  CHECK((x == ex && y == ey && z == ez));

  // Started again on the same stack, with a new entry: the same again.
  Counting again{&fiber, 7, 0};
  fiber.start(stack, counting_entry, &again);
  while (!fiber.finished()) fiber.resume();
  CHECK(again.result == counting_expected(7));
}

namespace {

// The frame address of a function is 16-aligned exactly when the stack was as the System V
// ABI requires at its entry (rsp % 16 == 8, just after the call); forcing a frame pointer
// here makes it so on x86-64. A misaligned fiber stack breaks aligned SSE spills.
__attribute__((noinline)) uintptr_t frame_address() {
  return reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
}

void alignment_entry(void* arg) {
  auto* misaligned = static_cast<uintptr_t*>(arg);
  *misaligned = frame_address() % 16;
  alignas(16) volatile double pair[2] = {1.0, 2.0};  // 16-aligned only if the stack is
  *misaligned |= reinterpret_cast<uintptr_t>(&pair[0]) % 16;
}

}  // namespace

TEST_CASE("a fiber's entry sees the stack aligned as after a call") {
  FiberStack stack;
  Fiber fiber;
  for (int run = 0; run < 3; ++run) {
    uintptr_t misaligned = 99;
    fiber.start(stack, alignment_entry, &misaligned);
    fiber.resume();
    REQUIRE(fiber.finished());
    CHECK(misaligned == 0);
  }
}

namespace {
// a/b rounded by the SSE unit's current mode (MXCSR); fegetround() reads the x87 control
// word. A switch must keep both per side. To nearest, 1/3 rounds down and 1/10 up, so
// rounding up shows in 1/3 and rounding down in 1/10.
double divide(double a, double b) {
  volatile double va = a, vb = b;
  return va / vb;
}
double third() { return divide(1.0, 3.0); }
double tenth() { return divide(1.0, 10.0); }

struct Rounding {
  Fiber* fiber = nullptr;
  int at_start = -1, after_yield = -1;  // fegetround() in the fiber
  double third_at_start = 0, third_after_yield = 0;
};

void rounding_fiber(void* arg) {
  auto* r = static_cast<Rounding*>(arg);
  r->at_start = std::fegetround();  // inherited from the scheduler at start()
  r->third_at_start = third();
  std::fesetround(FE_UPWARD);
  r->fiber->yield();
  r->after_yield = std::fegetround();  // its own mode, whatever the scheduler did meanwhile
  r->third_after_yield = third();
  std::fesetround(FE_TONEAREST);
}
}  // namespace

TEST_CASE("each side keeps its own floating-point rounding mode across switches") {
  REQUIRE(std::fegetround() == FE_TONEAREST);
  const double nearest = third(), nearest_tenth = tenth();
  FiberStack stack;
  Fiber fiber;
  Rounding r{&fiber};
  fiber.start(stack, rounding_fiber, &r);
  fiber.resume();
  CHECK(r.at_start == FE_TONEAREST);
  CHECK(r.third_at_start == nearest);
  CHECK(std::fegetround() == FE_TONEAREST);  // the fiber's FE_UPWARD stayed with it
  CHECK(third() == nearest);
  std::fesetround(FE_DOWNWARD);
  fiber.resume();
  CHECK(std::fegetround() == FE_DOWNWARD);
  const double downward = tenth();
  std::fesetround(FE_TONEAREST);
  CHECK(downward < nearest_tenth);
  CHECK(r.after_yield == FE_UPWARD);
  CHECK(r.third_after_yield > nearest);
  CHECK(fiber.finished());
}

namespace {
void throwing_entry(void* arg) {
  auto* reached = static_cast<int*>(arg);
  *reached = 1;
  throw std::runtime_error("thrown on the fiber");
}
}  // namespace

TEST_CASE("an exception leaving the entry is handed over, not unwound across the switch") {
  FiberStack stack;
  Fiber fiber;
  int reached = 0;
  fiber.start(stack, throwing_entry, &reached);
  fiber.resume();
  CHECK(reached == 1);
  REQUIRE(fiber.finished());
  REQUIRE(fiber.error() != nullptr);
  CHECK_THROWS_WITH_AS(std::rethrow_exception(fiber.error()), "thrown on the fiber",
                       std::runtime_error);
  // The fiber is reusable afterwards, and a clean run clears the error.
  Counting c{&fiber, 3, 0};
  fiber.start(stack, counting_entry, &c);
  while (!fiber.finished()) fiber.resume();
  CHECK(fiber.error() == nullptr);
  CHECK(c.result == counting_expected(3));
}

TEST_CASE("a fiber abandoned at a yield can be started again") {
  FiberStack stack;
  Fiber fiber;
  Counting abandoned{&fiber, 1000, 0};
  fiber.start(stack, counting_entry, &abandoned);
  for (int i = 0; i < 5; ++i) fiber.resume();  // stopped at its fifth yield, never finished
  CHECK(!fiber.finished());
  Counting c{&fiber, 4, 0};
  fiber.start(stack, counting_entry, &c);
  while (!fiber.finished()) fiber.resume();
  CHECK(c.result == counting_expected(4));
  CHECK(abandoned.result == 0);
}

namespace {
// 1 KiB of stack per level, written in full (so no level steps over a 4 KiB guard page), and
// from alloca: on the real stack even where ASan moves locals to a fake stack.
__attribute__((noinline)) int recurse(int depth) {
  volatile char* frame = static_cast<char*>(__builtin_alloca(1024));
  for (int i = 0; i < 1024; ++i) frame[i] = static_cast<char>(depth);
  if (depth == 0) return frame[0];
  return recurse(depth - 1) + frame[depth % 1024];
}

// The permissions /proc/self/maps gives the mapping that holds `address` ("rw-p", "---p"),
// or "" if none does.
std::string permissions_at(const void* address) {
  const auto a = reinterpret_cast<uintptr_t>(address);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::string perms;
    fields >> std::hex >> begin >> dash >> end >> perms;
    if (begin <= a && a < end) return perms;
  }
  return "";
}

// About 1 MiB of frames: four times the fiber's stack.
void overflowing_entry(void*) { (void)recurse(1024); }
}  // namespace

TEST_CASE("a fiber that overflows its stack stops on the guard page (SIGSEGV)") {
  brigade::testing::Deadline deadline("fiber stack overflow in a child process");
  FiberStack stack;
  Fiber fiber;
  fiber.start(stack, overflowing_entry, nullptr);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  char* guard = static_cast<char*>(stack.bottom()) - page;
  CHECK(permissions_at(guard) == "---p");
  CHECK(permissions_at(guard + page - 1) == "---p");
  CHECK(permissions_at(stack.bottom()) == "rw-p");
  // In a child process, set up before fork() (the child allocates nothing), with SIGSEGV's
  // default action: no test framework or sanitizer handler turns the crash into something else.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    signal(SIGSEGV, SIG_DFL);
    fiber.resume();
    _exit(0);  // only if the overflow went unnoticed
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == SIGSEGV);
}
