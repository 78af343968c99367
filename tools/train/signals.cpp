#include "tools/train/signals.h"

#include <csignal>

#include "engine/output_file.h"

namespace brigade::train {

namespace {
volatile std::sig_atomic_t g_signal = 0;

// The program ends now, killed by `sig`, and a file it was writing (a checkpoint, --save-initial)
// is left as it was before, without the temporary the new one was going to.
void end_now(int sig) {
  remove_unfinished_temporaries();
  struct sigaction fallback = {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(sig, &fallback, nullptr);
  std::raise(sig);  // blocked in its own handler: delivered, and fatal, when this returns
}

extern "C" void on_stop_signal(int sig) {
  if (g_signal == 0) {
    g_signal = sig;
    return;
  }
  end_now(sig);  // the second
}

extern "C" void on_signal_before_training(int sig) { end_now(sig); }

void install(void (*handler)(int)) {
  struct sigaction action = {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  // The other stop signal waits while this handler runs: the second one never interrupts the
  // first halfway.
  sigaddset(&action.sa_mask, SIGINT);
  sigaddset(&action.sa_mask, SIGTERM);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}
}  // namespace

void install_exit_handlers() { install(on_signal_before_training); }

void install_stop_handlers() { install(on_stop_signal); }

int stop_signal() { return g_signal; }

}  // namespace brigade::train
