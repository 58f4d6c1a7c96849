"""The joint problem's own ``solve``/``evaluate`` options: what :func:`register_options` adds and :data:`OPTIONS` names.

Kept apart from :mod:`milp_partition.cli.joint` (its reader and commands) so that building the command line's parser
imports no solver, no problem module and no numpy (``milp-partition --help`` and ``--version`` stay fast:
``tests/test_startup.py``); the registry names this module in the problem's ``options``.
"""

from __future__ import annotations

import argparse

from milp_partition.cli import flags
from milp_partition.cli.export_options import BATCH_OPTION, EXPORT_OPTIONS

#: The engines ``--space`` offers (:data:`milp_partition.joint.space.SPACES`, named here so that the parser imports no
#: problem module; ``tests/test_startup.py`` holds them equal).
SPACES = ("torchtitan", "megatron")

#: ``--microbatches``' default for an imported graph (``milp_partition.joint.layers.DEFAULT_MICROBATCHES``, named
#: here so that the parser imports no problem module; ``tests/test_startup.py`` holds them equal).
DEFAULT_IMPORTED_MICROBATCHES = 64

#: Problem options this problem reads (besides those every problem takes).
OPTIONS = frozenset(
    {
        "devices",
        "memory",
        "bandwidth",
        "microbatches",
        "method",
        "tp_degrees",
        "profile",
        "stages",
        "data_parallel",
        "tensor_parallel",
        "max_ideals",
        "memory_reserve",
        *EXPORT_OPTIONS,
        BATCH_OPTION,
        "space",
        "objective",
        "global_batch",
        "coefficients",
        "time_layers",
        "calibration_launches",
        "calibration_seconds",
        "layer_times",
        "empty_steps",
        "kinds",
        "kind_profile",
    }
)


def register_options(parser: argparse.ArgumentParser, command: str = "solve") -> None:
    """Add the joint problem's own options (the cluster's --devices and --memory are shared)."""
    g = parser.add_argument_group("joint problem (Piper's)")
    g.add_argument(
        "--microbatches",
        "--micro-batches",
        dest="microbatches",
        type=flags.count,
        help=f"joint: micro-batches per batch N (default: the file's mbsInBatch; imported graph: {DEFAULT_IMPORTED_MICROBATCHES}, "
        "one sample each)",
    )
    g.add_argument(
        "--tp-degrees",
        help="joint, imported graph: tensor-parallel degrees to offer, a maximum (4: 1, 2, 4) or a list (1,2,8) "
        "of 1, 2, 4, 8 (default all up to --devices); --profile gives the device profile (default: the import's); "
        "--bandwidth defaults to the profile's device-to-device link",
    )
    g.add_argument(
        "--stages",
        type=int,
        help="joint: force the number of pipeline stages (the plan is proven optimal within the forced shape)",
    )
    g.add_argument(
        "--data-parallel",
        type=int,
        help="joint: force every stage's data-parallel degree (proven optimal within the forced shape)",
    )
    g.add_argument(
        "--tensor-parallel",
        type=int,
        help="joint: force every stage's tensor-parallel degree (one of --tp-degrees; --tp-degrees 2 alone offers 1 and 2)",
    )
    g.add_argument(
        "--kinds",
        help="joint, imported graph: plan on a cluster of device kinds, KIND:COUNT[:MEMORY[:PER_NODE]] comma-separated "
        "(H100:8,A100:16; memory defaults to the kind's datasheet, devices per node to 8): each stage's kind, data- "
        "and tensor-parallel degree chosen, priced with each kind's profile, proven by the exact DP "
        "(instead of --devices/--memory/--profile); evaluate GRAPH RESULT --kinds ... re-checks such a plan",
    )
    g.add_argument(
        "--kind-profile",
        action="append",
        metavar="KIND=FILE",
        help="joint, --kinds: a measured profile JSON for a kind (default: the kind's datasheet); repeat per kind",
    )
    if command == "solve":
        _run_objective_options(g)
        g.add_argument(
            "--method",
            choices=["dp", "milp"],
            help="joint: dp (default) = the exact DP (the wide-graph bounds and the slot MILP only when the graph has "
            "more ideals than the DP's cap or than its compiled passes take); "
            "milp = the slot MILP with --solver (any MILP back-end), warm-started by the baselines",
        )
        g.add_argument(
            "--space",
            choices=SPACES,
            help="joint: the best plan a training engine can run (every stage the same data- and tensor-parallel "
            "degrees; every transformer block recomputed or none), proven over that space; then --export it",
        )


def _run_objective_options(g: argparse._ArgumentGroup) -> None:
    """``solve``'s options of the run objective's coefficients: where they come from and how they are measured."""
    g.add_argument(
        "--coefficients",
        help="joint, --objective run: a JSON of torch's per-operator costs (forward_overhead_s, backward_overhead_s, "
        "matmul_flops_per_s, memory_s_per_byte; default: measured on this machine when solving); --global-batch "
        "(shared with galvatron) gives the samples per step (default 64), --microbatches N with --data-parallel D "
        "forces N = d m micro-batches",
    )
    g.add_argument(
        "--time-layers",
        action="store_true",
        help="joint, --objective run: time the model's own layers on this CPU at every candidate micro-batch size "
        "(forward, backward and the optimizer step; the model from the import's reference) instead of pricing "
        "operators with --coefficients; and, on CPU ranks with gloo, the runtime's empty step E of every candidate "
        "shape (run's own measure: Schedule1F1B and DDP on a tiny module) and gloo's message and all-reduce fits, "
        "all recorded in the result for --layer-times",
    )
    g.add_argument(
        "--calibration-launches",
        type=flags.ranged_int(1, 50),
        metavar="K",
        help="joint, --objective run, with --time-layers: calibrate K times and plan with the median of each "
        "measured number over the K (default 1; on a machine with other work one calibration's layer times, E and "
        "fits moved by 20%% to 4x between calibrations run back to back)",
    )
    g.add_argument(
        "--calibration-seconds",
        type=flags.nonnegative_seconds,
        metavar="S",
        help="joint, --objective run, with --time-layers: each timing of the calibration on the ranks (the empty step E "
        "of every candidate shape, the layers at every candidate micro-batch size) lasts at least S seconds, its "
        "shapes or sizes in turn step by step, so that each one's median comes from the same S seconds (default 0: "
        "each one's steps back to back; on a machine whose speed changes from one second to the next, a few seconds)",
    )
    g.add_argument(
        "--layer-times",
        nargs="+",
        metavar="RESULT_JSON",
        help="joint, --objective run: reuse the layer times a solve with --time-layers wrote (its result JSON), so "
        "that forced and free plans are priced from one measurement; several results (calibrations of one model at "
        "different times): the median of each measured number over them",
    )
    g.add_argument(
        "--empty-steps",
        nargs="+",
        metavar="RUN_JSON",
        help="joint, --objective run: the runtime's own step E per shape from these run.json files (each run "
        "measures its shape's schedule with nothing to compute, prediction.costs.empty_step_s); they replace "
        "the calibrated E (--time-layers, --layer-times) of their shapes; a shape with no E is priced with E = 0",
    )
