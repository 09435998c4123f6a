"""capture(): names, parameter counts, the optimizer's state, and clear refusals.

Run by tests/torch.rs (through scripts/torch/venv.sh) as part of `cargo test`, or alone:
    $(scripts/torch/venv.sh) -m unittest discover -s python/tests -v
"""

import json
import tempfile
import unittest
from pathlib import Path

import torch
from torch import nn

import placer_torch


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = torch.relu(self.conv2(x))
        return self.fc(x.mean(dim=(2, 3)))


def small_batch(b=4):
    torch.manual_seed(0)
    return torch.randn(b, 3, 16, 16), torch.randint(0, 10, (b,))


def load(path):
    doc = json.loads(Path(path).read_text())
    return {t["name"]: t for t in doc["tensors"]}, doc["nodes"]


class CaptureCnn(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.manual_seed(0)
        cls.model = SmallCnn()
        cls.opt = torch.optim.SGD(cls.model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
        cls.before = {k: v.clone() for k, v in cls.model.state_dict().items()}
        cls.dir = tempfile.TemporaryDirectory()
        cls.path = Path(cls.dir.name) / "cnn.json"
        cls.cap = placer_torch.capture(cls.model, small_batch(), nn.CrossEntropyLoss(), cls.opt, cls.path)
        cls.tensors, cls.nodes = load(cls.path)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_parameter_count_is_torchs(self):
        want = sum(p.numel() for p in self.model.parameters())
        self.assertEqual(self.cap.summary["parameters"], want)
        self.assertEqual(sum(self.cap.parameters.values()), want)

    def test_parameters_gradients_and_state_carry_torch_names(self):
        for q, p in self.model.named_parameters():
            self.assertEqual(self.tensors[q]["role"], "weight", q)
            self.assertEqual(self.tensors[q]["shape"], list(p.shape), q)
            self.assertEqual(self.tensors[f"{q}.grad"]["role"], "weight_gradient", q)
            buf = f"optimizer.state[{q}].momentum_buffer"
            self.assertEqual(self.tensors[buf]["role"], "optimizer_state", q)
            (update,) = [n for n in self.nodes if n["name"] == f"{q}.sgd_momentum"]
            self.assertEqual(update["inputs"], [f"{q}.grad"])
            self.assertEqual(update["updates"], [q, buf])
            self.assertEqual(update["attrs"], {"lr": 0.05, "weight_decay": 1e-4, "momentum": 0.9})
        self.assertEqual(self.tensors["batch[0]"]["role"], "input")
        self.assertEqual(self.tensors["batch[1]"]["dtype"], "i64")

    def test_saved_activations_are_named_after_graph_nodes(self):
        # The first relu's output is saved for its backward (relu_backward reads y).
        readers = [n for n in self.nodes if "relu" in n["inputs"]]
        self.assertEqual(self.tensors["relu"]["role"], "activation")
        self.assertIn("relu_backward", [n["op"] for n in readers])
        # Batch norm's saved statistics and max-pool's positions are workspace, by the
        # getitem node names torch's graph gives them.
        bn = next(n for n in self.nodes if n["op"] == "batch_norm")
        self.assertTrue(all(o.startswith("getitem") for o in bn["outputs"]), bn)
        self.assertEqual([self.tensors[o]["role"] for o in bn["outputs"][1:]], ["workspace"] * 2)
        pool = next(n for n in self.nodes if n["op"] == "max_pool2d")
        self.assertEqual(self.tensors[pool["outputs"][1]]["dtype"], "i64")

    def test_running_statistics_are_reported_outside_the_graph(self):
        self.assertEqual(sorted(n for n, _ in self.cap.outside), ["bn1.running_mean", "bn1.running_var"])
        self.assertEqual(self.cap.outside_bytes, 2 * 8 * 4)

    def test_capture_leaves_the_model_untouched(self):
        after = self.model.state_dict()
        for k, v in self.before.items():
            self.assertTrue(torch.equal(v, after[k]), k)
        self.assertTrue(self.model.training)
        self.assertEqual(self.opt.state, {} if not self.opt.state else self.opt.state)
        self.assertEqual(len(self.opt.state), 0)

    def test_the_file_is_placers_and_reads_back(self):
        summary = placer_torch.check_model(self.path.read_text())
        self.assertEqual(summary["content_hash"], self.cap.summary["content_hash"])
        ops = sorted({n["op"] for n in self.nodes})
        for op in ("conv2d", "conv2d_backward_data", "conv2d_backward_filter", "batch_norm_backward",
                   "max_pool2d_backward", "global_avg_pool_backward", "softmax_cross_entropy_backward"):
            self.assertIn(op, ops)


class CaptureZoo(unittest.TestCase):
    def test_resnet18_parameter_count(self):
        import torchvision

        torch.manual_seed(0)
        m = torchvision.models.resnet18()
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        x, y = torch.randn(2, 3, 32, 32), torch.randint(0, 1000, (2,))
        cap = placer_torch.capture(m, (x, y), nn.CrossEntropyLoss(), opt)
        self.assertEqual(cap.summary["parameters"], 11_689_512)
        self.assertEqual(cap.summary["parameters"], sum(p.numel() for p in m.parameters()))
        self.assertEqual(len(cap.optimizer_state), 62)
        self.assertIn("layer4.1.conv2.weight.grad", cap.gradients.values())

    def test_bert_parameter_count(self):
        from transformers import BertConfig, BertForSequenceClassification

        torch.manual_seed(0)
        # Eager attention, as docs/torch.md advises: its mask arithmetic (a mask of ones,
        # scaled by a number) is part of the graph.
        cfg = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                         vocab_size=100, max_position_embeddings=32, attn_implementation="eager")
        bert = BertForSequenceClassification(cfg).train()

        class Logits(nn.Module):
            def __init__(self):
                super().__init__()
                self.bert = bert

            def forward(self, ids):
                return self.bert(input_ids=ids).logits

        m = Logits()
        opt = torch.optim.SGD(m.parameters(), lr=0.01)
        ids, labels = torch.randint(0, 100, (2, 8)), torch.randint(0, 2, (2,))
        cap = placer_torch.capture(m, (ids, labels), nn.CrossEntropyLoss(), opt)
        self.assertEqual(cap.summary["parameters"], sum(p.numel() for p in m.parameters()))
        self.assertEqual(cap.optimizer_state, {})  # plain SGD keeps no state
        self.assertIn("bert.bert.embeddings.word_embeddings.weight.grad", cap.gradients.values())


class Refusals(unittest.TestCase):
    def test_every_unsupported_op_is_listed_on_one_line(self):
        class Odd(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)

            def forward(self, x):
                return self.fc(torch.cumsum(torch.sin(x), dim=1))

        m = Odd()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        with self.assertRaises(placer_torch.CaptureError) as e:
            placer_torch.capture(m, (torch.randn(2, 4), torch.randint(0, 3, (2,))), nn.CrossEntropyLoss(), opt)
        msg = str(e.exception)
        self.assertNotIn("\n", msg)
        self.assertIn("aten.sin.default", msg)
        self.assertIn("aten.cumsum.default", msg)

    def test_an_optimizer_placer_cannot_represent(self):
        m = SmallCnn()
        with self.assertRaisesRegex(placer_torch.CaptureError, "optimizer Adam cannot be captured"):
            placer_torch.capture(m, small_batch(), nn.CrossEntropyLoss(), torch.optim.Adam(m.parameters()))

    def test_a_batch_that_is_not_a_tuple(self):
        m = SmallCnn()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        with self.assertRaisesRegex(placer_torch.CaptureError, "example_batch must be a tuple"):
            placer_torch.capture(m, torch.randn(2, 3, 16, 16), nn.CrossEntropyLoss(), opt)

    def test_a_step_torch_cannot_trace(self):
        class Branchy(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)

            def forward(self, x):
                return self.fc(x) if x.sum() > 0 else -self.fc(x)  # data-dependent control flow

        m = Branchy()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        with self.assertRaisesRegex(placer_torch.CaptureError, "^torch could not trace the training step: "):
            placer_torch.capture(m, (torch.randn(2, 4), torch.randint(0, 3, (2,))), nn.CrossEntropyLoss(), opt)

    def test_an_unwritable_path(self):
        m = SmallCnn()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        with self.assertRaisesRegex(placer_torch.ModelError, "cannot write model /nonexistent-dir/m.json"):
            placer_torch.capture(m, small_batch(), nn.CrossEntropyLoss(), opt, "/nonexistent-dir/m.json")

    def test_a_malformed_model_text(self):
        with self.assertRaisesRegex(placer_torch.ModelError, r"^1 problem\(s\) in the captured model; first: "):
            placer_torch.check_model('{"format": "placer-model", "version": 1, "name": "x", "tensors": [], "nodes": []}')


if __name__ == "__main__":
    unittest.main()
