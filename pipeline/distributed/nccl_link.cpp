#include "pipeline/distributed/nccl_link.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <optional>

namespace brigade::distributed {

using pipeline::Message;

NcclLink::NcclLink(std::string name, const MpiSession& session, MPI_Comm comm, int peer,
                   int link, int microbatches, Device gpu, bool sending,
                   MpiLinkOptions options)
    : ProcessLink(std::move(name), session, comm, peer, link, microbatches, gpu, options,
                  /*in_send_order=*/true),
      sending_(sending) {
  BRIGADE_CHECK(gpu.is_cuda(), name_ << ": an NcclLink carries CUDA tensors; " << gpu
                                     << " is not a GPU (use an MpiLink)");
  int me = 0;
  BRIGADE_MPI_CHECK(MPI_Comm_rank(comm, &me));
  BRIGADE_CHECK(peer != me, name_ << ": peer rank " << peer << " is this rank; an NcclLink joins two");

  // The two ends' communicator: the lower rank makes the id and sends it. On the heap: a
  // receive given up on may still land there (poll.h, wait_for_request).
  const auto id = std::make_shared<ncclUniqueId>();
  const int id_tag = tags_.control(1);
  if (me < peer) {
    BRIGADE_NCCL_RANK_CHECK(ncclGetUniqueId(id.get()));
    BRIGADE_MPI_CHECK(
        MPI_Send(id.get(), static_cast<int>(sizeof *id), MPI_BYTE, peer, id_tag, comm));
  } else {
    MPI_Request request = MPI_REQUEST_NULL;
    BRIGADE_MPI_CHECK(
        MPI_Irecv(id.get(), static_cast<int>(sizeof *id), MPI_BYTE, peer, id_tag, comm, &request));
    wait_for_request(faults_, request, id, options_.timeout,
                     [&] { return name_ + ": the NCCL id from rank " + std::to_string(peer_); });
  }
  nccl_ = std::make_unique<NcclCommunicator>(*id, 2, me < peer ? 0 : 1, gpu);
  nccl_peer_ = me < peer ? 1 : 0;

  // Open the connection now, while both ends are here anyway: NCCL connects peers on first
  // use, and that first use would otherwise block a send() until the receiver came.
  Tensor one = Tensor::zeros(Shape{1}, stream_);
  BRIGADE_CUDA_CHECK(cudaSetDevice(gpu.index));
  if (sending_) {
    BRIGADE_NCCL_RANK_CHECK(ncclSend(one.data<float>(), 1, ncclFloat, nccl_peer_, nccl_->get(),
                                     stream_.cuda_handle()));
  } else {
    BRIGADE_NCCL_RANK_CHECK(ncclRecv(one.data<float>(), 1, ncclFloat, nccl_peer_, nccl_->get(),
                                     stream_.cuda_handle()));
  }
  stream_.synchronize();
  start_communication(/*receives_ahead=*/!sending_);
}

NcclLink::~NcclLink() {
  stop_communication();  // waits (bounded) for the last headers to leave
  // A receive posted for a micro-batch that never came, or a peer that failed, leaves NCCL
  // work that will never complete: abort it instead of waiting for it.
  if (closed() || faults_.heard() || !arrived_.empty()) nccl_->abort_pending();
}

void NcclLink::send(int microbatch, Message message) {
  BRIGADE_CHECK(sending_, name_ << ": this end was made to receive (sending = false)");
  check_send(microbatch, message);
  const Tensor& t = message.tensor;
  BRIGADE_CHECK(t.defined() && t.device() == device_,
                name_ << ": micro-batch " << microbatch << " is "
                      << (t.defined() ? "on " + t.device().str() : std::string("undefined"))
                      << "; this NcclLink carries tensors of " << device_);
  Outgoing out;
  out.microbatch = microbatch;
  out.header[0] = microbatch;
  write_shape(t.shape(), &out.header[1]);  // (max_rank = 4: a rank-4 shape fills words 1..5)
  out.message = std::move(message);
  queue_send(std::move(out));
}

const Event* NcclLink::gate(const Message& message) const {
  // Unrecorded where the sender's work has no checks behind its device (link.h).
  return message.checked.recorded() ? &message.checked : nullptr;
}

void NcclLink::post_payload(Outgoing& out) {
  // The payload: after the producer's work, on the link's stream. The tensor's memory is
  // declared in use by that stream, so the allocator keeps it until the send is done.
  const Tensor& t = out.message.tensor;
  stream_.wait(out.message.ready);
  t.record_stream(stream_);
  BRIGADE_CUDA_CHECK(cudaSetDevice(device_.index));
  BRIGADE_NCCL_RANK_CHECK(ncclSend(t.data<float>(), static_cast<size_t>(t.numel()), ncclFloat,
                                   nccl_peer_, nccl_->get(), stream_.cuda_handle()));
  // The header, after the ncclSend is enqueued: headers arrive in ncclSend order.
  post_header(out.header, tags_.control(0), &out.requests[0]);
}

ProcessLink::Header NcclLink::failure_header(int microbatch, int64_t bytes) const {
  return {microbatch, kFailedWork, faults_.rank(), bytes, 0, 0};
}

bool NcclLink::receive_ahead() {
  if (receive_error_) return false;  // the peer sends nothing after its failure
  try {
    const std::optional<Header> words = try_receive_header(tags_.control(0), -1);
    if (!words) return false;
    const int64_t mb = (*words)[0], rank = (*words)[1];
    BRIGADE_CHECK(mb >= 0 && mb < tags_.microbatches() &&
                      (rank == kFailedWork || (rank >= 0 && rank <= Shape::max_rank)),
                  name_ << ": a header from rank " << peer_ << " that is not one (micro-batch "
                        << mb << ", rank " << rank << "); is it running the same program?");
    if (rank == kFailedWork) {
      // The sender's work for mb failed: it posted no ncclSend, so no ncclRecv here either.
      receive_error_ = std::make_exception_ptr(
          receive_failure((*words)[2], (*words)[3], static_cast<int>(mb)));
      return true;
    }
    const Shape shape = read_shape(&(*words)[1]);
    Tensor tensor = Tensor::empty(shape, stream_);
    BRIGADE_CUDA_CHECK(cudaSetDevice(device_.index));
    BRIGADE_NCCL_RANK_CHECK(ncclRecv(tensor.data<float>(), static_cast<size_t>(shape.numel()),
                                     ncclFloat, nccl_peer_, nccl_->get(), stream_.cuda_handle()));
    Message message{tensor, Event()};
    message.ready.record(stream_);
    BRIGADE_CHECK(arrived_.emplace(static_cast<int>(mb), message).second,
                  name_ << ": micro-batch " << mb << " arrived twice from rank " << peer_);
  } catch (...) {
    // Another rank's failure heard while the text came, a bad header, a failed call: the
    // receivers throw it.
    receive_error_ = std::current_exception();
  }
  return true;
}

Message NcclLink::receive(int microbatch) {
  BRIGADE_CHECK(!sending_, name_ << ": this end was made to send (sending = true)");
  tags_.check_microbatch(name_, microbatch, "receive");
  Message message;
  std::exception_ptr error;
  auto here = [&] {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = arrived_.find(microbatch); it != arrived_.end()) {
      message = std::move(it->second);
      arrived_.erase(it);
      return true;
    }
    error = receive_error_;
    return error != nullptr;
  };
  if (!poll_until(faults_, here, [&] { return closed(); }, options_.timeout,
                  [&] { return from_peer(microbatch); }))
    throw closed_error(microbatch);
  if (error) std::rethrow_exception(error);
  return message;
}

}  // namespace brigade::distributed
