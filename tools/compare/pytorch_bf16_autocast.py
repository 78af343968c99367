#!/usr/bin/python3
"""Brigade's --precision bf16 against PyTorch's CPU autocast in bf16, on the question's network.

Brigade's trainer runs N steps (default 30) of SGD with momentum on Fashion-MNIST in file order
with seed_cnn_nodropout.model and --precision bf16, saving its initial parameters and every
step's loss. PyTorch loads those parameters and trains on the same batches under
torch.autocast("cpu", dtype=torch.bfloat16), twice: on 1 thread and on 2 threads (a third
1-thread run checks that a run repeats itself bit for bit). The two
PyTorch runs differ only in the order their kernels add (oneDNN splits the reductions of the
backward passes, over the batch and over the output pixels, among its threads), so their
difference is the spread bf16 training has on its own. Brigade passes when its worst per-step
distance to the nearer PyTorch run is within the worst per-step spread. A third PyTorch run,
"Brigade's rule" (kernels/precision.h: the two operands of every Conv2D and Dense GEMM rounded
to bf16, forward and both backward passes, with fp32 sums; every layer's output and every
layer's input gradient rounded to bf16; the loss and its gradient in fp32), says what
separates the two programs when Brigade is outside: autocast also adds the bias in bf16 and
rounds the weight gradients to bf16 before they reach the fp32 masters. Two more autocast runs
are printed for scale, not the criterion: oneDNN held to AVX-512 without its bf16
instructions (ONEDNN_MAX_CPU_ISA=AVX512_CORE, read once at start: a process of its own), as a
processor without AVX-512 BF16 runs it, the same rule in another order again; and oneDNN off
(torch.backends.mkldnn.flags(enabled=False)), other kernels, not the same ones in another
order.

  /usr/bin/python3 tools/compare/pytorch_bf16_autocast.py

Exits 1 when Brigade is outside the spread. Needs Debian's python3-torch (1.13) and
python3-numpy, as pytorch_seed_cnn.py, whose readers and network builder it uses.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_seed_cnn import FASHION_MNIST, REPO, build_model, read_idx, read_safetensors, run, step_losses  # noqa: E402

import numpy as np  # noqa: E402  (pytorch_seed_cnn re-executes under Debian's python3 if needed)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


# ---- Brigade's rule in PyTorch: GEMM operands and layer boundaries rounded to bf16 ------------

def bf16(t):
    """t rounded to bfloat16 (nearest, ties to even) and widened back to float32."""
    return t.to(torch.bfloat16).to(torch.float32)


class Bf16OperandsConv2d(torch.autograd.Function):
    """y = conv(bf16(x), bf16(w)) + b; dx = conv_input(bf16(w), bf16(dy)); dw = conv_weight(bf16(x),
    bf16(dy)): every product on bf16 operands, every sum and the bias in float32 (the boundary
    after the layer rounds its output)."""

    @staticmethod
    def forward(ctx, x, w, b):
        xr, wr = bf16(x), bf16(w)
        ctx.save_for_backward(xr, wr)
        return F.conv2d(xr, wr, b)

    @staticmethod
    def backward(ctx, dy):
        xr, wr = ctx.saved_tensors
        dyr = bf16(dy)
        dx = torch.nn.grad.conv2d_input(xr.shape, wr, dyr)
        dw = torch.nn.grad.conv2d_weight(xr, wr.shape, dyr)
        return dx, dw, dy.sum(dim=(0, 2, 3))


class Bf16OperandsLinear(torch.autograd.Function):
    """The same rule for y = x w^T + b."""

    @staticmethod
    def forward(ctx, x, w, b):
        xr, wr = bf16(x), bf16(w)
        ctx.save_for_backward(xr, wr)
        return F.linear(xr, wr, b)

    @staticmethod
    def backward(ctx, dy):
        xr, wr = ctx.saved_tensors
        dyr = bf16(dy)
        return dyr @ wr, dyr.t() @ xr, dy.sum(dim=0)


class Bf16Boundary(torch.autograd.Function):
    """The boundary between two layers: the value crossing it is a bf16 value both ways, the
    first layer's output going forward and the second layer's input gradient coming back."""

    @staticmethod
    def forward(ctx, x):
        return bf16(x)

    @staticmethod
    def backward(ctx, dy):
        return bf16(dy)


def brigade_rule_forward(model, x):
    """model's forward with its Conv2d and Linear layers computed by Brigade's bf16 rule and
    every layer's output and input gradient rounded to bf16. The last layer's output (the
    logits) is rounded too, but the loss's gradient flowing into it stays fp32."""
    layers = list(model)
    for i, layer in enumerate(layers):
        if isinstance(layer, torch.nn.Conv2d):
            x = Bf16OperandsConv2d.apply(x, layer.weight, layer.bias)
        elif isinstance(layer, torch.nn.Linear):
            x = Bf16OperandsLinear.apply(x, layer.weight, layer.bias)
        else:
            x = layer(x)
        if i + 1 < len(layers):
            x = Bf16Boundary.apply(x)
        else:
            x = x + (bf16(x) - x).detach()  # rounded forward, the gradient passed through
    return x


