// A step's verdict on a GPU (step_verdict.cu; the words and their codes: kernels/
// step_verdict.h). Plain declarations: launchers.h includes this list into brigade::emu and
// brigade::cuda. Launches are asynchronous and never block the host.

// *word = max(*word, failed) when some element of t[0, n) is NaN or infinite.
void step_verdict_check_finite(const float* t, int64_t n, int32_t* word, int32_t failed,
                               const Stream& stream);
