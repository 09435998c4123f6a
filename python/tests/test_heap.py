"""The C heap held steady (placer_torch/heap.py): freed blocks stay for the next op."""

import subprocess
import sys
import unittest

# A fresh interpreter frees a block of the given MiB and reports how much of it stayed
# resident. Above glibc's starting mmap threshold (128 KiB) nothing of either size comes
# from the heap, so without steady() the block is unmapped when freed; 64 MiB is also
# past the 32 MiB that glibc's threshold can be raised to. With "thread", a fresh thread
# allocates and frees it: glibc gives such a thread a heap of its own, which it gives
# back as soon as its top is free, unless every thread shares the main heap.
_PROBE = """
import sys
steady = sys.argv[1] == "1"
mib = int(sys.argv[2])
on_thread = sys.argv[3] == "thread"
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
out = []
def probe():
    p = libc.malloc(n)
    ctypes.memset(p, 1, n)
    before = rss()
    libc.free(p)
    out.append((before - rss()) / n)
if on_thread:
    import threading
    t = threading.Thread(target=probe)
    t.start()
    t.join()
else:
    probe()
print(out[0])
"""


class SteadyHeap(unittest.TestCase):
    def freed_share(self, steady: bool, mib: int, where: str) -> float:
        out = subprocess.run([sys.executable, "-c", _PROBE, "1" if steady else "0", str(mib), where],
                             capture_output=True, text=True, check=True)
        return float(out.stdout)

    def test_a_freed_block_stays_resident_only_on_the_steady_heap(self):
        for where in ("main", "thread"):
            for mib in (20, 64):
                with self.subTest(mib=mib, where=where):
                    self.assertGreater(self.freed_share(False, mib, where), 0.9,
                                       f"glibc as found gives a freed {mib} MiB back")
                    self.assertLess(self.freed_share(True, mib, where), 0.1,
                                    "the steady heap keeps it for the next op, whichever thread freed it")


if __name__ == "__main__":
    unittest.main()
