#!/usr/bin/env python3
"""Where a plan's measured step goes, from a pipeline report directory: per strategy, the
step's median against the sum of its kernels' medians, copy waits and blocking copies
(the rest is time between kernels); and for the ILP plan, its kernels that overlap a
background copy, measured against predicted (kernel time + the interference the solver
charged), beside the kernels with no copy; then the same split by where the kernels'
operands are, with the all-DRAM plan's times for the ILP kernels whose operands are all
in DRAM: those run the same code on the same data in both plans, so what differs there
is the kernel's context (the arena's layout, what ran before it).

    scripts/copies-in-step.py reports/MODEL
"""
import json
import sys


def main(directory):
    measured = json.load(open(f"{directory}/measured.json"))
    plan = json.load(open(f"{directory}/plan.json"))
    print("| strategy | step ms | Σ kernels ms | copy waits ms | blocking ms | rest ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in measured:
        k, w, b, s = sum(r["kernel_ns"]), sum(r["copy_wait_ns"]), r["blocking_ns"], r["step_ns"]["median"]
        print(f"| {r['name']} | {s/1e6:.3f} | {k/1e6:.3f} | {w/1e6:.3f} | {b/1e6:.3f} | {(s-k-w-b)/1e6:.3f} |")
    ilp = next((r for r in measured if r["name"].startswith("ilp")), None)
    if ilp is None:
        return
    kernels = plan["kernels"]
    beside = [i for i, k in enumerate(kernels) if k["copies_ns"] > 0]
    alone = [i for i in range(len(kernels)) if i not in beside]
    got = sum(ilp["kernel_ns"][i] for i in beside)
    time = sum(kernels[i]["time_ns"] for i in beside)
    charged = sum(kernels[i]["interference_ns"] for i in beside)
    print(
        f"\nILP plan: {len(beside)} kernels beside a background copy measured {got/1e6:.3f} ms, "
        f"predicted {time/1e6:.3f} + interference {charged/1e6:.3f} = {(time+charged)/1e6:.3f} ms "
        f"({(got/(time+charged)-1)*100:+.1f}%)"
    )
    got = sum(ilp["kernel_ns"][i] for i in alone)
    want = sum(ilp["predicted_kernel_ns"][i] for i in alone)
    print(f"ILP plan: the other {len(alone)} kernels measured {got/1e6:.3f} ms, predicted {want/1e6:.3f} ms "
          f"({(got/want-1)*100:+.1f}%)")
    by_name = {r["name"]: r for r in measured}
    dram = by_name.get("all-dram")
    fast = plan["pools"][0]["name"]
    print("\n| ILP kernels | n | predicted ms | of it, copy interference | measured ms | error | all-DRAM plan, measured ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for copy in (True, False):
        for slow in (False, True):
            group = [i for i, k in enumerate(kernels)
                     if (k["copies_ns"] > 0) == copy and any(c != fast for c in k["config"]) == slow]
            if not group:
                continue
            charged = sum(kernels[i]["interference_ns"] for i in group)
            want = sum(kernels[i]["time_ns"] for i in group) + charged
            got = sum(ilp["kernel_ns"][i] for i in group)
            other = f"{sum(dram['kernel_ns'][i] for i in group)/1e6:.3f}" if dram and not slow else "-"
            name = ("beside a copy" if copy else "no copy") + (", an operand outside DRAM" if slow else ", all in DRAM")
            print(f"| {name} | {len(group)} | {want/1e6:.3f} | {charged/1e6:.3f} | {got/1e6:.3f} | {(got/want-1)*100:+.1f}% | {other} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/copies-in-step.py REPORT_DIR")
    main(sys.argv[1])
