// Not NCCL's: what a test of the emulated NCCL (kernels/emu/nccl) needs to see that a GPU does
// not show. A send that waits for its receiver is, on a GPU, a kernel spinning; a test can only
// see its stream busy, which proves nothing about why. This says when the waiting starts.
#pragma once

#include <functional>

namespace brigade::emu {

// `hook` is called on the stream's worker thread, once per ncclSend, when the send has started
// and found that its peer has not posted the matching receive: it now holds its stream until
// that receive comes. `what` names it ("ncclSend to rank 1"). An empty function removes it.
void set_nccl_send_waits_hook(std::function<void(const char* what)> hook);

}  // namespace brigade::emu
