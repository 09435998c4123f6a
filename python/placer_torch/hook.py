"""The op hook (`_hook.cpp`, its live storages in `_live.cpp` and its CPU allocator in
`_births.cpp`, which share `_hook.h`), compiled against
the installed torch the first time a plan is applied, and cached by torch's extension
builder (TORCH_EXTENSIONS_DIR, by default ~/.cache/torch_extensions) until its sources
or torch change. It needs a C++ compiler and ninja; without them `load` says so in one
line rather than running the step unseen.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path


class HookError(RuntimeError):
    """The op hook could not be built or loaded."""


@functools.lru_cache(maxsize=None)
def load():
    """The compiled hook module (built once per source and torch version)."""
    from torch.utils import cpp_extension

    # ninja from PyPI sits beside the interpreter, which a venv's python need not have on PATH.
    here = str(Path(sys.executable).parent)
    if here not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = here + os.pathsep + os.environ.get("PATH", "")
    missing = [tool for tool in ("c++", "ninja") if shutil.which(tool) is None]
    if missing:
        raise HookError(f"placer_torch: cannot build its op hook: {' and '.join(missing)} not found on PATH "
                        f"(scripts/install-deps.sh installs a compiler; the venv's ninja comes from PyPI)")
    source = Path(__file__).with_name("_hook.cpp")
    sources = [str(source), str(source.with_name("_live.cpp")), str(source.with_name("_births.cpp"))]
    try:
        # NDEBUG as torch's own build: RecordFunction's debug checks read a member that
        # only a debug build of torch sets.
        return cpp_extension.load(name="placer_torch_hook", sources=sources, extra_cflags=["-O2", "-DNDEBUG"],
                                  verbose=False)
    except Exception as e:  # the builder raises several kinds; the user needs one line
        # The compiler's first error, not the command line the builder leads with.
        lines = str(e).strip().splitlines() or [type(e).__name__]
        first = next((line.strip() for line in lines if "error:" in line), lines[0])
        raise HookError(f"placer_torch: building its op hook ({source}) failed: {first}") from e
