"""Runs in the NUMA guest (scripts/vm/guest.sh, with check.sh --torch): the small CNN's
own torch loop (python/examples/small_cnn.py, captured on the host) for three steps under
each PLAN in turn, in one process (importing torch takes minutes under the guest's
software CPU), with parameters and optimizer state re-homed into their planned pools'
memory, and results the plan has outside DRAM born there. For each plan it prints
`== plan FILE`, the losses, apply's report, and one `homed` line per pool with its
pages as the kernel places them now and the parameters and momentum buffers among them
(scripts/vm/verify.py reads them). Usage: torch_step.py MODEL PLAN...
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "examples"))

import placer_torch  # noqa: E402
from small_cnn import build  # noqa: E402

model_path = sys.argv[1]
for plan_path in sys.argv[2:]:
    model, loss_fn, opt, (images, labels) = build()
    placed = placer_torch.apply(model, opt, model_path, plan_path)
    losses = []
    for _ in range(3):  # the momentum buffers step 1 makes are re-homed as step 2 starts
        with placed:
            opt.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            opt.step()
        losses.append(loss.item())
    print(f"== plan {Path(plan_path).name}")
    print("losses " + " ".join(f"{x:.6f}" for x in losses))
    print(placed.report())
    params = {q for q, _ in model.named_parameters()}
    for pool, n, nbytes, asked, on, elsewhere, unknown, per_node in placed.pages():
        nodes = ",".join(str(x) for x in placed.bound[pool])
        # Of the tensors re-homed there: parameters, and their momentum buffers. The
        # pool's buffers also hold gradients, saved activations and results born there.
        homed = [name for name, (p, _) in placed.homed.items() if p == pool]
        n_params = sum(name in params for name in homed)
        n_states = sum(name.startswith("optimizer.state[") for name in homed)
        print(f"homed {pool} nodes={nodes} tensors={n} bytes={nbytes} asked={asked} on={on} "
              f"elsewhere={elsewhere} unknown={unknown} per_node={per_node} params={n_params} states={n_states}")
