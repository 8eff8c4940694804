"""Memory for a traced pass's stacked sites (tfviz.core.model.run_layers), reused on the CPU.

A traced pass writes every layer's attention weights and four (T, D) sites into tensors made
before layer 0: 135 MiB for a Llama-sized model at 256 tokens. Memory that size is new to the
process every time (malloc maps it from the system and unmaps it when freed), and each first
write of a 4 KiB page faults in a zeroed page, a measurable share of that pass (bench/README.md).
A model's own per-layer tensors are small and come from memory malloc reuses.

So the memory of a trace nobody holds any more is kept for the next one:

- one anonymous private memory map per pass, handed out as a numpy array over it: the torch
  tensor made from that array keeps it alive, and every view of the tensor and every numpy array
  of the trace (tfviz.core.trace.TraceArrays) keeps the tensor's storage;
- when that array is freed (every array of the trace gone, say the server's cache dropped it),
  its map goes back on a short free list, its pages still in place (FREE_BYTES at most);
- a pass takes a free map of its size class, or maps a new one.

A map is handed out again only after its array was freed, so nothing that can still read it
sees it rewritten: a cached trace stays as it was. Other devices keep their own: torch's CUDA
allocator reuses memory already.
"""

from __future__ import annotations

import math
import mmap
import threading
import weakref

import numpy as np
import torch

MIN_BYTES = 1 << 20  # smaller stacks come from malloc's heap, which reuses memory already
FREE_BYTES = 256 << 20  # free maps kept, the most recently freed first
ALIGN = 64  # bytes: each site of a stack starts on a cache line

# A map is free when on this list; the lock is re-entrant because a map comes back from a weak
# reference's callback, which the garbage collector may run in any thread, this one included.
_free: list[mmap.mmap] = []
_lock = threading.RLock()


def size_class(nbytes: int) -> int:
    """nbytes rounded up to one of eight steps per doubling (at most 1/8 more, whole pages): a
    text a token longer mostly falls in the same class, so its trace reuses the last one's map."""
    step = max(mmap.PAGESIZE, 1 << max(0, (nbytes - 1).bit_length() - 4))
    return -(-nbytes // step) * step


def stacked_empty(
    shapes: dict[str, tuple[int, ...]], dtype: torch.dtype, device: torch.device
) -> dict[str, torch.Tensor]:
    """Uninitialised contiguous tensors of these shapes, one per name, carved out of one block
    of memory: on the CPU a reused map (see the module doc) once the block reaches MIN_BYTES."""
    size = torch.empty((), dtype=dtype).element_size()
    per = ALIGN // math.gcd(ALIGN, size)  # elements per aligned step
    starts, at = {}, 0
    for name, shape in shapes.items():
        starts[name] = at
        at += -(-math.prod(shape) // per) * per
    if _mappable(at * size, device):
        block = _block(at * size).view(dtype)
    else:
        block = torch.empty(at, dtype=dtype, device=device)
    return {
        name: block[starts[name] : starts[name] + math.prod(shape)].view(shape)
        for name, shape in shapes.items()
    }


def kept_bytes() -> int:
    """The bytes of free maps kept for the next traces."""
    with _lock:
        return sum(len(m) for m in _free)


def kept_sizes() -> list[int]:
    """The byte size of each free map kept, oldest first (the first dropped when the kept
    bytes pass FREE_BYTES): which size classes the next traces can reuse without a new map."""
    with _lock:
        return [len(m) for m in _free]


def release() -> int:
    """Unmap every free map kept (an idle server hands their memory back to the system: the next
    trace maps a new one); returns their bytes."""
    with _lock:
        dropped = list(_free)
        _free.clear()
    nbytes = sum(len(m) for m in dropped)
    for mapped in dropped:
        mapped.close()
    return nbytes


def _mappable(nbytes: int, device: torch.device) -> bool:
    # (no MAP_PRIVATE: not a POSIX system; the block is made as usual)
    cpu = torch.device(device).type == "cpu"
    return cpu and nbytes >= MIN_BYTES and hasattr(mmap, "MAP_PRIVATE")


def _block(nbytes: int) -> torch.Tensor:
    """nbytes of a free map of their size class, or of a new one, as a uint8 tensor."""
    capacity = size_class(nbytes)
    with _lock:
        at = next((i for i in reversed(range(len(_free))) if len(_free[i]) == capacity), None)
        mapped = None if at is None else _free.pop(at)
    if mapped is None:
        # Private: a forked child (a worker process) gets its own copy on write, not this one.
        mapped = mmap.mmap(-1, capacity, flags=mmap.MAP_PRIVATE)
    raw = np.frombuffer(mapped, dtype=np.uint8)
    weakref.finalize(raw, _give_back, mapped).atexit = False
    return torch.from_numpy(raw)[:nbytes]


def _give_back(mapped: mmap.mmap) -> None:
    """A map whose array was freed goes on the free list; the oldest are dropped (unmapped once
    nothing refers to them) beyond FREE_BYTES."""
    with _lock:
        _free.append(mapped)
        total = sum(len(m) for m in _free)
        while total > FREE_BYTES:
            total -= len(_free.pop(0))
