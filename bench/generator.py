"""A deterministic generator of dbt-duckdb projects of any size, for the scale bench and the slow tests.

`generate(models=N, flows=M, seed=S)` writes, under `.dpone/bench/projects/<N>m-<M>f-<S>/` (ignored
by git, `.dpone/` is), a project root that `DPONE_PROJECT_ROOT` can point at:

- `dpone.yaml` naming the dbt project (`dbt_project_dir: dbt`), so the dpone code location, the dpone
  dbt plugin and the fork services load *this* project instead of dbt_project_synthetic;
- `dbt/`: a dbt-duckdb project (`dpone_scale`) whose profile is the dpone plugin's, like
  dbt_project_synthetic/profiles.yml, and whose `flows/` holds M ordinary flow workloads (flow.yaml,
  dag.yaml, one SQL file, and the `pack.json` the release capture rebuilds and compares), so `dbt/`
  is also a release source root;
- `dbt/scale_project.json`: what was generated (layer, parents, materialization of every node),
  for the bench and the tests to pick nodes by shape instead of by name.

Shape, for N table-building nodes (seeds count: N is the number of Dagster assets the project
makes): 1% seeds and 5% raw models (generated rows, the project's "sources"), 30% staging models
(one parent each: fan-out from the raw layer), intermediates joining 1-5 staging or earlier
intermediate models (fan-in; the first intermediate has exactly 5 parents, the "probe" a fork job
selects), and 20% marts aggregating 1-4 intermediates, some incremental (merge) and some SCD2
(incremental with `is_current`, the shape dpone recognizes). Every node has `unique` + `not_null`
tests on `id`; every model is cheap to build (tens of rows).

What a reader could get wrong: the output is a pure function of (N, M, seed): same arguments, the
same bytes (tests/scale/test_generator.py compares two trees). `target/` and `.dpone/` inside the
root are written later by whoever uses the project (dbt parse, a lake) and are not part of the
generated tree. A finished tree carries `.generated`; an unfinished one is never reused.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from dpone_dagster.contracts.flows import ResourceCeiling
from dpone_dagster.release.build.packs import build_pack, parse_manifest

REPO_ROOT = Path(__file__).resolve().parent.parent
PROJECTS_DIR = REPO_ROOT / ".dpone" / "bench" / "projects"
PROJECT_NAME = "dpone_scale"
DBT_DIR = "dbt"
SUMMARY_FILE = "scale_project.json"
DONE_MARKER = ".generated"
PROBE_PARENTS = 5
RAW_ROWS = 40
_CEILING = ResourceCeiling(max_cpu_millicores=4000, max_memory_bytes=8 * 1024**3)
# Not generated: written later by dbt (target/, logs/) or by a lake/control store (.dpone/).
NOT_GENERATED = frozenset({"target", "logs", ".dpone", "dbt_packages", DONE_MARKER})


@dataclass(frozen=True)
class Node:
    name: str
    layer: str  # seed | raw | staging | intermediate | marts
    schema: str
    parents: tuple[str, ...]
    materialized: str  # seed | table | incremental | scd2

    @property
    def table(self) -> str:
        return f"{self.schema}.{self.name}"


def layer_sizes(total: int) -> dict[str, int]:
    """How many nodes of each layer N table-building nodes get (at least one each, N >= 10)."""
    if total < 10:
        raise ValueError("a generated project needs at least 10 nodes")
    seeds = max(1, total // 100)
    raw = max(2, total * 5 // 100)
    staging = max(PROBE_PARENTS, total * 30 // 100)
    marts = max(1, total * 20 // 100)
    intermediate = total - seeds - raw - staging - marts
    if intermediate < 1:
        raise ValueError("too few nodes for every layer")
    return {"seed": seeds, "raw": raw, "staging": staging, "intermediate": intermediate, "marts": marts}


def plan_nodes(total: int, seed: int) -> list[Node]:
    """The project's nodes in dependency order; a pure function of (total, seed)."""
    rng = random.Random(seed)
    sizes = layer_sizes(total)
    width = len(str(total))
    nodes: list[Node] = []
    by_layer: dict[str, list[str]] = {}

    def add(layer: str, prefix: str, schema: str, parents: tuple[str, ...], materialized: str) -> None:
        name = f"{prefix}_{len(by_layer.get(layer, [])) + 1:0{width}d}"
        by_layer.setdefault(layer, []).append(name)
        nodes.append(Node(name, layer, schema, parents, materialized))

    for _ in range(sizes["seed"]):
        add("seed", "seed", "raw", (), "seed")
    for _ in range(sizes["raw"]):
        add("raw", "raw", "raw", (), "table")
    sources = by_layer["seed"] + by_layer["raw"]
    for index in range(sizes["staging"]):
        parent = sources[index] if index < len(sources) else rng.choice(sources)  # every source is read
        add("staging", "stg", "staging", (parent,), "table")
    for index in range(sizes["intermediate"]):
        pool = by_layer["staging"] + by_layer.get("intermediate", [])[-50:]  # depth without one giant fan-in
        fan_in = PROBE_PARENTS if index == 0 else rng.choice((1, 1, 2, 2, 2, 3, 3, 4, 5))
        parents = (
            tuple(rng.sample(by_layer["staging"][:PROBE_PARENTS], PROBE_PARENTS))
            if index == 0
            else tuple(rng.sample(pool, min(fan_in, len(pool))))
        )
        materialized = "incremental" if rng.random() < 0.1 else "table"
        add("intermediate", "int", "intermediate", parents, materialized)
    for _ in range(sizes["marts"]):
        pool = by_layer["intermediate"]
        parents = tuple(rng.sample(pool, min(rng.randint(1, 4), len(pool))))
        draw = rng.random()
        materialized = "scd2" if draw < 0.1 else "incremental" if draw < 0.3 else "table"
        add("marts", "mart", "marts", parents, materialized)
    return nodes


