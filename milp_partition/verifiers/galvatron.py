r"""Independent verifier of Galvatron plans: recomputes every time and memory figure from the profiles.

It imports only the data model (no cost code of the solver).  Checks: the plan is in the space (powers of 2,
pp <= chunks, chunks | batch, split sums to the layers with non-empty stages, dp divides the micro-batch, tp_sp <= 8,
ZeRO-3 only with dp > 1); memory per stage under Galvatron's rule

    (M)  sum_l ceil(4 P/tp * zr(sdp) + act * b * k) + ceil(E_i) + int(buffer) <= U

and the sound 1F1B time (T) = sum C + (m-1) max C + max(0, max_i (R_i - sum_{j<=i} C_j)); Galvatron's own
pipeline estimate is reported beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from milp_partition.galvatron.problem import CONTEXT_MB, GalvatronPlan, GalvatronProblem

_MB = 1048576.0


@dataclass(frozen=True)
class GalvatronReport:
    feasible: bool
    objective: float
    galvatron_estimate_s: float
    violations: tuple[str, ...]
    stage_compute_s: tuple[float, ...]
    stage_sync_s: tuple[float, ...]
    stage_memory_mb: tuple[int, ...]
    usable_mb: int
    #: False when the plan is outside Galvatron's space (degrees, chunks, split, lengths): a malformed plan, not one
    #: that runs out of memory.
    in_space: bool = True


def _pow2(x: int) -> bool:
    return x >= 1 and x & (x - 1) == 0


def verify_galvatron(problem: GalvatronProblem, plan: GalvatronPlan) -> GalvatronReport:
    P, hw = problem, problem.collectives
    N, B, pp, m = P.devices, P.global_batch, plan.pp, plan.chunks
    bad = _space_violations(problem, plan)
    if bad:
        return GalvatronReport(False, math.inf, math.inf, tuple(bad), (), (), (), P.usable_mb(), in_space=False)
    kinds = [t for t, lt in enumerate(P.layer_types) for _ in range(lt.count)]
    layer, vocab = _cost_model(problem, plan, kinds)
    v = plan.vocab
    vg = v.tp_sp
    tp_used = [s.tp_sp for s in plan.layers if not s.sp or s.tp_sp == 1] + ([vg] if not v.sp or vg == 1 else [])
    if any(g > 1 for g in tp_used):
        G = max([s.tp_sp for s in plan.layers] + [vg])
        buf = int(B / m / (N // pp // G) * P.hidden * max(lt.seq for lt in P.layer_types) * 4 / _MB / 2)
    else:
        buf = 0
    usable = P.memory_mb - int(P.memory_mb * 0.2) if P.memory_mb // 1024 > 20 else P.memory_mb
    C, CG, R, MEM = [], [], [], []
    a = 0
    for i, n in enumerate(plan.division):
        vc, _, vm = vocab(i)
        c, r, mem, x = vc, 0.0, vm + buf, 0.0
        for k in range(a, a + n):
            lc, lr, lm = layer(k, i)
            c, r, mem = c + lc, r + lr, mem + lm
            if k > a and plan.layers[k - 1].tp_sp != plan.layers[k].tp_sp:
                G2 = max(plan.layers[k - 1].tp_sp, plan.layers[k].tp_sp)
                cdp = N // pp // G2
                cc = hw.allreduce_ms_per_mb
                rate = cc.get(str(G2), cc.get(f"{G2}_1", 0.0)) if (G2 == 1 or cdp == 1) else cc[f"{G2}_1"]
                x += (G2 - 1) / G2 * (B / m / cdp) * P.layer_types[kinds[k]].seq * P.hidden * 2 * rate * 1e-7
        CG.append(c)
        C.append(c + x)
        R.append(r)
        MEM.append(mem)
        if mem > usable:
            bad.append(f"stage {i + 1} needs {mem} MB, usable {usable} MB")
        a += n
    T, estimate = _pipeline_times(C, CG, R, m, pp)
    return GalvatronReport(not bad, T, estimate, tuple(bad), tuple(C), tuple(R), tuple(MEM), usable)


def _space_violations(problem: GalvatronProblem, plan: GalvatronPlan) -> list[str]:
    """Why the plan is outside Galvatron's space (degrees, chunks, split, per-layer tp_sp, dp and ZeRO-3); empty when inside."""
    P = problem
    N, B, pp, m = P.devices, P.global_batch, plan.pp, plan.chunks
    bad: list[str] = []
    if not _pow2(pp) or pp > P.max_pp or pp > N:
        bad.append(f"pp {pp} not a power of 2 within {min(P.max_pp, N)}")
    if m < 1 or B % m or pp > m:
        bad.append(f"chunks {m} must divide the batch {B} and be >= pp")
    if len(plan.division) != pp or any(n < 1 for n in plan.division) or sum(plan.division) != P.layers:
        bad.append(f"split {plan.division} is not {pp} non-empty stages of {P.layers} layers")
    if len(plan.layers) != P.layers:
        bad.append(f"{len(plan.layers)} layer strategies for {P.layers} layers")
    every = [(s.tp_sp, s.zero3, f"layer {k}") for k, s in enumerate(plan.layers)] + [
        (plan.vocab.tp_sp, plan.vocab.zero3, "vocabulary")
    ]
    micro = B // m if m >= 1 else 0
    for g, z3, who in every:
        if not _pow2(g) or g > 8 or pp * g > N:
            bad.append(f"{who}: tp_sp {g} not allowed")
            continue
        dp = N // pp // g
        if micro % dp:
            bad.append(f"{who}: dp {dp} does not divide the micro-batch {micro}")
        if z3 and dp == 1:
            bad.append(f"{who}: ZeRO-3 needs dp > 1")
    return bad


