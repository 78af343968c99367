#include "pipeline/distributed/process_link.h"

#include <vector>

namespace brigade::distributed {

using pipeline::ChannelClosed;
using pipeline::Message;

ProcessLink::ProcessLink(std::string name, const MpiSession& session, MPI_Comm comm, int peer,
                         int link, int microbatches, Device device, MpiLinkOptions options)
    : name_(std::move(name)),
      faults_(session.faults()),
      comm_(comm),
      peer_(peer),
      tags_(name_, comm, peer, link, microbatches),
      device_(device),
      options_(options),
      stream_(Stream::create(device)) {}

void ProcessLink::write_shape(const Shape& shape, int64_t* words) {
  words[0] = shape.rank();
  for (int i = 0; i < shape.rank(); ++i) words[1 + i] = shape[i];
}

Shape ProcessLink::read_shape(const int64_t* words) {
  return Shape(std::vector<int64_t>(words + 1, words + 1 + words[0]));
}

void ProcessLink::check_send(int microbatch, const Message& message) const {
  tags_.check_microbatch(name_, microbatch, "send");
  BRIGADE_CHECK(message.ready.recorded(),
                name_ << ": micro-batch " << microbatch
                      << " sent with an event that was never recorded; record it after the "
                         "work that writes the tensor, then send");
}

void ProcessLink::post_header(const Header& header, int tag, MPI_Request* request) const {
  BRIGADE_MPI_CHECK(MPI_Isend(header.data(), header_words, MPI_INT64_T, peer_, tag, comm_, request));
}

ProcessLink::Header ProcessLink::receive_header(int tag, int microbatch) {
  MPI_Message handle = MPI_MESSAGE_NULL;
  MPI_Status status;
  auto here = [&] {
    int flag = 0;
    BRIGADE_MPI_CHECK(MPI_Improbe(peer_, tag, comm_, &flag, &handle, &status));
    return flag != 0;
  };
  auto what = [&] { return from_peer(microbatch); };
  if (!poll_until(faults_, here, [&] { return closed(); }, options_.timeout, what))
    throw closed_error(microbatch);
  int count = 0;
  BRIGADE_MPI_CHECK(MPI_Get_count(&status, MPI_INT64_T, &count));
  BRIGADE_CHECK(count == header_words, what() << ": a header of " << count << " words, expected "
                                              << header_words << "; is rank " << peer_
                                              << " running the same program?");
  Header header{};
  BRIGADE_MPI_CHECK(MPI_Mrecv(header.data(), header_words, MPI_INT64_T, &handle, MPI_STATUS_IGNORE));
  return header;
}

bool ProcessLink::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

ChannelClosed ProcessLink::closed_error(int microbatch) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ChannelClosed(name_ + ": closed while waiting for micro-batch " +
                       std::to_string(microbatch) + " (" + why_ + ")");
}

std::string ProcessLink::from_peer(int microbatch) const {
  return name_ + ": micro-batch " + std::to_string(microbatch) + " from rank " +
         std::to_string(peer_);
}

bool ProcessLink::close_locked(const std::string& why) {
  if (closed_) return false;
  closed_ = true;
  why_ = why;
  return true;
}

void ProcessLink::reopen_locked() {
  closed_ = false;
  why_.clear();
}

void ProcessLink::close(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  close_locked(why);
}

void ProcessLink::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  reopen_locked();
}

}  // namespace brigade::distributed
