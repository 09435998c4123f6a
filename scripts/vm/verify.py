#!/usr/bin/env python3
"""Checks what placer printed inside the NUMA guest (scripts/vm/guest.sh wrote it).

Usage: verify.py OUT_DIR. Prints one line per check, PASS or FAIL with the evidence,
and exits 1 if any check failed. The expected layout is the one scripts/vm/check.sh
gives the guest: node 0 DRAM with the CPUs, node 1 CPU-less DRAM, node 2 an NVDIMM
onlined by kmem; HMAT figures from configs/devices.
"""
import json
import pathlib
import re
import sys

out = pathlib.Path(sys.argv[1])
repo = pathlib.Path(__file__).resolve().parents[2]
failures = 0


def check(name, ok, evidence):
    global failures
    failures += 0 if ok else 1
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {evidence}")


def text(name):
    path = out / f"{name}.txt"
    return path.read_text() if path.exists() else ""


def load_json(name):
    body = text(name)
    # The first line is the command, as step() in guest.sh records it.
    try:
        return json.loads(body.split("\n", 1)[1])
    except (IndexError, json.JSONDecodeError) as e:
        check(f"{name} is JSON", False, str(e))
        return None


status = dict(line.split() for line in text("status").splitlines() if line.strip())
for step, rc in status.items():
    check(f"step '{step}' exits 0", rc == "0", f"exit {rc}" + ("" if rc == "0" else f"; see {step}.txt"))

devices = {n: json.loads((repo / "configs/devices" / f"{n}.json").read_text()) for n in ("optane-dcpmm", "remote-socket")}
want_hmat = {
    0: devices["optane-dcpmm"]["reference_dram"],
    1: devices["remote-socket"]["device"],
    2: devices["optane-dcpmm"]["device"],
}

topo = load_json("topo-json")
if topo:
    t = topo["host"]["topology"]
    nodes = {n["os_index"]: n for n in t["nodes"]}
    check("three NUMA nodes", sorted(nodes) == [0, 1, 2], f"nodes {sorted(nodes)}")
    want = {0: ("dram", 2, None), 1: ("remote-dram", 0, None), 2: ("pmem", 0, "NVM")}
    for i, (kind, cpus, subtype) in want.items():
        n = nodes.get(i, {})
        got = (n.get("kind"), n.get("cpus"), n.get("subtype"))
        check(f"node {i} is {kind}", got == (kind, cpus, subtype), f"kind {got[0]}, {got[1]} CPUs, subtype {got[2]}")
    far = nodes.get(1, {})
    check("node 1's kind is labelled an inference", bool(far.get("inferred")), far.get("inferred"))
    pmem = nodes.get(2, {})
    check("node 2 was onlined by kmem from a DAX device", pmem.get("kmem_dax") == "dax0.0", f"kmem_dax {pmem.get('kmem_dax')}")
    tiers = (nodes.get(0, {}).get("kernel_tier"), far.get("kernel_tier"), pmem.get("kernel_tier"))
    check(
        "kernel memory tiers: nodes 0 and 1 together, node 2 below",
        None not in tiers and tiers[0] == tiers[1] < tiers[2],
        f"tiers {tiers}",
    )
    for i, fig in want_hmat.items():
        a = nodes.get(i, {}).get("attrs", {})
        got = (a.get("read_bandwidth_mibps"), a.get("write_bandwidth_mibps"), a.get("read_latency_ns"))
        exp = (round(fig["read_gbps"] * 1000), round(fig["write_gbps"] * 1000), round(fig["latency_ns"]))
        check(f"node {i}'s HMAT figures are the device model's", got == exp, f"read/write/latency {got}, model {exp}")
    pools = {p["name"]: p["backend"] for p in topo["host"]["pools"]}
    want_pools = {"dram": [0], "remote-dram": [1], "pmem": [2]}
    got_pools = {name: b.get("nodes") for name, b in pools.items()}
    check("one pool per tier, each on its own node", got_pools == want_pools, f"pools {got_pools}")
    check("the guest knows it is a virtual machine", t.get("virtual_machine") is True, f"virtual_machine {t.get('virtual_machine')}")

exported = load_json("topo-export")
if exported:
    nodes = {n["os_index"]: n for n in exported["host"]["topology"]["nodes"]}
    kinds = {i: nodes.get(i, {}).get("kind") for i in (0, 1, 2)}
    check(
        "the guest's hwloc export: dram, remote-dram, pmem",
        kinds == {0: "dram", 1: "remote-dram", 2: "pmem"},
        f"kinds {kinds}",
    )
    why = nodes.get(1, {}).get("inferred") or ""
    check("the export's node 1 is far DRAM by HMAT alone", "HMAT alone" in why, why)

probe = load_json("probe-json")
if probe:
    for p in (probe.get("probe") or {}).get("pools", []):
        ok = p["pages_checked"] > 0 and p["pages_elsewhere"] == 0
        check(
            f"probe of '{p['pool']}' ran on its own node",
            ok,
            f"{p['pages_checked'] - p['pages_elsewhere']} of {p['pages_checked']} pages on its node; "
            f"{'EMULATED ' + p['emulated_as'] if p.get('emulated_as') else 'real timing'}",
        )
    backends = {p["name"]: p["backend"] for p in probe["host"]["pools"]}
    for name, node in (("pmem", 2), ("remote-dram", 1)):
        b = backends.get(name, {})
        check(
            f"'{name}' keeps node {node} and takes the device's timing",
            b.get("type") == "emulated" and b.get("nodes") == [node],
            f"backend {b}",
        )

