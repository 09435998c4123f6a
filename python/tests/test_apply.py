"""apply(): a torch loop under a placer plan keeps its numbers, is charged by the plan's
pools, runs the plan's moves and stays within the DRAM budget it was planned for.

Needs this build's `placer` (to profile and solve the captured model): tests/torch.rs
passes it as PLACER_BIN.
"""

import gc
import json
import os
import shutil
import sys
import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import placer_torch
from placer_torch import hook
from helpers import placer, placer_workdir
from test_capture import SmallCnn, small_batch


def _aten(target):
    _, name, overload = target.split(".")
    return getattr(getattr(torch.ops.aten, name), overload)


def train(model, opt, batch, steps, placed=None):
    losses = []
    for s in range(steps):
        torch.manual_seed(s)
        if placed is not None:
            placed.__enter__()
        try:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(batch[0]), batch[1])
            loss.backward()
            opt.step()
        finally:
            if placed is not None:
                placed.__exit__(None, None, None)
        losses.append(loss.item())
    return losses


class Apply(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        d, cls.env = placer_workdir(cls)
        torch.manual_seed(0)
        cls.start = SmallCnn()
        cls.batch = small_batch(8)
        cls.model_path = d / "cnn.json"
        opt = torch.optim.SGD(cls.start.parameters(), lr=0.05, momentum=0.9)
        placer_torch.capture(cls.start, cls.batch, nn.CrossEntropyLoss(), opt, cls.model_path)
        placer("profile", str(cls.model_path), env=cls.env)
        cls.plan = d / "plan.json"
        cls.baselines = d / "baselines"
        placer("solve", "--budget", "50%", "-o", str(cls.plan), "--baseline-plans", str(cls.baselines), env=cls.env)
        # Weight gradients outside DRAM whatever the timings say (the 50% plan keeps
        # them there on most runs, not all: its weights come from a measured profile).
        cls.grads_slow = d / "grads-slow.json"
        placer("solve", "--budget", "50%", "-o", str(cls.grads_slow), "--pin", "role=weight_gradient:pmem", env=cls.env)
        # Every tensor in DRAM, for a move the test makes itself.
        cls.all_dram = d / "all-dram.json"
        pins = [x for r in ("input", "weight", "optimizer_state", "activation", "workspace", "gradient",
                            "weight_gradient") for x in ("--pin", f"role={r}:dram")]
        placer("solve", "--budget", "16GiB", "-o", str(cls.all_dram), *pins, env=cls.env)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def fresh(self):
        torch.manual_seed(0)
        m = SmallCnn()
        m.load_state_dict(self.start.state_dict())
        return m, torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)

    def test_losses_are_unchanged_bit_for_bit(self):
        m, opt = self.fresh()
        plain = train(m, opt, self.batch, 5)
        m, opt = self.fresh()
        placed = placer_torch.apply(m, opt, self.model_path, self.plan)
        self.assertEqual(train(m, opt, self.batch, 5, placed), plain)
        self.assertEqual(len(placed.records), 5)

    def test_the_graph_is_matched_and_the_pools_charge(self):
        m, opt = self.fresh()
        placed = placer_torch.apply(m, opt, self.model_path, self.plan)
        train(m, opt, self.batch, 2, placed)
        r = placed.records[-1]
        # Every op of the graph that eager torch runs as a kernel (a view runs none).
        kernels = [k for k in placed.kernels if not _aten(k.target).is_view]
        self.assertEqual(r.matched, len(kernels), placed.unmatched_ops)
        all_slow = self.baselines / "all-slow.json"
        m2, opt2 = self.fresh()
        slow = placer_torch.apply(m2, opt2, self.model_path, all_slow)
        train(m2, opt2, self.batch, 2, slow)
        # Everything in the emulated pool waits more than a plan that keeps half in DRAM,
        # and the plan itself is charged for what it leaves in the slow pool.
        self.assertGreater(slow.records[-1].wait_ns, r.wait_ns)
        self.assertGreater(r.wait_ns, 0)
        # Ops outside the captured graph (the eager optimizer's among them) wait too, and
        # the record keeps their part apart: no profile times them.
        s = slow.records[-1]
        self.assertGreater(s.wait_unmatched_ns, 0, slow.unmatched_ops)
        self.assertLess(s.wait_unmatched_ns, s.wait_ns)
        # The hook charges a graph op for torch's operands by placer's formula: where the
        # op is one kernel of placer's with the same operands (a convolution without a
        # bias, a relu, batch norm), it is charged what placer's executor charges that
        # kernel under the plan. (A convolution with a bias is two of placer's kernels.)
        hook_waits, plan_waits = slow.tracker.step_waits(), slow.placement.planned_waits_ns()
        step_of = {n: i for i, n in enumerate(slow.placement.schedule())}
        same = {step_of[k["nodes"][0]] for k in slow.cap.kernels if len(k["nodes"]) == 1 and k["target"] in (
            "aten.convolution.default", "aten.relu.default", "aten._native_batch_norm_legit_functional.default")}
        self.assertGreaterEqual(len(same), 4)
        for step in same:
            self.assertGreater(plan_waits[step], 0)
            self.assertAlmostEqual(hook_waits[step], plan_waits[step], delta=1e-9 * plan_waits[step])
        self.assertGreater(slow.planned_waits_ns[1], 0)  # the optimizer's updates
        self.assertIn(f"(the plan charges its kernels {slow.planned_waits_ns[0] / 1e6:.3f} ms)", slow.report())
        self.assertIn("EMULATED", placed.report())
        # The step ran on the heap the profile times ops on (heap.py).
        self.assertIn("heap       C heap held steady", placed.report())

    def test_the_hook_sees_the_ops_a_dispatch_mode_sees(self):
        # The C++ hook sees each aten op at the level a Python dispatch mode does: after
        # torch's own decompositions, not the ops inside it. Views run no kernel.
        class Count(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.ops = 0

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if not func.is_view and func.namespace != "profiler":
                    self.ops += 1
                return func(*args, **(kwargs or {}))

        m, opt = self.fresh()
        placed = placer_torch.apply(m, opt, self.model_path, self.all_dram, rehome=False)
        train(m, opt, self.batch, 2, placed)
        m2, opt2 = self.fresh()
        train(m2, opt2, self.batch, 1)
        count = Count()
        train(m2, opt2, self.batch, 1, count)  # entered around the step, as `placed` is
        r = placed.records[-1]
        self.assertEqual(r.matched + r.unmatched, count.ops, placed.unmatched_ops)

    def test_one_plans_step_at_a_time(self):
        m, opt = self.fresh()
        first = placer_torch.apply(m, opt, self.model_path, self.all_dram, rehome=False)
        second = placer_torch.apply(m, opt, self.model_path, self.all_dram, rehome=False)
        with first:
            with self.assertRaisesRegex(RuntimeError, "^placer_torch: another plan's step is running"):
                second.__enter__()
        # The refused one holds nothing: it runs a step of its own afterwards.
        train(m, opt, self.batch, 1, second)
        self.assertGreater(second.records[-1].matched, 0)

    def test_without_a_compiler_the_hook_is_refused_in_one_line(self):
        empty = tempfile.mkdtemp()
        with mock.patch.dict(os.environ, {"PATH": empty}), mock.patch.object(sys, "executable", f"{empty}/python"):
            with self.assertRaises(hook.HookError) as e:
                hook.load.__wrapped__()
        self.assertRegex(str(e.exception), r"^placer_torch: cannot build its op hook: c\+\+ and ninja not found on PATH")
        self.assertNotIn("\n", str(e.exception))

    def test_the_plans_moves_run_every_step(self):
        plan = json.loads(self.plan.read_text())
        for path in [self.plan] + sorted(self.baselines.glob("*.json")):
            moves = len(json.loads(Path(path).read_text())["moves"])
            m, opt = self.fresh()
            placed = placer_torch.apply(m, opt, self.model_path, path)
            train(m, opt, self.batch, 2, placed)
            self.assertEqual([r.moves for r in placed.records], [moves, moves], path)
        self.assertIn("moves", plan)

    def test_saved_activations_kept_outside_dram_are_in_that_pools_memory(self):
        # Born in torch's memory (births off), they are copied into the pool's as saved.
        plain = train(*self.fresh(), self.batch, 3)
        m, opt = self.fresh()
        placed = placer_torch.apply(m, opt, self.model_path, self.baselines / "all-slow.json", born=False)
        self.assertEqual(train(m, opt, self.batch, 3, placed), plain)
        self.assertGreater(placed.records[-1].saved_placed, 0)
        self.assertEqual(placed.records[-1].born, 0)
        for pool, tensors, nbytes, asked, on, elsewhere, unknown, per_node in placed.pages():
            self.assertEqual((on, elsewhere, unknown), (asked, 0, 0), pool)
        self.assertIn("saved for backward copied into the memory of the pool", placed.report())
        # Their memory, kept for the next step, can be given back; the next step makes it again.
        self.assertGreater(placed.release(), 0)
        self.assertEqual(placed.release(), 0)
        m2, opt2 = self.fresh()
        self.assertEqual(train(m2, opt2, self.batch, 3), plain)

    def out_and_home(self, placed):
        """Gives `placed` two moves of the first forward result that backward reads again,
        well after: a blocking one out to the slow pool after its first use, a background
        one home before its last. Returns the slow pool and the two uses' steps."""
        slow = next(p for p in placed.bound if p != placed.dram)
        x = next(n for n in placed.kernels[0].outputs if n and placed.uses[n][-1] - placed.uses[n][0] > 3)
        first, last = placed.uses[x][0], placed.uses[x][-1]
        nbytes = next(t["bytes"] for t in json.loads(self.all_dram.read_text())["tensors"] if t["name"] == x)
        placed._set_moves([(x, placed.dram, slow, nbytes, False, first + 1),
                           (x, slow, placed.dram, nbytes, True, last)])
        return slow, first, last

    def test_with_pin_the_step_runs_on_its_core_and_copies_keep_off_it(self):
        plain = train(*self.fresh(), self.batch, 2)
        cores = os.sched_getaffinity(0)
        for pin in (False, True):
            m, opt = self.fresh()
            placed = placer_torch.apply(m, opt, self.model_path, self.all_dram, pin=pin)
            self.out_and_home(placed)
            during, copier = [], []
            finish = placed.mover._finish

            def watch(i):
                mine = os.sched_getaffinity(0)
                during.append(mine)
                if i in placed.mover.started:
                    # The copy thread's mask, asked on the copy thread after its copy.
                    copier.append((mine, placed.mover.copier.submit(os.sched_getaffinity, 0).result()))
                finish(i)

            placed.mover._finish = watch
            self.assertEqual(train(m, opt, self.batch, 2, placed), plain, pin)
            self.assertEqual(os.sched_getaffinity(0), cores, "the mask comes back after the step")
            self.assertTrue(during and copier, "a blocking and a background move ran")
            if not pin or len(cores) < 2:
                self.assertEqual({frozenset(d) for d in during + [c for _, c in copier]}, {frozenset(cores)}, pin)
            else:
                self.assertTrue(all(len(d) == 1 and d <= cores for d in during), during)
                for step_core, copy_cores in copier:
                    self.assertEqual(copy_cores, cores - step_core)

    def test_a_saved_activation_rides_its_moves_between_pools_memory(self):
        plain = train(*self.fresh(), self.batch, 3)
        m, opt = self.fresh()
        placed = placer_torch.apply(m, opt, self.model_path, self.all_dram)
        slow, _, _ = self.out_and_home(placed)
        seen = []
        unpack = placed._unpack

        def watch(h):
            t = unpack(h)
            seen.append(getattr(h, "pool", None))
            return t

        placed._unpack = watch
        placed._hooks = torch.autograd.graph.saved_tensors_hooks(placed._pack, placed._unpack)
        self.assertEqual(train(m, opt, self.batch, 3, placed), plain)
        self.assertEqual([r.routed for r in placed.records], [2, 2, 2])
        self.assertEqual([r.moves for r in placed.records], [2, 2, 2])
        # Backward read it back in DRAM's memory: the move home ran before the unpack.
        self.assertIn(placed.dram, seen)
        self.assertNotIn(slow, seen)

    def test_a_holder_lives_only_as_long_as_autograd_keeps_it(self):
        # apply finds a holder by name while autograd holds it; once backward has freed
        # it, apply must not keep it (nor the DRAM its tensor was moved home into).
        m, opt = self.fresh()
        placed = placer_torch.apply(m, opt, self.model_path, self.all_dram)
        self.out_and_home(placed)
        with placed:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(m(self.batch[0]), self.batch[1])
            held = list(placed.saved.keys())
            loss.backward()
            after = list(placed.saved.keys())
            opt.step()
        self.assertEqual(len(held), 1, held)
        self.assertEqual(after, [])
        self.assertEqual(placed.records[-1].routed, 2)

    def test_what_torch_holds_after_the_plans_last_use_is_not_placed_and_named(self):
        m, opt = self.fresh()
        placed = placer_torch.apply(m, opt, self.model_path, self.all_dram)
        kept = []
        handle = m.conv1.register_forward_hook(lambda _m, _a, out: kept.append(out))
        try:
            train(m, opt, self.batch, 1, placed)
        finally:
            handle.remove()
        r = placed.records[-1]
        name = placed.names[placed.tracker.names(kept[0])[0]]
        self.assertIn(name, r.outlived)
        self.assertNotIn(name, r.misplaced)
        self.assertGreaterEqual(r.unplaced_peak, kept[0].untyped_storage().nbytes())
        self.assertIn(f"outlived   {len(r.outlived)} of the plan's tensors still held by torch", placed.report())
        # Without the user's reference, conv1's result is freed with its last reader.
        m2, opt2 = self.fresh()
        placed2 = placer_torch.apply(m2, opt2, self.model_path, self.all_dram)
        train(m2, opt2, self.batch, 1, placed2)
        self.assertNotIn(name, placed2.records[-1].outlived)

    def test_a_move_runs_before_the_kernel_it_is_due_at_and_beside_the_one_it_overlaps(self):
        m, opt = self.fresh()
        placed = placer_torch.apply(m, opt, self.model_path, self.all_dram)
        _, first, last = self.out_and_home(placed)
        # The kernel the hook matched last when each move started and when it was done.
        at = {"start": [], "finish": []}
        start, finish = placed.mover._start, placed.mover._finish

        def watch_start(i):
            at["start"].append((i, placed.step))
            start(i)

        def watch_finish(i):
            if i not in placed.mover.done_early:
                at["finish"].append((i, placed.step))
            finish(i)

        placed.mover._start, placed.mover._finish = watch_start, watch_finish
        train(m, opt, self.batch, 1, placed)
        # The blocking one once kernel `first` is done; the background one once the kernel
        # before the one it overlaps is done, and waited for before the kernel that reads it.
        self.assertEqual(at["start"], [(1, last - 2)])
        self.assertEqual(at["finish"], [(0, first), (1, last - 1)])

    def test_a_background_move_beside_a_folded_kernel_starts_before_it(self):
        # A kernel that runs two of the schedule's nodes has the later one's step; the
        # kernel before it ends at a step the folded kernel's first node has.
        m, opt = self.fresh()
        placed = placer_torch.apply(m, opt, self.model_path, self.all_dram)
        steps = placed.kernel_steps
        folded = [s for p, s in zip(steps, steps[1:]) if s - p > 1]
        self.assertTrue(folded, f"the small CNN has no folded kernel: {steps}")
        s = folded[0]
        p = steps[steps.index(s) - 1]
        x = next(n for n in placed.names if n in placed.spans and n.endswith(".weight"))
        slow = next(q for q in placed.bound if q != placed.dram)
        placed._set_moves([(x, placed.dram, slow, 4096, True, s + 1)])
        at = {"start": [], "finish": []}
        start, finish = placed.mover._start, placed.mover._finish
        placed.mover._start = lambda i: (at["start"].append(placed.step), start(i))
        placed.mover._finish = lambda i: (at["finish"].append((placed.step, i in placed.mover.started)), finish(i))
        train(m, opt, self.batch, 1, placed)
        # Started once the kernel before the folded one is done, waited for after it.
        self.assertEqual(at["start"], [p])
        self.assertEqual(at["finish"], [(s, True)])

    def test_a_background_move_beside_the_kernel_that_saves_its_tensor_carries_it(self):
        plain = train(*self.fresh(), self.batch, 3)
        m, opt = self.fresh()
        placed = placer_torch.apply(m, opt, self.model_path, self.all_dram)
        slow, _, _ = self.out_and_home(placed)
        x = placed.mover.moves[0][0]
        # The kernel that saves x: the one running when autograd's hook gets it.
        saved_at = []
        pack = placed._pack

        def watch(t):
            h = pack(t)
            if getattr(h, "name", None) == x:
                saved_at.append(placed.step + 1)
            return h

        placed._pack = watch
        placed._hooks = torch.autograd.graph.saved_tensors_hooks(placed._pack, placed._unpack)
        train(m, opt, self.batch, 1, placed)
        k = saved_at[0]
        # Out in the background beside that kernel: before it saves x there is no holder.
        nbytes = placed.mover.moves[0][3]
        placed._set_moves([(x, placed.dram, slow, nbytes, True, k + 1)])
        m2, opt2 = self.fresh()
        placed2 = placer_torch.apply(m2, opt2, self.model_path, self.all_dram)
        placed2._set_moves(placed.mover.moves)
        self.assertEqual(train(m2, opt2, self.batch, 3, placed2), plain)
        # The first step knows no tensor autograd saves: scratch bytes; then the holder's.
        self.assertEqual([r.routed for r in placed2.records], [0, 1, 1])
        self.assertEqual([r.moves for r in placed2.records], [1, 1, 1])

    def test_results_the_plan_keeps_outside_dram_are_born_in_that_pools_memory(self):
        plain = train(*self.fresh(), self.batch, 3)
        ext = hook.load()
        m, opt = self.fresh()
        placed = placer_torch.apply(m, opt, self.model_path, self.baselines / "all-slow.json")
        slow = next(p for p in placed.bound if p != placed.dram)
        outs = []
        handle = m.conv1.register_forward_hook(lambda _m, _a, out: outs.append(out))
        try:
            self.assertEqual(train(m, opt, self.batch, 3, placed), plain)
        finally:
            handle.remove()
        # The first convolution's result, born while the op ran, in the slow pool's memory.
        self.assertEqual([ext.born_pool(t) for t in outs], [placed.pool_ids[slow]] * 3)
        r = placed.records[-1]
        self.assertGreater(r.born, 0)
        self.assertGreaterEqual(r.born_bytes, outs[-1].numel() * 4)
        # Saved for backward where they were born: none is copied out of torch's memory.
        self.assertEqual(r.saved_placed, 0)
        conv = next(k.outputs[0] for k in placed.kernels if k.target == "aten.convolution.default")
        self.assertNotIn(conv, r.misplaced)
        self.assertRegex(placed.report(), rf"born       {r.born} result\(s\) born in the memory of the pool")
        for pool, tensors, nbytes, asked, on, elsewhere, unknown, per_node in placed.pages():
            self.assertEqual((on, elsewhere, unknown), (asked, 0, 0), pool)
        # Outside a step every allocation is torch's own.
        self.assertEqual(ext.born_pool(m.conv1(self.batch[0])), -1)
        # A result born in pool memory outlives the plan that placed it.
        kept, want = outs[-1], outs[-1].clone()
        del placed, outs
        gc.collect()
        self.assertTrue(torch.equal(kept, want))
        del kept
        # With every tensor in DRAM nothing is born in pool memory.
        m2, opt2 = self.fresh()
        dram = placer_torch.apply(m2, opt2, self.model_path, self.all_dram)
        seen = []
        handle = m2.conv1.register_forward_hook(lambda _m, _a, out: seen.append(ext.born_pool(out)))
        try:
            train(m2, opt2, self.batch, 2, dram)
        finally:
            handle.remove()
        self.assertEqual(seen, [-1, -1])
        self.assertEqual((dram.records[-1].born, dram.records[-1].stray), (0, 0))

    def test_the_dram_peak_stays_within_the_budget_and_what_was_not_placed(self):
        budget = json.loads(self.plan.read_text())["budget_bytes"]
        m, opt = self.fresh()
        placed = placer_torch.apply(m, opt, self.model_path, self.plan)
        train(m, opt, self.batch, 3, placed)
        for r in placed.records:
            self.assertLessEqual(r.dram_peak, budget + r.unplaced_peak, r)
            self.assertGreater(r.unplaced_peak, 0)  # batch norm's running statistics at least
            # What the plan has no name for, by the op that made it, largest first; batch
            # norm's running statistics are buffers, first seen as an op's input.
            self.assertIn("an input", dict(r.unplaced_by))
            self.assertEqual(r.unplaced_by, sorted(r.unplaced_by, key=lambda x: -x[1]))
            self.assertLessEqual(sum(b for _, b in r.unplaced_by), r.unplaced_peak)
        self.assertIn("not named  at the not-placed peak, storages the plan has no name for", placed.report())

    def test_what_stays_in_torchs_memory_is_counted_in_dram_and_named(self):
        # Without re-homing, every tensor the all-slow plan keeps outside DRAM stays in
        # torch's memory: all the DRAM tracked is what the plan did not place, and the
        # report names the plan's tensors among it.
        m, opt = self.fresh()
        placed = placer_torch.apply(m, opt, self.model_path, self.baselines / "all-slow.json", rehome=False)
        train(m, opt, self.batch, 2, placed)
        r = placed.records[-1]
        self.assertGreater(r.dram_peak, 0)
        self.assertEqual(r.dram_peak, r.unplaced_peak)
        params = {q for q, _ in m.named_parameters()}
        self.assertLessEqual(params, set(r.misplaced))
        self.assertIn(f"not placed {len(r.misplaced)} of the plan's tensors stayed in torch's memory", placed.report())
        # Re-homed, the parameters are in the slow pool's memory: neither DRAM nor named.
        m2, opt2 = self.fresh()
        homed = placer_torch.apply(m2, opt2, self.model_path, self.baselines / "all-slow.json")
        train(m2, opt2, self.batch, 2, homed)
        self.assertFalse(params & set(homed.records[-1].misplaced))
        # With every tensor in DRAM, nothing is off the plan.
        m3, opt3 = self.fresh()
        dram = placer_torch.apply(m3, opt3, self.model_path, self.all_dram, rehome=False)
        train(m3, opt3, self.batch, 2, dram)
        self.assertEqual(dram.records[-1].misplaced, [])

    def test_parameters_and_optimizer_state_live_in_their_pools_memory_with_pages_checked(self):
        m, opt = self.fresh()
        placed = placer_torch.apply(m, opt, self.model_path, self.grads_slow)
        train(m, opt, self.batch, 2, placed)  # the momentum buffers exist after step 1
        with placed:
            pass
        params = {q for q, _ in m.named_parameters()}
        # Gradients only where the plan keeps them outside DRAM: homes kept from step to
        # step would hold DRAM all step.
        grads = {f"{q}.grad" for q in params if placed.placement.pool_at(f"{q}.grad", placed.steps - 1) != placed.dram}
        names = params | {f"optimizer.state[{q}].momentum_buffer" for q in params} | grads
        self.assertEqual(set(placed.homed), names)  # every pool of this host is NUMA-bound
        self.assertTrue(grads)
        for q, p in m.named_parameters():
            pool, nbytes = placed.homed[q]
            self.assertEqual(pool, placed.placement.pool_at(q, 0))
            self.assertEqual(nbytes, p.numel() * 4)
            if f"{q}.grad" in grads:
                # The gradient the optimizer read is the one in pool memory, kept from step to step.
                self.assertEqual(p.grad.data_ptr(), placed.grad_homes[q].data_ptr(), q)
                self.assertEqual(placed.homed[f"{q}.grad"][1], p.numel() * 4)
        rows = placed.pages()
        self.assertTrue(rows)
        for pool, tensors, nbytes, asked, on, elsewhere, unknown, per_node in rows:
            self.assertGreater(asked, 0, pool)
            self.assertEqual((on, elsewhere, unknown), (asked, 0, 0), pool)
        self.assertIn("pages checked are on its nodes", placed.report())
        # Without re-homing nothing moves, and the numbers are the same either way.
        m2, opt2 = self.fresh()
        plain = placer_torch.apply(m2, opt2, self.model_path, self.grads_slow, rehome=False)
        self.assertEqual(train(m2, opt2, self.batch, 3, plain), train(*self.fresh(), self.batch, 3))
        self.assertEqual(plain.homed, {})

    def test_a_plan_for_another_model_is_refused(self):
        other = Path(self.dir.name) / "other.json"
        m = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 10))
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        placer_torch.capture(m, self.batch, nn.CrossEntropyLoss(), opt, other)
        with self.assertRaisesRegex(placer_torch.ModelError, "^the plan is for model 'SmallCnn'"):
            placer_torch.apply(m, opt, other, self.plan)

    def test_a_model_without_its_capture_is_refused(self):
        bare = Path(self.dir.name) / "bare.json"
        shutil.copy(self.model_path, bare)
        m, opt = self.fresh()
        with self.assertRaisesRegex(placer_torch.CaptureError, "no capture beside bare.json"):
            placer_torch.apply(m, opt, bare, self.plan)


