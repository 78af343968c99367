#include "pipeline/distributed/mpi_link.h"

#include <climits>
#include <memory>

#include "pipeline/distributed/poll.h"

namespace brigade::distributed {

using pipeline::Message;

MpiLink::MpiLink(std::string name, const MpiSession& session, MPI_Comm comm, int peer,
                 int link, int microbatches, Device device, MpiLinkOptions options)
    : ProcessLink(std::move(name), session, comm, peer, link, microbatches, device, options,
                  /*in_send_order=*/false) {
  BRIGADE_CHECK(device.is_cpu(), name_ << ": an MpiLink carries CPU tensors; " << device
                                       << " is a GPU (use an NcclLink)");
  start_communication(/*receives_ahead=*/false);
}

MpiLink::~MpiLink() { stop_communication(); }

void MpiLink::send(int microbatch, Message message) {
  check_send(microbatch, message);
  const Tensor& t = message.tensor;
  BRIGADE_CHECK(t.defined(), name_ << ": micro-batch " << microbatch << " sent without a tensor");
  BRIGADE_CHECK(t.device().is_cpu(), name_ << ": micro-batch " << microbatch << " is on "
                                           << t.device()
                                           << "; an MpiLink carries CPU tensors (use an NcclLink)");
  BRIGADE_CHECK(t.nbytes() <= INT_MAX, name_ << ": micro-batch " << microbatch << " has "
                                             << t.nbytes() << " bytes, over MPI's int count");
  Outgoing out;
  out.microbatch = microbatch;
  write_shape(t.shape(), &out.header[0]);
  out.header[5] = static_cast<int64_t>(t.dtype());
  out.message = std::move(message);
  queue_send(std::move(out));
}

void MpiLink::post_payload(Outgoing& out) {
  post_header(out.header, tags_.message(out.microbatch, 0), &out.requests[0]);
  const Tensor& t = out.message.tensor;
  // float32, or bfloat16 in a bf16 run (kernels/precision.h): the header names which.
  BRIGADE_MPI_CHECK(MPI_Isend(t.storage()->data(), static_cast<int>(t.nbytes()), MPI_BYTE, peer_,
                              tags_.message(out.microbatch, 1), comm_, &out.requests[1]));
}

ProcessLink::Header MpiLink::failure_header(int /*microbatch: the tag says it*/,
                                            int64_t bytes) const {
  return {kFailedWork, faults_.rank(), bytes, 0, 0, 0};
}

Message MpiLink::receive(int microbatch) {
  tags_.check_microbatch(name_, microbatch, "receive");
  auto what = [&] { return from_peer(microbatch); };
  const Header header = receive_header(tags_.message(microbatch, 0), microbatch);
  if (header[0] == kFailedWork) throw receive_failure(header[1], header[2], microbatch);
  BRIGADE_CHECK(header[0] >= 0 && header[0] <= Shape::max_rank &&
                    (header[5] == static_cast<int64_t>(DType::float32) ||
                     header[5] == static_cast<int64_t>(DType::bfloat16)),
                what() << ": a header that is not a float32 or bfloat16 tensor of rank 0 to 4 "
                          "(rank " << header[0] << ", dtype " << header[5] << ")");
  const auto dtype = static_cast<DType>(header[5]);
  const Shape shape = read_shape(&header[0]);

  // The payload lands in host memory of device_ straight from MPI; the stream only carries
  // the event, recorded once the bytes are in.
  Tensor tensor = Tensor::empty(shape, stream_, dtype);
  MPI_Request request = MPI_REQUEST_NULL;
  BRIGADE_MPI_CHECK(MPI_Irecv(tensor.storage()->data(), static_cast<int>(tensor.nbytes()), MPI_BYTE,
                              peer_, tags_.message(microbatch, 1), comm_, &request));
  auto payload_here = [&] {
    int here = 0;
    BRIGADE_MPI_CHECK(MPI_Test(&request, &here, MPI_STATUS_IGNORE));
    return here != 0;
  };
  auto give_up = [&] {
    // Cancel; a receive already matched completes anyway, and MPI may write into the tensor
    // after this link is gone (a failed step's links are destroyed before MPI_Finalize): its
    // memory is kept for the rest of the process.
    MPI_Cancel(&request);
    MPI_Request_free(&request);
    keep_for_mpi(std::make_shared<Tensor>(tensor));
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

}  // namespace brigade::distributed
