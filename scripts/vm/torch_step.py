"""Runs in the NUMA guest (scripts/vm/guest.sh): the small CNN's own torch loop
(python/examples/small_cnn.py, captured on the host) for three steps under PLAN, with
parameters and optimizer state re-homed into their planned pools' memory. Prints the
losses, apply's report, and one `homed` line per pool with its pages as the kernel
reports them now (scripts/vm/verify.py reads them). Usage: torch_step.py MODEL PLAN
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "examples"))

import placer_torch  # noqa: E402
from small_cnn import build  # noqa: E402

model_path, plan_path = sys.argv[1], sys.argv[2]
model, loss_fn, opt, (images, labels) = build()
placed = placer_torch.apply(model, opt, model_path, plan_path)
losses = []
for _ in range(3):
    with placed:
        opt.zero_grad()
        loss = loss_fn(model(images), labels)
        loss.backward()
        opt.step()
    losses.append(loss.item())
with placed:  # re-homes the momentum buffers the first step made
    pass
print("losses " + " ".join(f"{x:.6f}" for x in losses))
print(placed.report())
tensors = {}
for name, (pool, _) in placed.homed.items():
    tensors[pool] = tensors.get(pool, 0) + 1
for pool, n, nbytes, asked, on, elsewhere, unknown, per_node in placed.pages():
    nodes = ",".join(str(x) for x in placed.bound[pool])
    print(f"homed {pool} nodes={nodes} tensors={n} bytes={nbytes} asked={asked} on={on} elsewhere={elsewhere} "
          f"unknown={unknown} per_node={per_node}")