PAGES = re.compile(r"pages verified on node ([\d,]+): (\d+) of (\d+)")


def pool_lines(name, expect):
    """Every `pool NAME` line of a run's output must show its pages verified on the
    expected node, all of them."""
    body = text(name)
    lines = [l.strip() for l in body.splitlines() if l.strip().startswith("pool ")]
    for pool, node, where in expect:
        line = next((l for l in lines if l.split()[1] == pool), "")
        m = PAGES.search(line)
        ok = bool(m) and m.group(1) == str(node) and m.group(2) == m.group(3) and int(m.group(3)) > 0
        ok = ok and where in line and "ON ANOTHER NODE" not in line
        check(f"{name}: pool '{pool}' bound to node {node}, pages verified", ok, line or "no such line")
    timing = next((l.strip() for l in body.splitlines() if l.strip().startswith("timing")), "")
    return timing


timing = pool_lines(
    "run",
    [
        ("dram", 0, "numa bind to node 0"),
        ("pmem", 2, "numa bind to node 2 (pmem, kmem-DAX dax0.0)"),
        ("remote-dram", 1, "numa bind to node 1 (remote-dram, inferred)"),
    ],
)
check("run: the timing is labelled EMULATED", "EMULATED" in timing and "optane-dcpmm" in timing, timing)
pool_lines("memkind", [("pmem", 2, "memkind MEMKIND_DAX_KMEM on node 2 (pmem, kmem-DAX dax0.0)")])
check("profile: labelled EMULATED", "EMULATED" in text("profile"), text("profile").strip().splitlines()[-1:])
solve_check = next((l.strip() for l in text("solve").splitlines() if l.strip().startswith("check ")), "")
check("solve: the plan passed the checker", re.match(r"check\s+ok", solve_check) is not None, solve_check)
plan = text("plan")
plan_pools = [l.strip() for l in plan.splitlines() if l.strip().startswith("pool ")]
check("plan: at least two pools hold arenas", len(plan_pools) >= 2, f"{len(plan_pools)} arena lines")
for line in plan_pools:
    m = PAGES.search(line)
    ok = bool(m) and m.group(2) == m.group(3) and int(m.group(3)) > 0 and "ON ANOTHER NODE" not in line
    check(f"plan: arena of '{line.split()[1]}' bound and verified", ok, line)
timing = next((l.strip() for l in plan.splitlines() if l.strip().startswith("timing")), "")
check("plan: the timing is labelled EMULATED", "EMULATED" in timing, timing)

HOMED = re.compile(r"homed (\S+) nodes=([\d,]+) tensors=(\d+) bytes=(\d+) asked=(\d+) on=(\d+) elsewhere=(\d+)"
                   r".* params=(\d+) states=(\d+)")


def torch_runs():
    """torch_step.py's runs, by plan file: the losses line, and per pool (nodes, parameters
    and momentum buffers re-homed there, pages asked, on the pool's nodes, elsewhere)."""
    runs = {}
    for section in text("torch-apply").split("== plan ")[1:]:
        name, body = section.split("\n", 1)
        losses = next((l for l in body.splitlines() if l.startswith("losses ")), "")
        rows = {m.group(1): (m.group(2), int(m.group(8)) + int(m.group(9)), *map(int, m.group(5, 6, 7)))
                for m in HOMED.finditer(body)}
        runs[name.strip()] = (losses, rows)
    return runs


if "torch-apply" in status:
    runs = torch_runs()
    plan_losses, rows = runs.get("cnn-plan.json", ("", {}))
    check("torch + plan: the loop ran three steps", len(plan_losses.split()) == 4, plan_losses or "no losses")
    ok = bool(rows) and all(asked > 0 and on == asked and not elsewhere for _, _, asked, on, elsewhere in rows.values())
    check("torch + plan: every re-homed pool's pages are on its nodes", ok, rows or "nothing re-homed")
    pmem_losses, rows = runs.get("cnn-pmem.json", ("", {}))
    nodes, tensors, asked, on, elsewhere = rows.get("pmem", ("-", 0, 0, 0, 0))
    # The small CNN: 7 parameters and 7 momentum buffers. The plan places the rest freely:
    # gradients, saved activations and results it keeps in another pool are in that
    # pool's memory, on its own nodes (the pmem pool's pages count theirs too).
    others = {p: r for p, r in rows.items() if p != "pmem"}
    rest_ok = all(a > 0 and o == a and not e for _, _, a, o, e in others.values())
    check(
        "torch + plan pinned to pmem: parameters and optimizer state on the kmem-DAX node",
        nodes == "2" and tensors == 14 and asked > 0 and on == asked and elsewhere == 0 and rest_ok,
        f"pools {sorted(rows)}; pmem: node {nodes}, {tensors} parameters and buffers, {on} of {asked} pages on it, {elsewhere} "
        f"elsewhere; others {others or '-'}",
    )
    check("torch: the same losses under both plans", pmem_losses == plan_losses, f"{plan_losses} | {pmem_losses}")

print(f"vm-check: {'all checks passed' if failures == 0 else f'{failures} check(s) FAILED'}")
sys.exit(1 if failures else 0)