class InPlaceNet(nn.Module):
    """Batch norm, then an in-place relu: eager torch writes the relu's result over batch
    norm's, where the captured graph has two tensors the plan may place apart."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.fc = nn.Linear(8 * 16 * 16, 10)

    def forward(self, x):
        return self.fc(self.relu(self.bn(self.conv(x))).flatten(1))


def _captured(cls, net, name: str):
    """For a suite's setUpClass: `net` (built after seeding), a batch of 4, plain SGD, and
    the step captured as NAME.json in the suite's directory; returns the directory and
    the environment `placer` runs in."""
    d, env = placer_workdir(cls)
    torch.manual_seed(0)
    cls.model = net()
    cls.batch = small_batch(4)
    cls.opt = torch.optim.SGD(cls.model.parameters(), lr=0.05)
    cls.model_path = d / f"{name}.json"
    placer_torch.capture(cls.model, cls.batch, nn.CrossEntropyLoss(), cls.opt, cls.model_path)
    return d, env


class InPlace(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        d, env = _captured(cls, InPlaceNet, "inplace")
        kernels = {k["target"]: k for k in placer_torch.Capture.load(cls.model_path).kernels}
        cls.bn_out = kernels["aten._native_batch_norm_legit_functional.default"]["outputs"][0]
        cls.relu = kernels["aten.relu.default"]["outputs"][0]
        # Batch norm's result in DRAM, the relu's in the slow pool, the rest in DRAM.
        pins = [x for r in ("input", "weight", "optimizer_state", "workspace", "gradient", "weight_gradient")
                for x in ("--pin", f"role={r}:dram")]
        pins += ["--pin", f"tensor={cls.bn_out}:dram", "--pin", f"tensor={cls.relu}:pmem"]
        cls.plan = d / "plan.json"
        placer("solve", str(cls.model_path), "--budget", "16GiB", "-o", str(cls.plan), *pins, env=env)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_an_in_place_result_is_born_in_its_pool_from_the_second_step(self):
        placed = placer_torch.apply(self.model, self.opt, self.model_path, self.plan)
        slow = placed.pool_ids["pmem"]
        self.assertEqual(placed.placement.pool_at(self.bn_out, placed.steps - 1), placed.dram)
        ext = hook.load()
        born = []
        handle = self.model.relu.register_forward_hook(lambda _m, _a, out: born.append(ext.born_pool(out)))
        try:
            train(self.model, self.opt, self.batch, 3, placed)
        finally:
            handle.remove()
        # The first step learns that the relu writes over batch norm's result; from then
        # on that storage is born where the plan keeps the relu's, and counts as placed.
        self.assertEqual(born, [-1, slow, slow])
        self.assertEqual([r.born - placed.records[0].born for r in placed.records], [0, 1, 1])


class ViewNet(nn.Module):
    """A reshape whose input nothing else reads: placer copies it into a tensor of its
    own, torch views the same storage (and keeps it for backward)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 16 * 16, 10)

    def forward(self, x):
        return self.fc((self.conv(x) * 2).flatten(1))