# ---------------------------------------------------------------------------------------------
# file contents


def _seed_csv(node: Node, rng: random.Random) -> str:
    lines = ["id,key,amount,updated_at"]
    for row in range(1, 11):
        lines.append(
            f"{row},{rng.randint(1, 9)},{rng.randint(0, 9999) / 100:.2f},2024-01-{rng.randint(1, 28):02d} 00:00:00"
        )
    return "\n".join(lines) + "\n"


def _raw_sql(node: Node, rng: random.Random) -> str:
    a, b, keys = rng.randint(3, 97), rng.randint(3, 97), rng.randint(5, 20)
    return (
        f"-- {node.name}: generated source rows (the project's raw input).\n"
        "select\n"
        "    i as id,\n"
        f"    (i * {a}) % {keys} as key,\n"
        f"    cast((i * {b}) % 1000 as double) / 10 as amount,\n"
        f"    timestamp '2024-01-01' + to_days(cast(i % 60 as integer)) as updated_at\n"
        f"from range(1, {RAW_ROWS + 1}) as t(i)\n"
    )


def _staging_sql(node: Node, rng: random.Random) -> str:
    factor = rng.randint(1, 9)
    return (
        f"-- {node.name}: typed and renamed from {node.parents[0]}.\n"
        "select\n"
        "    cast(id as bigint) as id,\n"
        "    cast(key as bigint) as key,\n"
        f"    cast(amount as double) * {factor} as amount,\n"
        "    cast(updated_at as timestamp) as updated_at\n"
        f'from {{{{ ref("{node.parents[0]}") }}}}\n'
    )


def _joined(parents: tuple[str, ...]) -> tuple[str, str, str]:
    """(amount sum, latest updated_at, from/join clause) over `parents` joined on id."""
    amount = " + ".join(f"coalesce(p{i}.amount, 0)" for i in range(len(parents)))
    latest = "greatest(" + ", ".join(f"coalesce(p{i}.updated_at, p0.updated_at)" for i in range(len(parents))) + ")"
    clause = f'from {{{{ ref("{parents[0]}") }}}} as p0\n' + "".join(
        f'left join {{{{ ref("{parent}") }}}} as p{i} on p{i}.id = p0.id\n' for i, parent in enumerate(parents[1:], 1)
    )
    return amount, latest if len(parents) > 1 else "p0.updated_at", clause


def _incremental_config() -> str:
    return '{{ config(materialized="incremental", incremental_strategy="merge", unique_key="id") }}\n'


def _intermediate_sql(node: Node, rng: random.Random) -> str:
    amount, latest, clause = _joined(node.parents)
    head = _incremental_config() if node.materialized == "incremental" else ""
    where = (
        "{% if is_incremental() %}where "
        + latest
        + " >= (select coalesce(max(updated_at), timestamp '1900-01-01') from {{ this }})\n{% endif %}"
    )
    return (
        f"-- {node.name}: joins {len(node.parents)} upstream model(s) on id.\n"
        + head
        + f"select\n    p0.id,\n    p0.key,\n    {amount} as amount,\n    {latest} as updated_at\n"
        + clause
        + (where + "\n" if node.materialized == "incremental" else "")
    )


def _marts_sql(node: Node, rng: random.Random) -> str:
    if node.materialized == "scd2":
        return _scd2_sql(node)
    parts = "\nunion all\n".join(f'select key, amount, updated_at from {{{{ ref("{p}") }}}}' for p in node.parents)
    head = _incremental_config() if node.materialized == "incremental" else ""
    return (
        f"-- {node.name}: per-key totals over {len(node.parents)} intermediate model(s).\n"
        + head
        + f"with unioned as (\n{parts}\n)\n"
        "select key as id, count(*) as rows_seen, sum(amount) as amount, max(updated_at) as updated_at\n"
        "from unioned\ngroup by key\n"
    )