def _cost_model(
    problem: GalvatronProblem, plan: GalvatronPlan, kinds: list[int]
) -> tuple[Callable[[int, int], tuple[float, float, int]], Callable[[int], tuple[float, float, int]]]:
    """``layer(k, stage)`` and ``vocab(stage)``: (time without, with the gradient sync (s), memory (MB)) of a layer or
    of the vocabulary's share of a stage, for a plan inside the space."""
    P, hw = problem, problem.collectives
    N, B, pp, m = P.devices, P.global_batch, plan.pp, plan.chunks
    micro = B // m
    oc = hw.overlap

    def key(sdp: int, tp: int) -> float:
        return hw.allreduce_ms_per_mb[f"{sdp}_{0 if tp != 1 else 1}"]

    def zr(z3: bool, sdp: int) -> float:
        x = 1 / sdp + 0.003
        return (x if z3 else 0.875 * x + 0.125) if m == 1 else (0.875 * x + 0.125 if z3 else 0.75 * x + 0.25)

    def layer(k: int, stage: int) -> tuple[float, float, int]:
        s, lt = plan.layers[k], P.layer_types[kinds[k]]
        g = s.tp_sp
        dp = N // pp // g
        b = micro // dp
        tp, sdp = (1, dp * g) if s.sp and g > 1 else (g, dp)
        f = lt.time_slope_ms * b / g + lt.time_intercept_ms
        bw = f * (3 if s.ckpt else 2)
        dmsg = (sdp - 1) / sdp * lt.parameter_mb / tp
        dc = key(sdp, tp)
        comm = 0.0
        if g > 1:
            tab = hw.all2all[g] if (s.sp and g > 1) else hw.allgather[g]
            comm = tab.ms(b * lt.seq * P.hidden * 2 / _MB) * (4 if s.sp else 6) * (1.5 if s.ckpt else 1)
        out = []
        for d in (0.0, dmsg):
            if dp > 1:
                a, bo = d * dc * oc, bw * oc
                body = f + (bo + (d - bo / (dc * oc)) * dc if a > bo else (a + bw - a / oc if a < bo else bo)) + comm
            else:
                body = f + bw + comm
            if s.zero3:
                body += dmsg * dc / 2
            if pp > 1 and pp in hw.p2p_ms_per_mb:
                body += 2 * pp * b * lt.seq * P.hidden * 2 / _MB * hw.p2p_ms_per_mb[pp] / lt.count
            out.append(body / 1000)
        kk = 1 if pp == 1 else pp - stage
        states = 4 * lt.parameter_mb / tp * (zr(s.zero3, sdp) if dp > 1 else 1)
        act = (lt.activation_mb[0] * kk * b / g) if s.ckpt else lt.activation_mb[g] * kk * b
        return out[0], out[1], math.ceil(states + act)

    v = plan.vocab
    vg = v.tp_sp
    vdp = N // pp // vg
    vb = micro // vdp
    vtp, vsdp = (1, vdp * vg) if v.sp and vg > 1 else (vg, vdp)
    vf = P.vocab.time_slope_ms * vb / vg + P.vocab.time_intercept_ms
    coe = key(vsdp, vtp) * (vsdp - 1) / vsdp
    ff, bf = (0.5, 1.0) if v.zero3 else (0.0, 0.5)
    vz = zr(v.zero3, vsdp) if vdp > 1 else 1.0
    ag = [hw.allgather[vtp].ms(vb * lt.seq * P.hidden * 2 / _MB) if vtp > 1 else 0.0 for lt in P.layer_types]

    def vocab(stage: int) -> tuple[float, float, int]:
        ends = [0] if pp == 1 else [0, pp - 1]
        if stage not in ends:
            return 0.0, 0.0, math.ceil(CONTEXT_MB)
        if pp == 1:
            f, st, tt, act = vf, P.vocab.off, ag[0] + ag[-1], P.vocab.off.activation_mb[vg] * vb
        elif stage == 0:
            f, st, tt, act = vf / 2, P.vocab.first, ag[0], P.vocab.first.activation_mb[vg] * pp * vb
        else:
            f, st, tt, act = vf / 2, P.vocab.last, ag[-1], P.vocab.last.activation_mb[vg] * vb
        msg = st.model_states_mb[vtp] / 8

        def ov(fc: float, bc: float) -> float:
            fw = fc + (f * oc - fc) / oc if f * oc > fc else fc
            bw = bc + (2 * f * oc - bc) / oc if 2 * f * oc > bc else bc
            return (fw + bw + tt) / 1000

        return (
            ov(msg * coe * ff, msg * coe * (bf - 0.5)),
            ov(msg * coe * ff, msg * coe * bf),
            math.ceil(st.model_states_mb[vtp] * vz + act + CONTEXT_MB),
        )

    return layer, vocab


def _pipeline_times(C: list[float], CG: list[float], R: list[float], m: int, pp: int) -> tuple[float, float]:
    """The sound 1F1B time (T) of the stages' times and Galvatron's own pipeline estimate (with the same tail)."""
    tail, acc = 0.0, 0.0
    for c, r in zip(C, R):
        acc += c
        tail = max(tail, r - acc)
    T = sum(C) + (m - 1) * max(C) + tail
    est = sum(CG) + CG[-1] * (m - 1)
    k2 = min(pp - 1, m - 1)
    rest = sum(CG[1:])
    est = max(est, max(k2 * CG[0] / 3, rest / 3) + max(k2 * CG[0] * 2 / 3, rest * 2 / 3) + CG[0] * max(0, m + 1 - pp))
    tail2, acc = 0.0, 0.0
    for c, r in zip(CG, R):
        acc += c
        tail2 = max(tail2, r - acc)
    return T, est + tail2
