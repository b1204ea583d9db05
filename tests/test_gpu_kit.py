"""The GPU kit (`benchmarks/gpu/`): its CPU dress rehearsal, so that the kit cannot rot between
GPU runs, and its wheel script's checks, offline.

The rehearsal is the device's one command, `benchmarks/gpu/run.sh --cpu --tiny`: it installs a
wheel (a probe made here, standing for the kit's) into a target folder with pip, offline, then
runs every section in its own process under its own limit and writes the same files. Atari's
section is left out here (the suite's time): its run is the cartpole section's code on the
`atari-pong` preset, which `tests/envs/test_envpool.py` trains in the fused loop."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import zipfile

import pytest
from conftest import child_env

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
KIT = os.path.join(ROOT, "benchmarks", "gpu")
SECTIONS = ("imports", "tests", "cartpole", "reference", "minatar", "precision", "replay", "l3",
            "atari", "learn_cartpole", "learn_pqn")  # fmt: skip
REHEARSED = tuple(s for s in SECTIONS if s != "atari")
# Timing keys that must be positive wherever they appear in a section's result.
POSITIVE = ("env_steps_per_s", "compile_s", "ms_per_update_median", "us_per_iter", "wall_s")


def _module(name: str):
    spec = importlib.util.spec_from_file_location(
        f"gpu_kit_{name}", os.path.join(KIT, f"{name}.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


wheels = _module("wheels")


def _wheel(folder, name, version, requires=(), files=None, requires_python=None) -> str:
    """A minimal wheel: METADATA with `requires`, and `files` (path -> text)."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = os.path.join(folder, f"{dist}-py3-none-any.whl")
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Python: {requires_python}"] if requires_python else []
    meta += [f"Requires-Dist: {r}" for r in requires]
    files = files if files is not None else {f"{name.replace('-', '_')}/__init__.py": ""}
    info = f"{dist}.dist-info"
    record = [f"{p},," for p in files] + [f"{info}/{n},," for n in ("METADATA", "WHEEL", "RECORD")]
    with zipfile.ZipFile(path, "w") as z:
        for p, text in files.items():
            z.writestr(p, text)
        z.writestr(f"{dist}.dist-info/METADATA", "\n".join(meta) + "\n\n")
        z.writestr(
            f"{dist}.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr(f"{dist}.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def _run(tmp_path, *args, timeout=600, wheel_dir=None):
    env = child_env(  # the CPU, and the session's XLA settings: tiny numbers, not results
        PYTHON=sys.executable,
        KIT_WHEELS=str(wheel_dir or tmp_path / "no-wheels"),
        KIT_SITE=str(tmp_path / "site"),
    )
    proc = subprocess.run(
        ["bash", os.path.join(KIT, "run.sh"), "--cpu", "--tiny", "--out", str(tmp_path / "out")]
        + list(args),
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    with open(tmp_path / "out" / "gpu_run-tiny.json") as f:
        return proc.stdout, json.load(f)


def _numbers(tree, path=""):
    """Every (path, number) leaf of a JSON tree (bools excluded)."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        yield path, tree


@pytest.mark.slow
def test_the_rehearsal_installs_the_kit_and_reports_every_section(tmp_path):
    kit = tmp_path / "wheels"
    kit.mkdir()
    _wheel(kit, "kit-probe", "1.0", files={"kit_probe/__init__.py": "VALUE = 42\n"})
    out, r = _run(tmp_path, "--sections", ",".join(REHEARSED), wheel_dir=kit)
    assert f"installed 1 wheel(s) from {kit}" in out
    assert (tmp_path / "site" / "kit_probe" / "__init__.py").exists()
    # the plan comes first: each section's limit, adding up to the 450 s budget
    assert out.index("total") < out.index("[1/10] imports")
    assert r["tiny"] is r["cpu"] is True and r["machine"]["backend"] == "cpu"
    assert r["budget_s"] == 450 and sum(r["limits_s"].values()) == pytest.approx(450)
    assert list(r["limits_s"]) == list(r["sections"]) == list(REHEARSED)
    flashbax = importlib.util.find_spec("flashbax") is not None
    for name, rec in r["sections"].items():
        assert 0 < rec["wall_s"] <= rec["limit_s"], name
        if name == "reference" and not flashbax:
            assert rec["status"] == "skipped" and "flashbax" in rec["reason"]
            continue
        assert rec["status"] == "ok", (name, rec.get("error"))
        for path, x in _numbers(rec["result"]):
            assert math.isfinite(x), f"{name}{path} = {x}"
            if path.rsplit(".", 1)[-1].endswith(POSITIVE):
                assert x > 0, f"{name}{path} = {x}"
    res = {n: rec.get("result") for n, rec in r["sections"].items()}
    imp = res["imports"]
    assert imp["failed"] == {} and imp["kit_modules"] == ["kit_probe"]
    assert imp["modules"] > 100 and imp["versions"]["jax"] and imp["machine"]["backend"] == "cpu"
    assert res["tests"]["counts"] == {"passed": 1} and res["tests"]["failures"] == {}
    assert [(x["variant"], x["num_seeds"]) for x in res["cartpole"]["rows"]] == [("auto", 2)]
    if flashbax:
        (row,) = res["reference"]["rows"]
        assert row["num_seeds"] == 2 and row["run_ratio_reference_over_jaxrl_fast"] > 0
    assert [(x["preset"], x["learner"]) for x in res["minatar"]["rows"]] == [
        ("pqn-minatar-breakout", "rollout")
    ]
    (table,) = res["precision"]["tables"]
    assert [x["compute"] for x in table["rows"]] == [
        "fp32 (highest)", "TF32 (fp32, default)", "bf16", "fp16",
    ]  # fmt: skip
    (cell,) = res["replay"]["cells"]
    assert {"ours_uniform", "ours_sum_tree", "ours_cumsum"} <= set(cell["methods"])
    assert cell["ours_sum_tree_over_ours_uniform"] > 0
    assert [x["variant"] for x in res["l3"]["rows"]] == ["L3 off", "L3 host, 4 MB blocks"]
    assert res["l3"]["rows"][1]["replay_counters"]["l3_read_calls"] > 0
    cart, pqn = res["learn_cartpole"], res["learn_pqn"]
    assert cart["reached"] and cart["stopped"] == "reached" and cart["wall_s_to_score"] > 0
    assert cart["curve"][-1]["mean"] >= 15.0 and cart["env_steps_to_score"] > 0
    assert not pqn["reached"] and pqn["stopped"] == "budget" and pqn["wall_s_to_score"] is None
    assert len(pqn["curve"]) == 2 and pqn["curve"][-1]["env_steps"] == pqn["budget_env_steps"]
    md = (tmp_path / "out" / "gpu_run-tiny.md").read_text()
    for name in REHEARSED:
        assert f"## {name} (" in md
    assert "not reached (its budget of" in md and "kit_probe" in md
    assert sorted(os.listdir(tmp_path / "out")) == ["gpu_run-tiny.json", "gpu_run-tiny.md"]


def test_a_section_past_its_limit_is_stopped_and_the_run_goes_on(tmp_path):
    out, r = _run(tmp_path, "--sections", "cartpole,replay", "--budget", "2", timeout=120)
    assert "no wheels in" in out
    assert [rec["status"] for rec in r["sections"].values()] == ["timeout", "timeout"]
    for rec in r["sections"].values():
        assert rec["wall_s"] < rec["limit_s"] + 10 and "stopped at its limit" in rec["error"]
    assert sum(r["limits_s"].values()) == pytest.approx(2)
    assert "replay: timeout" in out
    assert "| cartpole | timeout |" in (tmp_path / "out" / "gpu_run-tiny.md").read_text()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--sections", "cartpole,pong"], "unknown ['pong']"),
        (["--sections", "l3,l3"], "names a section twice"),
        (["--budget", "0"], "--budget 0: expected seconds > 0"),
    ],
)
def test_bad_arguments_are_refused_naming_them(args, needle):
    proc = subprocess.run(
        [sys.executable, os.path.join(KIT, "run.py"), *args],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2 and needle in proc.stderr


# ---- the wheel script, offline --------------------------------------------------------------
IMAGE = {"jax": "0.11.2", "numpy": "2.5.2", "matplotlib": None, "typing-extensions": None}


def test_requirements_are_met_by_the_kit_or_the_image(tmp_path):
    kit = [
        wheels.wheel_metadata(
            _wheel(
                tmp_path,
                "gymnax",
                "1.0.1",
                [
                    "jax<0.12,>=0.6; python_version < '3.14'",
                    "jax>=0.8.1; python_version >= '3.14'",
                    "gymnasium<1.4,>=1.1",
                    "matplotlib",
                    "pytest; extra == 'dev'",
                ],
            )
        ),  # fmt: skip
        wheels.wheel_metadata(
            _wheel(tmp_path, "gymnasium", "1.3.0", ["numpy>=1.22", "typing-extensions>=4"])
        ),
    ]
    rows, problems = wheels.check(kit, IMAGE, ["gymnax>=1.0.1", "numpy>=1.26"])
    assert problems == []
    met = {(x["by"], x["requirement"]): x["met_by"] for x in rows}
    assert met[("the project", "gymnax>=1.0.1")] == "kit 1.0.1"
    assert met[("gymnax 1.0.1", "jax<0.12,>=0.6")] == "image 0.11.2"
    assert met[("gymnax 1.0.1", "matplotlib")] == "image (version not read: assumed)"
    assert not any("pytest" in r for _, r in met) and ("gymnax 1.0.1", "jax>=0.8.1") not in met


def test_unmet_requirements_are_problems_naming_who_asks(tmp_path):
    kit = [
        wheels.wheel_metadata(_wheel(tmp_path, "gymnax", "1.0.1", ["gymnasium<1.4", "brax"])),
        wheels.wheel_metadata(_wheel(tmp_path, "gymnasium", "1.4.0", ["numpy>=3"])),
        wheels.wheel_metadata(_wheel(tmp_path, "newpy", "1.0", requires_python=">=3.13")),
    ]
    _, problems = wheels.check(kit, IMAGE, ["jax>=0.12"])
    assert problems == [
        "newpy 1.0 needs Python >=3.13, the image has 3.12",
        "the project requires jax>=0.12: image 0.11.2",
        "gymnax 1.0.1 requires gymnasium<1.4: kit 1.4.0",
        "gymnax 1.0.1 requires brax: missing",
        "gymnasium 1.4.0 requires numpy>=3: image 2.5.2",
    ]
    (tmp_path / "other").mkdir()
    twice = [kit[0], wheels.wheel_metadata(_wheel(tmp_path / "other", "gymnax", "1.0.0"))]
    assert "two wheels of gymnax: 1.0.1 and 1.0.0" in wheels.check(twice, IMAGE, [])[1]


def test_a_wheels_modules_are_what_import_can_name(tmp_path):
    path = _wheel(tmp_path, "pkg-x", "1.0", files={
        "pkg_x/__init__.py": "", "pkg_x/sub/mod.py": "", "single.py": "", "_native.so": "",
        "pkg_x-1.0.data/scripts/tool": "", "not-a-name/file.py": "",
    })  # fmt: skip
    assert wheels.wheel_modules(path) == ["pkg_x", "single"]


def test_the_image_list_and_the_projects_requirements():
    image = wheels.read_image()
    assert image["jax"] == "0.11.2" and image["python"] == "3.12.3"
    assert "flax" in image and "optax" in image and "orbax-checkpoint" in image
    assert "gymnax" not in image and "flashbax" not in image and "envpool" not in image
    reqs = wheels.project_requirements()
    names = {wheels.canon(r.split(">")[0].split("=")[0].split("<")[0]) for r in reqs}
    assert {"jax", "flax", "gymnax", "flashbax"} <= names
    assert any(r.startswith("flashbax>=") for r in reqs)  # the version an extra asks


def test_the_working_tree_leaves_room_for_the_wheels():
    """What the device carries is the tree that travels plus the wheels: the tree alone must
    leave most of the 64 MiB."""
    assert 0 < wheels.tree_bytes() < 16 * 2**20


def test_the_run_finds_every_gpu_marked_test_file():
    sections = _module("sections")
    files = sections.gpu_test_files()
    assert {
        "tests/test_gpu.py",
        "tests/run/test_train.py",
        "tests/agent/test_precision.py",
        "tests/checkpoint/test_checkpoint.py",
        "tests/loop/test_rollout.py",
    } <= set(files)
    assert "tests/test_gpu_kit.py" not in files
