#include "pipeline/distributed/nccl_link.h"

#include <cuda_runtime_api.h>

namespace brigade::distributed {

using pipeline::Message;

// A header in flight: micro-batch, rank, dims[4]. Kept until MPI has sent it.
struct NcclLink::SentHeader {
  Header words{};
  MPI_Request request = MPI_REQUEST_NULL;
};

NcclLink::NcclLink(std::string name, const MpiSession& session, MPI_Comm comm, int peer,
                   int link, int microbatches, Device gpu, bool sending,
                   MpiLinkOptions options)
    : ProcessLink(std::move(name), session, comm, peer, link, microbatches, gpu, options),
      sending_(sending) {
  BRIGADE_CHECK(gpu.is_cuda(), name_ << ": an NcclLink carries CUDA tensors; " << gpu
                                     << " is not a GPU (use an MpiLink)");
  int me = 0;
  BRIGADE_MPI_CHECK(MPI_Comm_rank(comm, &me));
  BRIGADE_CHECK(peer != me, name_ << ": peer rank " << peer << " is this rank; an NcclLink joins two");

  // The two ends' communicator: the lower rank makes the id and sends it.
  ncclUniqueId id{};
  const int id_tag = tags_.control(1);
  if (me < peer) {
    BRIGADE_NCCL_RANK_CHECK(ncclGetUniqueId(&id));
    BRIGADE_MPI_CHECK(MPI_Send(&id, static_cast<int>(sizeof id), MPI_BYTE, peer, id_tag, comm));
  } else {
    MPI_Request request = MPI_REQUEST_NULL;
    BRIGADE_MPI_CHECK(
        MPI_Irecv(&id, static_cast<int>(sizeof id), MPI_BYTE, peer, id_tag, comm, &request));
    auto here = [&] {
      int done = 0;
      BRIGADE_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
      return done != 0;
    };
    poll_until(faults_, here, [] { return false; }, options_.timeout,
               [&] { return name_ + ": the NCCL id from rank " + std::to_string(peer_); });
  }
  nccl_ = std::make_unique<NcclCommunicator>(id, 2, me < peer ? 0 : 1, gpu);
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
}

NcclLink::~NcclLink() {
  // Headers are small and sent eagerly; wait (bounded) for the last ones to leave.
  try {
    poll_until(
        faults_,
        [&] {
          std::lock_guard<std::mutex> lock(mutex_);
          retire_headers();
          return headers_.empty();
        },
        [] { return false; }, options_.timeout, [&] { return name_ + ": the last headers"; });
  } catch (const std::exception&) {
    // A peer failed or never took them: the job is ending; nothing more to do here.
  }
  // A receive posted for a micro-batch that never came, or a peer that failed, leaves NCCL
  // work that will never complete: abort it instead of waiting for it.
  if (closed() || faults_.heard() || !arrived_.empty()) nccl_->abort_pending();
}

void NcclLink::retire_headers() {
  for (auto it = headers_.begin(); it != headers_.end();) {
    int done = 0;
    BRIGADE_MPI_CHECK(MPI_Test(&(*it)->request, &done, MPI_STATUS_IGNORE));
    it = done ? headers_.erase(it) : std::next(it);
  }
}

void NcclLink::send(int microbatch, Message message) {
  BRIGADE_CHECK(sending_, name_ << ": this end was made to receive (sending = false)");
  check_send(microbatch, message);
  const Tensor& t = message.tensor;
  BRIGADE_CHECK(t.defined() && t.device() == device_,
                name_ << ": micro-batch " << microbatch << " is "
                      << (t.defined() ? "on " + t.device().str() : std::string("undefined"))
                      << "; this NcclLink carries tensors of " << device_);
  auto header = std::make_unique<SentHeader>();
  header->words[0] = microbatch;
  write_shape(t.shape(), &header->words[1]);  // (max_rank = 4: a rank-4 shape fills words 1..5)

  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;
  // The payload: after the producer's work, on the link's stream. The tensor's memory is
  // declared in use by that stream, so the allocator keeps it until the send is done.
  stream_.wait(message.ready);
  t.record_stream(stream_);
  BRIGADE_CUDA_CHECK(cudaSetDevice(device_.index));
  BRIGADE_NCCL_RANK_CHECK(ncclSend(t.data<float>(), static_cast<size_t>(t.numel()), ncclFloat,
                                   nccl_peer_, nccl_->get(), stream_.cuda_handle()));
  // The header, after the ncclSend is enqueued: headers arrive in ncclSend order.
  post_header(header->words, tags_.control(0), &header->request);
  headers_.push_back(std::move(header));
  retire_headers();
}

void NcclLink::take_next_header(int waiting_for) {
  const Header words = receive_header(tags_.control(0), waiting_for);
  const int64_t mb = words[0], rank = words[1];
  BRIGADE_CHECK(mb >= 0 && mb < tags_.microbatches() && rank >= 0 && rank <= Shape::max_rank,
                name_ << ": a header from rank " << peer_ << " that is not one (micro-batch " << mb
                      << ", rank " << rank << "); is it running the same program?");
  const Shape shape = read_shape(&words[1]);
  Tensor tensor = Tensor::empty(shape, stream_);
  BRIGADE_CUDA_CHECK(cudaSetDevice(device_.index));
  BRIGADE_NCCL_RANK_CHECK(ncclRecv(tensor.data<float>(), static_cast<size_t>(shape.numel()),
                                   ncclFloat, nccl_peer_, nccl_->get(), stream_.cuda_handle()));
  Message message{tensor, Event()};
  message.ready.record(stream_);
  BRIGADE_CHECK(arrived_.emplace(static_cast<int>(mb), message).second,
                name_ << ": micro-batch " << mb << " arrived twice from rank " << peer_);
}

Message NcclLink::receive(int microbatch) {
  BRIGADE_CHECK(!sending_, name_ << ": this end was made to send (sending = true)");
  tags_.check_microbatch(name_, microbatch, "receive");
  std::lock_guard<std::mutex> order(receive_mutex_);
  for (;;) {
    if (closed()) throw closed_error(microbatch);
    auto it = arrived_.find(microbatch);
    if (it != arrived_.end()) {
      Message message = std::move(it->second);
      arrived_.erase(it);
      return message;
    }
    take_next_header(microbatch);
  }
}

}  // namespace brigade::distributed
