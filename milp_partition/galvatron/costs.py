"""Galvatron's cost model, re-implemented from its description and code (``galvatron/core/cost_model``).

For a setting (N devices, global batch B, pp, chunks m), a layer of type t with strategy s = (g = tp_sp, sp,
ZeRO-3, ckpt): dp = N/pp/g, local batch b = B // m // dp, sharded-dp degree sdp = dp * (g if sp else 1),
tp = 1 if sp else g.

* forward fct = slope_t * (b/g) + intercept_t (ms); backward bct = 2 fct (3 fct when checkpointed).
* gradient message D = (sdp-1)/sdp * P_t/tp MB (bf16), at dc ms/MB (``allreduce[sdp_{0|1}]``), overlapped with
  the backward by the overlap coefficient; ZeRO-3 adds D/2 * dc (its all-gather), unoverlapped.
* tp/sp communication (g > 1): 6 all-gathers (tp) or 4 all-to-alls (sp) of b*seq*hidden*2 B, x1.5 when
  checkpointed; pp > 1 adds pp*2*b*seq*hidden*2 B of p2p, spread over the count of layers of that type.
* ``c`` = time without gradient sync, ``r`` = with it (seconds per micro-batch).
* memory (MB): 4 P/tp x ZeRO ratio(sdp) + activation per sample x b x k, k = pp - stage (1F1B), checkpointed
  layers keep act['checkpoint']/g per sample; each layer's MB rounded up (as Galvatron's DP charges it).
* vocabulary: half its time and its first/last memory on the first and last stage; + 1024 MB context per stage.
* re-layout where adjacent layers differ in g: (G-1)/G * b_G * seq * hidden * 2 B at the all-reduce rate, G the
  larger degree (Galvatron charges it only in its per-stage DP; the sound objective counts it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from milp_partition.galvatron.problem import (
    BYTES_PER_ELEMENT,
    CONTEXT_MB,
    GalvatronPlan,
    GalvatronProblem,
    Strategy,
    VocabStrategy,
)

MB = 1024 * 1024


def zero_ratio(zero3: bool, sdp: int, chunks: int) -> float:
    """Galvatron's model-state fraction kept per device under ZeRO-2/3 (bf16, async gradient reduce)."""
    x = 1 / sdp + 0.003
    if chunks == 1:
        return x if zero3 else 7 / 8 * x + 1 / 8
    return 7 / 8 * x + 1 / 8 if zero3 else 6 / 8 * x + 2 / 8


@dataclass(frozen=True)
class LayerCost:
    c: float  # s per micro-batch, no gradient sync
    r: float  # s per micro-batch, with gradient sync
    mem_mb: tuple[float, ...]  # exact MB, per stage index


@dataclass(frozen=True)
class VocabCost:
    c: tuple[float, ...]  # per stage, s (no gradient sync)
    r: tuple[float, ...]  # per stage, s (with gradient sync)
    mem_mb: tuple[float, ...]  # per stage, exact MB (context included)


