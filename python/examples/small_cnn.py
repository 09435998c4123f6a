"""A small CNN's training loop, captured for placer with one added line.

    python python/examples/small_cnn.py model.json
    placer profile model.json && placer solve --budget 50% && placer run model.json --plan plan.json

tests/torch.rs runs exactly this chain on a clean build.
"""

import sys

import torch
from torch import nn

import placer_torch


def build():
    """The model, loss, optimizer and batch, the same on every call (scripts/vm runs the
    loop in the guest on the model captured on the host)."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
    )
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    images, labels = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    return model, loss_fn, opt, (images, labels)


def main(out: str) -> None:
    model, loss_fn, opt, (images, labels) = build()

    cap = placer_torch.capture(model, (images, labels), loss_fn, opt, out)  # the added line
    s = cap.summary
    print(f"captured {s['nodes']} nodes, {s['tensors']} tensors, {s['parameters']} parameters "
          f"(torch: {sum(p.numel() for p in model.parameters())}) to {out}")
    if cap.outside:
        print(f"not placed by placer (torch updates them outside the graph): {cap.outside_bytes} B in "
              + ", ".join(n for n, _ in cap.outside))

    for _ in range(2):  # the loop itself is unchanged
        opt.zero_grad()
        loss = loss_fn(model(images), labels)
        loss.backward()
        opt.step()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: small_cnn.py OUT.json")
    main(sys.argv[1])
