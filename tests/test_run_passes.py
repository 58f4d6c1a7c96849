"""The passes inside a run are the passes the planner priced: no counting hooks on the timed steps (issue 42)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from milp_partition.run.engine import SavedActivations  # noqa: E402


def _pass(model: object, x: object) -> None:
    model(x).square().sum().backward()  # type: ignore[operator]


def test_saved_activations_are_counted_on_the_first_two_steps_only() -> None:
    """Steps 0 and 1 count what autograd saves (what step 0 leaves live into step 1 included); later steps run without
    the hooks, so those timed passes carry none of their Python: the count stays that of steps 0-1, nothing is packed."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x = torch.randn(3, 8)
    counter = SavedActivations({p.untyped_storage().data_ptr() for p in model.parameters()})
    packed: list[int] = []
    pack = counter.pack
    counter.pack = lambda t: (packed.append(1), pack(t))[1]  # type: ignore[method-assign]
    with counter.during(0):
        _pass(model, x)
    first, calls = counter.peak, len(packed)
    # the input x (3 x 8 floats) is saved by the first linear, the ReLU's output (3 x 16) by ReLU and the second linear
    assert first >= 3 * 8 * 4 + 3 * 16 * 4
    assert calls > 0
    with counter.during(1):
        _pass(model, x)
    assert len(packed) == 2 * calls
    peak = counter.peak
    for step in (2, 3):
        with counter.during(step):
            _pass(model, x)
    assert counter.peak == peak and len(packed) == 2 * calls


def test_hooks_removed_takes_an_even_share_off_each_node() -> None:
    """Hand-computed: hooked nodes 5, 3, 1 ms (9 ms) against a plain pass of 6 ms: 1 ms off each; against 3 ms: the
    even share (2 ms) would take the 1 ms node below 0, so it ends at 0 and the other two give 2.5 ms each (5 of the
    6 ms of hooks): 2.5 + 0.5 + 0 = 3.  The nodes always sum to the plain pass."""
    from milp_partition.run.predict import hooks_removed

    hooked = {"a": 5e-3, "b": 3e-3, "c": 1e-3}
    assert hooks_removed(hooked, 6e-3) == pytest.approx({"a": 4e-3, "b": 2e-3, "c": 0.0}, abs=1e-15)
    assert hooks_removed(hooked, 3e-3) == pytest.approx({"a": 2.5e-3, "b": 0.5e-3, "c": 0.0}, abs=1e-15)
    assert hooks_removed(hooked, 0.5e-3) == pytest.approx({"a": 0.5e-3, "b": 0.0, "c": 0.0}, abs=1e-15)
    assert hooks_removed(hooked, 12e-3) == pytest.approx({"a": 6e-3, "b": 4e-3, "c": 2e-3})  # a slower plain pass
    assert hooks_removed(hooked, 0.0) == {"a": 0.0, "b": 0.0, "c": 0.0}
    assert hooks_removed({}, 1.0) == {}


def test_layer_timer_nodes_sum_to_the_pass_without_hooks() -> None:
    """Every node of an imported MLP gets its forward and (through the hook on its output's gradient) its backward on
    every sample, never below 0, and per sample the nodes sum to the plain pass timed beside the hooked one."""
    import dataclasses

    from milp_partition.run.predict import LayerTimer
    from milp_partition.run.spec import RunSpec

    spec = RunSpec(
        "milp_partition.importers.models:mlp_small_test", ("4x32",), "float32", (), (), 1, 0.0, 1.0, "", "",
        microbatch_size=4,
    )  # fmt: skip
    model_nodes = LayerTimer(spec, samples=4).named
    nodes = tuple(v for v in model_nodes if v and "." not in v)  # the Sequential's children, in order
    timer = LayerTimer(dataclasses.replace(spec, node_order=nodes), samples=4)
    assert timer.points == list(nodes) and len(nodes) >= 3
    for _ in range(3):
        timer.sample()
    assert len(timer.passes) == 3
    for k, (plain_f, plain_b, hooked_f, hooked_b) in enumerate(timer.passes):
        assert min(plain_f, plain_b, hooked_f, hooked_b) > 0
        fwd = [timer.fwd[v][k] for v in nodes]
        bwd = [timer.bwd[v][k] for v in nodes]
        assert min(fwd + bwd) >= 0
        assert sum(fwd) == pytest.approx(plain_f, rel=1e-9) and sum(bwd) == pytest.approx(plain_b, rel=1e-9)
