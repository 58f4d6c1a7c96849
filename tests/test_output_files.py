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
from tests.source_trees import parsed

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


# -- issue 43 item 4: an output that is one of the inputs is refused (it would replace the input) ----------------------


def _copy_of_tiny(tmp_path: Path, name: str = "x.json") -> tuple[Path, str]:
    path = tmp_path / name
    path.write_text(TINY.read_text())
    return path, path.read_text()


def test_solve_refuses_to_write_its_result_over_its_instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    instance, text = _copy_of_tiny(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real").mkdir()
    (tmp_path / "via").symlink_to(tmp_path / "real")  # a folder link: the output path differs, the file is one
    moved, _ = _copy_of_tiny(tmp_path / "real", "y.json")
    os.link(instance, tmp_path / "hard.json")
    for given, output in [
        (str(instance), str(instance)),
        ("x.json", "./x.json"),
        ("x.json", str(tmp_path / "real" / ".." / "x.json")),
        (str(moved), "via/y.json"),
        ("x.json", "hard.json"),
    ]:
        rc, out, err = run_cli(["solve", given, "--solver", "none", "--progress", "0", "-o", output])
        assert rc == 2 and out == "", (given, output, err)
        assert "is the input file" in err and "--output" in err and err.count("\n") == 1, err
    assert instance.read_text() == text and moved.read_text() == text
    assert run_cli(["solve", "x.json", "--solver", "none", "--progress", "0", "-q", "-o", "r.json"])[0] == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["import", "onnx", "{in}", "--output", "{in}"],
        ["import", "torch", "{in}:factory", "--input", "2x3", "--output", "{in}"],
        ["import", "hf", "{in}", "--input", "1x8:int64", "--output", "{in}"],
        ["run", "{in}", "--output", "{in}"],
        ["evaluate", str(TINY), "{in}", "--devices", "2"],  # no output here: nothing to refuse (a baseline)
    ],
)
def test_every_command_refuses_an_output_that_is_an_input(tmp_path: Path, argv: list[str]) -> None:
    source = tmp_path / ("m.py" if argv[1] == "torch" else "m.onnx" if argv[1] == "onnx" else "m.json")
    source.write_bytes(b"# an input that must stay\n")
    rc, _, err = run_cli([a.replace("{in}", str(source)) for a in argv])
    assert source.read_bytes() == b"# an input that must stay\n"
    if "--output" in argv:
        assert rc == 2 and "is the input file" in err, err
    else:
        assert "is the input file" not in err


def test_gap_refuses_an_instance_among_the_files_it_writes(tmp_path: Path) -> None:
    instance, text = _copy_of_tiny(tmp_path, "gap.md")  # the report the sweep writes in its folder
    rc, _, err = run_cli(["gap", str(instance), "--output-dir", str(tmp_path), "--no-exact", "--quiet", "--no-charts"])
    assert rc == 2 and "is the input file" in err and "--output-dir" in err, err
    assert instance.read_text() == text


# -- issue 43 item 5: every writer goes through the atomic one ---------------------------------------------------------

#: Calls that write a file in place (a failed write would leave a cut file behind).
_RAW_WRITES = ("write_text", "write_bytes", "dump", "savetxt", "tofile", "to_csv", "fdopen")


def _raw_writes(path: Path) -> list[str]:
    import ast

    found = []
    for node in ast.walk(parsed(path)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        modes = [a.value for a in node.args[1:2] if isinstance(a, ast.Constant)]
        modes += [k.value.value for k in node.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)]
        if isinstance(node.func, ast.Attribute) and name == "open":  # Path.open(mode)
            modes += [a.value for a in node.args[:1] if isinstance(a, ast.Constant)]
        writes = name == "open" and any(isinstance(m, str) and set(m) & set("wax+") for m in modes)
        if writes or name in _RAW_WRITES or (name == "savefig" and "write_atomic" not in path.read_text()):
            found.append(f"{path.relative_to(REPO)}:{node.lineno} {name}")
    return found


def test_no_module_writes_a_file_but_through_the_atomic_writer() -> None:
    sources = [p for d in ("milp_partition", "formulations", "heuristics") for p in sorted((REPO / d).rglob("*.py"))]
    found = [hit for p in sources if p.name != "atomic.py" for hit in _raw_writes(p)]
    assert not found, "write through milp_partition.io.atomic.write_atomic: " + ", ".join(found)


_FULL_DISK = """
import resource, signal, sys
from pathlib import Path
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
from milp_partition.errors import InputError
from milp_partition.result import Result
from milp_partition.sweep.jobs import CSV_FIELDS, append_row
kind, target = sys.argv[1], Path(sys.argv[2])
try:
    if kind == "result":
        Result(problem="pipeline", solver="none", message="x" * 20000).write(target)
    else:
        append_row(target, {k: "y" * 500 for k in CSV_FIELDS})
except InputError as exc:
    print(exc)
    sys.exit(2)
"""


@pytest.mark.parametrize("kind", ["result", "csv"])
def test_a_write_cut_by_a_full_disk_leaves_the_old_file_whole(tmp_path: Path, kind: str) -> None:
    import subprocess
    import sys

    target = tmp_path / ("r.json" if kind == "result" else "gap.csv")
    from milp_partition.sweep.jobs import CSV_FIELDS

    old = '{"old": true}\n' if kind == "result" else ",".join(CSV_FIELDS) + "\r\n"
    target.write_text(old)
    target.chmod(0o644)
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, kind, str(target)], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert done.returncode == 2 and "nothing was replaced" in done.stdout, (done.stdout, done.stderr)
    assert target.read_bytes() == old.encode() and sorted(p.name for p in tmp_path.iterdir()) == [target.name]


def test_the_gap_table_keeps_its_permissions_when_rewritten(tmp_path: Path) -> None:
    from milp_partition.sweep.jobs import CSV_FIELDS, append_row, compact

    table = tmp_path / "gap.csv"
    append_row(table, {k: "1" for k in CSV_FIELDS})
    table.chmod(0o644)
    append_row(table, {k: "2" for k in CSV_FIELDS})
    assert stat.S_IMODE(table.stat().st_mode) == 0o644
    rows = compact(table)
    assert stat.S_IMODE(table.stat().st_mode) == 0o644  # mkstemp's 0600 was kept by the old rename (issue 43 item 11)
    assert [r["status"] for r in rows] == ["1", "2"]
