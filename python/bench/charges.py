"""Per torch op of a captured graph: what apply's hook charged it under a plan (the
emulated waits for torch's operands, two steps, the second recorded) against what the
plan charges placer's kernels for that op by the executor's formula
(`Placement.planned_waits_ns`). Kernels torch runs no graph op for (the optimizer's
updates) are listed by their placer op; the hook charges their work to ops outside the
graph, whose total is printed.

    scripts/torch/pybench.sh charges.py --work DIR --model resnet50 --batch 32 DIR/plan-10-torch-kernels.json
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

from side_by_side import Contender, given_plans


def main() -> None:
    a, mpath, model, data, loss_fn = given_plans(several=True)
    placer_op = {n["name"]: n["op"] for n in json.loads(mpath.read_text())["nodes"]}
    for plan in a.plans:
        c = Contender(plan, model, data, loss_fn, Path(plan), mpath)
        c.round(2)
        placed = c.placed
        charged, formula = placed.tracker.step_waits(), placed.placement.planned_waits_ns()
        op_at = placed.graph_op_at
        by = collections.defaultdict(lambda: [0, 0.0, 0.0])
        for s, node in enumerate(placed.placement.schedule()):
            row = by[op_at[s] if s in op_at else f"(no graph op in torch) {placer_op[node]}"]
            row[0] += 1
            row[1] += charged[s]
            row[2] += formula[s]
        r = placed.records[-1]
        print(f"\n{plan}: the hook charged {r.wait_ns / 1e6:.1f} ms a step, {r.wait_unmatched_ns / 1e6:.1f} of it to "
              f"ops outside the graph")
        print("| torch op | placer kernels | the hook's charge ms | the formula's ms |\n|---|---|---|---|")
        for op, (n, h, f) in sorted(by.items(), key=lambda kv: -abs(kv[1][1] - kv[1][2])):
            if h or f:
                print(f"| {op} | {n} | {h / 1e6:.2f} | {f / 1e6:.2f} |")


if __name__ == "__main__":
    main()