class Costs:
    """Every cost of one (problem, pp, chunks)."""

    def __init__(self, problem: GalvatronProblem, pp: int, chunks: int) -> None:
        self.p, self.pp, self.chunks = problem, pp, chunks
        self.hw = problem.collectives
        self._layer: dict[tuple[int, Strategy], LayerCost] = {}
        self._vocab: dict[VocabStrategy, VocabCost] = {}

    # ---- space ----
    def micro(self) -> int:
        return self.p.global_batch // self.chunks

    def dp(self, g: int) -> int:
        return self.p.devices // self.pp // g

    def degrees(self) -> list[int]:
        """tp_sp degrees allowed in this (pp, chunks): powers of 2 <= 8, <= N/pp, with dp dividing the micro-batch."""
        out, g = [], 1
        while g <= min(self.p.max_tp, self.p.devices // self.pp):
            dp = self.dp(g)
            if dp >= 1 and self.micro() % dp == 0 and dp <= self.micro():
                out.append(g)
            g *= 2
        return out

    def strategies(self) -> list[Strategy]:
        out = []
        for g in self.degrees():
            for sp in [False, True] if g > 1 else [False]:
                for z3 in [False, True] if self.dp(g) > 1 else [False]:
                    for ck in (False, True):
                        out.append(Strategy(g, sp, z3, ck))
        return out

    def vocab_strategies(self) -> list[VocabStrategy]:
        return [VocabStrategy(s.tp_sp, s.sp, s.zero3) for s in self.strategies() if not s.ckpt]

    # ---- helpers ----
    def _msg_mb(self, b: float, seq: int) -> float:
        return b * seq * self.p.hidden * BYTES_PER_ELEMENT / MB

    def _dc(self, sdp: int, tp: int) -> float:
        return self.hw.allreduce_ms_per_mb[f"{sdp}_0" if tp != 1 else f"{sdp}_1"]

    # ---- layers ----
    def layer(self, t: int, s: Strategy) -> LayerCost:
        key = (t, s)
        got = self._layer.get(key)
        if got is None:
            got = self._layer[key] = self._layer_cost(t, s)
        return got

    def _layer_cost(self, t: int, s: Strategy) -> LayerCost:
        lt, hw, pp = self.p.layer_types[t], self.hw, self.pp
        g = s.tp_sp
        dp = self.dp(g)
        b = self.micro() // dp
        tp = 1 if s.sp else g
        sdp = dp * (g if s.sp else 1)
        fct = lt.time_slope_ms * (b / g) + lt.time_intercept_ms
        bct = 2 * fct + (fct if s.ckpt else 0.0)
        d = (sdp - 1) * (lt.parameter_mb / tp / sdp)
        dc = self._dc(sdp, tp)
        dco = dc * hw.overlap
        comm = 0.0
        if g > 1:
            n = (4 if s.sp else 6) * (1.5 if s.ckpt else 1.0)
            table = hw.all2all[g] if s.sp else hw.allgather[g]
            comm = table.ms(self._msg_mb(b, lt.seq)) * n

        def one(dmsg: float) -> float:
            if g == 1 and dp > 1:
                res = fct + _overlap(dmsg, bct, dc, dco, hw.overlap)
            elif dp == 1 and g > 1:
                res = fct + bct + comm
            elif dp == 1 and g == 1:
                res = fct + bct
            else:
                res = fct + _overlap(dmsg, bct, dc, dco, hw.overlap) + comm
            if s.zero3:
                res += 0.5 * d * dc
            if pp > 1 and pp in hw.p2p_ms_per_mb:
                res += pp * 2 * b * lt.seq * self.p.hidden * BYTES_PER_ELEMENT / MB * hw.p2p_ms_per_mb[pp] / lt.count
            return res * 0.001

        ms = 4 * lt.parameter_mb / tp
        if dp > 1:
            ms *= zero_ratio(s.zero3, sdp, self.chunks)
        mems = []
        for stage in range(pp):
            k = 1 if pp == 1 else pp - stage
            if s.ckpt:
                act = lt.activation_mb[0] * k * b
                if g > 1:
                    act /= g
            else:
                act = lt.activation_mb[g] * k * b
            mems.append(ms + act)
        return LayerCost(one(0.0), one(d), tuple(mems))

    def layer_mem(self, t: int, s: Strategy, stage: int) -> int:
        """Galvatron's charge: the layer's MB rounded up."""
        return math.ceil(self.layer(t, s).mem_mb[stage])

    # ---- vocabulary ----
    def vocab(self, v: VocabStrategy) -> VocabCost:
        got = self._vocab.get(v)
        if got is None:
            got = self._vocab[v] = self._vocab_cost(v)
        return got

    def _vocab_cost(self, v: VocabStrategy) -> VocabCost:
        p, hw, pp = self.p, self.hw, self.pp
        g = v.tp_sp
        dp = self.dp(g)
        b = self.micro() // dp
        tp = 1 if v.sp else g
        sdp = dp * (g if v.sp else 1)
        fct = p.vocab.time_slope_ms * (b / g) + p.vocab.time_intercept_ms
        f = [fct] if pp == 1 else [fct / 2] + [0.0] * (pp - 2) + [fct / 2]
        dp_coe = self._dc(sdp, tp) * (sdp - 1) / sdp
        if pp == 1:
            msg = [p.vocab.off.model_states_mb[tp] / 4 * 0.5]
        else:
            msg = [p.vocab.first.model_states_mb[tp] / 4 * 0.5] + [0.0] * (pp - 2) + [p.vocab.last.model_states_mb[tp] / 4 * 0.5]
        fwdf, bwdf = (0.5, 1.0) if v.zero3 else (0.0, 0.5)
        per_seq = [hw.allgather[tp].ms(self._msg_mb(b, lt.seq)) if tp > 1 else 0.0 for lt in p.layer_types]
        tpt = [per_seq[0] + per_seq[-1]] if pp == 1 else [per_seq[0]] + [0.0] * (pp - 2) + [per_seq[-1]]
        oc = hw.overlap

        def ov(fc: float, fp: float, bc: float, bp: float, x: float) -> float:
            fp, bp = fp * oc, bp * oc
            fw = fc + (fp - fc) / oc if fp > fc else fc
            bw = bc + (bp - bc) / oc if bp > bc else bc
            return fw + bw + x

        r = tuple(0.001 * ov(msg[i] * dp_coe * fwdf, f[i], msg[i] * dp_coe * bwdf, f[i] * 2, tpt[i]) for i in range(pp))
        c = tuple(0.001 * ov(msg[i] * dp_coe * fwdf, f[i], msg[i] * dp_coe * (bwdf - 0.5), f[i] * 2, tpt[i]) for i in range(pp))
        zf = zero_ratio(v.zero3, sdp, self.chunks) if dp > 1 else 1.0
        if pp == 1:
            mem = [p.vocab.off.model_states_mb[tp] * zf + p.vocab.off.activation_mb[g] * b + CONTEXT_MB]
        else:
            mem = [p.vocab.first.model_states_mb[tp] * zf + p.vocab.first.activation_mb[g] * pp * b + CONTEXT_MB]
            mem += [float(CONTEXT_MB)] * (pp - 2)
            mem += [p.vocab.last.model_states_mb[tp] * zf + p.vocab.last.activation_mb[g] * b + CONTEXT_MB]
        return VocabCost(c, r, tuple(mem))

    def vocab_mem(self, v: VocabStrategy, stage: int) -> int:
        return math.ceil(self.vocab(v).mem_mb[stage])

    # ---- re-layout and the global buffer ----
    @cached_property
    def _relayout(self) -> dict[tuple[int, int, int], float]:
        out = {}
        degs = self.degrees()
        for t, lt in enumerate(self.p.layer_types):
            for a in degs:
                for b2 in degs:
                    if a == b2:
                        continue
                    big = max(a, b2)
                    cur_dp = self.p.devices // self.pp // big
                    lb = self.p.global_batch / self.chunks / cur_dp
                    size = (big - 1) / big * lb * lt.seq * self.p.hidden * BYTES_PER_ELEMENT
                    cc = self.hw.allreduce_ms_per_mb
                    if big == 1 or cur_dp == 1:
                        coe = cc[str(big)] if str(big) in cc else cc[f"{big}_1"]
                    else:
                        coe = cc[f"{big}_1"]
                    out[(t, a, b2)] = size * coe * 1e-7
        return out

    def relayout(self, t: int, prev: int, cur: int) -> float:
        """Seconds to re-lay out the activations entering a layer of type ``t`` of degree ``cur`` after ``prev``."""
        return 0.0 if prev == cur else self._relayout[(t, prev, cur)]

    def global_buffer_mb(self, g: int | None) -> int:
        """int() of Galvatron's global memory buffer for a plan with Megatron tp whose largest degree is ``g``;
        0 for ``None`` (no Megatron tp anywhere: its 'sp_only' task)."""
        if g is None:
            return 0
        cur_dp = self.p.devices // self.pp // g
        lb = self.p.global_batch / self.chunks / cur_dp
        return int(lb * self.p.hidden * max(t.seq for t in self.p.layer_types) * 4 / MB / 2)

    def buffer_degree(self, layers: tuple[Strategy, ...] | list[Strategy], v: VocabStrategy) -> int | None:
        """The cheapest global-buffer degree that admits a plan: its largest tp_sp if any Megatron tp, else None."""
        if any(s.tp_sp > 1 and not s.sp for s in layers) or (v.tp_sp > 1 and not v.sp):
            return max([s.tp_sp for s in layers] + [v.tp_sp])
        return None


def _overlap(d: float, bct: float, dc: float, dco: float, oc: float) -> float:
    """Galvatron's ``bct_dp_overlap``: overlapped part + the rest."""
    dpo, bo = d * dco, bct * oc
    if dpo > bo:
        return bo + (d - bo / dco) * dc
    if dpo < bo:
        return dpo + (bct - dpo / oc)
    return bo


@dataclass(frozen=True)
class Evaluation:
    """A plan's figures under the cost model."""

    feasible: bool
    violations: tuple[str, ...]
    stage_c: tuple[float, ...]  # C_i: compute without sync + vocab + re-layout
    stage_r: tuple[float, ...]  # R_i: layers with sync
    stage_relayout: tuple[float, ...]
    stage_mem_mb: tuple[int, ...]
    usable_mb: int
    global_buffer_mb: int
    sound_s: float
    galvatron_estimate_s: float


def sound_time(c: list[float] | tuple[float, ...], r: list[float] | tuple[float, ...], chunks: int) -> float:
    """T = sum C + (chunks-1) max C + max(0, max_i (R_i - sum_{j<=i} C_j))."""
    acc, tail = 0.0, 0.0
    for ci, ri in zip(c, r):
        acc += ci
        tail = max(tail, ri - acc)
    return sum(c) + (chunks - 1) * max(c) + tail


def galvatron_estimate(cg: list[float], r: list[float], chunks: int, pp: int) -> float:
    """Galvatron's ``pipeline_costmodel`` on stage compute ``cg`` (no re-layout) and synced layer sums ``r``."""
    res = sum(cg) + cg[-1] * (chunks - 1)
    rest = sum(cg[1:])
    k = min(pp - 1, chunks - 1)
    res = max(res, max(k * cg[0] / 3, rest / 3) + max(k * cg[0] * 2 / 3, rest * 2 / 3) + cg[0] * max(0, chunks + 1 - pp))
    acc, tail = 0.0, 0.0
    for ci, ri in zip(cg, r):
        acc += ci
        tail = max(tail, ri - acc)
    return res + tail


def evaluate(problem: GalvatronProblem, plan: GalvatronPlan, costs: Costs | None = None) -> Evaluation:
    """The plan's stage figures, memory under Galvatron's rule and both times (no feasibility of the space)."""
    cm = costs or Costs(problem, plan.pp, plan.chunks)
    types = problem.type_of()
    vc = cm.vocab(plan.vocab)
    gm = cm.global_buffer_mb(cm.buffer_degree(plan.layers, plan.vocab))
    usable = problem.usable_mb()
    c, cg, r, x, mem = [], [], [], [], []
    start = 0
    viol = []
    for i, n in enumerate(plan.division):
        ci = vc.c[i]
        ri = 0.0
        xi = 0.0
        mi = cm.vocab_mem(plan.vocab, i) + gm
        for k in range(start, start + n):
            s = plan.layers[k]
            lc = cm.layer(types[k], s)
            ci += lc.c
            ri += lc.r
            mi += cm.layer_mem(types[k], s, i)
            if k > start:
                xi += cm.relayout(types[k], plan.layers[k - 1].tp_sp, s.tp_sp)
        cg.append(ci)
        c.append(ci + xi)
        r.append(ri)
        x.append(xi)
        mem.append(mi)
        if mi > usable:
            viol.append(f"stage {i + 1}: {mi} MB > usable {usable} MB")
        start += n
    return Evaluation(
        not viol,
        tuple(viol),
        tuple(c),
        tuple(r),
        tuple(x),
        tuple(mem),
        usable,
        gm,
        sound_time(c, r, plan.chunks),
        galvatron_estimate(cg, r, plan.chunks, plan.pp),
    )
