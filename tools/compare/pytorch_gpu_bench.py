#!/usr/bin/env python3
"""PyTorch's training samples/s of a Brigade model file on one GPU: the figure tools/gpu-check.sh
puts beside `brigade-bench --level model,runtime` on cuda:0.

  python3 tools/compare/pytorch_gpu_bench.py                     # seed_cnn.model, batch 128 and 512
  python3 tools/compare/pytorch_gpu_bench.py --batches 128 --json out.json
  python3 tools/compare/pytorch_gpu_bench.py --beside bench.json   # brigade-bench --level model,runtime --json bench.json
  python3 tools/compare/pytorch_gpu_bench.py --math tf32 --beside bench-tf32.json   # brigade-bench ... --math tf32

The step is brigade-bench --level model's (tools/bench/model_bench.h): zero_grad, forward with dropout
on, softmax + cross-entropy, backward, SGD with momentum 0.9 and lr 0.01, on two synthetic
batches already on the GPU. --math fp32 (the default): TF32 off, as Brigade computes by default
(tools/gpu-check.sh also sets NVIDIA_TF32_OVERRIDE=0 for it); --math tf32: TF32 on for cuBLAS
and cuDNN both, as brigade-bench --math tf32 (NVIDIA_TF32_OVERRIDE must then be unset). Each repetition is --steps steps between two synchronisations; the
median of --reps repetitions is reported, after --warmup steps. Two rows per batch: PyTorch as
a user gets it (cudnn.benchmark off, the default) and with cudnn.benchmark on (cuDNN times its
algorithms at the first step of each shape and keeps the fastest).

Needs only torch (no numpy): the pip torch of a GPU machine. The network is built from the model
file as in pytorch_seed_cnn.py (the layers the question's network uses).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_model(model_file):
    """The model file as a torch.nn.Sequential: input HxWxC, conv2d (valid, stride 1),
    maxpool2d (stride = pool), dropout, flatten, dense; relu activations (the last dense's
    softmax stays in the loss, as in Brigade). Returns it and the input's shape (C, H, W)."""
    layers, shape, input_shape = [], None, None  # shape: (C, H, W) or (F,), as the layers go
    for lineno, raw in enumerate(open(model_file), 1):
        words = raw.split("#")[0].split()
        if not words or words[0] == "device":
            continue
        kind, args = words[0], dict(w.split("=", 1) for w in words[1:] if "=" in w)
        if kind == "input":
            h, w, c = (int(v) for v in words[1].split("x"))
            shape = input_shape = (c, h, w)
            continue
        if args.get("padding", "valid") != "valid" or "stride" in args:
            raise ValueError(f"{model_file}:{lineno}: only valid padding and default strides")
        if kind == "conv2d":
            size = args["kernel"].split("x")
            r, s, k = int(size[0]), int(size[-1]), int(args["filters"])
            layers.append(torch.nn.Conv2d(shape[0], k, (r, s)))
            shape = (k, shape[1] - r + 1, shape[2] - s + 1)
        elif kind == "maxpool2d":
            size = args["pool"].split("x")
            r, s = int(size[0]), int(size[-1])
            layers.append(torch.nn.MaxPool2d((r, s)))
            shape = (shape[0], (shape[1] - r) // r + 1, (shape[2] - s) // s + 1)
        elif kind == "dropout":
            layers.append(torch.nn.Dropout(float(args["rate"])))
        elif kind == "flatten":
            layers.append(torch.nn.Flatten())
            n = 1
            for d in shape:
                n *= d
            shape = (n,)
        elif kind == "dense":
            layers.append(torch.nn.Linear(shape[0], int(args["units"])))
            shape = (int(args["units"]),)
        else:
            raise ValueError(f"{model_file}:{lineno}: layer '{kind}' is not mirrored here")
        if args.get("activation") == "relu":
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers), input_shape


def samples_per_s(model_file, batch, device, warmup, reps, steps):
    """Median training samples/s of one (model, batch) on `device`."""
    torch.manual_seed(0)
    model, input_shape = build_model(model_file)
    model = model.to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator(device=device).manual_seed(3)
    batches = [(torch.rand((batch,) + input_shape, generator=g, device=device),
                torch.randint(0, 10, (batch,), generator=g, device=device)) for _ in range(2)]

    def step(k):
        x, y = batches[k % 2]
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for k in range(warmup):
        step(k)
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for k in range(steps):
            step(k)
        sync()
        times.append((time.perf_counter() - t0) / steps)
    return batch / statistics.median(times), statistics.median(times) * 1e3


