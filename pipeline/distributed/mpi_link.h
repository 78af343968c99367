// MpiLink: a Link (pipeline/runtime/link.h) to a stage in another process, over MPI point-to-point.
// CPU tensors: float32, or bfloat16 in a bf16 run (kernels/precision.h). One object is ONE
// END of a link (process_link.h: what every link to another process shares); this file is how
// its bytes move.
//
// On the wire, per micro-batch mb, two messages on `comm` from the sender to the receiver,
// tagged by link_tags.h from the link number and the step's micro-batch count m:
//   header   tag(link, mb, 0)   6 × int64: rank, dims[4], dtype   (the shape: the last
//                                micro-batch may be smaller)
//   payload  tag(link, mb, 1)   numel × 4 or 2 bytes (float32 or bfloat16, as the header says)
// or, when the work that writes the tensor failed on the sender, a failure in its place:
//   header   tag(link, mb, 0)   kFailedWork, the sender's rank in MPI_COMM_WORLD, n
//   payload  tag(link, mb, 1)   n chars: the cause ("activations 1->2: micro-batch 0 not
//                                sent: action 1F0 (stage 1, micro-batch 0): non-finite ...")
// The receiver then throws RankFailed at once (and hears it as a fault notice, faults.h),
// and so does the sender's own host at its next wait (FaultLine::hear of its own rank), so
// a failing rank ends the job with its cause instead of leaving its neighbours waiting.
// The tag names the micro-batch, so pairs match by micro-batch in any order the receiver
// asks for them (MPI_Improbe on the header's tag, then the payload's).
//
// send(mb, message) never blocks the caller: it queues the pair for the link's
// communication thread, which waits (polling, without blocking anything else) for
// `message.ready`, then posts MPI_Isend for the header and the payload, keeps the tensor
// alive until both complete, and makes MPI progress for them. So two neighbours sending to
// each other at the same moment cannot deadlock: neither send waits for a receive.
//
// receive(mb) blocks its caller until mb's header and payload are here (poll.h: it also
// wakes for close(), for another rank's failure, and at the deadline), lands the payload in
// a new tensor on `device` and returns it with an event recorded on the link's stream there.
// A receive given up while its payload is on its way (closed, the deadline, another rank's
// failure) cancels the payload's MPI_Irecv; one already matched completes anyway, whenever
// its bytes come, so that tensor is kept for the rest of the process (poll.h, keep_for_mpi),
// not freed with the link.
//
// close(why): receivers blocked now or later throw ChannelClosed; later sends are dropped
// (sends already posted still complete). reset(): reopens this end. A distributed step that
// fails ends the whole job (faults.h), so no message of a failed step is ever left in MPI
// for a later step to take.
#pragma once

#include <string>

#include "pipeline/distributed/process_link.h"

namespace brigade::distributed {

class MpiLink final : public ProcessLink {
 public:
  // The arguments are ProcessLink's (process_link.h); `device` must be a CPU.
  MpiLink(std::string name, const MpiSession& session, MPI_Comm comm, int peer, int link,
          int microbatches, Device device, MpiLinkOptions options = {});
  ~MpiLink() override;  // waits (bounded) for the sends in flight
  MpiLink(const MpiLink&) = delete;
  MpiLink& operator=(const MpiLink&) = delete;

  void send(int microbatch, pipeline::Message message) override;
  pipeline::Message receive(int microbatch) override;

 private:
  // ProcessLink's sending: a send waits for `message.ready` (a CPU stream's event carries
  // its work's failure), then posts header and payload by MPI_Isend on the micro-batch's tags.
  const Event* gate(const pipeline::Message& message) const override { return &message.ready; }
  void post_payload(Outgoing& out) override;
  Header failure_header(int microbatch, int64_t bytes) const override;
  int header_tag(int microbatch) const override { return tags_.message(microbatch, 0); }
};

}  // namespace brigade::distributed
