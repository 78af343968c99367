// Softmax, fused softmax + cross-entropy and the accuracy count (softmax.cu): the contracts
// of kernels/reference/softmax.h, one warp per row; launches are asynchronous.
//
// A kernel cannot throw, so softmax_cross_entropy reports a label outside [0, classes) in
// its CrossEntropyResult instead (cross_entropy_result.h): a bad row also gets a NaN loss
// and NaN gradients, so an unchecked result cannot look fine.
// Plain declarations: launchers.h includes this list into brigade::emu and brigade::cuda
// (include that header, not this file).

// x, y: (N, classes); y may alias x
void softmax_forward(const float* x, float* y, int64_t N, int64_t classes,
                     const Stream& stream);
// y, dy, dx: (N, classes): dx = y ⊙ (dy - <dy, y>) row by row
void softmax_backward(const float* y, const float* dy, float* dx, int64_t N,
                      int64_t classes, const Stream& stream);
// Floats of workspace softmax_cross_entropy needs: one loss per row.
int64_t softmax_cross_entropy_workspace_floats(int64_t N);
// logits, dlogits: (N, classes)  labels: (N)  workspace: (N)  result: (1), device
// memory. dlogits = (softmax - onehot) / normaliser (may alias logits); result->loss =
// sum of row losses / normaliser; a bad label is reported in *result (see above).
void softmax_cross_entropy(const float* logits, const int32_t* labels, float* dlogits,
                           int64_t N, int64_t classes, float normaliser, float* workspace,
                           CrossEntropyResult* result, const Stream& stream);
// logits: (N, classes)  labels: (N)  correct: (1), overwritten with the number of rows
// whose first largest logit is at the label.
void accuracy_count(const float* logits, const int32_t* labels, int64_t N, int64_t classes,
                    unsigned long long* correct, const Stream& stream);
// The same count of one micro-batch, written with `result` (its softmax_cross_entropy's) into
// *row (device memory): {loss, correct, bad row, bad label} (kernels/micro_batch_tally.h).
// `word` (null: none): a step's verdict word (kernels/step_verdict.h), *word = max(*word,
// failed) when the result holds a bad label — the step's label check, in the same launch.
void tally_cross_entropy(const float* logits, const int32_t* labels, int64_t N, int64_t classes,
                         const CrossEntropyResult* result, MicroBatchTally* row, int32_t* word,
                         int32_t failed, const Stream& stream);
