"""Pool memory for torch tensors, and the holders that carry saved activations between
pools at the plan's moves.

Autograd keeps what backward needs through saved-tensor hooks. `apply` hands each saved
tensor that the plan moves to a `Saved` holder; the plan's moves then copy the holder's
tensor into the destination pool's memory at the steps the plan schedules (background
ones on the copy thread), and backward unpacks whatever the holder has by then. The
forward pass keeps using torch's own tensor until it lets go of it.
"""

from __future__ import annotations

import ctypes

import torch


class PoolMemory:
    """Tensors in pool memory allocated by placer-pools (pages bound to the pool's NUMA
    nodes, placed and checked; `Homes.pages()` asks the kernel again). Memory a tensor
    no longer uses is kept by the Rust core for the next tensor of that pool and size
    (homes.rs), as the hook's births are: a fresh allocation would fault its pages in
    every step."""

    def __init__(self, homes):
        self.homes = homes

    def tensor(self, pool: str, like: torch.Tensor) -> torch.Tensor:
        """A contiguous tensor shaped as `like`, in `pool`'s memory (contents undefined)."""
        nbytes = like.numel() * like.element_size()
        address = self.homes.take(pool, nbytes)
        arr = (ctypes.c_ubyte * nbytes).from_address(address)
        # Every tensor over the memory holds the array, and the array its slot: the
        # address is free again only once none of them is left.
        arr._owner = _Slot(self.homes, address)
        return torch.frombuffer(arr, dtype=like.dtype).view(like.shape)

    def release(self) -> int:
        """Frees the memory no tensor is over (kept for reuse until now); returns its bytes."""
        return self.homes.release()


class _Slot:
    __slots__ = ("homes", "address")

    def __init__(self, homes, address: int):
        self.homes, self.address = homes, address

    def __del__(self):
        self.homes.give(self.address)


class Saved:
    """What autograd keeps for a saved tensor the plan moves: the tensor as it is now,
    the pool it is in (the DRAM pool while it is torch's own), and the copy in flight."""

    # __weakref__: apply finds a holder by name only while autograd still keeps it.
    __slots__ = ("t", "name", "pool", "pending", "__weakref__")

    def __init__(self, t: torch.Tensor, name: str, pool: str):
        self.t, self.name, self.pool = t, name, pool
        #: the copy's future while a background move of it runs
        self.pending = None


def routable(t: torch.Tensor) -> bool:
    """Whether `t` is its whole storage, contiguous: what a holder can copy as it is.
    A view (a transposed weight, a slice) keeps torch's own storage."""
    s = t.untyped_storage()
    return t.numel() > 0 and t.storage_offset() == 0 and t.is_contiguous() and \
        t.numel() * t.element_size() == s.nbytes()
