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

`steady()` makes every block come from the heap and keeps the heap from being trimmed.
glibc's dynamic mmap threshold cannot be raised past 32 MiB, so larger blocks would
still be mapped afresh and fault in every step: at ResNet-50 b32, where most activations
and their gradients are 51-103 MB, that was 0.16-2.4 million page faults and 0.3-4.3 s
of system time in a 5-7.7 s step, falling over the first steps as the heap grew, and
different again after other work in the process (the profile's passes, a held buffer).
So `steady()` also turns glibc's use of `mmap` for blocks off (M_MMAP_MAX 0); glibc
still maps memory when the heap cannot grow. Measured here, ResNet-50 b32's step then
took 0-20,385 faults from its third step on, and a median of 5,659 ms against 7,592 ms
on glibc as found (docs/BENCHMARKS.md, "Every block from the heap"). `profile()` and
`apply()` both call it, so that the kernels the profile times, the step whose overhead
it measures and the step the plan runs see the same heap. The cost is resident memory:
freed memory stays mapped, up to the step's own peak of temporaries and what
fragmentation adds.

Threads other than the main one get heaps of their own from glibc ("arenas"), each
mapped apart (at most 64 MiB) and given back to the kernel as soon as its top is free,
whatever the trim threshold says. apply's copy thread allocates the DRAM copy of every
saved activation a background move brings back: at ResNet-50 b32 under a plan with 290
moves a step, that was 160,000-250,000 page faults and 2.6-6.2 s of system time per
step, and the step took 9.4-11.3 s where the same plan ran 6.7-7.0 s with one heap for
all threads. So `steady()` also makes every thread use the main heap (M_ARENA_MAX 1);
apply allocates seldom off the main thread, so the lock they then share costs nothing
measurable. A thread that already has a heap of its own keeps it.
"""

from __future__ import annotations

import ctypes
import ctypes.util

#: glibc's `mallopt` parameters (malloc.h) and its own ceiling for the dynamic mmap
#: threshold on 64-bit hosts (DEFAULT_MMAP_THRESHOLD_MAX: 4 MiB x sizeof(long)).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8
MMAP_THRESHOLD = 32 * 2**20
#: The largest value `mallopt` takes (an int): the heap's top is never this free.
_NEVER_TRIM = 2**31 - 1

#: What `steady()` sets, in order. The threshold still matters where glibc maps anyway
#: (a heap that cannot grow).
STEADY = ((_M_MMAP_THRESHOLD, MMAP_THRESHOLD), (_M_TRIM_THRESHOLD, _NEVER_TRIM), (_M_MMAP_MAX, 0), (_M_ARENA_MAX, 1))
#: What `steady()` set before every block came from the heap (python/bench/heap.py's
#: "thresholds only").
THRESHOLDS_ONLY = STEADY[:2]

_state: tuple[bool, str] | None = None


def steady() -> bool:
    """Holds the process's C heap steady (see the module's comment), once; whether it
    is. On a C library without glibc's `mallopt` it does nothing: op times there depend
    on its allocator's own history, and `describe()` says so."""
    global _state
    if _state is None:
        _state = set_mallopt(STEADY)
    return _state[0]


def describe() -> str:
    """What `steady()` did, in words, for reports."""
    steady()
    return _state[1]


def set_mallopt(settings) -> tuple[bool, str]:
    """Sets glibc's `mallopt` (parameter, value) pairs in order for the process; whether
    all were taken, and what was done, in words. `steady()` is `set_mallopt(STEADY)` once."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        version = libc.gnu_get_libc_version().decode()
    except (OSError, AttributeError):
        return False, f"C heap left as it is: {name or 'the C library'} has no glibc mallopt"
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    for i, (param, value) in enumerate(settings):
        # mallopt returns 1 on success, 0 on a value it refuses.
        if mallopt(param, value) != 1:
            return False, (f"C heap not held steady: glibc {version}'s mallopt refused parameter {param} = {value} "
                           f"({i} setting(s) before it taken)")
    if tuple(settings) == STEADY:
        return True, f"C heap held steady (glibc {version}: every block from the one heap of all threads, never trimmed)"
    return True, f"C heap: glibc {version}'s mallopt took {list(settings)}"
