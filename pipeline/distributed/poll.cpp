#include "pipeline/distributed/poll.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>

namespace brigade::distributed {

std::chrono::milliseconds default_timeout() {
  const char* text = std::getenv("BRIGADE_MPI_TIMEOUT_S");
  if (text == nullptr || *text == '\0') return std::chrono::seconds(600);
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

}  // namespace brigade::distributed
