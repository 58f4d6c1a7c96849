"""Export to Galvatron: a Galvatron plan as Galvatron's runtime config (what its ``save_results`` writes and its runtime
reads), and back.

The Galvatron problem's solve puts this config in its result (``galvatron_config``); ``solve --export galvatron FILE``
writes it alone.  Layer strategies are lists encoded as comma-separated integers, one per layer, as Galvatron writes
them.
"""

from __future__ import annotations

from milp_partition.galvatron.problem import GalvatronPlan, GalvatronProblem, Strategy, VocabStrategy


def plan_to_config(problem: GalvatronProblem, plan: GalvatronPlan) -> dict[str, object]:
    """The plan in Galvatron's runtime config format (what its ``save_results`` writes and its runtime reads)."""
    j = lambda xs: ",".join(str(int(x)) for x in xs)  # noqa: E731
    return {
        "pp_deg": plan.pp,
        "tp_sizes_enc": j(s.tp_sp for s in plan.layers),
        "tp_consecutive_flags": j(1 for _ in plan.layers),
        "dp_types_enc": j(s.zero3 for s in plan.layers),
        "use_sp": j(s.sp and s.tp_sp > 1 for s in plan.layers),
        "checkpoint": j(s.ckpt for s in plan.layers),
        "global_bsz": problem.global_batch,
        "chunks": plan.chunks,
        "pp_division": j(plan.division),
        "pipeline_type": problem.pipeline_type,
        "default_dp_type": problem.default_dp_type,
        "vtp": plan.vocab.tp_sp,
        "vsp": int(plan.vocab.sp and plan.vocab.tp_sp > 1),
        "embed_sdp": int(plan.vocab.zero3),
    }


def plan_from_config(cfg: dict[str, object], where: str = "galvatron_config") -> GalvatronPlan:
    """The inverse of :func:`plan_to_config` (raises ``ValueError`` naming the field on a bad config)."""

    def ints(key: str) -> list[int]:
        v = cfg.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return [v]
        if not isinstance(v, str):
            raise ValueError(f"{where}.{key}: expected a comma-separated string of integers")
        try:
            return [int(x) for x in v.split(",")]
        except ValueError:
            raise ValueError(f"{where}.{key}: expected a comma-separated string of integers, got {v!r}") from None

    tps, sps, dts, cks = ints("tp_sizes_enc"), ints("use_sp"), ints("dp_types_enc"), ints("checkpoint")
    if not len(tps) == len(sps) == len(dts) == len(cks):
        raise ValueError(f"{where}: tp_sizes_enc, use_sp, dp_types_enc and checkpoint differ in length")
    layers = tuple(Strategy(t, bool(s) and t > 1, bool(d), bool(c)) for t, s, d, c in zip(tps, sps, dts, cks))
    pp, chunks, vtp = ints("pp_deg")[0], ints("chunks")[0], ints("vtp")[0]
    vsp = ints("vsp")[0] if "vsp" in cfg else 0
    sdp = ints("embed_sdp")[0] if "embed_sdp" in cfg else 0
    return GalvatronPlan(pp, chunks, tuple(ints("pp_division")), layers, VocabStrategy(vtp, bool(vsp) and vtp > 1, bool(sdp)))
