"""torch's intra-op threads, started before a thread that runs ops pins itself.

OpenMP starts its team of intra-op threads at the first parallel region, and each thread
takes the affinity mask of the thread that started it. The profile pins the thread that
runs torch's kernels to its launcher's core while it runs one, and apply pins the step's
thread for a plan with background moves (`_core.pin_here`): a team first started then
would share that one core, and every kernel would run on one core instead of all of them.
"""

from __future__ import annotations

import torch


def start() -> None:
    """Runs one op large enough for torch to run it on every intra-op thread (more
    elements than its grain, 32,768), so the team exists, with this thread's mask."""
    torch.ones(1 << 20).add_(1)
