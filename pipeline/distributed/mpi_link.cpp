#include "pipeline/distributed/mpi_link.h"

#include <array>
#include <climits>
#include <cstdio>

namespace brigade::distributed {

using pipeline::ChannelClosed;
using pipeline::Message;

namespace {
constexpr int header_words = 6;  // rank, dims[4], dtype
using Header = std::array<int64_t, header_words>;
}  // namespace

// One queued or posted send. Its header and tensor stay here until both sends complete.
struct MpiLink::Outgoing {
  int microbatch = 0;
  Message message;
  Header header{};
  std::array<MPI_Request, 2> requests{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  bool posted = false;
};

MpiLink::MpiLink(std::string name, const MpiSession& session, MPI_Comm comm, int peer,
                 int link, int microbatches, Device device, MpiLinkOptions options)
    : name_(std::move(name)),
      faults_(session.faults()),
      comm_(comm),
      peer_(peer),
      tags_(name_, comm, peer, link, microbatches),
      device_(device),
      options_(options),
      stream_(Stream::create(device)) {
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

std::string MpiLink::from_peer(int microbatch) const {
  return name_ + ": micro-batch " + std::to_string(microbatch) + " from rank " +
         std::to_string(peer_);
}

void MpiLink::send(int microbatch, Message message) {
  tags_.check_microbatch(name_, microbatch, "send");
  BRIGADE_CHECK(message.ready.recorded(),
                name_ << ": micro-batch " << microbatch
                      << " sent with an event that was never recorded; record it after the "
                         "work that writes the tensor, then send");
  const Tensor& t = message.tensor;
  BRIGADE_CHECK(t.defined(), name_ << ": micro-batch " << microbatch << " sent without a tensor");
  BRIGADE_CHECK(t.device().is_cpu(), name_ << ": micro-batch " << microbatch << " is on "
                                           << t.device()
                                           << "; an MpiLink carries CPU tensors (use an NcclLink)");
  BRIGADE_CHECK(t.numel() <= INT_MAX, name_ << ": micro-batch " << microbatch << " has "
                                            << t.numel() << " elements, over MPI's int count");
  Outgoing out;
  out.microbatch = microbatch;
  out.header[0] = t.shape().rank();
  for (int i = 0; i < t.shape().rank(); ++i) out.header[1 + static_cast<size_t>(i)] = t.shape()[i];
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
        // The producer's work failed: its step fails on this rank, which ends the job
        // (faults.h). Sending garbage would only hide that.
        it = outgoing_.erase(it);
        continue;
      }
      const Tensor& t = out.message.tensor;
      BRIGADE_MPI_CHECK(MPI_Isend(out.header.data(), header_words, MPI_INT64_T, peer_,
                                  tags_.message(out.microbatch, 0), comm_, &out.requests[0]));
      BRIGADE_MPI_CHECK(MPI_Isend(t.data<float>(), static_cast<int>(t.numel()), MPI_FLOAT, peer_,
                                  tags_.message(out.microbatch, 1), comm_, &out.requests[1]));
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
  auto closed = [&] {
    std::lock_guard<std::mutex> lock(mutex_);
    return closed_;
  };
  auto closed_error = [&] {
    std::lock_guard<std::mutex> lock(mutex_);
    return ChannelClosed(name_ + ": closed while waiting for micro-batch " +
                         std::to_string(microbatch) + " (" + why_ + ")");
  };
  auto what = [&] { return from_peer(microbatch); };

  MPI_Message handle = MPI_MESSAGE_NULL;
  MPI_Status status;
  auto header_here = [&] {
    int here = 0;
    BRIGADE_MPI_CHECK(MPI_Improbe(peer_, tags_.message(microbatch, 0), comm_, &here, &handle, &status));
    return here != 0;
  };
  if (!poll_until(faults_, header_here, closed, options_.timeout, what)) throw closed_error();
  Header header{};
  int count = 0;
  BRIGADE_MPI_CHECK(MPI_Get_count(&status, MPI_INT64_T, &count));
  BRIGADE_CHECK(count == header_words, what() << ": a header of " << count << " words, expected "
                                              << header_words << "; is rank " << peer_
                                              << " running the same program?");
  BRIGADE_MPI_CHECK(MPI_Mrecv(header.data(), header_words, MPI_INT64_T, &handle, MPI_STATUS_IGNORE));
  BRIGADE_CHECK(header[0] >= 0 && header[0] <= Shape::max_rank &&
                    header[5] == static_cast<int64_t>(DType::float32),
                what() << ": a header that is not a float32 tensor of rank 0 to 4 (rank "
                       << header[0] << ", dtype " << header[5] << ")");
  const Shape shape(std::vector<int64_t>(header.begin() + 1, header.begin() + 1 + header[0]));

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
    arrived = poll_until(faults_, payload_here, closed, options_.timeout, what);
  } catch (...) {
    give_up();
    throw;
  }
  if (!arrived) {
    give_up();
    throw closed_error();
  }
  Message message{tensor, Event()};
  message.ready.record(stream_);
  return message;
}

void MpiLink::close(const std::string& why) {
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

void MpiLink::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = false;
  why_.clear();
  outgoing_.remove_if([](const Outgoing& out) { return !out.posted; });
}

}  // namespace brigade::distributed