def _scd2_sql(node: Node) -> str:
    parent = node.parents[0]
    return (
        f"-- {node.name}: SCD2 history of {parent} per key "
        "(versions keyed by a hash; `is_current` marks the live one).\n"
        '{{ config(materialized="incremental", incremental_strategy="merge", unique_key="id") }}\n'
        "with source as (\n"
        "    select key, sum(amount) as amount, max(updated_at) as changed_at,\n"
        "           md5(cast(sum(amount) as varchar)) as attributes_hash\n"
        f'    from {{{{ ref("{parent}") }}}}\n'
        "    group by key\n"
        "),\n"
        "{% if is_incremental() %}\n"
        "current_versions as (select * from {{ this }} where is_current),\n"
        "changed as (\n"
        "    select source.* from source\n"
        "    left join current_versions on current_versions.key = source.key\n"
        "    where current_versions.key is null or current_versions.attributes_hash <> source.attributes_hash\n"
        "),\n"
        "closed as (\n"
        "    select current_versions.id, current_versions.key, current_versions.amount, "
        "current_versions.attributes_hash,\n"
        "           current_versions.valid_from, changed.changed_at as valid_to, false as is_current\n"
        "    from current_versions inner join changed on changed.key = current_versions.key\n"
        "),\n"
        "{% else %}\n"
        "changed as (select * from source),\n"
        "{% endif %}\n"
        "opened as (\n"
        "    select md5(cast(key as varchar) || '|' || cast(changed_at as varchar)) as id, "
        "key, amount, attributes_hash,\n"
        "           changed_at as valid_from, cast(null as timestamp) as valid_to, true as is_current\n"
        "    from changed\n"
        ")\n"
        "{% if is_incremental() %}\nselect * from closed\nunion all\n{% endif %}\n"
        "select * from opened\n"
    )


_SQL = {"raw": _raw_sql, "staging": _staging_sql, "intermediate": _intermediate_sql, "marts": _marts_sql}


def _schema_yml(nodes: list[Node], kind: str) -> str:
    lines = ["version: 2", "", f"{kind}:"]
    for node in nodes:
        lines += [
            f"  - name: {node.name}",
            f"    description: generated {node.layer} node ({node.materialized}).",
            "    columns:",
            "      - name: id",
            "        data_tests: [unique, not_null]",
        ]
    return "\n".join(lines) + "\n"


_DBT_PROJECT = f"""# Generated by bench/generator.py: a synthetic dbt-duckdb project for scale measurements.
name: {PROJECT_NAME}
version: "1.0.0"
profile: {PROJECT_NAME}
config-version: 2

model-paths: ["models"]
macro-paths: ["macros"]
seed-paths: ["seeds"]
clean-targets: ["target"]

flags:
  send_anonymous_usage_stats: false
  use_colors: false

seeds:
  {PROJECT_NAME}:
    +schema: raw

models:
  {PROJECT_NAME}:
    +materialized: table
    raw:
      +schema: raw
    staging:
      +schema: staging
    intermediate:
      +schema: intermediate
    marts:
      +schema: marts
"""


def _profiles() -> str:
    synthetic = (REPO_ROOT / "dbt_project_synthetic" / "profiles.yml").read_text(encoding="utf-8")
    body = synthetic[synthetic.index("dbt_project_synthetic:") :]
    return "# Generated by bench/generator.py: the dpone plugin profile of dbt_project_synthetic.\n" + body.replace(
        "dbt_project_synthetic:", f"{PROJECT_NAME}:", 1
    )


def _flow_files(index: int, width: int, reads: str) -> dict[str, str]:
    name = f"flow_{index:0{width}d}"
    flow_yaml = (
        f"# Generated ordinary flow {index}: per-key counts of {reads}.\n"
        "schema: dpone.flow-manifest.v1\n"
        f"pack_id: {name}\n"
        f"selector: flow:{name}\n"
        "runner: flow_runtime\n"
        f"description: Generated flow {index}\n"
        "sql:\n"
        f"  - sql/{name}.sql\n"
        "resources:\n"
        '  requests: {cpu: "100m", memory: "128Mi"}\n'
        '  limits: {cpu: "250m", memory: "256Mi"}\n'
        "connections:\n"
        "  - alias: orders_source\n"
        "    conn_type: ducklake\n"
        "    access: read\n"
        "    parameters: {schema: raw}\n"
        "  - alias: flow_lake\n"
        "    conn_type: ducklake\n"
        "    access: write\n"
        "    parameters: {schema: flow_marts}\n"
        "writes:\n"
        f"  - flow_marts.{name}\n"
    )
    dag_yaml = (
        f"schema: dpone.flow-dag.v1\ndag_id: {name}\nschedule: manual\nselector: flow:{name}\ntags: [generated]\n"
    )
    sql = (
        "create schema if not exists flow_marts;\n"
        f"create or replace table flow_marts.{name} as\n"
        f"select key, count(*) as rows_seen, max(updated_at) as last_updated_at\n"
        f"from orders_source.{reads}\n"
        "group by all\n"
        "order by all;\n"
    )
    return {
        f"flows/{name}/flow.yaml": flow_yaml,
        f"flows/{name}/dag.yaml": dag_yaml,
        f"flows/{name}/sql/{name}.sql": sql,
    }


