"""The scale project generator (bench/generator.py): same arguments, same bytes; a realistic shape.

What a reader could get wrong: determinism is checked on two *separate* generations into different
directories, compared byte for byte; a generator that read the clock, the process's hash seed or the
directory it writes into would differ here. A different seed must give a different project, or the
comparison proves nothing.
"""

from __future__ import annotations

import json

from bench.generator import DBT_DIR, PROBE_PARENTS, generate, generated_tree, layer_sizes, load_summary
from dpone_dagster.contracts.flows import ResourceCeiling
from dpone_dagster.release.build.flows import capture_ordinary
from dpone_dagster.release.source.snapshot import open_source

MODELS, FLOWS = 200, 12


def test_the_same_seed_gives_byte_identical_projects_and_another_seed_does_not(tmp_path):
    first = generated_tree(generate(MODELS, FLOWS, seed=7, base=tmp_path / "a"))
    second = generated_tree(generate(MODELS, FLOWS, seed=7, base=tmp_path / "b"))
    other = generated_tree(generate(MODELS, FLOWS, seed=8, base=tmp_path / "c"))
    assert len(first) > MODELS + 4 * FLOWS
    assert first == second
    assert set(first) == set(other)  # the same layout (names depend on the sizes only)...
    changed = [path for path in first if first[path] != other.get(path)]
    assert any(path.startswith(f"{DBT_DIR}/models/") for path in changed)  # ...other contents


def test_the_shape_has_every_layer_fan_in_fan_out_incremental_scd2_and_tests(tmp_path):
    root = generate(MODELS, FLOWS, seed=3, base=tmp_path)
    summary = load_summary(root)
    nodes = {node["name"]: node for node in summary["nodes"]}
    assert len(nodes) == MODELS
    counts = {layer: sum(1 for n in nodes.values() if n["layer"] == layer) for layer in layer_sizes(MODELS)}
    assert counts == layer_sizes(MODELS)
    assert len(nodes[summary["probe"]]["parents"]) == PROBE_PARENTS
    assert all(parent in nodes for node in nodes.values() for parent in node["parents"])
    readers: dict[str, int] = {}
    for node in nodes.values():
        for parent in node["parents"]:
            readers[parent] = readers.get(parent, 0) + 1
    assert max(readers.values()) >= 3  # fan-out
    assert {"incremental", "scd2", "table", "seed"} <= {n["materialized"] for n in nodes.values()}
    dbt = root / DBT_DIR
    schema_files = [*dbt.glob("models/*/_*.yml"), dbt / "seeds" / "_seeds.yml"]
    tested = sum(path.read_text().count("data_tests: [unique, not_null]") for path in schema_files)
    assert tested == MODELS
    scd2 = next(n for n in nodes.values() if n["materialized"] == "scd2")
    assert "is_current" in (dbt / "models" / "marts" / f"{scd2['name']}.sql").read_text()
    assert (
        "plugins:" in (dbt / "profiles.yml").read_text()
        and "dpone_dagster.lake.dbt_plugin" in (dbt / "profiles.yml").read_text()
    )
    assert json.loads((root / DBT_DIR / "scale_project.json").read_text())["seed"] == 3


def test_the_generated_flows_are_ordinary_workloads_the_release_capture_accepts(tmp_path):
    root = generate(MODELS, FLOWS, seed=5, base=tmp_path)
    ceiling = ResourceCeiling(max_cpu_millicores=4000, max_memory_bytes=8 * 1024**3)
    with open_source(root / DBT_DIR, work_dir=tmp_path) as tree:
        capture = capture_ordinary(tree, resource_ceiling=ceiling)
    assert len(capture.workloads) == FLOWS
