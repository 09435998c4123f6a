"""One thread's memcpy (`ctypes.memmove`, as apply's copy thread makes a background
copy) over buffers of several sizes: whether the profile's interference calibration,
which copies over two 16 MiB buffers, times the copy a plan's activations take. The best
of 3 runs per size, and 100 MiB copies from a 2 GiB region, each source read once.

    scripts/torch/pybench.sh memcpy.py
"""

from __future__ import annotations

import argparse
import ctypes
import time

import torch


def speed(nbytes: int, reps: int) -> float:
    """GB/s of the best of 3 runs of `reps` copies of `nbytes` between two buffers."""
    a, b = torch.ones(nbytes, dtype=torch.uint8), torch.zeros(nbytes, dtype=torch.uint8)
    ctypes.memmove(b.data_ptr(), a.data_ptr(), nbytes)  # fault both in first
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(reps):
            ctypes.memmove(b.data_ptr(), a.data_ptr(), nbytes)
        best = min(best, (time.perf_counter() - t) / (reps * nbytes))
    return 1 / best / 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--placer", help="unused: pybench.sh passes it to every script")
    ap.parse_args()
    print("| copy | GB/s | ns/B |\n|---|---|---|")
    for mib, reps in [(16, 32), (100, 5), (1024, 1)]:
        g = speed(mib << 20, reps)
        print(f"| {mib} MiB between two buffers | {g:.2f} | {1 / g:.3f} |")
    chunk, region = 100 << 20, 2048 << 20
    src, dst = torch.ones(region, dtype=torch.uint8), torch.zeros(chunk, dtype=torch.uint8)
    t, n = time.perf_counter(), 0
    for off in range(0, region - chunk + 1, chunk):
        ctypes.memmove(dst.data_ptr(), src.data_ptr() + off, chunk)
        n += chunk
    g = n / (time.perf_counter() - t) / 1e9
    print(f"| 100 MiB from a 2 GiB region, each source once | {g:.2f} | {1 / g:.3f} |")


if __name__ == "__main__":
    main()
