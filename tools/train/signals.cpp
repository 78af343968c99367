#include "tools/train/signals.h"

#include <csignal>

#include "engine/output_file.h"

namespace brigade::train {

namespace {
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_signal == 0) {
    g_signal = sig;
    return;
  }
  // The second: the program ends now, and a file it was writing (a checkpoint) is left as it
  // was before, without the temporary the new one was going to.
  remove_unfinished_temporaries();
  struct sigaction fallback = {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(sig, &fallback, nullptr);
  std::raise(sig);  // blocked in its own handler: delivered, and fatal, when this returns
}
}  // namespace

void install_stop_handlers() {
  struct sigaction action = {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  // The other stop signal waits while this handler runs: the second one never interrupts the
  // first halfway.
  sigaddset(&action.sa_mask, SIGINT);
  sigaddset(&action.sa_mask, SIGTERM);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int stop_signal() { return g_signal; }

}  // namespace brigade::train
