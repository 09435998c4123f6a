"""torch's own training step under placer's plan, beside unmodified torch and the
baselines, interleaved in one process; placer's executor on the same plan beside them.

Run through scripts/torch/bench.sh, which provides the venv, builds placer and prints
the host's FMA peak. For each model: capture the step, profile it with torch's kernels
(`placer_torch.profile`) and with placer's (`placer profile`), compare the two, `placer
solve` at the budget from each (writing every baseline's plan too), then rounds of:
torch all-DRAM (twice: the noise floor), torch + each plan, torch + each baseline, each
from the same starting weights on the same batches, and `placer run --plan` (a
subprocess, between rounds); odd rounds in the reverse order (ABBA). Reports step time
± MAD, the DRAM peak tracked, losses, each plan's prediction against torch's step
under it, and where that step goes beyond torch all-DRAM's, beside the solver's terms.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

import placer_torch


def build(name: str, batch: int):
    torch.manual_seed(0)
    if name == "small-cnn":
        m = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(32, 10))
        return m, (torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,)))
    if name in ("resnet18", "resnet50"):
        import torchvision

        m = getattr(torchvision.models, name)()
        return m, (torch.randn(batch, 3, 224, 224), torch.randint(0, 1000, (batch,)))
    if name in ("bert-tiny", "bert-base"):
        from transformers import BertConfig, BertForSequenceClassification

        small = name == "bert-tiny"
        # Eager attention: with "sdpa", eager torch runs a fused attention kernel that the
        # captured graph has as its decomposition, so the two would not run the same ops.
        cfg = BertConfig(hidden_size=128 if small else 768, num_hidden_layers=2 if small else 12,
                         num_attention_heads=2 if small else 12, intermediate_size=512 if small else 3072,
                         attn_implementation="eager")
        bert = BertForSequenceClassification(cfg).train()

        class Logits(nn.Module):
            def __init__(self):
                super().__init__()
                self.bert = bert

            def forward(self, ids):
                return self.bert(input_ids=ids).logits

        return Logits(), (torch.randint(0, cfg.vocab_size, (batch, 128)), torch.randint(0, 2, (batch,)))
    sys.exit(f"side_by_side: unknown model '{name}' (small-cnn, resnet18, resnet50, bert-tiny, bert-base)")


def captured(name: str, batch: int, path: Path):
    """The bench's model `name` at `batch`, its step (cross-entropy, SGD with momentum)
    captured at `path`: (model, batch, loss_fn, Capture)."""
    model, data = build(name, batch)
    loss_fn = nn.CrossEntropyLoss()
    cap = placer_torch.capture(model, data, loss_fn, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), path)
    return model, data, loss_fn, cap


def placer(bin_: str, *args, env=None) -> str:
    out = subprocess.run([bin_, *args], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"side_by_side: placer {' '.join(args)} failed:\n{out.stderr.strip()}")
    return out.stdout


class Contender:
    """One way of running the step, with its own copy of the starting weights."""

    def __init__(self, label, model, batch, loss_fn, plan=None, model_path=None, pin=False):
        self.label = label
        self.model = copy.deepcopy(model)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.batch, self.loss_fn = batch, loss_fn
        self.placed = placer_torch.apply(self.model, self.opt, model_path, plan, pin=pin) if plan else None
        self.times, self.losses, self.peaks = [], [], []
        #: apply's record of each timed step
        self.records = []
        self.start = (copy.deepcopy(self.model.state_dict()), copy.deepcopy(self.opt.state_dict()))

    def round(self, steps: int) -> list:
        self.model.load_state_dict(self.start[0])
        self.opt.load_state_dict(self.start[1])
        losses = []
        for s in range(steps):
            torch.manual_seed(1000 + s)  # dropout draws the same masks in every contender
            t0 = time.perf_counter()
            if self.placed is not None:
                with self.placed:
                    loss = self.step()
            else:
                loss = self.step()
            dt = time.perf_counter() - t0
            if s > 0:  # the first step of a round warms the caches
                self.times.append(dt)
                if self.placed is not None:
                    r = self.placed.records[-1]
                    self.records.append(r)
                    self.peaks.append((r.dram_peak, r.unplaced_peak))
            losses.append(loss)
        self.losses.append(losses)
        if self.placed is not None:
            # Every contender keeps its saved activations' pool memory for its next step;
            # eleven ResNet-50 b32 contenders holding theirs at once ran out of 24 GiB.
            self.placed.release()
        return losses

    def step(self) -> float:
        self.opt.zero_grad()
        loss = self.loss_fn(self.model(*self.batch[:-1]), self.batch[-1])
        loss.backward()
        self.opt.step()
        return loss.item()


def work_args() -> argparse.ArgumentParser:
    """The options of a script run on a `--rounds 0 --work DIR` directory (plans.py,
    copies.py): the directory, the captured model and batch, rounds and steps."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--placer", help="unused: pybench.sh passes it to every script")
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=4)
    return ap


