"""Export to Galvatron: a Galvatron plan as Galvatron's runtime config (what its ``save_results`` writes and its runtime
reads), the config read back, and what a config says about the setting that a problem contradicts.

The Galvatron problem's solve puts this config in its result (``galvatron_config``); ``solve --export galvatron
--export-to PATH`` writes it alone; ``evaluate`` reads one.  Layer strategies are lists encoded as comma-separated
integers, one per layer, as Galvatron writes them.
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
    """The inverse of :func:`plan_to_config` (raises ``ValueError`` naming the field on a bad config).

    Every field is checked against its domain: degrees, chunks and the split are positive integers; ``use_sp``,
    ``dp_types_enc``, ``checkpoint``, ``tp_consecutive_flags``, ``vsp`` and ``embed_sdp`` are 0 or 1 (only
    consecutive tp groups are priced, so ``tp_consecutive_flags`` must be 1 where tp_sp > 1).  Whether the plan fits the setting
    (powers of two, the batch, the layers) is the verifier's: :func:`config_mismatches` and
    :func:`milp_partition.verifiers.galvatron.verify_galvatron`.
    """

    def ints(key: str, lo: int = 1, hi: int | None = None) -> list[int]:
        v = cfg.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            out = [v]
        elif isinstance(v, str):
            try:
                out = [int(x) for x in v.split(",")]
            except ValueError:
                raise ValueError(f"{where}.{key}: expected a comma-separated string of integers, got {v!r}") from None
        else:
            raise ValueError(f"{where}.{key}: expected a comma-separated string of integers, got {v!r}")
        bad = [x for x in out if x < lo or (hi is not None and x > hi)]
        if bad:
            domain = f"{lo} or {hi}" if hi == lo + 1 else f"at least {lo}" if hi is None else f"{lo}..{hi}"
            raise ValueError(f"{where}.{key}: {bad[0]} is not allowed (each value must be {domain})")
        return out

    def one(key: str, lo: int = 1, hi: int | None = None, default: int | None = None) -> int:
        if default is not None and key not in cfg:
            return default
        got = ints(key, lo, hi)
        if len(got) != 1:
            raise ValueError(f"{where}.{key}: expected one integer, got {cfg.get(key)!r}")
        return got[0]

    tps = ints("tp_sizes_enc")
    sps, dts, cks = (ints(k, 0, 1) for k in ("use_sp", "dp_types_enc", "checkpoint"))
    if not len(tps) == len(sps) == len(dts) == len(cks):
        raise ValueError(f"{where}: tp_sizes_enc, use_sp, dp_types_enc and checkpoint differ in length")
    if "tp_consecutive_flags" in cfg:
        flags = ints("tp_consecutive_flags", 0, 1)
        if len(flags) != len(tps):
            raise ValueError(f"{where}: tp_consecutive_flags and tp_sizes_enc differ in length")
        split = [k for k, (f, t) in enumerate(zip(flags, tps)) if f == 0 and t > 1]
        if split:
            raise ValueError(
                f"{where}.tp_consecutive_flags: layer {split[0]} has a non-consecutive tp group (0), which "
                "is not priced here; only consecutive groups (1)"
            )
    layers = tuple(Strategy(t, bool(s) and t > 1, bool(d), bool(c)) for t, s, d, c in zip(tps, sps, dts, cks))
    pp, chunks, vtp = one("pp_deg"), one("chunks"), one("vtp")
    vsp, sdp = one("vsp", 0, 1, default=0), one("embed_sdp", 0, 1, default=0)
    return GalvatronPlan(pp, chunks, tuple(ints("pp_division")), layers, VocabStrategy(vtp, bool(vsp) and vtp > 1, bool(sdp)))


def config_mismatches(problem: GalvatronProblem, cfg: dict[str, object], where: str = "galvatron_config") -> list[str]:
    """What a runtime config says about the setting that the problem contradicts: ``global_bsz`` against the global
    batch, ``pipeline_type`` and ``default_dp_type`` against the ones priced (each checked where the config has it)."""
    out = []
    for key, want in (
        ("global_bsz", problem.global_batch),
        ("pipeline_type", problem.pipeline_type),
        ("default_dp_type", problem.default_dp_type),
    ):
        if key in cfg and (cfg[key] != want or isinstance(cfg[key], bool)):
            out.append(f"{where}.{key} is {cfg[key]!r}, but the setting evaluated has {want!r}")
    return out
