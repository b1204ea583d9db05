"""benchmarks/ is a documented suite (issue 31): README.md indexes every script; results are
grouped per script; one-off A/B experiments live apart, each listed; scripts share one helper
module and never edit `sys.path`."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
# Modules that are not benchmarks themselves (imported by the scripts).
HELPERS = {
    "common.py",
    "reference_loop.py",
    "claims_measure.py",
    "claims_render.py",
    "replay_timing.py",
    "replay_host.py",
    "replay_report.py",
    "applications_report.py",
}
SCRIPTS = {p.name for p in BENCH.glob("*.py")} - HELPERS
# Kits: a folder of scripts that belong together, indexed as `folder/script` rows; its results
# go to `results/<folder>/`.
KITS = {"gpu": ("wheels.py", "run.sh")}


def test_every_benchmark_script_has_a_row_in_the_index():
    index = (BENCH / "README.md").read_text()
    rows = set(SCRIPTS) | {f"{kit}/{script}" for kit, scripts in KITS.items() for script in scripts}
    missing = sorted(s for s in rows if f"| `{s}` |" not in index)
    assert not missing, f"benchmarks/README.md has no row for {missing}"
    for helper in HELPERS:
        assert f"`{helper}`" in index


def test_results_are_grouped_per_script():
    results = BENCH / "results"
    loose = sorted(p.name for p in results.iterdir() if p.is_file())
    assert not loose, f"results/ holds files outside a script's folder: {loose}"
    folders = {p.name for p in results.iterdir() if p.is_dir()}
    scripts = {s.removesuffix(".py") for s in SCRIPTS} | set(KITS)
    assert folders <= scripts, f"results folders with no script: {sorted(folders - scripts)}"
    for folder in folders:
        assert any((results / folder).iterdir()), folder


def test_every_experiment_is_listed_in_its_index():
    experiments = BENCH / "experiments"
    index = (experiments / "README.md").read_text()
    stems = {p.name.split(".")[0] for p in experiments.iterdir() if p.name != "README.md"}
    unlisted = sorted(s for s in stems if f"`{s}`" not in index)
    assert not unlisted, f"benchmarks/experiments/README.md does not list {unlisted}"


def test_scripts_use_the_shared_helpers_and_never_edit_sys_path():
    for path in sorted([*BENCH.glob("*.py"), *BENCH.glob("gpu/*.py")]):
        text = path.read_text()
        assert "sys.path.insert" not in text and "sys.path.append" not in text, path.name
        if path.name in SCRIPTS:
            assert re.search(r"^(import common|from common import)", text, re.M), path.name