def project_files(models: int, flows: int, seed: int) -> dict[str, bytes]:
    """Every generated file of the dbt project (paths relative to `dbt/`), as bytes."""
    nodes = plan_nodes(models, seed)
    rng = random.Random(f"{seed}:contents")
    files: dict[str, str] = {
        "dbt_project.yml": _DBT_PROJECT,
        "profiles.yml": _profiles(),
        "macros/generate_schema_name.sql": (
            REPO_ROOT / "dbt_project_synthetic" / "macros" / "generate_schema_name.sql"
        ).read_text(encoding="utf-8"),
    }
    for node in nodes:
        if node.layer == "seed":
            files[f"seeds/{node.name}.csv"] = _seed_csv(node, rng)
        else:
            files[f"models/{node.layer}/{node.name}.sql"] = _SQL[node.layer](node, rng)
    files["seeds/_seeds.yml"] = _schema_yml([n for n in nodes if n.layer == "seed"], "seeds")
    for layer in ("raw", "staging", "intermediate", "marts"):
        files[f"models/{layer}/_{layer}.yml"] = _schema_yml([n for n in nodes if n.layer == layer], "models")
    raw_tables = [n.name for n in nodes if n.layer == "raw"]
    width = len(str(max(flows, 1)))
    for index in range(1, flows + 1):
        flow = _flow_files(index, width, raw_tables[(index - 1) % len(raw_tables)])
        files.update(flow)
        directory = f"flows/flow_{index:0{width}d}"
        manifest = parse_manifest(flow[f"{directory}/flow.yaml"].encode(), f"{directory}/flow.yaml")
        sql_sources = {path: data.encode() for path, data in flow.items() if path.endswith(".sql")}
        pack = build_pack(manifest, workload_dir=directory, sql_sources=sql_sources, ceiling=_CEILING)
        files[f"{directory}/pack.json"] = pack.canonical_bytes().decode()
    summary = {
        "generator": "bench/generator.py",
        "models": models,
        "flows": flows,
        "seed": seed,
        "probe": next(n.name for n in nodes if n.layer == "intermediate"),
        "nodes": [asdict(n) | {"table": n.table} for n in nodes],
    }
    files[SUMMARY_FILE] = json.dumps(summary, indent=1, sort_keys=True) + "\n"
    return {path: text.encode("utf-8") for path, text in sorted(files.items())}


def project_root(models: int, flows: int, seed: int, base: Path = PROJECTS_DIR) -> Path:
    return base / f"{models}m-{flows}f-{seed}"


def generate(models: int, flows: int = 0, seed: int = 1, *, base: Path = PROJECTS_DIR, force: bool = False) -> Path:
    """Write the project (or reuse a finished one) and return its root (the `DPONE_PROJECT_ROOT`)."""
    root = project_root(models, flows, seed, base)
    if (root / DONE_MARKER).is_file() and not force:
        return root
    staging = root.with_name(root.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    dbt_dir = staging / DBT_DIR
    for path, data in project_files(models, flows, seed).items():
        target = dbt_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (staging / "dpone.yaml").write_bytes(f"# Generated by bench/generator.py\ndbt_project_dir: {DBT_DIR}\n".encode())
    (staging / DONE_MARKER).write_bytes(b"")
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
    return root


def load_summary(root: Path) -> dict:
    return json.loads((root / DBT_DIR / SUMMARY_FILE).read_text(encoding="utf-8"))


def generated_tree(root: Path) -> dict[str, bytes]:
    """Relative path → bytes of every generated file under `root` (what dbt or a lake wrote later left out)."""
    out: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and not NOT_GENERATED.intersection(relative.parts):
            out[relative.as_posix()] = path.read_bytes()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.generator", description="generate a scale test project")
    parser.add_argument("--models", type=int, default=1000, help="table-building dbt nodes (seeds + models)")
    parser.add_argument("--flows", type=int, default=0, help="ordinary flow workloads")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--force", action="store_true", help="regenerate even when a finished copy exists")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    root = generate(args.models, args.flows, args.seed, force=args.force)
    print(
        json.dumps({"root": str(root), "models": args.models, "flows": args.flows, "seed": args.seed})
        if args.json
        else root
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
