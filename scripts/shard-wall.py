#!/usr/bin/env python3
"""What sharding a profile costs and saves, from a run of scripts/bench-shards.sh.

At most one shard per pass of a round: past that, hosts idle.

Per shard: the process's wall time, its measuring time (the checkpoint's
wall_seconds), its passes' time (each pass's interval in the checkpoint's host
activity), and so its reference pass (measuring minus passes) and its overhead
(process minus measuring: start-up, loading the model, planning the whole profile).

On paper, for H identical hosts running H shards at once: the slowest shard (the
overhead and reference pass every shard pays, plus its round-robin share of the
measured first-stage passes, every round it ran), then the merge, then the finish on
one host (the second stage and the calibration, as measured). Scheduling latency is
left out (about a second per job on the single-node Slurm of scripts/slurm/test.sh).
"""
import argparse
import json


def pass_seconds(profile):
    return {s["pass"]: s["activity"]["seconds"] for s in profile["host_activity"] if s["pass"] is not None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--first-use", type=float, required=True)
    ap.add_argument("--plan-only", type=float, required=True)
    ap.add_argument("--merge", type=float, required=True)
    ap.add_argument("--finish", type=float, required=True)
    ap.add_argument("--shards", required=True)
    ap.add_argument("--merged", required=True)
    a = ap.parse_args()

    rows = []
    plan_passes = None
    seconds_by_plan_pass = {}  # plan pass -> seconds summed over the rounds it ran
    for line in open(a.shards):
        index, elapsed, path = line.split()
        p = json.load(open(path))
        shard = p["header"]["shard"]
        plan_passes = shard["plan_passes"]
        times = pass_seconds(p)
        length = -(-(plan_passes - (shard["index"] - 1)) // shard["count"])
        for local, secs in times.items():
            plan_pass = shard["index"] - 1 + (local % length) * shard["count"]
            seconds_by_plan_pass[plan_pass] = seconds_by_plan_pass.get(plan_pass, 0.0) + secs
        passes = sum(times.values())
        rows.append((int(index), float(elapsed), p["wall_seconds"], passes, len(times), len(p["measurements"])))

    print(f"shards of one plan ({plan_passes} first-stage passes a round), one at a time on this host:")
    print()
    print("| shard | process s | measuring s | its passes | passes s | reference pass s | overhead s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for index, elapsed, measuring, passes, count, _ in rows:
        print(f"| {index}/{len(rows)} | {elapsed:.1f} | {measuring:.1f} | {count} | {passes:.1f} | "
              f"{measuring - passes:.1f} | {elapsed - measuring:.1f} |")
    overhead = max(e - m for _, e, m, _, _, _ in rows)
    reference = max(m - s for _, _, m, s, _, _ in rows)
    merged = json.load(open(a.merged))
    design = merged.get("design")
    print()
    print(f"a host's first use (its DRAM baseline measured, then --plan-only): {a.first_use:.1f} s, once per host; "
          f"planning alone (--plan-only, a process): {a.plan_only:.1f} s; merge of "
          f"{sum(r[5] for r in rows):,} measurements: {a.merge:.2f} s (a process); finish on one host: "
          f"{a.finish:.1f} s" + (f" ({design['second_stage_passes']} second-stage passes a round and the "
                                 "calibration)" if design else " (the calibration)"))
    print()
    total = sum(seconds_by_plan_pass.values())
    longest = max(seconds_by_plan_pass.values())
    print(f"on paper, H identical hosts at once (first-stage passes {total:.1f} s in all, the longest plan pass "
          f"{longest:.1f} s over its rounds; every shard also pays {overhead:.1f} s overhead and a "
          f"{reference:.1f} s reference pass; then merge and finish):")
    print()
    print("| hosts | slowest shard s | + merge + finish s | wall s | speed-up | shard passes / serial |")
    print("|---:|---:|---:|---:|---:|---:|")
    one = None
    for hosts in (1, 2, 4, 8, 16, 32):
        # A shard needs a pass of its own: hosts past the plan's passes a round idle.
        shards = min(hosts, plan_passes)
        shares = [0.0] * shards
        for plan_pass, secs in seconds_by_plan_pass.items():
            shares[plan_pass % shards] += secs
        slowest = overhead + reference + max(shares)
        tail = (a.merge + a.finish) if hosts > 1 else a.finish
        wall = slowest + tail
        one = one or wall
        label = f"{hosts}" if shards == hosts else f"{hosts} ({shards} shards)"
        print(f"| {label} | {slowest:.1f} | {tail:.1f} | {wall:.1f} | {one / wall:.2f}x | "
              f"{max(shares):.1f} / {overhead + reference + tail:.1f} |")


if __name__ == "__main__":
    main()
