#include "pipeline/distributed/faults.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>
#include <vector>

namespace brigade::distributed {

namespace {
constexpr int notice_tag = 1;
constexpr int acknowledgement_tag = 2;  // "I heard of your failure and said so": one byte
constexpr size_t notice_max_bytes = 2000;

MPI_Comm duplicate_world() {
  MPI_Comm comm = MPI_COMM_NULL;
  BRIGADE_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  return comm;
}

void say(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

// " (here: <where>)": where this rank was when it caught `what`, when that says more than the
// failure it heard; the heard failure itself, which `what` often ends with, is not repeated.
std::string here(const std::string& what, const RankFailed& heard) {
  std::string where = what;
  for (const std::string& known : {std::string(heard.what()), heard.cause()}) {
    const size_t at = where.find(known);
    if (at != std::string::npos) where.erase(at);
  }
  while (!where.empty() && (where.back() == ' ' || where.back() == ':')) where.pop_back();
  if (where.empty()) return "";
  return " (here: " + printable(where, 300) + ")";
}

// The pause of a polling loop: a yield at first, growing to 1 ms (poll.h says why).
void pause(int tries) {
  if (tries < 64)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
}  // namespace

FaultLine::FaultLine(int rank, int size) : rank_(rank), size_(size), comm_(duplicate_world()) {}

std::vector<int> FaultLine::read_notices() {
  std::vector<int> senders;
  for (;;) {
    int arrived = 0;
    MPI_Message message;
    MPI_Status status;
    // A matched probe takes the message out of matching, so two threads polling at once
    // can never both try to receive the same notice.
    BRIGADE_MPI_CHECK(
        MPI_Improbe(MPI_ANY_SOURCE, notice_tag, comm_.get(), &arrived, &message, &status));
    if (!arrived) return senders;
    int bytes = 0;
    BRIGADE_MPI_CHECK(MPI_Get_count(&status, MPI_CHAR, &bytes));
    std::string text(static_cast<size_t>(bytes), '\0');
    BRIGADE_MPI_CHECK(MPI_Mrecv(text.data(), bytes, MPI_CHAR, &message, MPI_STATUS_IGNORE));
    if (!heard_) heard_.emplace(status.MPI_SOURCE, printable(text, notice_max_bytes));
    senders.push_back(status.MPI_SOURCE);
  }
}

void FaultLine::check() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!heard_) read_notices();
  if (heard_) throw *heard_;
}

std::optional<RankFailed> FaultLine::heard() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return heard_;
}

RankFailed FaultLine::hear(int rank, const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!heard_) heard_.emplace(rank, printable(what, notice_max_bytes));
  return *heard_;
}

void FaultLine::end_job_if_heard(const std::function<std::string()>& waiting_on) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!heard_) read_notices();
    if (!heard_) return;
  }
  abort_job("waiting on its device's work: " + waiting_on());
}

void FaultLine::abort_job(const std::string& what) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborting_) {
    // Another thread of this rank is already taking the job down: wait to be killed.
    lock.unlock();
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  aborting_ = true;
  try {
    if (!heard_) read_notices();
  } catch (const std::exception&) {
    // MPI itself is failing: abort below all the same.
  }
  if (!heard_ || heard_->rank() == rank_) {
    // This rank failed: what it caught, or the first cause its own link found (hear()).
    const std::string cause = heard_ ? heard_->cause() : what;
    say("brigade: rank " + std::to_string(rank_) + " failed: " + cause +
        (heard_ ? here(what, *heard_) : ""));
    lock.unlock();
    notify(cause);
    await_acknowledgements();
  } else {
    // A follower: the failed rank has notified everyone and waits for each to say why it
    // stops before it aborts the job (so that mpirun names that rank).
    say("brigade: rank " + std::to_string(rank_) + " stops: " + heard_->what() +
        here(what, *heard_));
    lock.unlock();
    acknowledge_until_killed();
  }
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this is for the compiler and broken MPIs
}

void FaultLine::await_acknowledgements() {
  std::vector<bool> answered(static_cast<size_t>(size_), false);
  answered[static_cast<size_t>(rank_)] = true;
  const auto until = std::chrono::steady_clock::now() + acknowledgement_wait;
  try {
    for (int tries = 0; std::chrono::steady_clock::now() < until; ++tries) {
      if (std::all_of(answered.begin(), answered.end(), [](bool a) { return a; })) return;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        // A rank that failed too says so itself: its notice stands for its acknowledgement.
        for (int sender : read_notices()) answered[static_cast<size_t>(sender)] = true;
      }
      for (;;) {
        int arrived = 0;
        MPI_Message message;
        MPI_Status status;
        BRIGADE_MPI_CHECK(MPI_Improbe(MPI_ANY_SOURCE, acknowledgement_tag, comm_.get(), &arrived,
                                      &message, &status));
        if (!arrived) break;
        char byte = 0;
        BRIGADE_MPI_CHECK(MPI_Mrecv(&byte, 1, MPI_CHAR, &message, MPI_STATUS_IGNORE));
        answered[static_cast<size_t>(status.MPI_SOURCE)] = true;
      }
      pause(tries);
    }
  } catch (const std::exception&) {
    // MPI itself is failing: the caller aborts all the same.
  }
}

void FaultLine::acknowledge_until_killed() {
  static const char byte = 1;  // what an acknowledgement carries; MPI reads it until sent
  std::set<int> acknowledged;
  std::vector<MPI_Request> sent;
  const auto until = std::chrono::steady_clock::now() + 2 * acknowledgement_wait;
  try {
    for (int tries = 0; std::chrono::steady_clock::now() < until; ++tries) {
      std::vector<int> failed;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        failed = read_notices();
        failed.push_back(heard_->rank());  // heard by a notice or by a link's failure message
      }
      for (int r : failed) {
        if (r == rank_ || !acknowledged.insert(r).second) continue;
        MPI_Request request = MPI_REQUEST_NULL;
        BRIGADE_MPI_CHECK(MPI_Isend(&byte, 1, MPI_CHAR, r, acknowledgement_tag, comm_.get(),
                                    &request));
        sent.push_back(request);
      }
      int done = 0;  // MPI progresses the sends only inside its calls
      BRIGADE_MPI_CHECK(
          MPI_Testall(static_cast<int>(sent.size()), sent.data(), &done, MPI_STATUSES_IGNORE));
      pause(tries);
    }
  } catch (const std::exception&) {
    // MPI itself is failing: the caller aborts all the same.
  }
}

void FaultLine::notify(const std::string& what) {
  std::unique_lock<std::mutex> lock(mutex_);
  // MPI reads the text until the sends complete: it lives as long as this FaultLine.
  const std::string& text = notices_.emplace_back(what.substr(0, notice_max_bytes));
  lock.unlock();
  std::vector<MPI_Request> sent;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request request = MPI_REQUEST_NULL;
    if (MPI_Isend(text.data(), static_cast<int>(text.size()), MPI_CHAR, r, notice_tag,
                  comm_.get(), &request) == MPI_SUCCESS)
      sent.push_back(request);
  }
  // Notices are small (sent eagerly): give them a bounded moment to leave.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  int done = 0;
  while (!done && std::chrono::steady_clock::now() < until) {
    if (MPI_Testall(static_cast<int>(sent.size()), sent.data(), &done, MPI_STATUSES_IGNORE) !=
        MPI_SUCCESS)
      break;
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void report_failure_and_abort(const MpiSession& session, const std::string& what) {
  session.faults().abort_job(what);
}

}  // namespace brigade::distributed
