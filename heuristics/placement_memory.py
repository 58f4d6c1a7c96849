"""Memory guard for greedy placement: never strand a task that could still have fit.

A greedy placement that only checks "does this task fit now?" fails on instances
whose memory binds tightly (Moirai's toy has total capacity equal to total task
memory): it fills devices with small tasks and a large one finds no room later.
The guard prevents that with a *fallback packing*:

1. Before placing anything, pack every item (a task, or a colocation group as one
   item of its summed memory) into the devices by worst-fit decreasing (the device
   with most room left), else best-fit decreasing, honouring allowed devices.
2. Each unplaced item *reserves* its memory on its fallback device.
3. A greedy step may put a set of items on device ``k`` only if their memory fits
   in ``free[k] - reserved[k]`` plus what those very items had reserved on ``k``.

By induction the fallback packing of the items not yet placed stays valid, so the
greedy never fails on memory when step 1 succeeded (each check is O(1) per item).
When the reservations alone keep a task from the device it prefers, the caller
may ask :meth:`MemoryGuard.repack` to re-pack the other items' reservations
around it (a bounded number of times, on a bounded number of items).
When no device's capacity is below the total task memory, memory cannot bind and
the guard reserves nothing.  When both packings fail, it reserves nothing and the
greedy may still fail, with a clear error.
"""

from __future__ import annotations

import numpy as np

from milp_partition.placement.problem import PlacementProblem


class MemoryGuard:
    """Free memory per device with the fallback reservations of the module docstring.

    Items are tasks ``0..n-1`` and colocation groups ``n + g``; a task in a group
    has no item of its own.
    """

    #: Most re-packing attempts per guard (see :meth:`repack`).
    max_repacks: int = 200
    #: Re-packing is tried only while at most this many items hold reservations.
    max_repack_items: int = 5000

    def __init__(self, problem: PlacementProblem, *, reserve: bool = True) -> None:
        n, d = problem.num_tasks, problem.num_devices
        self.n, self.d = n, d
        self.repacks = 0
        self.holding = 0  # items holding a reservation
        self.ok_rows: list[list[bool]] = []
        self.free = problem.device_memory.astype(np.float64).tolist()
        self.cap = list(self.free)
        groups = problem.colocation
        num_groups = int(groups.max()) + 1 if n and groups.max() >= 0 else 0
        member = groups >= 0
        item_mem = np.concatenate([np.where(member, 0.0, problem.task_memory), np.zeros(num_groups)])
        if num_groups:
            item_mem[n:] = np.bincount(groups[member], weights=problem.task_memory[member], minlength=num_groups)
        self.item_mem = item_mem.tolist()
        self.fallback = [-1] * (n + num_groups)
        self.reserved = [0.0] * d
        self.packed = True
        total = float(item_mem.sum())
        if not reserve or total <= float(problem.device_memory.min()):
            return
        allowed = np.isfinite(problem.time)
        item_allowed = np.concatenate([allowed & ~member[:, None], np.ones((num_groups, d), dtype=bool)])
        if num_groups:
            blocked = np.zeros((num_groups, d), dtype=bool)
            np.logical_or.at(blocked, groups[member], ~allowed[member])
            item_allowed[n:] = ~blocked
        real = np.concatenate([~member, np.ones(num_groups, dtype=bool)])
        items = np.flatnonzero(real & (item_mem > 0))
        items = items[np.lexsort((items, -item_mem[items]))].tolist()
        self.ok_rows = item_allowed.tolist()
        self.d = d
        fb = self._pack(items, list(self.free))
        if fb is None:
            self.packed = False
            return
        for x, k in fb.items():
            self.fallback[x] = k
            self.reserved[k] += self.item_mem[x]
        self.holding = len(fb)

    def _pack(self, items: list[int], room: list[float]) -> dict[int, int] | None:
        """Worst-fit decreasing, else best-fit decreasing, of ``items`` (sorted by decreasing memory) into ``room``."""
        d = self.d
        for worst_fit in (True, False):
            left = list(room)
            fb: dict[int, int] = {}
            for x in items:
                m = self.item_mem[x]
                row = self.ok_rows[x]
                cands = [k for k in range(d) if row[k] and m <= left[k]]
                if not cands:
                    break
                k = max(cands, key=lambda k: (left[k], -k)) if worst_fit else min(cands, key=lambda k: (left[k], k))
                left[k] -= m
                fb[x] = k
            else:
                return fb
        return None

    def repack(self, k: int, items: list[int], need: float) -> bool:
        """Try to make room for ``items`` on device ``k`` by re-packing the reservations of every other unplaced item.

        Returns True (and adopts the new fallback packing) when ``need`` then fits
        on ``k``.  Bounded: at most :attr:`max_repacks` attempts per guard, and
        only while at most :attr:`max_repack_items` items hold reservations.
        """
        if self.repacks >= self.max_repacks or need > self.free[k] or self.holding > self.max_repack_items + len(items):
            return False
        self.repacks += 1
        own = set(items)
        rest = [x for x in range(len(self.fallback)) if self.fallback[x] >= 0 and x not in own]
        room = list(self.free)
        room[k] -= need
        rest.sort(key=lambda x: (-self.item_mem[x], x))
        fb = self._pack(rest, room)
        if fb is None:
            return False
        self.reserved = [0.0] * self.d
        for x in rest:
            self.fallback[x] = fb[x]
            self.reserved[fb[x]] += self.item_mem[x]
        for x in items:
            if self.fallback[x] >= 0:
                self.fallback[x] = k
                self.reserved[k] += self.item_mem[x]
        return True

    def item_of(self, task: int, group: int) -> int:
        """The item of a task: its group's, or its own."""
        return self.n + group if group >= 0 else task

    def fits(self, k: int, items: list[int], need: float) -> bool:
        """Whether ``need`` memory for ``items`` can go on device ``k`` without stranding anything."""
        free = self.free[k]
        if need > free:
            return False
        room = free - self.reserved[k]
        for x in items:
            if self.fallback[x] == k:
                room += self.item_mem[x]
        return need <= room + 1e-12 * max(1.0, abs(self.cap[k]) if self.cap[k] != float("inf") else 1.0)

    def take(self, k: int, items: list[int], need: float) -> None:
        """Put ``items`` (``need`` memory) on device ``k``; their reservations end."""
        self.free[k] -= need
        for x in items:
            f = self.fallback[x]
            if f >= 0:
                self.reserved[f] -= self.item_mem[x]
                self.fallback[x] = -1
                self.holding -= 1
