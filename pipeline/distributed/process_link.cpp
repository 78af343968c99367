#include "pipeline/distributed/process_link.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/stream.h"
#include "pipeline/runtime/step_checks.h"

namespace brigade::distributed {

using pipeline::ChannelClosed;
using pipeline::Message;

namespace {

// The longest failure text a link carries (a notice's bound, faults.cpp).
constexpr size_t failure_max_bytes = 2000;

// What a producer's failure says first: the task that failed, not the streams that waited on
// it ("[passed on by the waits of ...]", engine/stream.h); a failed NaN check names its stage,
// action and micro-batch.
std::string first_cause(std::exception_ptr error) {
  for (;;) {
    try {
      std::rethrow_exception(error);
    } catch (const StreamError& e) {
      if (!e.cause()) return e.what();
      error = e.cause();
    } catch (const pipeline::FailedCheck& e) {
      return "action " + pipeline::to_string(e.action) + " (stage " +
             std::to_string(e.action.stage) + ", micro-batch " +
             std::to_string(e.action.microbatch) + "): " + e.what();
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "unknown exception";
    }
  }
}

}  // namespace

ProcessLink::ProcessLink(std::string name, const MpiSession& session, MPI_Comm comm, int peer,
                         int link, int microbatches, Device device, MpiLinkOptions options,
                         bool in_send_order)
    : name_(std::move(name)),
      faults_(session.faults()),
      comm_(comm),
      peer_(peer),
      tags_(name_, comm, peer, link, microbatches),
      device_(device),
      options_(options),
      stream_(Stream::create(device)),
      in_send_order_(in_send_order) {}

ProcessLink::~ProcessLink() {
  // The derived destructor has stopped the thread (it calls the derived class): a no-op then.
  stop_communication();
}

void ProcessLink::start_communication(bool receives_ahead) {
  receives_ahead_ = receives_ahead;
  thread_ = std::thread([this] { communicate(); });
}

void ProcessLink::stop_communication() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void ProcessLink::queue_send(Outgoing out) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;  // nobody will receive it: the step is failing
    outgoing_.push_back(std::move(out));
  }
  wake_.notify_all();
}

// Posts each queued send whose gate has passed (in send order if asked), or its failure;
// retires the posted ones MPI is done with.
void ProcessLink::advance_sends() {
  for (auto it = outgoing_.begin(); it != outgoing_.end();) {
    Outgoing& out = *it;
    if (!out.posted) {
      const Event* passed = gate(out.message);
      if (passed && !passed->query()) {
        if (in_send_order_) return;  // no later send may overtake this one
        ++it;
        continue;
      }
      std::exception_ptr failed;
      try {
        if (passed) passed->synchronize();  // complete: only rethrows a failure of that work
      } catch (const std::exception&) {
        failed = std::current_exception();
      }
      // The work behind the tensor failed, so this rank's step fails and the job ends
      // (faults.h). Its cause goes in the tensor's place: the receiver stops at once, naming
      // this rank and the cause, instead of waiting for a tensor that never comes while this
      // rank waits for what the receiver would have sent back.
      if (failed)
        post_failure(out, failed);
      else
        post_payload(out);
      out.posted = true;
    }
    int done = 0;
    BRIGADE_MPI_CHECK(MPI_Testall(2, out.requests.data(), &done, MPI_STATUSES_IGNORE));
    it = done ? outgoing_.erase(it) : std::next(it);
  }
}

void ProcessLink::post_failure(Outgoing& out, std::exception_ptr error) {
  out.failure = printable(name_ + ": micro-batch " + std::to_string(out.microbatch) +
                              " not sent: " + first_cause(error),
                          failure_max_bytes);
  out.header = failure_header(out.microbatch, static_cast<int64_t>(out.failure.size()));
  out.message = Message{};  // the tensor is not needed any more
  // And this rank hears of it as of another's failure: its host may be waiting in a receive
  // whose sender waits for this very send, and it stops at its next poll.
  faults_.hear(faults_.rank(), out.failure);
  post_header(out.header, header_tag(out.microbatch), &out.requests[0]);
  BRIGADE_MPI_CHECK(MPI_Isend(out.failure.data(), static_cast<int>(out.failure.size()), MPI_CHAR,
                              peer_, tags_.message(out.microbatch, 1), comm_, &out.requests[1]));
}

void ProcessLink::communicate() {
  std::unique_lock<std::mutex> lock(mutex_);
  auto pause = std::chrono::microseconds(20);
  std::chrono::steady_clock::time_point stop_by{};
  for (;;) {
    try {
      advance_sends();
    } catch (const std::exception& e) {
      // A failed MPI (or NCCL) call: nothing here can be sent any more. Receivers of this
      // rank see the failure through their own calls; say it once and drop the sends.
      std::fprintf(stderr, "%s: sends dropped: %s\n", name_.c_str(), e.what());
      outgoing_.clear();
    }
    const bool received = receives_ahead_ && !stopping_ && receive_ahead();
    const bool waiting = !outgoing_.empty() || (receives_ahead_ && !stopping_);
    if (stopping_) {
      // Destruction: the sends in flight complete once the peer receives them; give them
      // the wait's deadline, less if some rank failed (the job is ending anyway).
      if (stop_by == std::chrono::steady_clock::time_point{})
        stop_by = std::chrono::steady_clock::now() + options_.timeout;
      if (outgoing_.empty() || faults_.heard() || std::chrono::steady_clock::now() > stop_by)
        return;
    }
    if (!waiting && !stopping_) {
      wake_.wait(lock, [&] { return stopping_ || !outgoing_.empty(); });
      pause = std::chrono::microseconds(20);
    } else if (received) {
      pause = std::chrono::microseconds(20);  // more may follow at once
    } else {
      // Sends are waiting for their gate or for MPI, or headers may come: poll again soon
      // (poll.h says why).
      wake_.wait_for(lock, pause);
      pause = std::min(std::chrono::microseconds(1000), pause * 2);
    }
  }
}

