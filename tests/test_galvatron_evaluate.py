"""``evaluate`` of a Galvatron result checks every claim (objective, status, stages, the config's fields against their
domains and the setting) and tells a malformed plan (exit 2) from one that runs out of memory (exit 3) (issue 43,
item 2)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from milp_partition.cli.dispatch import main
from tests.fuzz_inputs import run_cli


@pytest.fixture(scope="module")
def root(shared_benchmarks: Path) -> Path:
    return shared_benchmarks / "galvatron"


def _setting(root: Path, memory: str = "36GiB", batch: str = "16") -> list[str]:
    return ["--hardware", str(root / "hardware"), "--devices", "8", "--memory", memory, "--global-batch", batch]


@pytest.fixture(scope="module")
def result(root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The README's 36 GB / batch-16 setting, proven in about a second."""
    out = tmp_path_factory.mktemp("galv") / "plan.json"
    assert main(["solve", str(root / "models/llama2-7b"), *_setting(root), "--output", str(out), "--quiet"]) == 0
    return json.loads(out.read_text())


def _evaluate(root: Path, data: Any, tmp_path: Path, *setting: str) -> tuple[int, str]:
    path = tmp_path / "fake.json"
    path.write_text(json.dumps(data))
    rc, out, err = run_cli(["evaluate", str(root / "models/llama2-7b"), str(path), *(setting or _setting(root))])
    return rc, err + out


def _cfg(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["galvatron_config"].__setitem__(key, value)


def test_an_honest_result_passes(root: Path, result: dict[str, Any], tmp_path: Path) -> None:
    rc, text = _evaluate(root, result, tmp_path)
    assert rc == 0 and "feasible" in text, text


FAKES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("objective", lambda d: d.update(objective=0.5), "objective 0.5"),
    ("status infeasible", lambda d: d.update(status="infeasible"), "status 'infeasible'"),
    ("estimate", lambda d: d.update(galvatron_estimate_s=0.1), "galvatron_estimate_s"),
    ("stage memory", lambda d: d["stages"][0].update(memory_mb=1), "memory_mb"),
    ("instance batch", lambda d: d["instance"].update(global_batch=64), "instance.global_batch"),
    ("instance not an object", lambda d: d.update(instance=2**70), "instance 1180591620717411303424 is not an object"),
    ("format removed", lambda d: (d.pop("format"), d.update(objective=0.5)), "objective 0.5"),
    ("checkpoint 2", _cfg("checkpoint", ",".join(["2"] * 32)), "checkpoint"),
    ("dp_types_enc 5", _cfg("dp_types_enc", ",".join(["5"] * 32)), "dp_types_enc"),
    ("use_sp 2", _cfg("use_sp", ",".join(["2"] * 32)), "use_sp"),
    ("vsp 3", _cfg("vsp", 3), "vsp"),
    ("pipeline_type bogus", _cfg("pipeline_type", "bogus"), "pipeline_type"),
    ("global_bsz", _cfg("global_bsz", 32), "global_bsz"),
    ("pp 3 (outside the space)", _cfg("pp_deg", 3), "pp 3"),
    ("split of 31 layers", _cfg("pp_division", "31"), "split"),
]


@pytest.mark.parametrize(("what", "mutate", "named"), FAKES, ids=[f[0] for f in FAKES])
def test_a_faked_claim_or_malformed_plan_exits_2(
    root: Path, result: dict[str, Any], tmp_path: Path, what: str, mutate: Callable[[dict[str, Any]], None], named: str
) -> None:
    fake = copy.deepcopy(result)
    mutate(fake)
    rc, text = _evaluate(root, fake, tmp_path)
    assert rc == 2 and named in text and "Traceback" not in text, text


def test_a_bare_config_claims_nothing_and_global_batch_is_checked(root: Path, result: dict[str, Any], tmp_path: Path) -> None:
    cfg = result["galvatron_config"]
    assert _evaluate(root, cfg, tmp_path)[0] == 0
    rc, text = _evaluate(root, cfg, tmp_path, *_setting(root, batch="32"))
    assert rc == 2 and "global_bsz" in text, text


def test_a_plan_that_does_not_fit_memory_is_infeasible(root: Path, result: dict[str, Any], tmp_path: Path) -> None:
    """The same plan on 8 GiB devices: in the space, out of memory: exit 3."""
    rc, text = _evaluate(root, result["galvatron_config"], tmp_path, *_setting(root, memory="8GiB"))
    assert rc == 3 and "INFEASIBLE" in text, text


def test_consecutive_flags_matter_only_where_tp_is_above_1(result: dict[str, Any]) -> None:
    """Galvatron may write 0 for a layer without a tp group; a non-consecutive group of 2 or more is not priced."""
    from milp_partition.io.export.galvatron import plan_from_config

    cfg = dict(result["galvatron_config"])
    n = len(cfg["tp_sizes_enc"].split(","))
    cfg["tp_consecutive_flags"] = ",".join(["0"] * n)
    assert plan_from_config({**cfg, "tp_sizes_enc": ",".join(["1"] * n)}).layers[0].tp_sp == 1
    with pytest.raises(ValueError, match="layer 0 has a non-consecutive tp group"):
        plan_from_config({**cfg, "tp_sizes_enc": ",".join(["2"] + ["1"] * (n - 1))})