class ViewNames(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        d, env = _captured(cls, ViewNet, "viewnet")
        placer("profile", str(cls.model_path), env=env)
        cls.plan = d / "plan.json"
        placer("solve", "--budget", "50%", "-o", str(cls.plan), env=env)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_a_storage_torch_views_takes_the_name_of_placers_copy_once_its_own_is_not_read(self):
        placed = placer_torch.apply(self.model, self.opt, self.model_path, self.plan)
        (view,) = [k for k in placed.kernels if k.target == "aten.view.default" and k.inputs[0].startswith("mul")]
        first, copy = view.inputs[0], view.outputs[0]
        self.assertLess(placed.ends[first], placed.ends[copy])  # the copy is read in backward
        seen = []

        def hook(_module, args, _out):
            name, others = placed.tracker.names(args[0])
            decides = placed.tracker.counted_name(args[0])
            seen.append((placed.names[name], [placed.names[o] for o in others], placed.names[decides]))

        handle = self.model.fc.register_forward_hook(hook)
        try:
            train(self.model, self.opt, self.batch, 1, placed)
        finally:
            handle.remove()
        # Read by the linear under the copy's name: the storage is counted where the plan
        # keeps the copy, not where it kept the reshape's input, which is no longer held.
        self.assertEqual(seen, [(copy, [first], copy)])


class CopyBeside(unittest.TestCase):
    """A background move's copy keeps the step's cores as placer's executor's copy thread
    does: the emulated device's time is slept, not spun."""

    def test_the_emulated_wait_beside_the_kernels_takes_no_core(self):
        from placer_torch.moves import _copy_beside

        src = torch.arange(1 << 20, dtype=torch.float32)
        dst = torch.empty_like(src)
        wall, cpu = time.perf_counter(), time.thread_time()
        _copy_beside(dst, src, 200e6)
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        self.assertTrue(torch.equal(dst, src))
        self.assertGreaterEqual(wall, 0.2)
        # The memcpy of 4 MiB and the last 50 µs' spin: a spun wait would cost its 200 ms.
        self.assertLess(cpu, 0.05, f"the copy used {cpu * 1e3:.1f} ms of CPU in {wall * 1e3:.1f} ms")


if __name__ == "__main__":
    unittest.main()
