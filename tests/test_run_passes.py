"""The passes inside a run are the passes the planner priced: no counting hooks on the timed steps (issue 42)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from milp_partition.run.engine import SavedActivations  # noqa: E402


def _pass(model: object, x: object) -> None:
    model(x).square().sum().backward()  # type: ignore[operator]


def test_saved_activations_are_counted_on_the_first_step_only() -> None:
    """Step 0 (the warm-up) counts what autograd saves (the same tensors as every step's); later steps run without the
    hooks, so the timed passes carry none of their Python: the count stays that of step 0 and no tensor is packed."""
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
    for step in (1, 2):
        with counter.during(step):
            _pass(model, x)
    assert counter.peak == first and len(packed) == calls
