"""The C heap a training step's temporaries come from, held steady.

Eager torch on a CPU allocates every op's result afresh through the C library's
`malloc`. glibc serves a large block either from its heap, whose freed memory it reuses
without a page fault, or from a fresh `mmap`, whose every page faults in (a kernel
zeroes it) when the op first writes it. Which one depends on the process's history:
glibc raises its mmap threshold as the program frees large blocks (up to 32 MiB), and
gives the top of its heap back to the kernel whenever more than twice that is free
there ("trimming").

So an op's time depends on what ran before it. Measured on ResNet-50 b8 (torch's
kernels, this project's 2-core VM): the profile's passes, which run a few kernels of a
step at a time, left the heap trimmed before about half their timings, and `add` of a
25.7 MB tensor took 8-9 ms instead of 2.5-3 ms; the passes' kernels summed to 1,791 ms,
the same kernels inside whole steps to 1,521 ms. Held steady, the two came to 1,513 and
1,444 ms, and torch's whole step fell from 1,667 to 1,435 ms.

`steady()` fixes both thresholds for the process: blocks up to glibc's own ceiling of
32 MiB come from the heap, and the heap is never trimmed. A loop that has run a few steps
reaches that state anyway unless something trims its heap in between; larger blocks are
still mapped afresh and fault in every step, in the profile and in the loop alike.
`profile()` and `apply()` both call it, so that the kernels the profile times and the
step the plan runs see the same heap. The cost is resident memory: freed heap stays
mapped, up to the step's own peak of temporaries.
"""

from __future__ import annotations

import ctypes
import ctypes.util

#: glibc's `mallopt` parameters (malloc.h) and its own ceiling for the dynamic mmap
#: threshold on 64-bit hosts (DEFAULT_MMAP_THRESHOLD_MAX: 4 MiB x sizeof(long)).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 2**20
#: The largest value `mallopt` takes (an int): the heap's top is never this free.
_NEVER_TRIM = 2**31 - 1

_state: tuple[bool, str] | None = None


def steady() -> bool:
    """Holds the process's C heap steady (see the module's comment), once; whether it
    is. On a C library without glibc's `mallopt` it does nothing: op times there depend
    on its allocator's own history, and `describe()` says so."""
    global _state
    if _state is None:
        _state = _set()
    return _state[0]


def describe() -> str:
    """What `steady()` did, in words, for reports."""
    steady()
    return _state[1]


def _set() -> tuple[bool, str]:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        version = libc.gnu_get_libc_version().decode()
    except (OSError, AttributeError):
        return False, f"C heap left as it is: {name or 'the C library'} has no glibc mallopt"
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    # mallopt returns 1 on success, 0 on a value it refuses.
    if mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1 or mallopt(_M_TRIM_THRESHOLD, _NEVER_TRIM) != 1:
        return False, f"C heap left as it is: glibc {version}'s mallopt refused the thresholds"
    return True, f"C heap held steady (glibc {version}: blocks up to {MMAP_THRESHOLD >> 20} MiB from the heap, never trimmed)"
