"""One training step of placer against PyTorch (CPU) on the same models, in the same run.

Run through scripts/bench-pytorch.sh, which builds placer and provides a venv with torch.
Both sides do the same work: forward, softmax cross-entropy on integer labels, backward,
SGD (lr 0.01, momentum 0.9) on every weight. The machine is shared and drifts, so the two
sides alternate in rounds (placer, torch, placer, torch, ...) and only their ratio matters.
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

# torch warns at import when numpy is missing; nothing here uses numpy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402


def die(msg):
    sys.exit(f"bench-pytorch: {msg}")


# --- The models, written to match crates/zoo/src/models/{resnet,cnn}.rs layer for layer.


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock (v1.5: the stride is on the first 3x3 conv)."""

    def __init__(self, cin, width, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != width:
            self.downsample = nn.Sequential(nn.Conv2d(cin, width, 1, stride, bias=False), nn.BatchNorm2d(width))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x if self.downsample is None else self.downsample(x)
        return self.relu(out)


def resnet18():
    # BatchNorm2d keeps torchvision's default running statistics (placer has none): a
    # per-channel update per layer, negligible next to the convolutions.
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for stage, width in enumerate([64, 128, 256, 512]):
        for i in range(2):
            layers.append(BasicBlock(cin, width, 2 if stage > 0 and i == 0 else 1))
            cin = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers)


def mlp():
    return nn.Sequential(
        nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
    )


def lenet():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10),
    )


# zoo name -> (batch, torch constructor, classes)
MODELS = {
    "resnet18": (8, resnet18, 1000),
    "mlp": (64, mlp, 10),
    "lenet-mnist": (256, lenet, 10),
}


# --- Measurement.


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        die(f"`{' '.join(cmd)}` exited with {p.returncode}:\n{p.stderr.strip()}")
    return p.stdout


def mad(xs):
    m = statistics.median(xs)
    return statistics.median(abs(x - m) for x in xs)


def placer_round(args, model_file):
    """One placer process: W warm-up steps, then N timed steps; (median, MAD) in ms."""
    # Pin rayon's pool to the same thread count torch gets (it defaults to all cores).
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
    out = run([args.placer, "run", model_file, "-n", str(args.n), "--warmup", str(args.warmup), "--json"], env=env)
    step = json.loads(out)["step_ms"]
    return step["median"], step["mad"]


def torch_round(args, model, opt, x, y):
    """The same protocol in-process: W warm-up steps, then N timed steps; (median, MAD) in ms."""
    times = []
    for i in range(args.warmup + args.n):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        # CPU ops are synchronous: the step is done when opt.step() returns.
        dt = (time.perf_counter() - t0) * 1e3
        if i >= args.warmup:
            times.append(dt)
    if not torch.isfinite(loss):
        die(f"torch loss is {loss.item()}")
    return statistics.median(times), mad(times)


def bench(args, name, workdir):
    batch, build, classes = MODELS[name]
    model_file = os.path.join(workdir, f"{name}-b{batch}.json")
    run([args.placer, "zoo", name, "--batch", str(batch), "-o", model_file])
    zoo_params = json.loads(run([args.placer, "inspect", model_file, "--json"]))["parameters"]

    torch.manual_seed(0)
    model = build().train()
    torch_params = sum(p.numel() for p in model.parameters())
    if torch_params != zoo_params:
        die(f"{name}: torch model has {torch_params:,} parameters, placer's zoo {zoo_params:,}")

    # Input and label shapes come from the zoo's model.json, so both sides see the same batch.
    shapes = {t["name"]: t["shape"] for t in json.load(open(model_file))["tensors"]}
    x = torch.randn(shapes["images"])
    y = torch.randint(0, classes, shapes["labels"])
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    rounds = {"placer": [], "torch": []}
    for r in range(args.rounds):
        rounds["placer"].append(placer_round(args, model_file))
        rounds["torch"].append(torch_round(args, model, opt, x, y))
        print(f"{name} round {r + 1}/{args.rounds}: placer {rounds['placer'][-1][0]:.2f} ms, "
              f"torch {rounds['torch'][-1][0]:.2f} ms", file=sys.stderr)
    return batch, zoo_params, rounds


