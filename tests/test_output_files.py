"""Output files are written atomically and only over regular files (issue 20 item 10)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from milp_partition.errors import InputError
from milp_partition.io.atomic import write_atomic
from tests.fuzz_inputs import run_cli
from tests.fuzz_seeds import REPO

TINY = REPO / "examples" / "tiny.json"


def test_a_symbolic_link_is_refused_and_kept(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_text("keep")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    rc, out, err = run_cli(["solve", str(TINY), "--solver", "none", "--progress", "0", "-o", str(link)])
    assert rc == 2 and out == "" and "symbolic link" in err  # refused before solving
    assert link.is_symlink() and target.read_text() == "keep"


def test_a_device_or_pipe_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    rc, _, err = run_cli(["solve", str(TINY), "--solver", "none", "--progress", "0", "-o", str(fifo)])
    assert rc == 2 and "not a regular file" in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # not replaced
    with pytest.raises(InputError, match="not a regular file"):
        write_atomic("/dev/null", "x")  # (as root a rename would have replaced /dev/null)


def test_the_import_writer_and_the_others_are_atomic_too(tmp_path: Path) -> None:
    """io.native.write_text_file (import, write_joint, the converters) goes through the same atomic writer."""
    from milp_partition.io.json_text import write_text_file

    link = tmp_path / "l.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(InputError, match="symbolic link"):
        write_text_file(link, "{}")
    plain = tmp_path / "p.json"
    write_text_file(plain, "{}")
    assert plain.read_text() == "{}" and sorted(p.name for p in tmp_path.iterdir()) == ["l.json", "p.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_plot_writes_atomically_and_refuses_links(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("matplotlib")
    result = tmp_path / "r.json"
    assert run_cli(["solve", str(TINY), "-q", "--progress", "0", "-o", str(result)])[0] == 0
    png = tmp_path / "plot.png"
    png.write_bytes(b"old image")
    link = tmp_path / "link.png"
    link.symlink_to(png)
    rc, _, err = run_cli(["plot", str(result), "-o", str(link)])
    assert rc == 2 and "symbolic link" in err and png.read_bytes() == b"old image"

    def failing_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    rc, _, err = run_cli(["plot", str(result), "-o", str(png)])
    assert rc == 2 and "nothing was replaced" in err and png.read_bytes() == b"old image"  # drawn in memory, not in place
    monkeypatch.undo()
    assert run_cli(["plot", str(result), "-o", str(png)])[0] == 0
    assert png.read_bytes().startswith(b"\x89PNG")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    json.loads(result.read_text())
