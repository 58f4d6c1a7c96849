"""Sizes and rates always carry a unit; 'b' is a bit; every report shows the capacity it planned for (issue 20 item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from milp_partition.errors import InputError
from milp_partition.units import format_rate, parse_bytes, parse_rate
from tests.fuzz_inputs import run_cli
from tests.fuzz_seeds import REPO, SHARED, _tiny_piper


@pytest.mark.parametrize(("text", "value"), [("16GiB", 16 * 2**30), ("16GB", 16 * 10**9), ("4096B", 4096), ("1.5KiB", 1536)])
def test_sizes_with_units(text: str, value: int) -> None:
    assert parse_bytes(text, "--memory") == value


@pytest.mark.parametrize(
    ("text", "value"),
    [("25GB/s", 25e9), ("25GiB/s", 25 * 2**30), ("200Gb/s", 25e9), ("100Gbps", 12.5e9), ("8b/s", 1.0), ("80B/s", 80.0)],
)
def test_rates_with_units_and_bits(text: str, value: float) -> None:
    assert parse_rate(text, "--bandwidth") == pytest.approx(value)


@pytest.mark.parametrize("text", ["40", "40.5", "1e9"])
def test_a_size_without_a_unit_is_refused_naming_the_units(text: str) -> None:
    with pytest.raises(InputError, match=r"no unit.*GiB"):
        parse_bytes(text, "--memory")
    with pytest.raises(InputError, match=r"no unit.*GB/s"):
        parse_rate(text, "--bandwidth")


def test_bits_are_not_a_size() -> None:
    with pytest.raises(InputError, match="bits"):
        parse_bytes("16Gb", "--memory")


def test_format_rate() -> None:
    assert format_rate(25 * 2**30) == "25 GiB/s" and format_rate(10.0) == "10 B/s"


def test_the_command_line_refuses_unitless_sizes(tmp_path: Path) -> None:
    rc, _, err = run_cli(["solve", str(REPO / "examples" / "tiny.json"), "--memory", "40", "--progress", "0"])
    assert rc == 2 and "--memory" in err and "no unit" in err
    piper = tmp_path / "p.json"
    piper.write_text(json.dumps(_tiny_piper()))
    rc, _, err = run_cli(["solve", str(piper), "--bandwidth", "25", "--progress", "0"])
    assert rc == 2 and "--bandwidth" in err and "no unit" in err
    rc, out, _ = run_cli(["solve", str(piper), "--bandwidth", "80b/s", "--progress", "0"])
    assert rc == 0 and "bandwidth 10 B/s" in out  # 80 bits per second


@pytest.mark.parametrize(
    ("instance", "shown"),
    [
        (REPO / "examples" / "tiny.json", "cluster    2 accelerators, 16.00 GiB each; link 9.313 GiB/s"),
        (SHARED / "placement" / "example-1.json", "cluster    memory d0 14, d1 14, d2 16"),
    ],
)
def test_every_report_shows_the_capacity(instance: Path, shown: str) -> None:
    rc, out, _ = run_cli(["solve", str(instance), "--solver", "none", "--progress", "0"])
    assert rc == 0 and shown in out


@pytest.mark.parametrize("text", ["25GiB", "25GB", "200Gb", "80B"])
def test_a_size_is_not_a_rate(text: str) -> None:
    """Issue 43 item 11: ``--bandwidth 25GiB`` (no /s) was taken as 25 GiB per second."""
    with pytest.raises(InputError, match=r"a size, not a rate.*/s"):
        parse_rate(text, "--bandwidth")
