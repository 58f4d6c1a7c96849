"""docs/ARCHITECTURE.md's layer table says what tests/test_layering.py's LAYERS says (issue 41, item 8)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_layering import LAYERS, MODULES, layer_of

ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "ARCHITECTURE.md"


def table() -> dict[int, set[str]]:
    """Layer -> the module names its row lists (backticked lower-case names, relative to milp_partition; ``x.py`` files
    and class names aside)."""
    text = ARCHITECTURE.read_text()
    section = text[text.index("## Layers") :]
    rows: dict[int, set[str]] = {}
    for line in section.splitlines():
        found = re.match(r"\|\s*(\d)\.[^|]*\|([^|]*)\|", line)
        if found:
            names = re.findall(r"`([^`]+)`", found.group(2))
            rows[int(found.group(1))] = {n for n in names if re.fullmatch(r"[a-z_][a-z0-9_.]*", n) and not n.endswith(".py")}
    return rows


def full(name: str) -> str:
    return name if name.split(".")[0] == "milp_partition" else f"milp_partition.{name}"


def test_every_layers_entry_is_in_its_row() -> None:
    rows = table()
    assert set(rows) == set(range(1, 8)), sorted(rows)
    missing = sorted(f"{k} (layer {v})" for k, v in LAYERS.items() if k.replace("milp_partition.", "", 1) not in rows[v]
                     and not (k == "milp_partition" and "milp_partition" in rows[v]))  # fmt: skip
    assert not missing, f"docs/ARCHITECTURE.md's layer table lacks, in the row of their layer: {missing}"


def test_every_module_the_table_names_has_that_layer() -> None:
    wrong = []
    for layer, names in table().items():
        for name in names:
            module = full(name)
            if module not in MODULES and not any(m.startswith(module + ".") for m in MODULES):
                wrong.append(f"{name}: no such module")
            elif layer_of(module) != layer:
                wrong.append(f"{name}: in row {layer}, LAYERS says {layer_of(module)}")
    assert not wrong, wrong
