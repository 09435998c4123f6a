"""Per op of a plan: what the emulated pools charge its kernels by the executor's
formula (`Placement.planned_waits_ns`) against the slowdown the profile predicts for
them (each kernel's time in the plan less its time in an all-DRAM plan from the same
profile), and where those times came from.

On an emulated pool the data stays in DRAM, so a kernel's configurations differ only
by the wait the device model charges: the formula is exact, and what the profile's
slowdown adds or misses is the noise of timing the same kernel several times.

    scripts/torch/pybench.sh waits.py MODEL.json PLAN.json ALL-DRAM-PLAN.json
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from placer_torch import _core


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--placer", help="unused (pybench.sh passes it)")
    ap.add_argument("model")
    ap.add_argument("plan")
    ap.add_argument("all_dram")
    a = ap.parse_args()
    plan, dram = (json.loads(Path(p).read_text())["kernels"] for p in (a.plan, a.all_dram))
    if [k["node"] for k in plan] != [k["node"] for k in dram]:
        raise SystemExit("waits.py: the two plans are not of one schedule")
    formula = _core.Placement(a.model, a.plan).planned_waits_ns()
    op_of = {n["name"]: n["op"] for n in json.loads(Path(a.model).read_text())["nodes"]}
    by = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0, collections.Counter()])
    for k, d, w in zip(plan, dram, formula):
        if w == 0 and k["time_ns"] == d["time_ns"]:
            continue
        row = by[op_of[k["node"]]]
        slowdown = k["time_ns"] - d["time_ns"]
        row[0] += 1
        row[1] += w
        row[2] += slowdown
        row[3] += abs(slowdown - w)
        row[4][k["source"]] += 1
    print("| op | kernels | the formula's waits ms | the profile's slowdown ms | Σ |slowdown − waits| ms | times |")
    print("|---|---|---|---|---|---|")
    total = [0.0, 0.0, 0.0]
    for op, (n, w, s, off, sources) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        total = [total[0] + w, total[1] + s, total[2] + off]
        print(f"| {op} | {n} | {w / 1e6:.2f} | {s / 1e6:.2f} | {off / 1e6:.2f} | "
              f"{', '.join(f'{c} {src}' for src, c in sorted(sources.items()))} |")
    print(f"| all | {sum(r[0] for r in by.values())} | {total[0] / 1e6:.2f} | {total[1] / 1e6:.2f} | "
          f"{total[2] / 1e6:.2f} | |")


if __name__ == "__main__":
    main()