// The sender's failure: heard like a fault notice (faults.h), so every later wait of this
// rank ends too.
RankFailed ProcessLink::receive_failure(int64_t failed_rank, int64_t bytes, int microbatch) {
  auto what = [&] { return from_peer(microbatch); };
  BRIGADE_CHECK(failed_rank >= 0 && bytes >= 0 && bytes <= static_cast<int64_t>(failure_max_bytes),
                what() << ": a failure header with rank " << failed_rank << " and " << bytes
                       << " bytes; is rank " << peer_ << " running the same program?");
  // On the heap, kept if the wait throws: the text may still land (poll.h, wait_for_request).
  const auto text = std::make_shared<std::string>(static_cast<size_t>(bytes), '\0');
  MPI_Request request = MPI_REQUEST_NULL;
  BRIGADE_MPI_CHECK(MPI_Irecv(text->data(), static_cast<int>(text->size()), MPI_CHAR, peer_,
                              tags_.message(microbatch, 1), comm_, &request));
  // Not ended by close(): the failure is the news, whatever else this rank is doing. (The
  // text follows its header at once; only another rank's notice or the deadline comes first.)
  wait_for_request(faults_, request, text, options_.timeout, what);
  return faults_.hear(static_cast<int>(failed_rank), printable(*text, failure_max_bytes));
}

void ProcessLink::write_shape(const Shape& shape, int64_t* words) {
  words[0] = shape.rank();
  for (int i = 0; i < shape.rank(); ++i) words[1 + i] = shape[i];
}

Shape ProcessLink::read_shape(const int64_t* words) {
  return Shape(std::vector<int64_t>(words + 1, words + 1 + words[0]));
}

void ProcessLink::check_send(int microbatch, const Message& message) const {
  tags_.check_microbatch(name_, microbatch, "send");
  BRIGADE_CHECK(message.ready.recorded(),
                name_ << ": micro-batch " << microbatch
                      << " sent with an event that was never recorded; record it after the "
                         "work that writes the tensor, then send");
}

void ProcessLink::post_header(const Header& header, int tag, MPI_Request* request) const {
  BRIGADE_MPI_CHECK(MPI_Isend(header.data(), header_words, MPI_INT64_T, peer_, tag, comm_, request));
}

ProcessLink::Header ProcessLink::receive_header(int tag, int microbatch) {
  std::optional<Header> header;
  auto here = [&] { return (header = try_receive_header(tag, microbatch)).has_value(); };
  auto what = [&] { return from_peer(microbatch); };
  if (!poll_until(faults_, here, [&] { return closed(); }, options_.timeout, what))
    throw closed_error(microbatch);
  return *header;
}

std::optional<ProcessLink::Header> ProcessLink::try_receive_header(int tag, int microbatch) {
  MPI_Message handle = MPI_MESSAGE_NULL;
  MPI_Status status;
  int flag = 0;
  BRIGADE_MPI_CHECK(MPI_Improbe(peer_, tag, comm_, &flag, &handle, &status));
  if (!flag) return std::nullopt;
  auto what = [&] { return from_peer(microbatch); };
  int count = 0;
  BRIGADE_MPI_CHECK(MPI_Get_count(&status, MPI_INT64_T, &count));
  BRIGADE_CHECK(count == header_words, what() << ": a header of " << count << " words, expected "
                                              << header_words << "; is rank " << peer_
                                              << " running the same program?");
  Header header{};
  BRIGADE_MPI_CHECK(MPI_Mrecv(header.data(), header_words, MPI_INT64_T, &handle, MPI_STATUS_IGNORE));
  return header;
}

bool ProcessLink::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

ChannelClosed ProcessLink::closed_error(int microbatch) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ChannelClosed(name_ + ": closed while waiting for micro-batch " +
                       std::to_string(microbatch) + " (" + why_ + ")");
}

std::string ProcessLink::from_peer(int microbatch) const {
  const std::string which =
      microbatch < 0 ? "the next header" : "micro-batch " + std::to_string(microbatch);
  return name_ + ": " + which + " from rank " + std::to_string(peer_);
}

void ProcessLink::close(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
    closed_ = true;
    why_ = why;
    // Sends not posted yet are dropped; posted ones complete (MPI holds their buffers).
    outgoing_.remove_if([](const Outgoing& out) { return !out.posted; });
  }
  wake_.notify_all();
}

void ProcessLink::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = false;
  why_.clear();
  outgoing_.remove_if([](const Outgoing& out) { return !out.posted; });
}

}  // namespace brigade::distributed
