"""Run the commands of the README and of the guides in docs/ in order, as a new user would, and check the numbers they show.

Usage: ``python benchmarks/readme_commands.py [--readme FILE ...] [--output results/readme_commands.md]
[--timeout-s 900]``, from the repository root with the venv active (or run by the venv's python: its ``bin``
folder goes first on ``PATH``).  Without ``--readme`` it reads README.md, then the guides of :data:`GUIDES`, then
any other ``docs/*.md`` (sorted); the commands of one file may use what an earlier command of the same file wrote
(under ``scratch/``, which README.md's first commands make).

Every ``bash`` (or plain) fenced block of each file is read.  A block whose lines start with ``$ `` holds
commands, each followed by the output the README shows; the other blocks hold one command per line
(``\\`` continues a line, a quoted string may span lines, ``#`` lines are comments).  Each command runs in
``bash`` from the repository root, in order, and must exit 0.  Each shown output line (``...`` elides; a line ending
in ``...`` need only start one) must appear in the command's output, after times in seconds (``0.37 s``, ``seconds=0.26``) are masked and runs of
spaces collapsed: the other numbers must match exactly.  A few commands are skipped, each with its reason
(:data:`SKIP`).  The report goes to ``--output`` (Markdown); the exit code is 1 when a command failed or an
output differed.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: The guides under docs/ whose commands run after README.md's, in this order (the rest of docs/*.md follows, sorted).
GUIDES: tuple[str, ...] = (
    "pipeline.md",
    "strategy.md",
    "placement.md",
    "joint.md",
    "import.md",
    "calibration.md",
    "gap_and_sweeps.md",
    "results_and_proofs.md",
)


def default_pages() -> list[Path]:
    """README.md, the guides of :data:`GUIDES`, then the other ``docs/*.md``."""
    docs = REPO / "docs"
    first = [docs / name for name in GUIDES if (docs / name).exists()]
    rest = sorted(p for p in docs.glob("*.md") if p not in first)
    return [REPO / "README.md", *first, *rest]


#: Commands not run, by a substring of the command, with the reason given in the report.
SKIP: tuple[tuple[str, str], ...] = (
    ("python3 -m venv", "set-up: this script already runs in the venv"),
    ("calibrate --output scratch/gpu.json", "the full calibration suite takes many minutes on a CPU"),
    ("gap ../shared/benchmarks/placement/*.json", "exact solves of every Moirai instance: up to an hour"),
    ("gap ../shared/benchmarks/pipeline/", "a sweep of its own (many exact solves)"),
    ("benchmarks/gap_bench.py", "a benchmark of its own (an hour), written into results/"),
    ("benchmarks/placement_scaling.py", "a benchmark of its own (minutes)"),
)


@dataclass
class Command:
    """A README command, its line number and the output lines the README shows for it."""

    text: str
    line: int
    shown: list[str]


def _complete(text: str) -> bool:
    if text.endswith("\\"):
        return False
    try:
        shlex.split(text, comments=True)
    except ValueError:  # an open quote: the command goes on on the next line
        return False
    return True


def parse_readme(text: str) -> list[Command]:
    """The commands of the README's shell blocks, in order."""
    commands: list[Command] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = lines[i].strip()
        if not fence.startswith("```") or fence[3:] not in ("", "bash", "sh", "console"):
            i += 1
            continue
        j = i + 1
        block: list[tuple[int, str]] = []
        while j < len(lines) and not lines[j].strip().startswith("```"):
            block.append((j + 1, lines[j]))
            j += 1
        i = j + 1
        dollar = any(line.startswith("$ ") for _, line in block)
        if not dollar and not any(line.strip().startswith(("milp-partition", "python", ".")) for _, line in block):
            continue  # an output-only block
        k = 0
        while k < len(block):
            lineno, line = block[k]
            if dollar and not line.startswith("$ "):
                k += 1
                continue
            body = line[2:] if dollar else line
            if not body.strip() or body.strip().startswith("#"):
                k += 1
                continue
            while not _complete(body.rstrip()) and k + 1 < len(block):
                k += 1
                body += "\n" + block[k][1]
            k += 1
            shown: list[str] = []
            if dollar:
                while k < len(block) and not block[k][1].startswith("$ "):
                    shown.append(block[k][1])
                    k += 1
            commands.append(Command(body, lineno, shown))
    return commands


_TIMES = (
    (re.compile(r"\b\d+(\.\d+)?( ?)s\b"), r"<t>\2s"),
    (re.compile(r"seconds=\S+"), "seconds=<t>"),
    (re.compile(r"\s+"), " "),
)


def normalize(line: str) -> str:
    """Mask times in seconds and collapse runs of white space."""
    for pattern, repl in _TIMES:
        line = pattern.sub(repl, line)
    return line.strip()


def check_output(shown: list[str], output: str) -> list[str]:
    """Shown lines that do not appear (normalized) in ``output``; a line ending in ``...`` need only start one."""
    have = [normalize(line) for line in output.splitlines()]
    have_set = set(have)
    missing = []
    for line in shown:
        want = normalize(line)
        if not want or want == "...":
            continue
        if want.endswith("..."):
            if not any(h.startswith(want[:-3].rstrip()) for h in have):
                missing.append(line)
        elif want not in have_set:
            missing.append(line)
    return missing


def _display(page: Path) -> str:
    """``page`` relative to the repository root where it lies inside it."""
    try:
        return str(page.resolve().relative_to(REPO))
    except ValueError:
        return str(page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--readme",
        type=Path,
        action="append",
        help="a Markdown file whose commands to run (repeat; default: README.md and docs/*.md)",
    )
    parser.add_argument("--output", type=Path, default=REPO / "results" / "readme_commands.md")
    parser.add_argument("--timeout-s", type=float, default=900.0, help="limit per command (default 900 s)")
    args = parser.parse_args(argv)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    pages = args.readme or default_pages()
    commands = [(page, cmd) for page in pages for cmd in parse_readme(page.read_text())]
    rows, failures = [], 0
    for n, (page, cmd) in enumerate(commands, 1):
        where = f"{_display(page)}:{cmd.line}"
        one_line = " ".join(cmd.text.replace("\\\n", " ").split())
        reason = next((why for key, why in SKIP if key in cmd.text), None)
        if reason is not None:
            rows.append((n, where, one_line, "-", "-", f"skipped: {reason}"))
            print(f"[{n}] skipped: {one_line[:100]}", file=sys.stderr)
            continue
        print(f"[{n}] {one_line[:120]}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                ["bash", "-c", cmd.text], cwd=REPO, env=env, capture_output=True, text=True, timeout=args.timeout_s
            )
            rc, output = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired:
            rc, output = None, ""
        seconds = time.perf_counter() - start
        missing = check_output(cmd.shown, output) if rc == 0 else []
        if rc != 0:
            verdict = f"FAILED: exit {rc}: {' | '.join(output.strip().splitlines()[-2:])[:300]}"
        elif missing:
            verdict = "OUTPUT DIFFERS: not found: " + " | ".join(m.strip() for m in missing[:4])
        else:
            verdict = f"ok ({len([s for s in cmd.shown if s.strip() and s.strip() != '...'])} shown lines found)"
        failures += not verdict.startswith("ok")
        rows.append((n, where, one_line, str(rc), f"{seconds:.1f}", verdict))
        print(f"     {verdict[:200]}", file=sys.stderr)
    lines = [
        "# README and guide commands, run in order",
        "",
        "Written by `benchmarks/readme_commands.py` (do not edit): every command of "
        + ", ".join(_display(p) for p in pages)
        + ", run from the repository root in that order; a command passes when it exits 0 and every output line the",
        "page shows for it appears in its output (times in seconds masked). Times are wall-clock on a shared 2-core machine.",
        "",
        f"{len(rows)} commands, {sum(r[5].startswith('ok') for r in rows)} ok, "
        f"{sum(r[5].startswith('skipped') for r in rows)} skipped, {failures} failed.",
        "",
        "| # | file:line | command | exit | seconds | check |",
        "|---|---|---|---|---|---|",
    ]
    for n, line, text, rc, seconds, verdict in rows:
        cell = text.replace("|", "\\|")
        lines.append(f"| {n} | {line} | `{cell[:160]}` | {rc} | {seconds} | {verdict.replace('|', '/')} |")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.output}: {failures} failed", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
