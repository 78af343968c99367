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
//   send(mb, message): the link's stream waits for message.ready (on the GPU, no host wait),
//     ncclSend of the payload is enqueued there, and the header (mb, shape) goes by MPI_Isend
//     on the link's header tag (link_tags.h: the control row of its tags). Both in send
//     order, under one lock: the headers tell the receiver the order of the ncclSends.
//   receive(mb): takes headers in arrival order (= the sender's order), enqueues an ncclRecv
//     into a new tensor for each, with an event after it, until mb's has come; earlier
//     micro-batches wait in a map for their receive(). Returns mb's tensor and event at once:
//     the host never waits for the data.
//   close(why): receivers throw ChannelClosed; later sends are dropped; the communicator is
//     aborted at destruction (a receive it posted may never be matched).
#pragma once

#include <list>
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
  struct SentHeader;
  void take_next_header(int waiting_for);  // receive side: one header in, its ncclRecv out
  void retire_headers();                   // send side (mutex_ held): forget headers MPI has sent

  bool sending_;
  std::unique_ptr<NcclCommunicator> nccl_;  // this end and the peer: ranks 0 (lower) and 1
  int nccl_peer_ = 0;

  std::list<std::unique_ptr<SentHeader>> headers_;  // sent, until MPI completes them (mutex_)
  std::mutex receive_mutex_;                        // one receive takes headers at a time
  std::map<int, pipeline::Message> arrived_;        // receives enqueued, not yet taken
};

}  // namespace brigade::distributed
