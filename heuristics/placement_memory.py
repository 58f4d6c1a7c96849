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
When no device's capacity is below the total task memory, memory cannot bind and
the guard reserves nothing.  When both packings fail, it reserves nothing and the
greedy may still fail, with a clear error.
"""

from __future__ import annotations

import numpy as np

from milp_partition.placement import PlacementProblem


class MemoryGuard:
    """Free memory per device with the fallback reservations of the module docstring.

    Items are tasks ``0..n-1`` and colocation groups ``n + g``; a task in a group
    has no item of its own.
    """

    def __init__(self, problem: PlacementProblem, *, reserve: bool = True) -> None:
        n, d = problem.num_tasks, problem.num_devices
        self.n = n
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
        ok_rows = item_allowed.tolist()
        for worst_fit in (True, False):
            room = list(self.free)
            fb = {}
            for x in items:
                m = self.item_mem[x]
                cands = [k for k in range(d) if ok_rows[x][k] and m <= room[k]]
                if not cands:
                    break
                k = max(cands, key=lambda k: (room[k], -k)) if worst_fit else min(cands, key=lambda k: (room[k], k))
                room[k] -= m
                fb[x] = k
            else:
                for x, k in fb.items():
                    self.fallback[x] = k
                    self.reserved[k] += self.item_mem[x]
                return
        self.packed = False

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
