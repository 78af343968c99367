// See rank_reports.h.
#include "tools/train/rank_reports.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "engine/device.h"
#include "pipeline/distributed/poll.h"

namespace brigade::train {

namespace dist = brigade::distributed;

namespace {

// The clock exchange's messages: apart from gather_model's on the same communicator (whose
// tags are a stage's tensor indices), so that no message of one can match the other.
constexpr int kClockTag = 32000;  // MPI allows tags up to 32767 at least
// Round trips per rank: the shortest bounds the error best (clock_offset_ns).
constexpr int kClockRounds = 8;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int rank_in(MPI_Comm comm) {
  int rank = 0;
  BRIGADE_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  return rank;
}

// On rank 0: rank `peer`'s steady clock minus rank 0's, in ns (Cristian's algorithm). Rank 0
// reads its clock (a), pings the peer, which answers with its own clock's reading (b); the
// answer arrives at c. The peer read b at about (a + c) / 2 on rank 0's clock, within
// (c - a) / 2, so the round with the shortest trip is kept: a round whose ping waited on a
// peer asleep between polls is long. On the peer: answers the pings, returns 0. The other
// ranks do not call it.
int64_t clock_offset_ns(const ReportChannel& channel, int peer) {
  const bool asking = rank_in(channel.comm) == 0;
  const std::string what = "the clock of rank " + std::to_string(peer);
  int64_t best_trip = INT64_MAX, offset = 0;
  for (int round = 0; round < kClockRounds; ++round) {
    const auto word = std::make_shared<int64_t>(0);  // the ping's, then the answer's
    MPI_Request request = MPI_REQUEST_NULL;
    if (asking) {
      const int64_t a = now_ns();
      BRIGADE_MPI_CHECK(MPI_Isend(word.get(), 1, MPI_INT64_T, peer, kClockTag, channel.comm,
                                  &request));
      channel.wait(request, word, what + ": its ping");
      BRIGADE_MPI_CHECK(MPI_Irecv(word.get(), 1, MPI_INT64_T, peer, kClockTag, channel.comm,
                                  &request));
      channel.wait(request, word, what + ": its answer");
      const int64_t c = now_ns();
      if (c - a < best_trip) best_trip = c - a, offset = *word - (a + (c - a) / 2);
    } else {
      BRIGADE_MPI_CHECK(
          MPI_Irecv(word.get(), 1, MPI_INT64_T, 0, kClockTag, channel.comm, &request));
      channel.wait(request, word, what + ": rank 0's ping");
      *word = now_ns();
      BRIGADE_MPI_CHECK(
          MPI_Isend(word.get(), 1, MPI_INT64_T, 0, kClockTag, channel.comm, &request));
      channel.wait(request, word, what + ": the answer to rank 0");
    }
  }
  return offset;
}

// A trace event as it travels: plain numbers, copied as bytes (every rank runs this program).
struct PackedEvent {
  int32_t device, lane, stage, op, microbatch, unused;
  double start, end;  // ms from the sending rank's time 0
};
static_assert(std::is_trivially_copyable_v<PackedEvent>);

// What a rank sends of its timeline: its time 0 on its own clock and its bytes sent, then its
// events.
struct PackedHeader {
  int64_t zero_ns;
  uint64_t sent_bytes;
};
static_assert(std::is_trivially_copyable_v<PackedHeader>);

}  // namespace

std::string pack_timeline(const pipeline::Timeline& t, int64_t zero_ns) {
  std::string out(sizeof(PackedHeader) + t.events.size() * sizeof(PackedEvent), '\0');
  const PackedHeader header{zero_ns, t.sent_bytes};
  std::memcpy(out.data(), &header, sizeof header);
  char* at = out.data() + sizeof header;
  for (const pipeline::TimelineEvent& e : t.events) {
    const PackedEvent p{e.device, e.lane, e.action.stage, static_cast<int32_t>(e.action.op),
                        e.action.microbatch, 0, e.start, e.end};
    std::memcpy(at, &p, sizeof p);
    at += sizeof p;
  }
  return out;
}

uint64_t unpack_timeline_into(pipeline::Timeline& t, const std::string& bytes,
                              int64_t offset_ns, int64_t zero_ns) {
  PackedHeader header{};
  BRIGADE_CHECK(bytes.size() >= sizeof header &&
                    (bytes.size() - sizeof header) % sizeof(PackedEvent) == 0,
                "--trace: a rank's events came in " << bytes.size() << " bytes");
  std::memcpy(&header, bytes.data(), sizeof header);
  // The sender's time 0 on this rank's clock, in ms after this rank's own time 0.
  const double shift_ms = static_cast<double>(header.zero_ns - offset_ns - zero_ns) / 1e6;
  for (size_t at = sizeof header; at < bytes.size(); at += sizeof(PackedEvent)) {
    PackedEvent p{};
    std::memcpy(&p, bytes.data() + at, sizeof p);
    t.events.push_back({p.device, p.lane,
                        pipeline::Action{p.stage, static_cast<pipeline::Op>(p.op), p.microbatch},
                        p.start + shift_ms, p.end + shift_ms});
  }
  return header.sent_bytes;
}

void ReportChannel::wait(MPI_Request& request, std::shared_ptr<void> buffers,
                         const std::string& what) const {
  dist::wait_for_request(faults, request, std::move(buffers), timeout, [&] { return what; });
}

std::vector<std::string> ReportChannel::gather(const std::string& mine,
                                               const std::string& what) const {
  int size = 0;
  BRIGADE_MPI_CHECK(MPI_Comm_size(comm, &size));
  const bool root = rank_in(comm) == 0;
  BRIGADE_CHECK(mine.size() <= INT_MAX, what << ": " << mine.size() << " bytes to gather");
  // On the heap: MPI's until the calls complete (poll.h, wait_for_request).
  struct Buffers {
    std::string mine, all;
    int length = 0;
    std::vector<int> lengths, offsets;  // [rank], on rank 0
  };
  const auto b = std::make_shared<Buffers>();
  b->mine = mine;
  b->length = static_cast<int>(mine.size());
  if (root) b->lengths.assign(static_cast<size_t>(size), 0);
  MPI_Request request = MPI_REQUEST_NULL;
  BRIGADE_MPI_CHECK(MPI_Igather(&b->length, 1, MPI_INT, b->lengths.data(), 1, MPI_INT, 0, comm,
                                &request));
  wait(request, b, what + ": the sizes");
  size_t total = 0;
  for (int length : b->lengths) {
    b->offsets.push_back(static_cast<int>(total));
    total += static_cast<size_t>(length);
  }
  BRIGADE_CHECK(total <= INT_MAX, what << ": " << total << " bytes to gather");
  b->all.resize(total);
  BRIGADE_MPI_CHECK(MPI_Igatherv(b->mine.data(), b->length, MPI_BYTE, b->all.data(),
                                 b->lengths.data(), b->offsets.data(), MPI_BYTE, 0, comm,
                                 &request));
  wait(request, b, what);
  std::vector<std::string> out;
  for (size_t r = 0; r < b->lengths.size(); ++r)
    out.push_back(b->all.substr(static_cast<size_t>(b->offsets[r]),
                                static_cast<size_t>(b->lengths[r])));
  return out;
}

std::vector<double> peak_words(const std::map<std::string, uint64_t>& peaks, int rank, int ranks,
                               int slots) {
  BRIGADE_CHECK(std::cmp_less_equal(peaks.size(), slots),
                "--metrics: rank " << rank << " measured " << peaks.size()
                                   << " devices' peaks, more than its pipeline's " << slots);
  std::vector<double> words(static_cast<size_t>(ranks) * static_cast<size_t>(slots) * 3, 0.0);
  size_t at = static_cast<size_t>(rank) * static_cast<size_t>(slots) * 3;
  for (const auto& [name, bytes] : peaks) {
    // Any index reads back: the name is of this rank's own device.
    const Device d = Device::parse(name, std::numeric_limits<int>::max());
    words[at++] = static_cast<double>(static_cast<int>(d.kind) + 1);
    words[at++] = static_cast<double>(d.index);
    words[at++] = static_cast<double>(bytes);
  }
  return words;
}

std::map<std::string, uint64_t> peaks_of_words(std::span<const double> summed, int slots) {
  std::map<std::string, uint64_t> peaks;
  const size_t per_rank = static_cast<size_t>(slots) * 3;
  for (size_t at = 0; at + 3 <= summed.size(); at += 3) {
    if (summed[at] == 0) continue;  // an empty slot
    const Device d{static_cast<DeviceKind>(static_cast<int>(summed[at]) - 1),
                   static_cast<int>(summed[at + 1])};
    peaks["rank " + std::to_string(at / per_rank) + " " + d.str()] =
        static_cast<uint64_t>(summed[at + 2]);
  }
  return peaks;
}

// Clocks: each rank's events are in ms from its own step's start on its own steady clock, and
// the ranks' clocks differ (one per host; and the steps start apart). Rank 0 measures each
// peer's clock against its own (clock_offset_ns) and moves the peer's events by the difference
// of the two time 0s on its own clock, so that a send and its receive line up within half the
// fastest round trip between the two ranks. The offset is measured as the job ends, after the
// last evaluation and checkpoint: two hosts' clocks drift apart over that time (a few parts per
// million; up to 500 while one is slewed), microseconds a second, so a long end widens it.
// A peer whose step began before rank 0's has events before 0: every event is then moved
// later by as much, the earliest at 0 (a trace's axis starts there).
void gather_timeline(const ReportChannel& channel, int pipeline_ranks,
                     pipeline::Timeline& timeline, std::chrono::steady_clock::time_point zero) {
  const int rank = rank_in(channel.comm);
  std::vector<int64_t> offsets(static_cast<size_t>(pipeline_ranks), 0);  // [rank], on rank 0
  for (int peer = 1; peer < pipeline_ranks; ++peer)
    if (rank == 0 || rank == peer)
      offsets[static_cast<size_t>(peer)] = clock_offset_ns(channel, peer);
  const int64_t zero_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(zero.time_since_epoch()).count();
  const bool sends = rank > 0 && rank < pipeline_ranks;
  const std::vector<std::string> all =
      channel.gather(sends ? pack_timeline(timeline, zero_ns) : std::string(),
                     "the ranks' trace events");
  if (all.empty()) return;  // not rank 0
  for (int peer = 1; peer < pipeline_ranks; ++peer)
    timeline.sent_bytes += unpack_timeline_into(timeline, all[static_cast<size_t>(peer)],
                                                offsets[static_cast<size_t>(peer)], zero_ns);
  double earliest = 0;
  for (const pipeline::TimelineEvent& e : timeline.events) earliest = std::min(earliest, e.start);
  for (pipeline::TimelineEvent& e : timeline.events) e.start -= earliest, e.end -= earliest;
  // An arrow from each send to its receive, now that both ranks' are here (a rank's own
  // timeline had none for the sends that cross to another process).
  pipeline::join_sends_to_receives(timeline);
}

}  // namespace brigade::train
