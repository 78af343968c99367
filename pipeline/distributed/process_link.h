// ProcessLink: what every Link (pipeline/runtime/link.h) to a stage in another process has,
// whatever carries its bytes. MpiLink (CPU tensors, MPI point-to-point) and NcclLink (CUDA
// tensors, NCCL on a stream) derive from it and hold only how the payload moves.
//
// One object is ONE END of a link: the sending rank makes one with the receiver as `peer`
// and only sends; the receiving rank makes one with the sender as `peer` and only receives.
// Both ends give the same `link` number, from which link_tags.h derives the MPI tags.
//
// What is shared:
//   - the link's identity: its name, the peer, the tags, the device, the deadline of every
//     wait (poll.h), and a stream on that device where received tensors get their events;
//   - the send's checks (a micro-batch of the schedule, an event that was recorded);
//   - close(why) / reset(): a closed end throws ChannelClosed to its receivers;
//   - the header: six int64 words that go by MPI ahead of each payload and tell the receiver
//     the payload's shape. Which six is each link's (MpiLink: rank, dims[4], dtype; NcclLink:
//     micro-batch, rank, dims[4]); the shape is always written as `rank, dims...`
//     (write_shape / read_shape), and a header is sent and taken the same way (post_header /
//     receive_header).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "pipeline/distributed/link_tags.h"
#include "pipeline/distributed/mpi_session.h"
#include "pipeline/distributed/poll.h"
#include "pipeline/runtime/link.h"

namespace brigade::distributed {

// Both links take these (the name is the MPI link's, which came first).
struct MpiLinkOptions {
  std::chrono::milliseconds timeout = default_timeout();  // of every wait (poll.h)
};

class ProcessLink : public pipeline::Link {
 public:
  const std::string& name() const override { return name_; }
  // Receivers blocked now or later throw ChannelClosed; later sends are dropped.
  void close(const std::string& why) override;
  void reset() override;  // reopens this end

 protected:
  // `link` numbers this link among the links on `comm`, the same at both ends, from 0 to
  // LinkTags::max_link(microbatches): e.g. 2·s for "activations s->s+1" and 2·s+1 for
  // "gradients s+1->s". `microbatches`: the schedule's m, the same at both ends; the link
  // carries micro-batches 0 .. m-1. Which devices a link accepts is the derived class's check.
  ProcessLink(std::string name, const MpiSession& session, MPI_Comm comm, int peer, int link,
              int microbatches, Device device, MpiLinkOptions options);

  static constexpr int header_words = 6;
  using Header = std::array<int64_t, header_words>;
  // The shape as `rank, dims...` from words[0] (1 + rank words, at most 5).
  static void write_shape(const Shape& shape, int64_t* words);
  static Shape read_shape(const int64_t* words);  // words[0] already checked to be 0 .. 4

  // Throws unless `microbatch` is one of the schedule's and `message.ready` was recorded.
  void check_send(int microbatch, const pipeline::Message& message) const;
  // MPI_Isend of `header` to the peer on `tag`; `header` must live until `request` completes.
  void post_header(const Header& header, int tag, MPI_Request* request) const;
  // Waits (poll.h) for the peer's next header on `tag` and takes it. `microbatch`: the one the
  // caller waits for, named in the messages. Throws closed_error(microbatch) if closed first.
  Header receive_header(int tag, int microbatch);

  bool closed() const;
  pipeline::ChannelClosed closed_error(int microbatch) const;
  std::string from_peer(int microbatch) const;  // "activations 0->1: micro-batch 3 from rank 0"
  // With mutex_ held: close (false if already closed, and nothing changes) / reopen.
  bool close_locked(const std::string& why);
  void reopen_locked();

  const std::string name_;
  FaultLine& faults_;
  const MPI_Comm comm_;
  const int peer_;
  const LinkTags tags_;
  const Device device_;
  const MpiLinkOptions options_;
  Stream stream_;  // on device_: where received tensors' events are recorded

  mutable std::mutex mutex_;  // closed_, why_, and what the derived class guards with it
  bool closed_ = false;
  std::string why_;
};

}  // namespace brigade::distributed
