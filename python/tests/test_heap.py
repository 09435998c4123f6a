"""The C heap held steady (placer_torch/heap.py): freed blocks stay for the next op."""

import subprocess
import sys
import unittest

# A fresh interpreter frees a 20 MiB block and reports how much of it stayed resident.
# Below glibc's starting mmap threshold (128 KiB) nothing of that size comes from the
# heap, so without steady() the block is unmapped when freed.
_PROBE = """
import sys
steady = sys.argv[1] == "1"
if steady:
    import placer_torch.heap as h
    assert h.steady(), h.describe()
page = __import__("os").sysconf("SC_PAGE_SIZE")
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * page
import ctypes
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
n = 20 * 2**20
p = libc.malloc(n)
ctypes.memset(p, 1, n)
before = rss()
libc.free(p)
print((before - rss()) / n)
"""


class SteadyHeap(unittest.TestCase):
    def freed_share(self, steady: bool) -> float:
        out = subprocess.run([sys.executable, "-c", _PROBE, "1" if steady else "0"], capture_output=True, text=True,
                             check=True)
        return float(out.stdout)

    def test_a_freed_block_stays_resident_only_on_the_steady_heap(self):
        self.assertGreater(self.freed_share(False), 0.9, "glibc as found gives a freed 20 MiB block back")
        self.assertLess(self.freed_share(True), 0.1, "the steady heap keeps it for the next op")


if __name__ == "__main__":
    unittest.main()
