#!/usr/bin/python3
"""Brigade against PyTorch on the question's network: loss parity and training throughput.

  parity      Brigade's trainer runs N steps of SGD with momentum on Fashion-MNIST in file
              order (--no-shuffle) with a model file without dropout, saving its initial and
              final parameters; PyTorch loads the initial ones, trains on the same batches in
              the same order, and every step's loss and every final parameter tensor must agree
              to --rtol (1e-4). Prints a PASS/FAIL table; exits 1 on FAIL.
  throughput  PyTorch's training samples/s beside Brigade's (build/tools/brigade-bench
              --level model) at the same batch and thread count, runs alternating, and the ratio.

  /usr/bin/python3 tools/compare/pytorch_seed_cnn.py parity
  /usr/bin/python3 tools/compare/pytorch_seed_cnn.py throughput --threads 1,2 --rounds 3

Needs Debian's python3-torch (1.13; tools/setup.sh --with-pytorch) and python3-numpy. Reads
safetensors and gzip'd IDX itself: both formats are a few lines (see read_safetensors, read_idx).
"""
import argparse
import collections
import gzip
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ModuleNotFoundError as e:
    # A python3 of its own (pyenv, a venv) first on PATH does not see Debian's packages.
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit(f"pytorch_seed_cnn.py: {e}: install python3-torch and python3-numpy "
             "(tools/setup.sh --with-pytorch)")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


# ---- file formats ----------------------------------------------------------------------------

def read_safetensors(path):
    """name -> float32 numpy array. Layout: u64 little-endian header length, a JSON header
    {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, raw data."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} has dtype {t['dtype']}, expected F32")
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(t["shape"]).copy()
    return out


def read_idx(path):
    """A gzip'd IDX file (big-endian: 0, 0, type 0x08 = u8, rank; then the dims) -> numpy u8."""
    with gzip.open(path, "rb") as f:
        blob = f.read()
    zero, kind, rank = struct.unpack(">HBB", blob[:4])
    if zero != 0 or kind != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    dims = struct.unpack(">" + "I" * rank, blob[4:4 + 4 * rank])
    return np.frombuffer(blob[4 + 4 * rank:], dtype=np.uint8).reshape(dims)


# ---- the network of a model file ---------------------------------------------------------------

