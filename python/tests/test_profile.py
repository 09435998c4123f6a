"""profile(): placer's profiler timing torch's own aten ops.

The runner is checked on its own first (each node's replayed calls compute what torch
computes, on the executor's bytes, in place), then through the Rust profiler: a
checkpoint that says whose kernels it timed, that `placer compare` and `placer solve`
read, that resumes after an interruption and that refuses another kind's checkpoint.
Needs this build's `placer`: tests/torch.rs passes it as PLACER_BIN.
"""

import json
import shutil
import tempfile
import unittest
from pathlib import Path

import torch
from torch import nn

import placer_torch
from placer_torch import _core
from placer_torch.capture import sidecar_path
from helpers import placer, placer_workdir
from test_capture import SmallCnn, small_batch


def operand(t: torch.Tensor):
    return (t.data_ptr(), t.numel() * t.element_size())


class Runner(unittest.TestCase):
    """TorchKernels called as the executor calls it, on tensors standing for its buffers."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.path = Path(cls.dir.name) / "cnn.json"
        torch.manual_seed(0)
        cls.model = SmallCnn()
        cls.opt = torch.optim.SGD(cls.model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
        cls.cap = placer_torch.capture(cls.model, small_batch(8), nn.CrossEntropyLoss(), cls.opt, cls.path)
        cls.runner = placer_torch.TorchKernels(cls.path, placer_torch.Capture.load(cls.path))
        cls.index = {name: i for i, (name, _, _) in enumerate(cls.runner.nodes)}

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def run_node(self, name, inputs, written):
        return self.runner(self.index[name], [operand(t) for t in inputs], [operand(t) for t in written])

    def test_a_convolution_runs_torchs_op_on_the_operands_bytes(self):
        name, ins, outs = self.runner.nodes[self.index["convolution"]]
        self.assertEqual(ins, ["batch[0]", "conv1.weight"])
        x, w = torch.randn(8, 3, 16, 16), torch.randn(8, 3, 3, 3)
        y = torch.zeros(8, 8, 16, 16)
        ns = self.run_node(name, [x, w], [y])
        self.assertGreater(ns, 0)
        torch.testing.assert_close(y, nn.functional.conv2d(x, w, padding=1), rtol=0, atol=0)

    def test_the_loss_replays_log_softmax_then_nll_loss(self):
        name = next(n for n, c in self.cap.calls.items() if c[-1]["target"] == "aten.nll_loss_forward.default")
        self.assertEqual([c["target"] for c in self.cap.calls[name]],
                         ["aten._log_softmax.default", "aten.nll_loss_forward.default"])
        _, ins, outs = self.runner.nodes[self.index[name]]
        logits, labels = torch.randn(8, 10), torch.randint(0, 10, (8,))
        loss, probs = torch.zeros(()), torch.zeros(8, 10)
        self.run_node(name, [logits, labels], [loss, probs][: len(outs)])
        self.assertEqual(loss.item(), nn.functional.cross_entropy(logits, labels).item())

    def test_an_sgd_update_is_torchs_in_place(self):
        name = "fc.weight.sgd_momentum"
        _, ins, written = self.runner.nodes[self.index[name]]
        self.assertEqual(ins, ["fc.weight.grad"])
        self.assertEqual(written, ["fc.weight", "optimizer.state[fc.weight].momentum_buffer"])
        w, g, buf = torch.randn(10, 16), torch.randn(10, 16), torch.randn(10, 16)
        ref_w = w.clone().requires_grad_()
        ref_w.grad = g.clone()
        ref = torch.optim.SGD([ref_w], lr=0.05, momentum=0.9, weight_decay=1e-4)
        ref.state[ref_w]["momentum_buffer"] = buf.clone()
        ref.step()
        self.run_node(name, [g], [w, buf])
        self.assertTrue(torch.equal(w, ref_w.detach()))
        self.assertTrue(torch.equal(buf, ref.state[ref_w]["momentum_buffer"]))

    def test_every_node_is_replayed_folded_or_listed(self):
        names = [n for n, _, _ in self.runner.nodes]
        replayed = [n for n in names if n in self.cap.calls]
        self.assertEqual(len(replayed) + len(self.runner.folded_nodes) + len(self.runner.placer_nodes), len(names))
        # The convolution with a bias is one aten op; placer's convolution without it is
        # folded into the node that adds the bias.
        self.assertIn("convolution_1.conv", self.runner.folded_nodes)
        self.assertEqual(self.runner(self.index["convolution_1.conv"], [], []), 0.0)


class DropoutRunner(unittest.TestCase):
    """Dropout as eager torch runs it on a CPU: the mask is the f32 noise torch keeps,
    drawn in place, and the backward multiplies by it."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        path = Path(cls.dir.name) / "mlp.json"
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.25), nn.ReLU(), nn.Linear(32, 4))
        cls.cap = placer_torch.capture(m, (torch.randn(8, 16), torch.randint(0, 4, (8,))), nn.CrossEntropyLoss(),
                                       torch.optim.SGD(m.parameters(), lr=0.1), path)
        cls.model = json.loads(path.read_text())
        cls.runner = placer_torch.TorchKernels(path, placer_torch.Capture.load(path))
        cls.index = {name: i for i, (name, _, _) in enumerate(cls.runner.nodes)}

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def node(self, op):
        return next(n for n in self.model["nodes"] if n["op"] == op)

    def test_the_mask_has_the_bytes_torch_keeps(self):
        mask = self.node("dropout")["outputs"][1]
        t = next(t for t in self.model["tensors"] if t["name"] == mask)
        self.assertEqual((t["dtype"], t["shape"]), ("f32", [8, 32]))

    def test_forward_and_backward_replay_eagers_calls(self):
        fwd, bwd = self.node("dropout")["name"], self.node("dropout_backward")["name"]
        self.assertEqual([c["target"] for c in self.cap.calls[fwd]],
                         ["aten.bernoulli_.float", "aten.div_.Scalar", "aten.mul.Tensor"])
        self.assertEqual([c["target"] for c in self.cap.calls[bwd]], ["aten.mul.Tensor"])
        x, y, mask = torch.randn(8, 32), torch.zeros(8, 32), torch.full((8, 32), 7.0)
        self.runner(self.index[fwd], [operand(x)], [operand(y), operand(mask)])
        # The noise is 0 or 1 / (1 - p), drawn into the mask's own bytes.
        self.assertTrue(bool(((mask == 0) | (mask == 1 / 0.75)).all()), mask)
        self.assertTrue(bool((mask == 0).any() and (mask != 0).any()))
        torch.testing.assert_close(y, x * mask, rtol=0, atol=0)
        dy, dx = torch.randn(8, 32), torch.zeros(8, 32)
        self.runner(self.index[bwd], [operand(dy), operand(mask)], [operand(dx)])
        torch.testing.assert_close(dx, dy * mask, rtol=0, atol=0)