def given_plans(several: bool = False) -> tuple:
    """A script on one plan (copies.py, move_trace.py) or, with `several`, on several
    (plans.py, charges.py) of a `--rounds 0 --work DIR` directory: its arguments (the
    plan as `plan`, or the plans as `plans`), the captured model's path, and the bench's
    model, batch and loss."""
    ap = work_args()
    if several:
        ap.add_argument("plans", nargs="+")
    else:
        ap.add_argument("plan")
    a = ap.parse_args()
    model, data = build(a.model, a.batch)
    return a, Path(a.work) / f"{a.model}-b{a.batch}.json", model, data, nn.CrossEntropyLoss()


def floor(model, batch, loss_fn) -> list:
    """Unmodified torch with every tensor in DRAM twice: A, and A′ for the noise floor."""
    return [Contender("torch, all in DRAM (A)", model, batch, loss_fn),
            Contender("torch, all in DRAM, again (A′)", model, batch, loss_fn)]


def in_order(contenders: list, round_index: int) -> list:
    """The contenders in the order of one round: as listed in even rounds, reversed in odd
    ones (ABBA), so a drift of the host over the run and whatever the first slot of a
    round costs fall on both ends of the list alike: with every round in one order, A, timed
    first, ran slower than A′ in 20 of the 26 runs docs/BENCHMARKS.md recorded before this
    (median A′/A about 0.97); the first run with this order gave 0.999."""
    return contenders if round_index % 2 == 0 else contenders[::-1]


def med_mad(xs):
    m = statistics.median(xs)
    return m, statistics.median(abs(x - m) for x in xs)


EXCESS_HEAD = ("| plan | over A: measured (predicted over all-DRAM) ms | emulated waits of the graph's ops (the plan's "
               "charge for its kernels; the profile's slowdown) | emulated waits of other ops (the plan's charge for the "
               "kernels torch runs no graph op for) | blocking moves (predicted) | waited for copies (predicted: "
               "exposed) | the rest (predicted: the copies' charge on their kernels) |\n"
               "|---|---|---|---|---|---|---|")