# ---- the comparison --------------------------------------------------------------------------

def torch_losses(a, initial, images, labels, threads, kind):
    """Per-step losses of PyTorch from `initial`: kind "autocast" or "brigade-rule"."""
    torch.set_num_threads(threads)
    model = build_model(a.model)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in initial.items()})
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    losses = []
    for step in range(a.steps):
        lo = step * a.batch
        x = torch.from_numpy(images[lo:lo + a.batch].astype(np.float32) / np.float32(255.0)).unsqueeze(1)
        y = torch.from_numpy(labels[lo:lo + a.batch].astype(np.int64))
        opt.zero_grad()
        if kind == "autocast":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = model(x)
            loss = F.cross_entropy(logits.float(), y)  # the loss in fp32, as Brigade's
        else:
            loss = F.cross_entropy(brigade_rule_forward(model, x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def pass_on(a):
    """The options that decide a PyTorch run, for a run in another process."""
    return ["--model", a.model, "--data-dir", a.data_dir, "--steps", str(a.steps), "--batch",
            str(a.batch), "--lr", str(a.lr), "--momentum", str(a.momentum)]


def compare(a):
    work = a.workdir or tempfile.mkdtemp(prefix="brigade-bf16-")
    os.makedirs(work, exist_ok=True)
    init, metrics = os.path.join(work, "initial.safetensors"), os.path.join(work, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    run([a.brigade_train, "--model", a.model, "--devices", "cpu:0", "--threads-per-device", "1",
         "--precision", "bf16", "--optimizer", "sgd", "--lr", str(a.lr), "--momentum", str(a.momentum),
         "--batch", str(a.batch), "--steps", str(a.steps), "--epochs", "1", "--no-shuffle",
         "--seed", str(a.seed), "--data-dir", a.data_dir, "--save-initial", init,
         "--metrics", metrics, "--print-every", "10"])
    brigade = step_losses(metrics)
    missing = [s for s in range(1, a.steps + 1) if s not in brigade]
    if missing:
        raise ValueError(f"{metrics}: no loss for steps {missing}")
    mine = [brigade[s] for s in range(1, a.steps + 1)]

    initial = read_safetensors(init)
    images = read_idx(os.path.join(a.data_dir, "train-images-idx3-ubyte.gz"))  # (N, 28, 28)
    labels = read_idx(os.path.join(a.data_dir, "train-labels-idx1-ubyte.gz"))  # (N)
    t1 = torch_losses(a, initial, images, labels, 1, "autocast")
    t2 = torch_losses(a, initial, images, labels, 2, "autocast")
    t1_again = torch_losses(a, initial, images, labels, 1, "autocast")
    rule = torch_losses(a, initial, images, labels, 1, "brigade-rule")
    no_bf16_isa = json.loads(subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--autocast-losses-from", init] + pass_on(a),
        env=dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX512_CORE"), check=True, capture_output=True,
        text=True).stdout)
    with torch.backends.mkldnn.flags(enabled=False):  # PyTorch's own CPU kernels instead
        native = torch_losses(a, initial, images, labels, 1, "autocast")

    print(f"\nper-step loss, {a.steps} steps, batch {a.batch}, SGD lr {a.lr} momentum {a.momentum}")
    print(f"{'step':>5} {'brigade':>10} {'autocast 1t':>11} {'autocast 2t':>11} {'spread':>9} "
          f"{'brigade d':>9} {'rule (1t)':>10} {'b - rule':>9}")
    spread = [abs(p - q) for p, q in zip(t1, t2)]
    dist = [min(abs(m - p), abs(m - q)) for m, p, q in zip(mine, t1, t2)]
    for s in range(a.steps):
        print(f"{s + 1:>5} {mine[s]:10.6f} {t1[s]:11.6f} {t2[s]:11.6f} {spread[s]:9.2e} "
              f"{dist[s]:9.2e} {rule[s]:10.6f} {abs(mine[s] - rule[s]):9.2e}")
    repeat = max(abs(p - q) for p, q in zip(t1, t1_again))
    worst_spread, worst_dist = max(spread), max(dist)
    worst_rule = max(abs(m - r) for m, r in zip(mine, rule))
    print(f"\nPyTorch autocast, 1 thread run twice: worst difference {repeat:.2e} (0: a run repeats itself)")
    print(f"PyTorch autocast, 1 thread against 2 threads (the spread): worst {worst_spread:.2e}, "
          f"mean {np.mean(spread):.2e}")
    print(f"Brigade to the nearer autocast run: worst {worst_dist:.2e}, mean {np.mean(dist):.2e}")
    print(f"Brigade to Brigade's rule in PyTorch: worst {worst_rule:.2e} (the same rule, other "
          "fp32 kernels: their orders differ, and bf16 rounding amplifies that)")
    print(f"PyTorch autocast with oneDNN held to AVX512_CORE (no bf16 instructions) to its bf16 "
          f"kernels, 1 thread (another order; for scale): worst "
          f"{max(abs(p - q) for p, q in zip(t1, no_bf16_isa)):.2e}")
    worst_native = max(abs(p - q) for p, q in zip(t1, native))
    print(f"PyTorch autocast without oneDNN (its own kernels: another algorithm, not only another "
          f"order; for scale, not the criterion) to oneDNN on 1 thread: worst {worst_native:.2e}")
    ok = worst_dist <= worst_spread
    print(f"\nbf16 against autocast: {'PASS' if ok else 'FAIL'} (Brigade's worst distance "
          f"{worst_dist:.2e} {'<=' if ok else '>'} the spread {worst_spread:.2e}; files in {work})")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--brigade-train", default=os.path.join(REPO, "build/tools/brigade-train"))
    p.add_argument("--model", default=os.path.join(REPO, "tools/compare/seed_cnn_nodropout.model"))
    p.add_argument("--data-dir", default=FASHION_MNIST)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workdir", help="keep the files here (default: a new temporary folder)")
    p.add_argument("--autocast-losses-from", metavar="INITIAL",
                   help="only print, as JSON, the 1-thread autocast losses from these parameters")
    a = p.parse_args()
    try:
        if a.autocast_losses_from:
            images = read_idx(os.path.join(a.data_dir, "train-images-idx3-ubyte.gz"))
            labels = read_idx(os.path.join(a.data_dir, "train-labels-idx1-ubyte.gz"))
            print(json.dumps(torch_losses(a, read_safetensors(a.autocast_losses_from), images,
                                          labels, 1, "autocast")))
            return 0
        return compare(a)
    except (OSError, ValueError, KeyError, subprocess.CalledProcessError) as e:
        print(f"pytorch_bf16_autocast.py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
