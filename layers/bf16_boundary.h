// Precision bf16's layer boundaries (kernels/precision.h): in a bf16 run, the output of every
// layer and the gradient of its input are bf16 values (stored in float32), as under PyTorch's
// autocast. A pipeline may cut the model at any layer boundary, so with this rule a stage's
// input, its output and the gradients it receives and sends are bf16 values on any partition:
// one device and N devices compute the same thing, and the tensors cross between stages in
// bf16 storage losslessly (pipeline/runtime/README.md).
//
// Module::forward applies both halves to every layer: its output rounded on its stream, and
// the node it recorded wrapped so that the input gradient is rounded too. Rounding is in
// place (one pass, no memory), so the tape's own saved output — a ReLU's mask, a max-pool's
// winner — is the rounded value the next layer sees, on one device as on many. Where the
// result is a view of the layer's input (Flatten), the rounded values go to a new tensor
// instead: the input may be the caller's batch, which a layer never writes.
//
// A result that already holds bf16 values (Tensor::holds_bf16_values) is not rounded at all —
// rounding would write the same bits: Flatten's view of a layer's output, or of the gradient
// of its own output; a ReLU of either. That is no kernel launch, and no copy for Flatten.
// Which tensors say so: each rounded here, each received from another stage in bf16 storage
// (ops::widen_to_float32), and what the ops that select elements make of them (kernels/ops.h).
//
// Fused: a layer asks the op that writes its output or its input gradient to round it in the
// kernel that writes it (boundary_rounding(), ops::Bf16Rounding): a hand-written GPU kernel
// then rounds as it stores — Dropout both ways, Dense's forward (bias and ReLU's epilogue, on
// either path), a ReLU's mask written into a convolution's input gradient, and on the
// hand-written path Conv2D's forward and backward-data, Dense's backward-data and MaxPool2D's
// backward — and the op marks its result, so that rounding here finds it done. A library's
// result (cuDNN, cuBLAS) and a CPU device's come back unmarked and are rounded here: the same
// bits either way.
#pragma once

#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/ops.h"
#include "layers/tape.h"

namespace brigade::layers {

// What a layer asks of the op writing its output or input gradient: fused rounding in
// precision bf16, none in fp32 (where the boundary rounds nothing).
ops::Bf16Rounding boundary_rounding();

// `result` (computed from `source` on `stream`) rounded to bf16 values: in place, or a new
// tensor when it shares `source`'s storage; `result` itself when it already holds bf16 values.
// The tensor returned is marked as holding them.
Tensor round_at_boundary(const Tensor& result, const Tensor& source, const Stream& stream);

// Replaces the tape's last node — the one a layer's forward just recorded — with one whose
// input gradient is rounded by round_at_boundary on `stream` (the layer's stream).
void round_input_gradient_of_last(Tape& tape, const Stream& stream);

}  // namespace brigade::layers
