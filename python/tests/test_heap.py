"""The C heap held steady (placer_torch/heap.py): freed blocks stay for the next op."""

import subprocess
import sys
import unittest

# A fresh interpreter frees a block of the given MiB and reports how much of it stayed
# resident. Above glibc's starting mmap threshold (128 KiB) nothing of either size comes
# from the heap, so without steady() the block is unmapped when freed; 64 MiB is also
# past the 32 MiB that glibc's threshold can be raised to.
_PROBE = """
import sys
steady = sys.argv[1] == "1"
mib = int(sys.argv[2])
if steady:
    import placer_torch.heap as h
    assert h.steady(), h.describe()
page = __import__("os").sysconf("SC_PAGE_SIZE")
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * page
import ctypes
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
n = mib * 2**20
p = libc.malloc(n)
ctypes.memset(p, 1, n)
before = rss()
libc.free(p)
print((before - rss()) / n)
"""


class SteadyHeap(unittest.TestCase):
    def freed_share(self, steady: bool, mib: int) -> float:
        out = subprocess.run([sys.executable, "-c", _PROBE, "1" if steady else "0", str(mib)], capture_output=True,
                             text=True, check=True)
        return float(out.stdout)

    def test_a_freed_block_stays_resident_only_on_the_steady_heap(self):
        for mib in (20, 64):
            with self.subTest(mib=mib):
                self.assertGreater(self.freed_share(False, mib), 0.9, f"glibc as found gives a freed {mib} MiB back")
                self.assertLess(self.freed_share(True, mib), 0.1, "the steady heap keeps it for the next op")


if __name__ == "__main__":
    unittest.main()
