"""What the suites that run this build's `placer` share: tests/torch.rs passes it as
PLACER_BIN."""

import os
import subprocess
import tempfile
import unittest
from pathlib import Path


def placer(*args, env, ok=(0,)) -> str:
    """`placer ARGS` with `env`; its stdout, or a failure with its stderr."""
    out = subprocess.run([os.environ["PLACER_BIN"], *args], capture_output=True, text=True, env=env)
    if out.returncode not in ok:
        raise AssertionError(f"placer {' '.join(args)} exited {out.returncode}:\n{out.stderr}")
    return out.stdout


def placer_workdir(cls) -> tuple:
    """For a suite's setUpClass: skips it without PLACER_BIN; otherwise gives it a
    temporary directory (`cls.dir`, removed by `cls.dir.cleanup()`) and returns the
    directory and an environment whose checkpoints go under it."""
    if "PLACER_BIN" not in os.environ:
        raise unittest.SkipTest("PLACER_BIN is not set (tests/torch.rs sets it to this build's placer)")
    cls.dir = tempfile.TemporaryDirectory()
    d = Path(cls.dir.name)
    return d, dict(os.environ, PLACER_CHECKPOINT_DIR=str(d / "checkpoints"))
