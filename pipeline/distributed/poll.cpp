#include "pipeline/distributed/poll.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace brigade::distributed {

std::chrono::milliseconds default_timeout() {
  const char* text = std::getenv("BRIGADE_MPI_TIMEOUT_S");
  if (text == nullptr || *text == '\0') return kDefaultTimeout;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  BRIGADE_CHECK(end != text && *end == '\0' && seconds > 0 && seconds < 1e7,
                "BRIGADE_MPI_TIMEOUT_S=\"" << printable(text)
                                           << "\": expected a number of seconds above 0");
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

bool poll_until(FaultLine& faults, const std::function<bool()>& test,
                const std::function<bool()>& stop, std::chrono::milliseconds timeout,
                const std::function<std::string()>& what) {
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(0);
  for (int tries = 0;; ++tries) {
    if (stop()) return false;
    if (test()) return true;
    faults.check();
    if (std::chrono::steady_clock::now() - start > timeout)
    {
      std::ostringstream os;
      os << what() << ": still waiting after " << static_cast<double>(timeout.count()) / 1000
         << " s (BRIGADE_MPI_TIMEOUT_S); has that rank died or hung?";
      throw MpiError(os.str());
    }
    if (tries < 64) {
      std::this_thread::yield();
    } else {
      // Back off to at most 1 ms: a wakeup costs little, a late one costs at most that.
      pause = std::min(std::chrono::microseconds(1000),
                       std::max(std::chrono::microseconds(20), pause * 2));
      std::this_thread::sleep_for(pause);
    }
  }
}

namespace {
// The buffers of calls whose waits threw: MPI may still write into them. Never freed, even in
// static destruction (a stream's worker may still be in an MPI call then).
std::mutex kept_mutex;
std::vector<std::shared_ptr<void>>& kept() {
  static auto* buffers = new std::vector<std::shared_ptr<void>>;
  return *buffers;
}
}  // namespace

void wait_for_request(FaultLine& faults, MPI_Request& request, std::shared_ptr<void> buffers,
                      std::chrono::milliseconds timeout, const std::function<std::string()>& what) {
  auto done = [&] {
    int here = 0;
    BRIGADE_MPI_CHECK(MPI_Test(&request, &here, MPI_STATUS_IGNORE));
    return here != 0;
  };
  try {
    poll_until(faults, done, [] { return false; }, timeout, what);
  } catch (...) {
    // Still running: its memory is MPI's from now on.
    if (request != MPI_REQUEST_NULL) keep_for_mpi(std::move(buffers));
    throw;
  }
}

void keep_for_mpi(std::shared_ptr<void> buffers) {
  std::lock_guard<std::mutex> lock(kept_mutex);
  kept().push_back(std::move(buffers));
}

size_t kept_request_buffers() {
  std::lock_guard<std::mutex> lock(kept_mutex);
  return kept().size();
}

}  // namespace brigade::distributed
