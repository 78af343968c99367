#include "pipeline/distributed/faults.h"

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace brigade::distributed {

namespace {
constexpr int notice_tag = 1;
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
}  // namespace

FaultLine::FaultLine(int rank, int size) : rank_(rank), size_(size), comm_(duplicate_world()) {}

void FaultLine::read_notices() {
  for (;;) {
    int arrived = 0;
    MPI_Message message;
    MPI_Status status;
    // A matched probe takes the message out of matching, so two threads polling at once
    // can never both try to receive the same notice.
    BRIGADE_MPI_CHECK(
        MPI_Improbe(MPI_ANY_SOURCE, notice_tag, comm_.get(), &arrived, &message, &status));
    if (!arrived) return;
    int bytes = 0;
    BRIGADE_MPI_CHECK(MPI_Get_count(&status, MPI_CHAR, &bytes));
    std::string text(static_cast<size_t>(bytes), '\0');
    BRIGADE_MPI_CHECK(MPI_Mrecv(text.data(), bytes, MPI_CHAR, &message, MPI_STATUS_IGNORE));
    if (!heard_) heard_.emplace(status.MPI_SOURCE, printable(text, notice_max_bytes));
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
  if (heard_) {
    // A follower: the failed rank has notified everyone and is aborting the job. Say why
    // this rank stops, give that rank a moment to be the one mpirun names, then abort.
    say("brigade: rank " + std::to_string(rank_) + " stops: " + heard_->what() +
        (what.empty() || what == heard_->what() ? "" : " (here: " + printable(what, 300) + ")"));
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::seconds(2));
  } else {
    say("brigade: rank " + std::to_string(rank_) + " failed: " + what);
    lock.unlock();
    notify(what);
  }
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this is for the compiler and broken MPIs
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
