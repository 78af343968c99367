// LinkTags: the MPI tags of one link's messages, sized by the schedule's micro-batch count.
//
// MPI matches a message by (communicator, source, tag), and a tag is at most MPI_TAG_UB,
// which the standard lets be as small as 32767 (Open MPI's here is 2^31 - 1). The links
// between two ranks share their communicator, so a tag must name both the link and the
// micro-batch:
//
//   tag(link, mb, part) = (link · (m + 1) + mb) · 2 + part      part 0: header, 1: payload
//
// where m is the step's micro-batch count: 0 .. m-1 are the micro-batches, and the spare
// row mb = m carries a link's control messages (NcclLink: its headers and its NCCL id).
// Both ends know m — they run the same schedule — so they compute the same tags without
// asking each other. Room: (MPI_TAG_UB + 1) / (2(m + 1)) link numbers: with m = 8, 1820
// even at the standard's minimum (an interleaved schedule of 910 stages per rank), 119
// million here. MPI_TAG_UB is read from MPI_COMM_WORLD, the one communicator that carries
// it: the pipeline's communicator (MPI_Comm_split) has no such attribute, and an earlier
// version, reading it there, fell back to 32767 and with a fixed field of 4096 micro-batches
// had 4 link numbers left — 2 stages per rank.
//
// Why not a communicator per link, which would free the tag for the micro-batch alone:
// making one (MPI_Comm_create_group, MPI_Comm_split) is collective, so both ends would have
// to make their links in one agreed order at start-up, and each costs an MPI context id.
// The tag arithmetic needs no traffic and no order, and a link stays a local object.
// The one cost: two ends given different m would use different tags and never match; the
// receive then ends at the deadline (poll.h), naming the silent rank.
#pragma once

#include <string>

#include "pipeline/distributed/mpi_session.h"

namespace brigade::distributed {

class LinkTags {
 public:
  // The tags of link number `link` to `peer` on `comm`. Throws a brigade::Error naming the
  // link `name` unless `peer` is a rank of `comm`, m >= 1, and `link` fits in `comm`'s tag
  // space for m micro-batches.
  LinkTags(const std::string& name, MPI_Comm comm, int peer, int link, int microbatches);

  int microbatches() const { return m_; }
  int message(int microbatch, int part) const { return (link_ * (m_ + 1) + microbatch) * 2 + part; }
  int control(int part) const { return message(m_, part); }

  // The largest link number MPI_TAG_UB allows with m micro-batches (-1: none).
  static int max_link(int microbatches);
  // Throws a brigade::Error naming the link unless 0 <= microbatch < m.
  void check_microbatch(const std::string& name, int microbatch, const char* verb) const;

 private:
  int link_, m_;
};

}  // namespace brigade::distributed
