"""A transformers BERT fine-tuning loop (sequence classification), with a placer plan.
The lines marked `# placer` are all that differ from the plain loop.

    python python/examples/bert.py capture bert.json
    placer profile bert.json && placer solve --budget 25% -o bert.plan.json
    python python/examples/bert.py train bert.json bert.plan.json

BERT-base from a config (no download: nothing but PyPI is reachable here); with a
checkpoint, `BertForSequenceClassification.from_pretrained(...)` works the same way.
"""

import sys

import torch
from torch import nn
from transformers import BertConfig, BertForSequenceClassification

import placer_torch  # placer


class Classifier(nn.Module):
    """The logits alone, so the loss is the loop's own."""

    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, ids):
        return self.bert(input_ids=ids).logits


def main(mode: str, model_path: str, plan_path: str | None = None, batch: int = 8, seq: int = 128,
         steps: int = 5) -> None:
    torch.manual_seed(0)
    # Eager attention: "sdpa" runs a fused kernel eagerly that torch's captured graph
    # decomposes, so the loop would not run the ops the plan was made for.
    model = Classifier(BertForSequenceClassification(BertConfig(attn_implementation="eager")).train())
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=2e-5, momentum=0.9)
    ids, labels = torch.randint(0, 30522, (batch, seq)), torch.randint(0, 2, (batch,))

    if mode == "capture":
        placer_torch.capture(model, (ids, labels), loss_fn, opt, model_path)  # placer
        return
    placed = placer_torch.apply(model, opt, model_path, plan_path)  # placer
    for step in range(steps):
        torch.manual_seed(step)
        with placed:  # placer
            opt.zero_grad()
            loss = loss_fn(model(ids), labels)
            loss.backward()
            opt.step()
        print(f"step {step}: loss {loss.item():.6f}")
    print(placed.report())  # placer


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("capture", "train") or (sys.argv[1] == "train") != (len(sys.argv) == 4):
        sys.exit("usage: bert.py capture MODEL.json | train MODEL.json PLAN.json")
    main(*sys.argv[1:])