def print_beside(bench_json, info):
    """Brigade's fp32 rows of `brigade-bench --level model,runtime --json` beside PyTorch's, per
    batch: the model level's (cpu, hand-written and vendor on cuda:0, a plain loop) with the best
    of each side's ratio, then the runtime level's (as brigade-train steps, CUDA graphs on and
    off) with the two ratios a GPU step is judged by."""
    bench = json.load(open(bench_json))
    rows = [r for r in bench.get("model", []) if r.get("precision", "fp32") == "fp32"]
    b = {(r["impl"], r["batch"]): r["samples_per_s"] for r in rows}
    threads = max((r["threads"] for r in rows if r["impl"] == "cpu"), default=0)
    t = {(r["cudnn_benchmark"], r["batch"]): r["samples_per_s"] for r in info["rows"]}
    math = "TF32 (vendor and PyTorch; cpu and hand-written FP32)" if info["math"] == "tf32" else "FP32"
    print(f"\nbeside Brigade ({bench_json}): training samples/s, one device, {math}; cpu = cpu:0 on "
          f"{threads} threads; PyTorch {info['torch']}, cuDNN {info['cudnn']}, on {info['gpu']}")
    print(f"{'batch':>5} {'cpu':>9} {'hand-written':>12} {'vendor':>9} {'pytorch':>9} {'+benchmark':>10}"
          "  best brigade / best pytorch")
    for batch in sorted({k[1] for k in list(b) + list(t)}):
        row = [b.get(("cpu", batch)), b.get(("handwritten", batch)), b.get(("vendor", batch)),
               t.get((False, batch)), t.get((True, batch))]
        mine, theirs = max(filter(None, row[1:3]), default=0), max(filter(None, row[3:]), default=0)
        cells = " ".join(f"{x:>{w}.0f}" if x else f"{'-':>{w}}" for x, w in zip(row, (9, 12, 9, 9, 10)))
        print(f"{batch:>5} {cells}" + (f"  {mine / theirs:.2f}x" if mine and theirs else ""))
    runtime = [r for r in bench.get("runtime", [])
               if r.get("precision", "fp32") == "fp32" and r["device"].startswith("cuda")]
    if runtime:
        print_runtime_beside(runtime, t)


def print_runtime_beside(rows, t):
    """The runtime level's GPU rows (brigade-train's step: graphs on, its default, and off) beside
    PyTorch eager (cudnn.benchmark off, a user's default): vendor / pytorch in samples/s, and the
    hand-written path's step time over the vendor path's, both with graphs on."""
    r = {(x["impl"], x["cuda_graphs"], x["batch"]): x for x in rows}
    print("\nthrough the pipeline runtime, as brigade-train steps (samples/s; graphs: CUDA graphs on"
          " or off)")
    heads = ("hw graphs", "hw off", "vendor graphs", "vendor off", "pytorch", "+benchmark")
    print(f"{'batch':>5} " + " ".join(f"{h:>13}" for h in heads)
          + "  vendor/pytorch  hand-written/vendor step time")
    for batch in sorted({x["batch"] for x in rows}):
        sps = [r.get(k, {}).get("samples_per_s") for k in
               (("handwritten", True, batch), ("handwritten", False, batch),
                ("vendor", True, batch), ("vendor", False, batch))]
        sps += [t.get((False, batch)), t.get((True, batch))]
        cells = " ".join(f"{x:>13.0f}" if x else f"{'-':>13}" for x in sps)
        hw, vendor, eager = sps[0], sps[2], sps[4]
        line = f"{batch:>5} {cells}"
        line += f"  {vendor / eager:13.2f}x" if vendor and eager else f"  {'-':>14}"
        if hw and vendor:
            line += f"  {vendor / hw:28.2f}x"  # step time ratio = inverse of samples/s ratio
        print(line)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=os.path.join(REPO, "tools/models/seed_cnn.model"))
    p.add_argument("--batches", default="128,512")
    p.add_argument("--device", default="cuda:0", help="cpu: a smoke test of this script without a GPU")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--json", help="also write the rows here")
    p.add_argument("--beside", help="brigade-bench --level model --json output: print both in one table")
    p.add_argument("--math", choices=("fp32", "tf32"), default="fp32",
                   help="tf32: matmuls and convolutions on tensor cores (as brigade-bench --math tf32)")
    a = p.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("pytorch_gpu_bench.py: torch sees no GPU (torch.cuda.is_available() is False)")
    tf32 = a.math == "tf32"  # FP32 arithmetic otherwise, as Brigade's default
    if tf32 and os.environ.get("NVIDIA_TF32_OVERRIDE") == "0":
        sys.exit("pytorch_gpu_bench.py: --math tf32 with NVIDIA_TF32_OVERRIDE=0, which turns TF32 off")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    info = {"torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
            "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
            "model": a.model, "math": a.math, "warmup": a.warmup, "reps": a.reps, "steps": a.steps, "rows": []}
    print(f"pytorch_gpu_bench: torch {info['torch']} (CUDA {info['cuda']}, cuDNN {info['cudnn']}) "
          f"on {info['gpu']}; {a.model}; {'TF32 on' if tf32 else 'FP32, TF32 off'}; "
          f"median of {a.reps} x {a.steps} steps")
    print(f"{'batch':>6} {'cudnn.benchmark':>15} {'step ms':>9} {'samples/s':>11}")
    for batch in (int(b) for b in a.batches.split(",")):
        for bench in (False, True):
            torch.backends.cudnn.benchmark = bench
            sps, ms = samples_per_s(a.model, batch, dev, a.warmup, a.reps, a.steps)
            info["rows"].append({"batch": batch, "cudnn_benchmark": bench, "step_ms": ms,
                                 "samples_per_s": sps})
            print(f"{batch:>6} {str(bench):>15} {ms:9.3f} {sps:11.1f}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(info, f, indent=2)
    if a.beside:
        if os.path.exists(a.beside):
            print_beside(a.beside, info)
        else:
            print(f"\nbeside Brigade: no {a.beside} (brigade-bench did not write it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
