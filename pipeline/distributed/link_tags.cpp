#include "pipeline/distributed/link_tags.h"

namespace brigade::distributed {

namespace {
// MPI_TAG_UB is an attribute of MPI_COMM_WORLD alone, and bounds the tags of every
// communicator: asked of a communicator made by MPI_Comm_split (a pipeline's), Open MPI
// reports it absent.
int64_t tag_ub() {
  void* value = nullptr;
  int found = 0;
  BRIGADE_MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found));
  return found ? *static_cast<int*>(value) : 32767;  // the standard's minimum
}
}  // namespace

int LinkTags::max_link(int microbatches) {
  return static_cast<int>((tag_ub() + 1) / (2 * (int64_t{microbatches} + 1))) - 1;
}

LinkTags::LinkTags(const std::string& name, MPI_Comm comm, int peer, int link, int microbatches)
    : link_(link), m_(microbatches) {
  int size = 0;
  BRIGADE_MPI_CHECK(MPI_Comm_size(comm, &size));
  BRIGADE_CHECK(peer >= 0 && peer < size,
                name << ": peer rank " << peer << " is not in the communicator (" << size
                     << " ranks)");
  BRIGADE_CHECK(microbatches >= 1, name << ": " << microbatches
                                        << " micro-batches per step; a link needs at least 1");
  const int most = max_link(microbatches);
  BRIGADE_CHECK(most >= 0, name << ": " << microbatches << " micro-batches per step are more "
                                << "than this MPI's tags (MPI_TAG_UB " << tag_ub()
                                << ") can number: at most " << (tag_ub() + 1) / 4 - 1);
  BRIGADE_CHECK(link >= 0 && link <= most,
                name << ": link number " << link << " is out of range: with " << microbatches
                     << " micro-batches per step this MPI's tags (MPI_TAG_UB " << tag_ub()
                     << ") allow link numbers 0 to " << most);
}

void LinkTags::check_microbatch(const std::string& name, int microbatch, const char* verb) const {
  BRIGADE_CHECK(microbatch >= 0 && microbatch < m_,
                name << ": cannot " << verb << " micro-batch " << microbatch
                     << ": this link carries micro-batches 0 to " << m_ - 1 << " (" << m_
                     << " per step)");
}

}  // namespace brigade::distributed