class Profile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        d, cls.env = placer_workdir(cls)
        cls.ck = d / "checkpoints"
        torch.manual_seed(0)
        m = SmallCnn()
        cls.path = d / "cnn.json"
        placer_torch.capture(m, small_batch(8), nn.CrossEntropyLoss(), torch.optim.SGD(m.parameters(), lr=0.1),
                             cls.path)
        cls.result = placer_torch.profile(cls.path, cls.ck, rounds=1, skip_calibrations=True, progress=False)
        placer("profile", str(cls.path), "--rounds", "1", "--skip-calibrations", env=cls.env)
        cls.ours = next(p for p in cls.ck.glob("*.ckpt") if not p.name.endswith("-torch.ckpt"))

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_the_checkpoint_says_torch_timed_it(self):
        r = self.result
        self.assertTrue(r["checkpoint"].endswith("-torch.ckpt"), r)
        self.assertGreater(r["measurements"], 0)
        self.assertIn(f"torch {torch.__version__}", r["label"])
        self.assertIn("steady C heap", r["label"])  # the ops were timed on the heap apply keeps
        self.assertTrue(r["emulated"])  # this host's slow pool is the emulated one

    def test_compare_sets_torchs_kernels_against_placers(self):
        out = placer("compare", str(self.ours), self.result["checkpoint"], env=self.env, ok=(0, 3))
        kernels = next(line for line in out.splitlines() if line.strip().startswith("kernels "))
        self.assertIn("placer's", kernels)
        self.assertIn(f"torch {torch.__version__} (aten ops", kernels)
        self.assertIn("folded into another node's kernel", kernels)

    def test_solve_plans_with_torchs_times_and_says_so(self):
        plan = Path(self.dir.name) / "plan.json"
        out = placer("solve", str(self.path), "--budget", "50%", "--profile", self.result["checkpoint"], "-o",
                     str(plan), env=self.env)
        self.assertIn("kernels timed", out)
        self.assertIn("torch", out)
        self.assertGreater(json.loads(plan.read_text())["predicted"]["step_ns"], 0)

    def test_a_checkpoint_of_placers_kernels_is_not_resumed_as_torchs(self):
        ck = Path(self.dir.name) / "mixed"
        ck.mkdir()
        shutil.copy(self.ours, ck / Path(self.result["checkpoint"]).name)
        with self.assertRaisesRegex(placer_torch.ProfileError, "it timed placer's kernels, this run times torch"):
            placer_torch.profile(self.path, ck, rounds=1, skip_calibrations=True, progress=False)

    def test_an_interrupted_profile_resumes_from_its_checkpoint(self):
        ck = Path(self.dir.name) / "interrupted"
        runner = placer_torch.TorchKernels(self.path, placer_torch.Capture.load(self.path))
        calls = {"n": 0}

        def failing(n, ins, outs):
            calls["n"] += 1
            if calls["n"] > 1200:  # of about 2,900 in the whole profile
                raise KeyboardInterrupt("stopped by the test")
            return runner(n, ins, outs)

        with self.assertRaisesRegex(placer_torch.ProfileError, r"node '.*': KeyboardInterrupt: stopped by the test"):
            _core.profile(str(self.path), str(ck), failing, runner.label, "torch", runner.placer_nodes,
                          runner.folded_nodes, rounds=1, skip_calibrations=True)
        (saved,) = ck.glob("*-torch.ckpt")
        r = placer_torch.profile(self.path, ck, rounds=1, skip_calibrations=True, progress=False)
        self.assertEqual(r["checkpoint"], str(saved))
        self.assertGreater(r["resumed"], 0)
        self.assertGreater(r["measurements"], 0)

    def test_the_loops_own_step_gives_the_step_overhead_solve_adds(self):
        torch.manual_seed(0)
        m = SmallCnn()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        x, y = small_batch(8)
        calls = {"n": 0}

        def step():
            calls["n"] += 1
            opt.zero_grad()
            nn.CrossEntropyLoss()(m(x), y).backward()
            opt.step()

        ck = Path(self.dir.name) / "with-step"
        r = placer_torch.profile(self.path, ck, rounds=1, progress=False, step=step)
        # Two warm-up steps, then at least nine timed, each beside a step of the kernels,
        # and as many again beside a copy thread (there is a pool to copy to).
        self.assertGreaterEqual(calls["n"], 20)
        self.assertGreater(r["whole_step_ns"], 0)
        self.assertIsNotNone(r["step_overhead_ns"])
        self.assertGreaterEqual(r["copy_loss_ns_per_byte"], 0.0)
        self.assertGreater(r["memcpy_beside_ns_per_byte"], 0.0)
        out = placer("solve", str(self.path), "--budget", "50%", "--profile", r["checkpoint"], "-o",
                     str(Path(self.dir.name) / "plan-step.json"), env=self.env)
        line = next(ln for ln in out.splitlines() if ln.strip().startswith("step overhead"))
        self.assertIn("whole steps of the user's own training loop", line)
        # The copies' charge is one share for every kernel, from the step beside the copy
        # thread, and a copy takes at least its memcpy there.
        line = next(ln for ln in out.splitlines() if ln.strip().startswith("copy beside a kernel"))
        self.assertIn("for every kernel", line)
        self.assertIn("are set aside", line)
        self.assertIn(f"{r['copy_loss_ns_per_byte']:.3f} ns per byte copied", line)
        plan = json.loads((Path(self.dir.name) / "plan-step.json").read_text())
        slow = [v for row in plan["move_ns_per_byte"] for v in row if v > 0]
        self.assertTrue(all(v >= r["memcpy_beside_ns_per_byte"] - 1e-12 for v in slow), (slow, r))
        # Without a step, the profile says what it lacks.
        out = placer("solve", str(self.path), "--budget", "50%", "--profile", self.result["checkpoint"], "-o",
                     str(Path(self.dir.name) / "plan-nostep.json"), env=self.env)
        self.assertIn("not given the loop's own step", out)

    def test_a_failing_step_stops_the_profile_in_one_line(self):
        def step():
            raise ValueError("the loader ran dry")

        with self.assertRaisesRegex(placer_torch.ProfileError,
                                    "the framework's own training step failed: ValueError: the loader ran dry"):
            placer_torch.profile(self.path, Path(self.dir.name) / "bad-step", rounds=1, progress=False, step=step)

    def test_a_capture_of_the_older_version_is_refused(self):
        old = Path(self.dir.name) / "old.json"
        shutil.copy(self.path, old)
        side = json.loads(sidecar_path(self.path).read_text())
        side["version"] = 1
        Path(str(old)[: -len(".json")] + ".torch.json").write_text(json.dumps(side))
        with self.assertRaisesRegex(placer_torch.CaptureError, "version 1; .* capture the step again"):
            placer_torch.profile(old, Path(self.dir.name) / "old-ck", progress=False)


if __name__ == "__main__":
    unittest.main()
