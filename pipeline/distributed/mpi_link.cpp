#include "pipeline/distributed/mpi_link.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <mutex>

namespace brigade::distributed {

using pipeline::Message;

// One queued or posted send. Its header and tensor stay here until both sends complete.
struct MpiLink::Outgoing {
  int microbatch = 0;
  Message message;
  Header header{};  // rank, dims[4], dtype
  std::array<MPI_Request, 2> requests{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  bool posted = false;
};

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
        // The producer's work failed: its step fails on this rank, which ends the job
        // (faults.h). Sending garbage would only hide that.
        it = outgoing_.erase(it);
        continue;
      }
      const Tensor& t = out.message.tensor;
      post_header(out.header, tags_.message(out.microbatch, 0), &out.requests[0]);
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
  auto what = [&] { return from_peer(microbatch); };
  const Header header = receive_header(tags_.message(microbatch, 0), microbatch);
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