def cpu_seconds():
    """Busy CPU seconds so far, as (whole host, this script and its children)."""
    # /proc/stat's "cpu" line, in clock ticks; skip idle, iowait and guest (counted in user).
    fields = open("/proc/stat").readline().split()[1:]
    ticks = sum(int(v) for i, v in enumerate(fields) if i not in (3, 4, 8, 9))
    own = os.times()
    return ticks / os.sysconf("SC_CLK_TCK"), own.user + own.system + own.children_user + own.children_system


def summary(per_round):
    """Median of the per-round medians, and median of the per-round MADs.

    placer --json reports a step's median and MAD but not each step's time, so both sides
    are summarised the same way: per round first, then across rounds.
    """
    return statistics.median(m for m, _ in per_round), statistics.median(d for _, d in per_round)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--placer", required=True, help="the placer release binary")
    ap.add_argument("-n", type=int, default=10, help="timed steps per round and side (default 10)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps before each round (default 2)")
    ap.add_argument("--rounds", type=int, default=3, help="placer/torch alternations (default 3)")
    ap.add_argument("--threads", type=int, default=2, help="threads for both sides (default 2)")
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {', '.join(MODELS)}")
    args = ap.parse_args()
    names = args.models.split(",")
    for name in names:
        if name not in MODELS:
            die(f"unknown model {name!r}; known: {', '.join(MODELS)}")

    torch.set_num_threads(args.threads)
    started = datetime.datetime.now(datetime.timezone.utc)
    t0, cpu0 = time.monotonic(), cpu_seconds()
    with tempfile.TemporaryDirectory() as workdir:
        results = {name: bench(args, name, workdir) for name in names}
    (all0, own0), (all1, own1) = cpu0, cpu_seconds()

    onednn = re.search(r"MKL-DNN (v[\d.]+)", torch.__config__.show())
    print(f"placer vs PyTorch {torch.__version__} (CPU), one training step, {started:%Y-%m-%d %H:%M} UTC, "
          f"{os.cpu_count()} CPUs")
    print(f"{args.rounds} rounds x {args.n} timed steps after {args.warmup} warm-up per side, placer and torch "
          f"alternating; {args.threads} threads each (torch.set_num_threads, RAYON_NUM_THREADS)")
    # Other processes on the CPUs hurt torch's OpenMP barriers more than rayon's work stealing.
    others = ((all1 - all0) - (own1 - own0)) / (time.monotonic() - t0) / os.cpu_count()
    print(f"other work on the host (processes, hypervisor steal) used {100 * others:.0f}% of the CPUs meanwhile"
          f"{'; the figures are skewed, rerun on a quiet machine' if others > 0.05 else ''}\n")
    print("| model | batch | parameters (both) | placer ms (MAD) | torch ms (MAD) | placer / torch |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (batch, params, rounds) in results.items():
        (pm, pd), (tm, td) = summary(rounds["placer"]), summary(rounds["torch"])
        print(f"| {name} | {batch} | {params:,} | {pm:.2f} ({pd:.2f}) | {tm:.2f} ({td:.2f}) | {pm / tm:.2f} |")
    print("\nper-round medians, ms (placer / torch):")
    for name, (_, _, rounds) in results.items():
        pairs = ", ".join(f"{p[0]:.2f} / {t[0]:.2f}" for p, t in zip(rounds["placer"], rounds["torch"]))
        print(f"  {name}: {pairs}")
    print(f"\nms: median over rounds of each round's median step (MAD: median of the rounds' MADs).\n"
          f"torch runs oneDNN (MKL-DNN {onednn.group(1) if onednn else '?'}) convolutions and MKL GEMMs "
          f"(mkldnn available: {torch.backends.mkldnn.is_available()}); placer runs its own kernels (kernels/).")


if __name__ == "__main__":
    main()
