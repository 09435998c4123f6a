"""Given plans of one captured model, run in torch side by side: unmodified torch all in
DRAM twice (A and A′, the noise floor), then torch under each plan, interleaved in rounds
in one process, each from the same starting weights on the same batches. Reports step
time ± MAD against A, each plan's prediction against its measured step, the DRAM peak
tracked (and of it not placed), whether the losses agree, where each plan's step goes
beyond A's beside the solver's terms for it, and each plan's report.

The work directory is one `side_by_side.py --rounds 0 --work DIR` left (the captured
model and its plans); plans solved there again with other options go beside them.
Run through scripts/torch/pybench.sh, which prints the host's FMA peak:

    scripts/torch/pybench.sh plans.py --work DIR --model resnet50 --batch 32 \\
        DIR/plan-25-async.json DIR/plan-25-torch-kernels.json DIR/baselines-25/greedy.json
"""

from __future__ import annotations

import json
from pathlib import Path

from side_by_side import EXCESS_HEAD, Contender, excess_row, floor, given_plans, in_order, med_mad


def main() -> None:
    a, mpath, model, data, loss_fn = given_plans(several=True)
    cs = floor(model, data, loss_fn) + [Contender(p, model, data, loss_fn, Path(p), mpath) for p in a.plans]
    for r in range(a.rounds):
        for c in in_order(cs, r):
            c.round(a.steps)
    base = med_mad([t * 1e3 for t in cs[0].times])[0]
    print(f"\n{a.model} b{a.batch}: {a.rounds} rounds of {a.steps} steps (the first of each round not timed)")
    print("| contender | step ms (median ± MAD) | vs A | predicted ms | measured vs predicted | DRAM peak tracked "
          "(of it not placed) |")
    print("|---|---|---|---|---|---|")
    for c in cs:
        m, d = med_mad([t * 1e3 for t in c.times])
        pred, err, peak = "-", "-", "-"
        if c.placed is not None:
            p = json.loads(Path(c.label).read_text())["predicted"]["step_ns"] / 1e6
            pred, err = f"{p:.1f}", f"{(m / p - 1) * 100:+.1f}%"
            top = max(c.peaks)
            peak = f"{top[0] / 2**20:.1f} MiB ({top[1] / 2**20:.1f})"
        print(f"| {c.label} | {m:.1f} ± {d:.1f} | {m / base:.3f}× | {pred} | {err} | {peak} |")
    print("\neach timed step, ms, in the order run:")
    for c in cs:
        print(f"  {c.label}: {' '.join(f'{t * 1e3:.0f}' for t in c.times)}")
    print(f"\nlosses identical across contenders, every step of every round: "
          f"{all(c.losses == cs[0].losses for c in cs)}")
    all_dram = Path(a.work) / "plan-all-dram.json"
    print(f"\nwhere each plan's step goes beyond A's, measured (and predicted over {all_dram.name}):\n{EXCESS_HEAD}")
    for c in cs[2:]:
        print(excess_row(c, Path(c.label), base, all_dram))
    for c in cs[2:]:
        print(f"\n{c.label}:\n{c.placed.report()}")


if __name__ == "__main__":
    main()
