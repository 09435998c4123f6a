"""torchvision's ResNet-50, trained with a placer plan. The lines marked `# placer` are
all that differ from the plain loop.

    python python/examples/resnet50.py capture r50.json          # writes r50.json (+ r50.torch.json)
    placer profile r50.json && placer solve --budget 25% -o r50.plan.json
    python python/examples/resnet50.py train r50.json r50.plan.json
"""

import sys

import torch
import torchvision
from torch import nn

import placer_torch  # placer


def main(mode: str, model_path: str, plan_path: str | None = None, batch: int = 32, steps: int = 5) -> None:
    torch.manual_seed(0)
    model = torchvision.models.resnet50()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    images, labels = torch.randn(batch, 3, 224, 224), torch.randint(0, 1000, (batch,))

    if mode == "capture":
        placer_torch.capture(model, (images, labels), loss_fn, opt, model_path)  # placer
        return
    placed = placer_torch.apply(model, opt, model_path, plan_path)  # placer
    for step in range(steps):
        with placed:  # placer
            opt.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            opt.step()
        print(f"step {step}: loss {loss.item():.6f}")
    print(placed.report())  # placer


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("capture", "train") or (sys.argv[1] == "train") != (len(sys.argv) == 4):
        sys.exit("usage: resnet50.py capture MODEL.json | train MODEL.json PLAN.json")
    main(*sys.argv[1:])
