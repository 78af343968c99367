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
//   - the sending: send() only queues a message; the link's communication thread waits
//     (polling, blocking nothing) until the work behind it has passed or failed — its
//     `gate` — and then posts it (the derived class moves the bytes) or, when that work
//     failed, the failure in its place (below);
//   - close(why) / reset(): a closed end throws ChannelClosed to its receivers and drops the
//     sends not posted yet;
//   - the header: six int64 words that go by MPI ahead of each payload and tell the receiver
//     the payload's shape. Which six is each link's (MpiLink: rank, dims[4], dtype; NcclLink:
//     micro-batch, rank, dims[4]); the shape is always written as `rank, dims...`
//     (write_shape / read_shape), and a header is sent and taken the same way (post_header /
//     receive_header);
//   - the failure in a tensor's place: when the work that writes a micro-batch's tensor
//     failed (a NaN check, a bad label), the sender's header carries kFailedWork where a
//     shape's rank goes (a rank is >= 0), then the failed rank in MPI_COMM_WORLD and the
//     length n of the cause; the cause's n chars follow by MPI on the micro-batch's payload
//     tag (tags_.message(mb, 1)). The receiver throws RankFailed with that cause at once, and
//     both ranks hear it (FaultLine::hear), so each one's host stops at its next wait.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "pipeline/distributed/faults.h"
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
  // Receivers blocked now or later throw ChannelClosed; the sends not posted yet and later
  // ones are dropped (posted ones complete).
  void close(const std::string& why) override;
  void reset() override;  // reopens this end (and drops the sends not posted)

 protected:
  static constexpr int header_words = 6;
  using Header = std::array<int64_t, header_words>;
  static constexpr int64_t kFailedWork = -1;  // in a header's shape-rank word: a failure

  // One queued or posted send; its header, tensor or failure stay here until MPI is done.
  struct Outgoing {
    int microbatch = 0;
    pipeline::Message message;
    Header header{};      // the derived class's header; or its failure header
    std::string failure;  // the cause, sent in the tensor's place when its work failed
    std::array<MPI_Request, 2> requests{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    bool posted = false;
  };

  // `link` numbers this link among the links on `comm`, the same at both ends, from 0 to
  // LinkTags::max_link(microbatches): e.g. 2·s for "activations s->s+1" and 2·s+1 for
  // "gradients s+1->s". `microbatches`: the schedule's m, the same at both ends; the link
  // carries micro-batches 0 .. m-1. Which devices a link accepts is the derived class's check.
  // `in_send_order`: post each send only after every earlier one (NCCL matches in issue
  // order), instead of as soon as its own gate has passed.
  ProcessLink(std::string name, const MpiSession& session, MPI_Comm comm, int peer, int link,
              int microbatches, Device device, MpiLinkOptions options, bool in_send_order);
  ~ProcessLink() override;

  // The communication thread: the derived constructor starts it once its members are made,
  // and its destructor stops it first (it waits, bounded, for the sends in flight). With
  // `receives_ahead`, the thread also calls receive_ahead() every pass, polling (pause up to
  // 1 ms) even with no send queued.
  void start_communication(bool receives_ahead);
  void stop_communication();
  // Queues `out` (its microbatch, message and header filled in) for the thread; dropped if
  // this end is closed.
  void queue_send(Outgoing out);

  // What the derived class does with a send, on the communication thread, mutex_ held:
  // The event whose completion says whether the work behind `message` passed (its failure is
  // rethrown by synchronize()), or null if there is nothing to wait for.
  virtual const Event* gate(const pipeline::Message& message) const = 0;
  // Posts the tensor and its header (out.requests: what MPI must complete).
  virtual void post_payload(Outgoing& out) = 0;
  // The failure header of micro-batch `microbatch` whose cause has `bytes` chars, and the tag
  // it goes on.
  virtual Header failure_header(int microbatch, int64_t bytes) const = 0;
  virtual int header_tag(int microbatch) const = 0;
  // The receiving side's work done ahead of its receive() calls, on the communication thread,
  // mutex_ held (with `receives_ahead` only); true if it took something (the thread then
  // polls again at once).
  virtual bool receive_ahead() { return false; }

  // The receiving side of a failure: `failed_rank` (in MPI_COMM_WORLD) and `bytes` from its
  // header; takes the cause from the peer, hears it (faults.h) and returns it, for the caller
  // to throw.
  RankFailed receive_failure(int64_t failed_rank, int64_t bytes, int microbatch);
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
  // The peer's next header on `tag` if it has come (without waiting), else nothing.
  // `microbatch`: the one expected, for the messages; < 0 if any.
  std::optional<Header> try_receive_header(int tag, int microbatch);

  bool closed() const;
  pipeline::ChannelClosed closed_error(int microbatch) const;
  // "activations 0->1: micro-batch 3 from rank 0" ("...: the next header from..." for mb < 0)
  std::string from_peer(int microbatch) const;

  const std::string name_;
  FaultLine& faults_;
  const MPI_Comm comm_;
  const int peer_;
  const LinkTags tags_;
  const Device device_;
  const MpiLinkOptions options_;
  Stream stream_;  // on device_: where received tensors' events are recorded

  mutable std::mutex mutex_;  // closed_, why_, the sends, and what the derived class guards
  bool closed_ = false;
  std::string why_;

 private:
  void communicate();    // the communication thread
  void advance_sends();  // with mutex_ held: post the sends whose gate passed, retire the done
  void post_failure(Outgoing& out, std::exception_ptr error);

  const bool in_send_order_;
  bool receives_ahead_ = false;
  std::condition_variable wake_;  // a send queued, or stopping
  std::list<Outgoing> outgoing_;  // queued or in flight, in send order (a list: MPI holds
                                  // pointers into its headers)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace brigade::distributed
