"""Galvatron's problem as plain data: profiles, the cluster, setting, strategies and plans (no solving).

The cluster is the one :class:`~milp_partition.cluster.Cluster`: one device kind (the devices, their memory) with
Galvatron's measured hardware profile as its collective tables (:class:`~milp_partition.cluster.CollectiveTables`).

Units are Galvatron's own: times in milliseconds in the profiles (seconds in results), memory in MB
(= MiB, Galvatron's "MB"; its "GB" is 1024 MB = 1 GiB).  Everything here is read by
:mod:`milp_partition.io.galvatron`; costs are in :mod:`milp_partition.galvatron.costs` and, independently,
in :mod:`milp_partition.verifiers.galvatron`.

The space (Galvatron's search space, ``docs/galvatron.md``): degrees are powers of two; one pipeline degree
``pp`` (<= ``max_pp``, <= layers), ``chunks`` micro-batches dividing the global batch with ``pp <= chunks``;
per layer a tensor (Megatron, ``sp=False``) or Ulysses sequence (``sp=True``) degree ``tp_sp`` <= 8 and
<= devices / pp, data-parallel degree ``dp = devices / pp / tp_sp`` which must divide the micro-batch
(``global_batch / chunks``), ZeRO-3 or the default ZeRO-2 (plain DDP when dp = 1), checkpointing on or off;
one vocabulary (embedding + LM head) strategy (tp_sp, sp, ZeRO-3) without checkpointing.  Any split of the
layers into ``pp`` contiguous non-empty stages (Galvatron's own search only tries the even one).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from milp_partition.cluster import Cluster, CollectiveTables, Link, one_kind_cluster
from milp_partition.errors import InputError

#: Galvatron's flat per-stage allowance for the PyTorch context (``pytorch_context_mem``), MB.
CONTEXT_MB = 1024
#: bf16 is the only precision profiled here: 2 bytes per element.
BYTES_PER_ELEMENT = 2
#: Galvatron's "MB" in bytes (MiB).
MB = 2**20


def galvatron_cluster(
    collectives: CollectiveTables,
    devices: int,
    memory_mb: int,
    devices_per_node: int,
    *,
    link: Link | None = None,
    node_link: Link | None = None,
) -> Cluster:
    """The cluster of a Galvatron setting: ``devices`` GPUs of one kind with ``memory_mb`` MB each, ``devices_per_node``
    per node (as the hardware files are named), the measured collectives of the hardware folder (which time every
    message) and the alpha-beta links between and within nodes where the folder measures them
    (:func:`milp_partition.io.galvatron.read_p2p_links`; ``None``: free, and the same).  The costs read the collectives
    only: the links change no answer."""
    return one_kind_cluster(
        devices,
        memory_mb * MB,
        devices_per_node=devices_per_node,
        link=link or Link(),
        node_link=node_link,
        collectives=collectives,
    )


@dataclass(frozen=True)
class LayerType:
    """One transformer layer type: ``count`` identical layers.

    ``time_slope_ms``/``time_intercept_ms``: forward ms of one layer for ``x`` samples per device-share
    (``x = local batch / tp_sp``) is ``slope * x + intercept`` (Galvatron's fit).  ``activation_mb``: MB per
    sample for tp_sp 1, 2, 4, 8 (keys ``1, 2, 4, 8``) and ``0`` for a checkpointed layer.
    """

    name: str
    count: int
    seq: int
    parameter_mb: float
    activation_mb: dict[int, float]
    time_slope_ms: float
    time_intercept_ms: float


@dataclass(frozen=True)
class VocabStates:
    """Model states MB by tp degree and activation MB per sample by tp_sp degree, for one vocabulary placement."""

    model_states_mb: dict[int, float]
    activation_mb: dict[int, float]


@dataclass(frozen=True)
class Vocab:
    """The vocabulary layers (embedding + LM head): forward time fit and memory without (``off``) and with
    pipelining (``first`` stage, ``last`` stage)."""

    time_slope_ms: float
    time_intercept_ms: float
    off: VocabStates
    first: VocabStates
    last: VocabStates


@dataclass(frozen=True)
class GalvatronProblem:
    """A Galvatron setting: model profile, the cluster (:func:`galvatron_cluster`: devices, memory per device and the
    measured collectives) and global batch."""

    model: str
    source: str
    hidden: int
    layer_types: tuple[LayerType, ...]
    vocab: Vocab
    cluster: Cluster
    global_batch: int
    max_tp: int = 8
    max_sp: int = 8
    max_pp: int = 8
    pipeline_type: str = "pipedream_flush"
    default_dp_type: str = "zero2"
    time_mode: str = "batch"
    notes: tuple[str, ...] = field(default=())

    @property
    def layers(self) -> int:
        return sum(t.count for t in self.layer_types)

    @property
    def devices(self) -> int:
        """GPUs of the setting (the cluster's one kind)."""
        return self.cluster.device_count

    @property
    def memory_mb(self) -> int:
        """Memory per GPU, MB (MiB)."""
        memory = self.cluster.memory_bytes
        if memory is None:
            raise InputError("the cluster gives no memory per device; give --memory", where="cluster")
        return int(memory) // MB

    @property
    def collectives(self) -> CollectiveTables:
        """The measured collectives of the cluster (Galvatron's hardware profile)."""
        tables = self.cluster.collectives
        if tables is None:
            raise InputError("the cluster has no measured collectives; give Galvatron's hardware folder", where="--hardware")
        return tables

    def type_of(self) -> tuple[int, ...]:
        """Layer type index of every layer, in model order."""
        out: list[int] = []
        for i, t in enumerate(self.layer_types):
            out += [i] * t.count
        return tuple(out)

    def usable_mb(self) -> int:
        """Galvatron's usable memory: M - int(0.2 M) when M // 1024 > 20 (its PyTorch cache reserve), else M."""
        m = self.memory_mb
        return m - int(m * 0.2) if m // 1024 > 20 else m


def divisors(n: int) -> list[int]:
    """The divisors of ``n >= 1`` in increasing order, by trial division up to sqrt(n) (46341 steps at 2**31)."""
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def outer_choices(problem: GalvatronProblem) -> list[tuple[int, int]]:
    """(pp, chunks) pairs of the space: pp a power of 2 within max_pp, the layers and the devices; chunks dividing the
    global batch, at least pp."""
    ms = divisors(problem.global_batch)
    out = []
    pp = 1
    while pp <= min(problem.max_pp, problem.layers, problem.devices):
        out += [(pp, m) for m in ms if m >= pp]
        pp *= 2
    return out


@dataclass(frozen=True, order=True)
class Strategy:
    """A layer's strategy inside a plan of pipeline degree pp on N devices: dp = N / pp / tp_sp."""

    tp_sp: int
    sp: bool = False
    zero3: bool = False
    ckpt: bool = False

    def label(self, pp: int, devices: int) -> str:
        """Galvatron's ``to_simple_string``: ``pp-tp_sp[*]-dp[f][-c][-sp]``."""
        dp = devices // pp // self.tp_sp
        s = f"{pp}-{self.tp_sp}{'*' if self.tp_sp > 1 else ''}-{dp}{'f' if self.zero3 else ''}"
        return s + ("-c" if self.ckpt else "") + ("-sp" if self.sp and self.tp_sp > 1 else "")


@dataclass(frozen=True, order=True)
class VocabStrategy:
    """The vocabulary layers' strategy: tp or sp degree, ZeRO-3 or not (no checkpointing)."""

    tp_sp: int
    sp: bool = False
    zero3: bool = False


@dataclass(frozen=True)
class GalvatronPlan:
    """A plan: pipeline degree, micro-batches, the split (layers per stage), each layer's strategy, the vocabulary's."""

    pp: int
    chunks: int
    division: tuple[int, ...]
    layers: tuple[Strategy, ...]
    vocab: VocabStrategy


def stage_rows(
    problem: GalvatronProblem,
    plan: GalvatronPlan,
    compute_s: tuple[float, ...],
    sync_s: tuple[float, ...],
    memory_mb: tuple[int, ...],
) -> list[dict[str, object]]:
    """The result's ``stages``: per stage its layers [first, end), C and R (s per micro-batch), memory (MiB) and its
    layers' strategy labels (the verifier's figures)."""
    rows: list[dict[str, object]] = []
    a = 0
    for i, n in enumerate(plan.division):
        rows.append(
            {
                "layers": [a, a + n],
                "compute_s": compute_s[i],
                "sync_s": sync_s[i],
                "memory_mb": memory_mb[i],
                "strategies": [s.label(plan.pp, problem.devices) for s in plan.layers[a : a + n]],
            }
        )
        a += n
    return rows
