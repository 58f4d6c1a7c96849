"""Layer-wise parallelization strategy: a 4-layer GPT stack from layer shapes, on 8 devices, under 2 GiB per device.

Run from the repository root: ``python examples/strategy.py`` (a few seconds).  The CLI does the same with
``milp-partition solve examples/gpt4_layers.json --devices 8 --memory 2GiB``; see docs/strategy.md.
"""

from pathlib import Path

from milp_partition import (
    StrategyGenerationSettings,
    StrategySolveSettings,
    generate_strategy_problem,
    parse_bytes,
    read_layer_graph,
    resolve_profile,
    solve_strategy,
)

HERE = Path(__file__).resolve().parent

layers = read_layer_graph(str(HERE / "gpt4_layers.json"))  # strategy-layers/1: layer kinds and shapes
problem = generate_strategy_problem(layers, resolve_profile("H100"), StrategyGenerationSettings(devices=8))
problem = problem.with_memory_limit(parse_bytes("2GiB", "memory limit"))  # static memory per device
result = solve_strategy(problem, StrategySolveSettings(time_limit_s=60, threads=1))

print(f"status {result.status}")
print(f"time per step {result.objective:.6g} s on 8 devices (bound {result.bound:.6g})")
for layer, config in list(result.assignment.items())[:6]:
    print(f"  {layer:24} {config}")