def excess_row(c: Contender, plan: Path, base_ms: float, all_dram: Path) -> str:
    """Where a plan's step goes beyond torch all-DRAM's (A), measured (medians of apply's
    records of the timed steps) beside the solver's terms for it over its all-DRAM plan:
    the emulated pools' waits of the graph's ops against the plan's charge for the same
    kernels (placer's executor's waits) and the profile's slowdown of them, those of the
    ops outside the graph against the plan's charge for the kernels torch runs no graph
    op for (the optimizer's updates), blocking moves, the wait for
    background copies against their exposed time, and the rest (the step less A and those
    three: what copies cost the kernels beside them, apply's own cost, and the host's
    noise) against the copies' charge on their kernels."""
    p = json.loads(plan.read_text())["predicted"]
    d = json.loads(all_dram.read_text())["predicted"]
    over = med_mad([t * 1e3 for t in c.times])[0] - base_ms
    waits, others, moves, copies = (statistics.median(getattr(r, f) for r in c.records) / 1e6
                                    for f in ("wait_ns", "wait_unmatched_ns", "in_line_ns", "copy_wait_ns"))
    graph, rest = (w / 1e6 for w in c.placed.planned_waits_ns)
    return (f"| {c.label} | {over:.1f} ({(p['step_ns'] - d['step_ns']) / 1e6:.1f}) | {waits - others:.1f} "
            f"({graph:.1f}; {(p['kernel_ns'] - d['kernel_ns']) / 1e6:.1f}) | {others:.1f} ({rest:.1f}) | {moves:.1f} "
            f"({p['sync_move_ns'] / 1e6:.1f}) | {copies:.1f} ({p['exposed_copy_ns'] / 1e6:.1f}) | "
            f"{over - waits - moves - copies:.1f} ({p['interference_ns'] / 1e6:.1f}) |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--placer", required=True)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--budget", default="25%", help="one budget, or several separated by commas (25%%,10%%)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3,
                    help="0: capture, profile and solve only, leaving them in --work (python/bench/plans.py runs them)")
    ap.add_argument("--work", required=True)
    ap.add_argument("--baselines", default="first-touch,interleave,greedy")
    ap.add_argument("--formulation", choices=["static", "sync", "async"],
                    help="the ILP's formulation for the plans (default: placer solve's own)")
    ap.add_argument("--kernels", choices=["torch", "placer", "both"], default="both",
                    help="whose kernels the profiles time; the plan applied first is torch's when profiled")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    mpath = work / f"{a.model}-b{a.batch}.json"
    t0 = time.perf_counter()
    model, batch, loss_fn, cap = captured(a.model, a.batch, mpath)
    print(f"capture    {time.perf_counter() - t0:.1f} s: {cap.summary['nodes']} nodes, "
          f"{cap.summary['parameters']} parameters, peak live {cap.summary['peak_live_bytes'] / 2**20:.1f} MiB")
    ckdir = work / "checkpoints"
    env = dict(os.environ, PLACER_CHECKPOINT_DIR=str(ckdir))
    profiles = {}
    if a.kernels in ("torch", "both"):
        t0 = time.perf_counter()
        # The loop's own step, on a copy of its own, times what torch spends between kernels.
        r = placer_torch.profile(mpath, ckdir, progress=False, step=Contender("profile", model, batch, loss_fn).step)
        print(f"profile    {time.perf_counter() - t0:.1f} s (torch's kernels: {r['label']}; "
              f"{len(r['placer_nodes'])} node(s) by placer's kernels, {len(r['folded_nodes'])} folded); "
              f"torch's step {r['whole_step_ns'] / 1e6:.2f} ms, of it {r['step_overhead_ns'] / 1e6:.2f} ms beyond "
              f"its kernels' medians")
        profiles["torch"] = r["checkpoint"]
    if a.kernels in ("placer", "both"):
        t0 = time.perf_counter()
        placer(a.placer, "profile", str(mpath), env=env)
        print(f"profile    {time.perf_counter() - t0:.1f} s (placer's kernels)")
        profiles["placer"] = next(str(p) for p in ckdir.glob("*.ckpt") if not p.name.endswith("-torch.ckpt"))
    if len(profiles) == 2:
        out = subprocess.run([a.placer, "compare", profiles["placer"], profiles["torch"]], capture_output=True,
                             text=True, env=env).stdout
        rows = [ln for ln in out.splitlines() if "µs" in ln and ("≥" in ln or "<" in ln) and "|" not in ln]
        print("torch's kernels (B) against placer's (A), `placer compare`:\n" + "\n".join(rows[:2]))
    budgets = a.budget.split(",")
    # The first profile's solves write the baselines' plans; torch's when it was profiled.
    first = next(iter(profiles))
    # The same graph with every tensor in DRAM: what apply itself costs. Every role
    # pinned, as a budget alone lets the solver leave a tensor elsewhere within its gap;
    # 16 GiB, as 100% of peak live memory leaves the pinned arena no room to pack.
    all_dram = work / "plan-all-dram.json"
    pins = [x for role in ("input", "weight", "optimizer_state", "activation", "workspace", "gradient",
                           "weight_gradient") for x in ("--pin", f"role={role}:dram")]
    placer(a.placer, "solve", str(mpath), "--budget", "16GiB", "--profile", profiles[first], "-o", str(all_dram),
           *pins, env=env)
    # (label, plan or None): made contenders only once every plan is solved and rounds run.
    runs = [("torch, all in DRAM", None), ("torch, all in DRAM, again (A′: the noise floor)", None),
            ("torch + apply, every tensor in DRAM (apply's overhead)", all_dram)]
    plans, planned = {}, {}
    for budget in budgets:
        tag = budget.rstrip("%")
        bdir = work / f"baselines-{tag}"
        for k, ck in profiles.items():
            plans[budget, k] = work / f"plan-{tag}-{k}-kernels.json"
            extra = ["--baseline-plans", str(bdir)] if k == first else []
            form = ["--formulation", a.formulation] if a.formulation else []
            placer(a.placer, "solve", str(mpath), "--budget", budget, "--profile", ck, "-o",
                   str(plans[budget, k]), *extra, *form, env=env)
            planned[budget, k] = len(runs)
            runs.append((f"{budget}: torch + placer plan ({k}-kernel profile)", plans[budget, k]))
        for b in a.baselines.split(","):
            if (bdir / f"{b}.json").exists():
                runs.append((f"{budget}: torch + {b}", bdir / f"{b}.json"))
    if a.rounds == 0:
        print(f"rounds 0: the captured model, its profile and its plans are in {work}")
        return
    contenders = [Contender(label, model, batch, loss_fn, plan, mpath) for label, plan in runs]
    ex_plans = [plans.get((b, "placer"), plans[b, first]) for b in budgets]
    executor = {p: [] for p in ex_plans}
    for r in range(a.rounds):
        for c in in_order(contenders, r):
            c.round(a.steps)
        for p in ex_plans:
            out = placer(a.placer, "run", str(mpath), "--plan", str(p), "-n", str(a.steps - 1), "--json", env=env)
            executor[p].append(json.loads(out))
    base = med_mad([t * 1e3 for t in contenders[0].times])[0]
    print(f"\n{a.model} b{a.batch}, budgets {', '.join(budgets)} of peak live memory, {a.rounds} rounds of "
          f"{a.steps} steps (the first of each round not timed)")
    print("| contender | step ms (median ± MAD) | vs torch all-DRAM | DRAM peak tracked (of it not placed) "
          "| budget | losses, step 1..N, round 1 |")
    print("|---|---|---|---|---|---|")
    for c in contenders:
        m, d = med_mad([t * 1e3 for t in c.times])
        peak, budget = "-", "-"
        if c.peaks:
            top = max(c.peaks)
            peak = f"{top[0] / 2**20:.1f} MiB ({top[1] / 2**20:.1f})"
            budget = f"{c.placed.placement.budget_bytes / 2**20:.1f} MiB"
        losses = ", ".join(f"{x:.6f}" for x in c.losses[0])
        print(f"| {c.label} | {m:.2f} ± {d:.2f} | {m / base:.3f}× | {peak} | {budget} | {losses} |")
    for p, runs in executor.items():
        ex = statistics.median(r[0]["step_ns"]["median"] / 1e6 for r in runs)
        print(f"| placer's executor, plan of {p.name} (subprocess) | {ex:.2f} | {ex / base:.3f}× | - | - | "
              f"placer's own kernels and data |")
    same = all(c.losses == contenders[0].losses for c in contenders[1:])
    print(f"\nlosses identical across torch contenders, every step of every round: {same}")
    for (budget, k), i in planned.items():
        predicted = json.loads(plans[budget, k].read_text())["predicted"]["step_ns"] / 1e6
        pm, _ = med_mad([t * 1e3 for t in contenders[i].times])
        print(f"{budget}: prediction ({k}-kernel profile) {predicted:.2f} ms against torch under that plan "
              f"{pm:.2f} ms: {(pm / predicted - 1) * 100:+.1f}%")
    # The all-DRAM step predicted against torch's own: the step overhead's check.
    dram_pred = json.loads(all_dram.read_text())["predicted"]["step_ns"] / 1e6
    print(f"all in DRAM: predicted {dram_pred:.2f} ms ({first}-kernel profile) against torch's {base:.2f} ms: "
          f"{(base / dram_pred - 1) * 100:+.1f}%")
    print("\nwhere each plan's step goes beyond A's, measured (and predicted):\n" + EXCESS_HEAD)
    for (budget, k), i in planned.items():
        print(excess_row(contenders[i], plans[budget, k], base, all_dram))
    for (budget, k), i in planned.items():
        if k == first:
            print(f"\n{budget}, the plan from the {k}-kernel profile:\n{contenders[i].placed.report()}")


if __name__ == "__main__":
    main()
