#include "pipeline/distributed/mpi_link.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <mutex>

#include "engine/stream.h"
#include "pipeline/runtime/step_checks.h"

namespace brigade::distributed {

using pipeline::Message;

// One queued or posted send. Its header and tensor (or failure) stay here until both sends
// complete.
struct MpiLink::Outgoing {
  int microbatch = 0;
  Message message;
  Header header{};      // rank, dims[4], dtype; or kFailedWork, world rank, bytes
  std::string failure;  // the cause, sent in the tensor's place when its producer failed
  std::array<MPI_Request, 2> requests{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  bool posted = false;
};

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

MpiLink::MpiLink(std::string name, const MpiSession& session, MPI_Comm comm, int peer,
                 int link, int microbatches, Device device, MpiLinkOptions options)
    : ProcessLink(std::move(name), session, comm, peer, link, microbatches, device, options) {
  BRIGADE_CHECK(device.is_cpu(), name_ << ": an MpiLink carries CPU tensors; " << device
                                       << " is a GPU (use an NcclLink)");
  thread_ = std::thread([this] { communicate(); });
}

MpiLink::~MpiLink() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void MpiLink::send(int microbatch, Message message) {
  check_send(microbatch, message);
  const Tensor& t = message.tensor;
  BRIGADE_CHECK(t.defined(), name_ << ": micro-batch " << microbatch << " sent without a tensor");
  BRIGADE_CHECK(t.device().is_cpu(), name_ << ": micro-batch " << microbatch << " is on "
                                           << t.device()
                                           << "; an MpiLink carries CPU tensors (use an NcclLink)");
  BRIGADE_CHECK(t.numel() <= INT_MAX, name_ << ": micro-batch " << microbatch << " has "
                                            << t.numel() << " elements, over MPI's int count");
  Outgoing out;
  out.microbatch = microbatch;
  write_shape(t.shape(), &out.header[0]);
  out.header[5] = static_cast<int64_t>(t.dtype());
  out.message = std::move(message);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;  // nobody will receive it: the step is failing
    outgoing_.push_back(std::move(out));
  }
  wake_.notify_all();
}

// Posts each queued send whose event has completed; retires the posted ones MPI is done with.
void MpiLink::advance_sends() {
  for (auto it = outgoing_.begin(); it != outgoing_.end();) {
    Outgoing& out = *it;
    if (!out.posted) {
      if (!out.message.ready.query()) {
        ++it;
        continue;
      }
      try {
        out.message.ready.synchronize();  // complete: only rethrows a failure of that work
      } catch (const std::exception&) {
        // The producer's work failed, so this rank's step fails and the job ends (faults.h).
        // Its cause goes in the tensor's place: the receiver stops at once, naming this rank
        // and the cause, instead of waiting for a tensor that never comes while this rank
        // waits for what the receiver would have sent back.
        out.failure = printable(name_ + ": micro-batch " + std::to_string(out.microbatch) +
                                    " not sent: " + first_cause(std::current_exception()),
                                failure_max_bytes);
        out.header = {kFailedWork, faults_.rank(), static_cast<int64_t>(out.failure.size()), 0,
                      0, 0};
        out.message = Message{};  // the tensor is not needed any more
        // And this rank hears of it as of another's failure: its host may be waiting in a
        // receive whose sender waits for this very send, and it stops at its next poll.
        faults_.hear(faults_.rank(), out.failure);
      }
      post_header(out.header, tags_.message(out.microbatch, 0), &out.requests[0]);
      if (out.failure.empty()) {
        const Tensor& t = out.message.tensor;
        BRIGADE_MPI_CHECK(MPI_Isend(t.data<float>(), static_cast<int>(t.numel()), MPI_FLOAT,
                                    peer_, tags_.message(out.microbatch, 1), comm_,
                                    &out.requests[1]));
      } else {
        BRIGADE_MPI_CHECK(MPI_Isend(out.failure.data(), static_cast<int>(out.failure.size()),
                                    MPI_CHAR, peer_, tags_.message(out.microbatch, 1), comm_,
                                    &out.requests[1]));
      }
      out.posted = true;
    }
    int done = 0;
    BRIGADE_MPI_CHECK(MPI_Testall(2, out.requests.data(), &done, MPI_STATUSES_IGNORE));
    it = done ? outgoing_.erase(it) : std::next(it);
  }
}

void MpiLink::communicate() {
  std::unique_lock<std::mutex> lock(mutex_);
  auto pause = std::chrono::microseconds(20);
  std::chrono::steady_clock::time_point stop_by{};
  for (;;) {
    try {
      advance_sends();
    } catch (const std::exception& e) {
      // A failed MPI call: nothing here can be sent any more. Receivers of this rank see
      // the failure through their own calls; say it once and drop the sends.
      std::fprintf(stderr, "%s: sends dropped: %s\n", name_.c_str(), e.what());
      outgoing_.clear();
    }
    if (stopping_) {
      // Destruction: the sends in flight complete once the peer receives them; give them
      // the wait's deadline, less if some rank failed (the job is ending anyway).
      if (stop_by == std::chrono::steady_clock::time_point{})
        stop_by = std::chrono::steady_clock::now() + options_.timeout;
      if (outgoing_.empty() || faults_.heard() || std::chrono::steady_clock::now() > stop_by)
        return;
    }
    if (outgoing_.empty() && !stopping_) {
      wake_.wait(lock, [&] { return stopping_ || !outgoing_.empty(); });
      pause = std::chrono::microseconds(20);
    } else {
      // Sends are waiting for their event or for MPI: poll again soon (poll.h says why).
      wake_.wait_for(lock, pause);
      pause = std::min(std::chrono::microseconds(1000), pause * 2);
    }
  }
}

Message MpiLink::receive(int microbatch) {
  tags_.check_microbatch(name_, microbatch, "receive");
  auto what = [&] { return from_peer(microbatch); };
  const Header header = receive_header(tags_.message(microbatch, 0), microbatch);
  if (header[0] == kFailedWork) throw receive_failure(header, microbatch);
  BRIGADE_CHECK(header[0] >= 0 && header[0] <= Shape::max_rank &&
                    header[5] == static_cast<int64_t>(DType::float32),
                what() << ": a header that is not a float32 tensor of rank 0 to 4 (rank "
                       << header[0] << ", dtype " << header[5] << ")");
  const Shape shape = read_shape(&header[0]);

  // The payload lands in host memory of device_ straight from MPI; the stream only carries
  // the event, recorded once the bytes are in.
  Tensor tensor = Tensor::empty(shape, stream_);
  MPI_Request request = MPI_REQUEST_NULL;
  BRIGADE_MPI_CHECK(MPI_Irecv(tensor.data<float>(), static_cast<int>(shape.numel()), MPI_FLOAT,
                              peer_, tags_.message(microbatch, 1), comm_, &request));
  auto payload_here = [&] {
    int here = 0;
    BRIGADE_MPI_CHECK(MPI_Test(&request, &here, MPI_STATUS_IGNORE));
    return here != 0;
  };
  auto give_up = [&] {
    // MPI may still write into the tensor: cancel, and keep the tensor alive with the link.
    MPI_Cancel(&request);
    MPI_Request_free(&request);
    std::lock_guard<std::mutex> lock(mutex_);
    abandoned_.push_back(tensor);
  };
  bool arrived = false;
  try {
    arrived = poll_until(faults_, payload_here, [&] { return closed(); }, options_.timeout, what);
  } catch (...) {
    give_up();
    throw;
  }
  if (!arrived) {
    give_up();
    throw closed_error(microbatch);
  }
  Message message{tensor, Event()};
  message.ready.record(stream_);
  return message;
}

// The sender's failure (header: kFailedWork, its world rank, the text's bytes): heard like
// a fault notice (faults.h), so every later wait of this rank ends too.
RankFailed MpiLink::receive_failure(const Header& header, int microbatch) {
  auto what = [&] { return from_peer(microbatch); };
  BRIGADE_CHECK(header[1] >= 0 && header[2] >= 0 &&
                    header[2] <= static_cast<int64_t>(failure_max_bytes),
                what() << ": a failure header with rank " << header[1] << " and " << header[2]
                       << " bytes; is rank " << peer_ << " running the same program?");
  std::string text(static_cast<size_t>(header[2]), '\0');
  MPI_Request request = MPI_REQUEST_NULL;
  BRIGADE_MPI_CHECK(MPI_Irecv(text.data(), static_cast<int>(text.size()), MPI_CHAR, peer_,
                              tags_.message(microbatch, 1), comm_, &request));
  auto here = [&] {
    int done = 0;
    BRIGADE_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    return done != 0;
  };
  // Not ended by close(): the failure is the news, whatever else this rank is doing. (The
  // text follows its header at once; only another rank's notice or the deadline comes first.)
  try {
    poll_until(faults_, here, [] { return false; }, options_.timeout, what);
  } catch (...) {
    MPI_Cancel(&request);
    MPI_Request_free(&request);
    throw;
  }
  return faults_.hear(static_cast<int>(header[1]), printable(text, failure_max_bytes));
}

void MpiLink::close(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!close_locked(why)) return;
    // Sends not posted yet are dropped; posted ones complete (MPI holds their buffers).
    outgoing_.remove_if([](const Outgoing& out) { return !out.posted; });
  }
  wake_.notify_all();
}

void MpiLink::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  reopen_locked();
  outgoing_.remove_if([](const Outgoing& out) { return !out.posted; });
}

}  // namespace brigade::distributed