def build_model(model_file):
    """The Brigade model file as a torch.nn.Sequential whose parameter names are Brigade's
    (conv2d_1.weight, dense_2.bias, ...). Understands what the question's network uses:
    input HxWxC, conv2d (valid, stride 1), maxpool2d, dropout, flatten, dense; relu/softmax
    activations (softmax on the last dense stays in the loss, as in Brigade)."""
    layers = collections.OrderedDict()
    counts = collections.Counter()
    shape = None  # (C, H, W) or (F,)
    for lineno, raw in enumerate(open(model_file), 1):
        words = raw.split("#")[0].split()
        if not words or words[0] == "device":
            continue
        kind, args = words[0], dict(w.split("=", 1) for w in words[1:] if "=" in w)
        where = f"{model_file}:{lineno}"
        if kind == "input":
            h, w, c = (int(v) for v in words[1].split("x"))
            shape = (c, h, w)
            continue
        counts[kind] += 1
        name = f"{kind}_{counts[kind]}"
        if args.get("padding", "valid") != "valid" or "stride" in args:
            raise ValueError(f"{where}: only valid padding and default strides are mirrored here")
        if kind == "conv2d":
            size = args["kernel"].split("x")  # "3x3", or "3" for 3x3
            r, s = int(size[0]), int(size[-1])
            k = int(args["filters"])
            layers[name] = torch.nn.Conv2d(shape[0], k, (r, s))
            shape = (k, shape[1] - r + 1, shape[2] - s + 1)
        elif kind == "maxpool2d":
            size = args["pool"].split("x")
            r, s = int(size[0]), int(size[-1])
            layers[name] = torch.nn.MaxPool2d((r, s))  # stride = the pool size, as in Keras
            shape = (shape[0], (shape[1] - r) // r + 1, (shape[2] - s) // s + 1)
        elif kind == "dropout":
            layers[name] = torch.nn.Dropout(float(args["rate"]))
        elif kind == "flatten":
            layers[name] = torch.nn.Flatten()
            shape = (int(np.prod(shape)),)
        elif kind == "dense":
            units = int(args["units"])
            layers[name] = torch.nn.Linear(shape[0], units)
            shape = (units,)
        else:
            raise ValueError(f"{where}: layer '{kind}' is not mirrored here")
        if args.get("activation") == "relu":
            layers[name + "_relu"] = torch.nn.ReLU()
    return torch.nn.Sequential(layers)


# ---- parity ----------------------------------------------------------------------------------

def run(cmd):
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def step_losses(metrics):
    """step -> loss, from brigade-train's --metrics file (JSON lines; the "step" ones)."""
    losses = {}
    for line in open(metrics):
        rec = json.loads(line)
        if rec.get("kind") == "step":
            losses[rec["step"]] = rec["loss"]
    return losses


def parity(a):
    torch.set_num_threads(1)
    work = a.workdir or tempfile.mkdtemp(prefix="brigade-parity-")
    os.makedirs(work, exist_ok=True)
    init, final, metrics = (os.path.join(work, n) for n in
                            ("initial.safetensors", "final.safetensors", "metrics.jsonl"))
    if os.path.exists(metrics):
        os.remove(metrics)
    run([a.brigade_train, "--model", a.model, "--devices", a.devices, "--threads-per-device", "1",
         "--optimizer", "sgd", "--lr", str(a.lr), "--momentum", str(a.momentum),
         "--batch", str(a.batch), "--steps", str(a.steps), "--epochs", "1", "--no-shuffle",
         "--seed", str(a.seed), "--data-dir", a.data_dir, "--save-initial", init, "--save", final,
         "--metrics", metrics, "--print-every", "10"])
    brigade_loss = step_losses(metrics)

    # PyTorch in float32 (the comparison) and in float64 (the exact trajectory, to tell how far
    # float32 itself can stay from it), in lockstep on the same batches.
    initial = read_safetensors(init)
    models, opts = {}, {}
    for dtype in (torch.float32, torch.float64):
        models[dtype] = build_model(a.model).to(dtype)
        models[dtype].load_state_dict({k: torch.from_numpy(v).to(dtype) for k, v in initial.items()})
        models[dtype].train()
        opts[dtype] = torch.optim.SGD(models[dtype].parameters(), lr=a.lr, momentum=a.momentum)
    images = read_idx(os.path.join(a.data_dir, "train-images-idx3-ubyte.gz"))  # (N, 28, 28)
    labels = read_idx(os.path.join(a.data_dir, "train-labels-idx1-ubyte.gz"))  # (N)

    ok = True
    print(f"\nper-step loss, batch {a.batch}, SGD lr {a.lr} momentum {a.momentum} "
          f"(PASS: |brigade - pytorch| / |pytorch| <= {a.rtol:g})")
    print(f"{'step':>5} {'brigade':>12} {'pytorch':>12} {'rel diff':>10}  result")
    worst = 0.0
    for step in range(1, a.steps + 1):
        lo = (step - 1) * a.batch
        x = torch.from_numpy(images[lo:lo + a.batch].astype(np.float32) / np.float32(255.0))
        y = torch.from_numpy(labels[lo:lo + a.batch].astype(np.int64))
        losses = {}
        for dtype, model in models.items():
            opts[dtype].zero_grad()
            loss = F.cross_entropy(model(x.to(dtype).unsqueeze(1)), y)
            loss.backward()
            opts[dtype].step()
            losses[dtype] = loss.item()
        theirs = losses[torch.float32]
        mine = brigade_loss.get(step)
        if mine is None:
            print(f"{step:>5} {'missing':>12} {theirs:12.7f} {'':>10}  FAIL")
            ok = False
            continue
        d = abs(mine - theirs) / abs(theirs)
        worst = max(worst, d)
        good = d <= a.rtol
        ok &= good
        if not good or step <= 3 or step % 10 == 0:
            print(f"{step:>5} {mine:12.7f} {theirs:12.7f} {d:10.2e}  {'PASS' if good else 'FAIL'}")
    print(f"worst per-step loss difference: {worst:.2e}")

    # Final parameters. d(a, b) = ||a - b|| / ||b|| per tensor. After 50 steps float32 rounding
    # has been amplified (ReLU and max-pool decisions near ties flip; conv2d_1's bias sums over
    # the many all-zero background pixels of Fashion-MNIST), so that PyTorch's own float32 run
    # is ~1e-2 away from its float64 run on some biases: 1e-4 between two float32 programs is
    # then out of reach for ANY pair. A tensor passes when it agrees to --rtol, or when Brigade
    # is as close to the float64 trajectory as PyTorch float32 is, within --floor-factor.
    def d(u, v):
        return float(np.linalg.norm(u - v) / max(float(np.linalg.norm(v)), 1e-30))
    print(f"\nfinal parameters, d(a, b) = ||a - b|| / ||b||; PASS: d(brigade, pytorch32) <= {a.rtol:g},"
          f" or d(brigade, pytorch64) <= {a.floor_factor:g} x d(pytorch32, pytorch64)")
    print(f"{'tensor':<16} {'shape':<16} {'b vs p32':>9} {'b vs p64':>9} {'p32 vs p64':>10} {'ratio':>6}  result")
    t32 = {k: v.detach().numpy() for k, v in models[torch.float32].state_dict().items()}
    t64 = {k: v.detach().numpy() for k, v in models[torch.float64].state_dict().items()}
    mine = read_safetensors(final)
    for name in sorted(set(t32) | set(mine)):
        if name not in t32 or name not in mine or t32[name].shape != mine[name].shape:
            what = "missing" if name not in t32 or name not in mine else f"{mine[name].shape}"
            print(f"{name:<16} {what:<16} {'':>9} {'':>9} {'':>10} {'':>6}  FAIL")
            ok = False
            continue
        m = mine[name].astype(np.float64)
        b32, b64, floor = d(m, t32[name]), d(m, t64[name]), d(t32[name].astype(np.float64), t64[name])
        ratio = b64 / max(floor, 1e-30)
        good = b32 <= a.rtol or ratio <= a.floor_factor
        ok &= good
        print(f"{name:<16} {str(tuple(m.shape)):<16} {b32:9.2e} {b64:9.2e} {floor:10.2e} {ratio:6.2f}"
              f"  {'PASS' if good else 'FAIL'}")
    print(f"\nparity: {'PASS' if ok else 'FAIL'} ({a.steps} steps, files in {work})")
    return 0 if ok else 1


# ---- throughput ------------------------------------------------------------------------------

def torch_samples_per_s(model_file, batch, threads, warmup, reps, steps):
    """Median samples/s of PyTorch training steps (the same step as brigade-bench --level model:
    zero_grad, forward with dropout on, cross-entropy, backward, SGD momentum): per wall second
    and per second of process CPU time."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = build_model(model_file)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(3)
    batches = [(torch.rand(batch, 1, 28, 28, generator=g), torch.randint(0, 10, (batch,), generator=g))
               for _ in range(2)]

    def step(k):
        x, y = batches[k % 2]
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    for k in range(warmup):
        step(k)
    times, cpu_times = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        for k in range(steps):
            step(k)
        times.append((time.perf_counter() - t0) / steps)
        cpu_times.append((time.process_time() - c0) / steps)
    return batch / statistics.median(times), batch / statistics.median(cpu_times)


def brigade_samples_per_s(bench, model_file, batch, threads, reps, steps):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([bench, "--level", "model", "--model", model_file, "--batches", str(batch),
                        "--threads", str(threads), "--reps", str(reps), "--steps", str(steps),
                        "--json", f.name], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        rows = json.load(open(f.name))["model"]
    r = next(r for r in rows if r["device"].startswith("cpu"))
    return r["samples_per_s"], batch / (r["cpu_step_ms"] * 1e-3)


def throughput(a):
    threads = [int(t) for t in a.threads.split(",")]
    print(f"training samples/s of {a.model}, batch {a.batch}, one CPU device; "
          f"{a.rounds} alternating rounds, each the median of {a.reps} x {a.steps} steps")
    print(f"torch {torch.__version__}, {torch.backends.mkldnn.is_available() and 'oneDNN on' or 'oneDNN off'}")
    # Per CPU second: what each process ran, not what it waited for a core, so steadier on a
    # shared machine. Only meaningful on 1 thread: with more, idle OpenMP threads spin (CPU
    # time PyTorch spends waiting), so the wall-clock ratio is the one that counts there.
    print("samples/s per wall second; on 1 thread also per second of process CPU time (cpu)")
    print(f"{'threads':>7} {'round':>5} {'brigade':>10} {'pytorch':>10} {'ratio':>7}"
          f" {'brigade cpu':>12} {'pytorch cpu':>12} {'cpu ratio':>9}")
    summary, ok = [], True
    for t in threads:
        ratios, cpu_ratios = [], []
        for r in range(a.rounds):
            b, bc = brigade_samples_per_s(a.brigade_bench, a.model, a.batch, t, a.reps, a.steps)
            p, pc = torch_samples_per_s(a.model, a.batch, t, 2, a.reps, a.steps)
            ratios.append(b / p)
            cpu_ratios.append(bc / pc)
            cpu = f" {bc:12.1f} {pc:12.1f} {bc / pc:9.2f}" if t == 1 else ""
            print(f"{t:>7} {r + 1:>5} {b:10.1f} {p:10.1f} {b / p:7.2f}{cpu}", flush=True)
        m = statistics.median(ratios)
        summary.append((t, m, statistics.median(cpu_ratios) if t == 1 else None))
        ok &= m >= a.target
    print(f"\nmedian ratio brigade / pytorch (target >= {a.target:g}):")
    for t, m, mc in summary:
        cpu = f"  (per CPU second: {mc:.2f}x)" if mc is not None else ""
        print(f"  {t} thread{'s' if t > 1 else ' '}: {m:.2f}x  {'met' if m >= a.target else 'NOT met'}{cpu}")
    return 0 if ok or not a.require_target else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    pa = sub.add_parser("parity", help="per-step losses and final parameters against PyTorch")
    pa.add_argument("--brigade-train", default=os.path.join(REPO, "build/tools/brigade-train"))
    pa.add_argument("--model", default=os.path.join(REPO, "tools/compare/seed_cnn_nodropout.model"))
    pa.add_argument("--devices", default="cpu:0", help="brigade-train --devices (cpu:0,cpu:1 pipelines)")
    pa.add_argument("--data-dir", default=FASHION_MNIST)
    pa.add_argument("--steps", type=int, default=50)
    pa.add_argument("--batch", type=int, default=128)
    pa.add_argument("--lr", type=float, default=0.01)
    pa.add_argument("--momentum", type=float, default=0.9)
    pa.add_argument("--seed", type=int, default=1)
    pa.add_argument("--rtol", type=float, default=1e-4)
    pa.add_argument("--floor-factor", type=float, default=3.0,
                    help="final parameters: how much farther from float64 than PyTorch float32 Brigade may be")
    pa.add_argument("--workdir", help="keep the files here (default: a new temporary folder)")
    th = sub.add_parser("throughput", help="training samples/s beside PyTorch's")
    th.add_argument("--brigade-bench", default=os.path.join(REPO, "build/tools/brigade-bench"))
    th.add_argument("--model", default=os.path.join(REPO, "tools/models/seed_cnn.model"))
    th.add_argument("--batch", type=int, default=128)
    th.add_argument("--threads", default="1,2")
    th.add_argument("--rounds", type=int, default=3)
    th.add_argument("--reps", type=int, default=3)
    th.add_argument("--steps", type=int, default=3)
    th.add_argument("--target", type=float, default=1.5)
    th.add_argument("--require-target", action="store_true", help="exit 1 if a ratio is below --target")
    a = p.parse_args()
    try:
        return parity(a) if a.what == "parity" else throughput(a)
    except (OSError, ValueError, KeyError, subprocess.CalledProcessError) as e:
        print(f"pytorch_seed_cnn.py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
