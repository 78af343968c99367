// NcclLink: a Link (pipeline/runtime/link.h) to a stage in another process for CUDA tensors:
// the shape goes by MPI (a small header), the payload by ncclSend/ncclRecv on a communication
// stream of the link's own. CUDA builds with NCCL only.
//
// One object is one end (process_link.h: what every link to another process shares; this
// file is how its bytes move): the sending rank makes it with `sending` = true and only
// sends, the receiving rank with false and only receives. Construction is collective between
// the two ends: the lower rank makes an ncclUniqueId and sends it by MPI, both join a
// two-rank NCCL communicator and exchange one float to open the connection. Make a rank's
// links in ascending link number (the runtime does): then no two ranks can wait for each
// other in opposite orders.
//
// Why a communicator and a stream per link (README.md, "Why neighbours cannot deadlock"): a
// ncclSend occupies its stream until the peer's ncclRecv runs, and NCCL matches the
// operations between two ranks in the order they were issued, not by tag. With its own
// stream, a link's send blocks only the link's later sends; with its own communicator, the
// order it must keep is its own.
//
//   send(mb, message): queues the message for the link's communication thread
//     (process_link.h), which takes them in send order. It waits — polling, on its own
//     thread, never the stage's host thread — for `message.checked`: on a GPU a failed check
//     (a NaN under --check-finite, a bad label) is not an error of the GPU's streams but a
//     verdict made on a host "check stream" behind the GPU (pipeline/runtime/step_checks.h),
//     and without this wait the NaN would travel on, a later stage would fail its own check,
//     and ranks would name that one. Then, if every check passed: the link's stream waits for
//     message.ready (on the GPU, no host wait), ncclSend of the payload is enqueued there,
//     and the header (mb, shape) goes by MPI_Isend on the link's header tag (link_tags.h: the
//     control row of its tags); the headers tell the receiver the order of the ncclSends.
//     If a check failed: no ncclSend for mb. The header says so instead (mb, kFailedWork,
//     the failed world rank, n) and the cause's n chars follow by MPI on mb's payload tag
//     (tags_.message(mb, 1)), and this rank hears its own failure (faults.h).
//   receiving: the receiving end's communication thread takes the headers as they arrive
//     (= the sender's order) and enqueues an ncclRecv into a new tensor for each, with an
//     event after it, into a map by micro-batch. So every ncclSend whose header went is
//     matched while this process lives, whatever its host is doing: a sender's GPU never
//     waits in an ncclSend for a host that stopped receiving (a rank that failed, or that
//     waits elsewhere), and the sender's host, whose streams would wait behind that send,
//     gets to its next wait and hears the failure. A failure header posts no ncclRecv (its
//     sender posted no ncclSend: both ends skip the same one, so NCCL's in-order matching
//     holds), and the thread takes nothing more.
//   receive(mb): waits (poll.h) until mb's tensor is in the map and returns it with its event
//     at once: the host never waits for the data. After a failure header, whichever
//     micro-batch it named, it throws RankFailed with the sender's cause.
//   close(why): receivers throw ChannelClosed; sends not posted yet and later ones are
//     dropped; the communicator is aborted at destruction (a receive it posted may never be
//     matched).
#pragma once

#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "pipeline/distributed/nccl_communicator.h"
#include "pipeline/distributed/process_link.h"

namespace brigade::distributed {

class NcclLink final : public ProcessLink {
 public:
  // The arguments are ProcessLink's (process_link.h); `gpu` must be a CUDA device. Its
  // tags_.control(0) carries the headers, tags_.control(1) the NCCL id; stream_ is the
  // link's communication stream.
  NcclLink(std::string name, const MpiSession& session, MPI_Comm comm, int peer, int link,
           int microbatches, Device gpu, bool sending, MpiLinkOptions options = {});
  ~NcclLink() override;
  NcclLink(const NcclLink&) = delete;
  NcclLink& operator=(const NcclLink&) = delete;

  void send(int microbatch, pipeline::Message message) override;
  pipeline::Message receive(int microbatch) override;

 private:
  // ProcessLink's sending (see above), on the communication thread.
  const Event* gate(const pipeline::Message& message) const override;
  void post_payload(Outgoing& out) override;
  Header failure_header(int microbatch, int64_t bytes) const override;
  int header_tag(int /*microbatch: the header says it*/) const override { return tags_.control(0); }
  // The receiving end, on the communication thread: each header as it comes, its ncclRecv
  // posted at once, whatever this rank's host is doing (see above).
  bool receive_ahead() override;

  bool sending_;
  std::unique_ptr<NcclCommunicator> nccl_;  // this end and the peer: ranks 0 (lower) and 1
  int nccl_peer_ = 0;

  // Guarded by mutex_ (ProcessLink's).
  std::map<int, pipeline::Message> arrived_;  // receives enqueued, not yet taken
  std::exception_ptr receive_error_;  // the peer's failure (RankFailed), or a bad header
};

}  // namespace brigade::distributed
