"""Render the Dagster UI into `docs/images/*.png` (`make screenshots`), and run a live webserver.

The screenshots come from the real thing: a `dagster-webserver` on 127.0.0.1 over the project's
`workspace.yaml`, a throwaway DAGSTER_HOME and a throwaway dpone state directory, the release job
launched through GraphQL so the lineage shows materialized assets, then headless Debian `chromium`
driven by Playwright (the system executable; Playwright never downloads a browser here).

`DagsterWebserver` / `running_webserver` are also the end-to-end test harness (`tests/ui/`), so the
tests and the images exercise the same server the same way. The fork pages (`fork_*.png`) come from
a second webserver for a fork, on the Dagster home `dpone dev` prepares for it (its own instance).

What a reader could get wrong: the instance written here uses the *default* run coordinator, which
launches runs immediately without a daemon. `make dev` runs `dagster dev`, whose daemon also
ticks sensors; the harness never starts a daemon, so sensors are evaluated with `sensorDryRun`,
exactly what the UI's "Test sensor" button does.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = REPO_ROOT / "docs" / "images"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
RELEASE_LOCATION = "dpone_dagster"
RELEASE_JOB = "release_job"
DEPLOYMENT_LOCATION = "dpone_deployment"
DEPLOYMENT_MODULE = "dpone_dagster.deployment.definitions"
FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}

_INSTANCE_YAML = """\
telemetry:
  enabled: false
run_coordinator:
  module: dagster._core.run_coordinator.default_run_coordinator
  class: DefaultRunCoordinator
"""

_WORKSPACE_STATUS = """
{ workspaceOrError { __typename
    ... on Workspace { locationEntries { name loadStatus
        locationOrLoadError { __typename ... on PythonError { message } } } }
    ... on PythonError { message } } }
"""

_LAUNCH_RUN = """
mutation($params: ExecutionParams!) { launchRun(executionParams: $params) { __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on InvalidSubsetError { message }
    ... on PipelineNotFoundError { message } } }
"""

_RUN_STATUS = """
query($runId: ID!) { runOrError(runId: $runId) { __typename ... on Run { status } } }
"""

_RUN_DETAILS = """
query($runId: ID!) { runOrError(runId: $runId) { __typename ... on Run { status tags { key value } } }
  logsForRun(runId: $runId, limit: 1000) { __typename ... on EventConnection { events { __typename
    ... on MessageEvent { message stepKey }
    ... on ExecutionStepFailureEvent { error { message } failureMetadata { metadataEntries {
        label ... on TextMetadataEntry { text } ... on IntMetadataEntry { intValue } } } }
    ... on MaterializationEvent { assetKey { path } metadataEntries { label
        ... on TextMetadataEntry { text } ... on IntMetadataEntry { intValue }
        ... on BoolMetadataEntry { boolValue } } } } } } }
"""

_RELOAD = """
mutation($name: String!) { reloadRepositoryLocation(repositoryLocationName: $name) { __typename
    ... on WorkspaceLocationEntry { loadStatus
        locationOrLoadError { __typename ... on PythonError { message errorChain { error { message } } } } }
    ... on PythonError { message } } }
"""

_SENSOR_DRY_RUN = """
mutation($selector: SensorSelector!, $cursor: String) { sensorDryRun(selectorData: $selector, cursor: $cursor) {
    __typename ... on PythonError { message }
    ... on DryRunInstigationTick { evaluationResult { skipReason cursor error { message }
        runRequests { runKey jobName tags { key value } } } } } }
"""


class WebserverError(RuntimeError):
    """The webserver did not start, a location failed to load, or a GraphQL call failed."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class DagsterWebserver:
    """A running `dagster-webserver` and a minimal GraphQL client for it (127.0.0.1 only)."""

    base_url: str
    process: subprocess.Popen
    log_path: Path
    locations: tuple[str, ...] = field(default=())

    def graphql(self, query: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": dict(variables or {})}).encode()
        request = urllib.request.Request(
            self.base_url + "/graphql",
            data=body,
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            payload = json.loads(response.read())
        if payload.get("errors"):
            raise WebserverError(f"GraphQL errors: {payload['errors']}")
        return payload["data"]

    def location_statuses(self) -> dict[str, dict[str, Any]]:
        data = self.graphql(_WORKSPACE_STATUS)["workspaceOrError"]
        if data["__typename"] != "Workspace":
            raise WebserverError(f"workspace failed: {data.get('message')}")
        return {entry["name"]: entry for entry in data["locationEntries"]}

    def wait_until_loaded(self, timeout: float = 180.0) -> dict[str, dict[str, Any]]:
        """Wait until no code location is still loading; return every location's status."""
        deadline = time.monotonic() + timeout
        while True:
            statuses = self.location_statuses()
            if statuses and all(s["loadStatus"] == "LOADED" for s in statuses.values()):
                return statuses
            if time.monotonic() > deadline:
                raise WebserverError(f"code locations still loading after {timeout}s: {statuses}")
            time.sleep(0.5)

    def launch_job(
        self,
        location: str,
        job: str,
        *,
        run_config: Mapping[str, Any] | None = None,
        repository: str = "__repository__",
    ) -> str:
        params = {
            "selector": {
                "repositoryLocationName": location,
                "repositoryName": repository,
                "jobName": job,
            },
            "runConfigData": dict(run_config or {}),
        }
        result = self.graphql(_LAUNCH_RUN, {"params": params})["launchRun"]
        if result["__typename"] != "LaunchRunSuccess":
            raise WebserverError(f"launching {job} failed: {result}")
        return result["run"]["runId"]

    def wait_for_run(self, run_id: str, timeout: float = 300.0) -> str:
        """Poll until the run finishes; return its final status (SUCCESS, FAILURE, CANCELED)."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.graphql(_RUN_STATUS, {"runId": run_id})["runOrError"]
            if run["__typename"] != "Run":
                raise WebserverError(f"run {run_id} is not readable: {run['__typename']}")
            if run["status"] in FINISHED:
                return run["status"]
            if time.monotonic() > deadline:
                raise WebserverError(f"run {run_id} still {run['status']} after {timeout}s")
            time.sleep(0.5)

    def launch_assets(self, location: str, asset_keys: list[list[str]], *, repository: str = "__repository__") -> str:
        """Materialize exactly these assets (the UI's "Materialize selected")."""
        params = {
            "selector": {
                "repositoryLocationName": location,
                "repositoryName": repository,
                "jobName": "__ASSET_JOB",
                "assetSelection": [{"path": key} for key in asset_keys],
            },
            "runConfigData": {},
        }
        result = self.graphql(_LAUNCH_RUN, {"params": params})["launchRun"]
        if result["__typename"] != "LaunchRunSuccess":
            raise WebserverError(f"materializing {asset_keys} failed: {result}")
        return result["run"]["runId"]

    def run_details(self, run_id: str) -> dict[str, Any]:
        """Status, tags (as a dict) and every event of a run."""
        data = self.graphql(_RUN_DETAILS, {"runId": run_id})
        run = data["runOrError"]
        return {
            "status": run["status"],
            "tags": {tag["key"]: tag["value"] for tag in run["tags"]},
            "events": data["logsForRun"]["events"],
        }

    def reload_location(self, name: str) -> dict[str, Any]:
        """Reload one code location and return its entry (load error included, if any)."""
        return self.graphql(_RELOAD, {"name": name})["reloadRepositoryLocation"]

    def sensor_dry_run(
        self, location: str, sensor: str, *, cursor: str | None = None, repository: str = "__repository__"
    ) -> dict[str, Any]:
        """Evaluate a sensor once, as the UI's "Test sensor" does; returns its evaluation result."""
        selector = {"repositoryLocationName": location, "repositoryName": repository, "sensorName": sensor}
        result = self.graphql(_SENSOR_DRY_RUN, {"selector": selector, "cursor": cursor})["sensorDryRun"]
        if result["__typename"] != "DryRunInstigationTick":
            raise WebserverError(f"sensor dry run failed: {result}")
        return result["evaluationResult"]

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def session_workspace(target: Path) -> Path:
    """Write the project's workspace.yaml, pinned to the repository, with the deployment location.

    Every entry of `workspace.yaml` is kept as it is (plus an absolute working directory, so the
    file works from anywhere); the dormant deployment location is appended only if the project
    file does not list it yet.
    """
    import yaml

    loaded = yaml.safe_load((REPO_ROOT / "workspace.yaml").read_text(encoding="utf-8")) or {}
    entries = [dict(entry) for entry in loaded.get("load_from", [])]
    for entry in entries:
        for spec in entry.values():
            if isinstance(spec, dict):
                spec.setdefault("working_directory", str(REPO_ROOT))
    modules = {spec.get("module_name") for entry in entries for spec in entry.values() if isinstance(spec, dict)}
    if DEPLOYMENT_MODULE not in modules:
        entries.append(
            {
                "python_module": {
                    "module_name": DEPLOYMENT_MODULE,
                    "attribute": "defs",
                    "location_name": DEPLOYMENT_LOCATION,
                    "working_directory": str(REPO_ROOT),
                }
            }
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump({"load_from": entries}, sort_keys=False), encoding="utf-8")
    return target


def write_instance(dagster_home: Path, instance_yaml: str | None = None) -> None:
    dagster_home.mkdir(parents=True, exist_ok=True)
    (dagster_home / "dagster.yaml").write_text(_INSTANCE_YAML if instance_yaml is None else instance_yaml)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@contextlib.contextmanager
def running_webserver(
    workspace_file: Path,
    *,
    dagster_home: Path,
    env: Mapping[str, str] | None = None,
    inherit_env: bool = True,
    startup_timeout: float = 180.0,
    instance_yaml: str | None = None,
    command_prefix: Sequence[str] = (),
) -> Iterator[DagsterWebserver]:
    """Start `dagster-webserver` on a free 127.0.0.1 port and wait until every location loaded.

    The server runs in its own process group (it spawns one code server per location); leaving the
    block stops that group, and only that group. `instance_yaml` replaces the default dagster.yaml
    (`_INSTANCE_YAML`); `command_prefix` runs the server through another command (e.g. the confinement
    launcher, which execs it: same process, same group).
    """
    write_instance(dagster_home, instance_yaml)
    port = free_port()
    log_path = dagster_home / "webserver.log"
    base_env = dict(os.environ) if inherit_env else {}
    child_env = {**base_env, **dict(env or {}), "DAGSTER_HOME": str(dagster_home)}
    command = [
        *command_prefix,
        sys.executable,
        "-m",
        "dagster_webserver",
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "-w",
        str(workspace_file),
    ]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env=child_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = DagsterWebserver(base_url=f"http://127.0.0.1:{port}", process=process, log_path=log_path)
    try:
        _wait_for_http(server, startup_timeout)
        server.locations = tuple(server.wait_until_loaded(startup_timeout))
        yield server
    finally:
        _stop(process)


def _wait_for_http(server: DagsterWebserver, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if server.process.poll() is not None:
            raise WebserverError(f"dagster-webserver exited early:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(server.base_url + "/server_info", timeout=5):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if time.monotonic() > deadline:
                raise WebserverError(f"dagster-webserver did not answer:\n{server.log_tail()}") from None
            time.sleep(0.3)


@dataclass(frozen=True)
class Page:
    """One screenshot: the UI path to open and the file name it is written to."""

    file_name: str
    path: str
    expand_groups: bool = False
    hide_asset_tree: bool = False
    wait_for: str | None = None
    """Text the page must show before the screenshot (waited for up to a minute)."""


def _open_browser(playwright, profile_dir: Path):
    return playwright.chromium.launch_persistent_context(
        str(profile_dir),
        executable_path=CHROMIUM,
        args=list(CHROMIUM_FLAGS),
        headless=True,
        viewport={"width": 1600, "height": 1000},
        device_scale_factor=1,
    )


def _dismiss_first_run_modal(page) -> None:
    skip = page.get_by_role("button", name="Skip")
    with contextlib.suppress(Exception):
        skip.click(timeout=30000)  # a loaded machine renders the modal late


def _expand_all_groups(page) -> None:
    """Right-click the empty top-left corner of the graph canvas and pick "Expand all groups"."""
    toolbar = page.get_by_role("button", name="Materialize all").first.bounding_box()
    page.mouse.click(toolbar["x"] - 400, toolbar["y"] + 120, button="right")
    item = page.get_by_role("menuitem").filter(has_text="Expand all groups")
    if item.count():
        item.first.click()
    else:
        page.keyboard.press("Escape")


def _hide_asset_tree(page) -> None:
    """Collapse the lineage page's asset tree (the button right of "Jump to…") for a wider graph."""
    with contextlib.suppress(Exception):
        box = page.get_by_placeholder("Jump to…").bounding_box(timeout=3000)
        page.mouse.click(box["x"] + box["width"] + 20, box["y"] + box["height"] / 2)
        page.wait_for_timeout(500)


def capture(base_url: str, pages: list[Page], out_dir: Path) -> list[Path]:
    """Open each page in headless Chromium and write a PNG per page into `out_dir`."""
    from playwright.sync_api import sync_playwright

    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="dpone-chromium-") as profile, sync_playwright() as playwright:
        browser = _open_browser(playwright, Path(profile))
        try:
            page = browser.new_page()
            page.goto(base_url + "/overview", wait_until="networkidle")
            _dismiss_first_run_modal(page)
            for spec in pages:
                page.goto(base_url + spec.path, wait_until="networkidle")
                page.wait_for_timeout(1500)
                if spec.wait_for:
                    with contextlib.suppress(Exception):
                        page.get_by_text(spec.wait_for).first.wait_for(timeout=60000)
                    page.wait_for_timeout(1500)
                if spec.hide_asset_tree:
                    _hide_asset_tree(page)
                if spec.expand_groups:
                    _expand_all_groups(page)
                    page.wait_for_timeout(1500)
                target = out_dir / spec.file_name
                page.screenshot(path=str(target))
                written.append(target)
        finally:
            browser.close()
    return written


_GROUP_ASSETS = """
{ assetNodes { assetKey { path } groupName isPartitioned } }
"""
_JOBS = """
query($selector: RepositorySelector!) { repositoryOrError(repositorySelector: $selector) {
    __typename ... on Repository { jobs { name tags { key value } } } } }
"""


def group_asset_keys(server: DagsterWebserver, group: str, *, partitioned: bool = False) -> list[list[str]]:
    """The group's asset keys; without `partitioned`, only its unpartitioned assets (what one
    "Materialize" run can build: a partitioned asset needs a partition key or a backfill)."""
    nodes = server.graphql(_GROUP_ASSETS)["assetNodes"]
    return [
        node["assetKey"]["path"]
        for node in nodes
        if node["groupName"] == group and (partitioned or not node["isPartitioned"])
    ]


def dormant_jobs(server: DagsterWebserver, family: str = "development") -> dict[str, list[str]]:
    """Job names of the deployment location's dormant development tasks by kind (native, ordinary, pre_hook);
    with `family="synthetic"`, the executable synthetic-family tasks instead."""
    selector = {"repositoryLocationName": DEPLOYMENT_LOCATION, "repositoryName": "__repository__"}
    repository = server.graphql(_JOBS, {"selector": selector})["repositoryOrError"]
    kinds: dict[str, list[str]] = {}
    for job in repository.get("jobs", []):
        tags = {tag["key"]: tag["value"] for tag in job["tags"]}
        kind = tags.get("dpone/task_kind")
        if kind and tags.get("dpone/family", "development") == family:
            kinds.setdefault(kind, []).append(job["name"])
    return {kind: sorted(names) for kind, names in kinds.items()}


def project_pages(release_run_id: str, refused_run_id: str, refused_job: str) -> list[Page]:
    """The pages the README and docs/ui.md show."""
    return [
        Page("lineage.png", "/asset-groups", expand_groups=True, hide_asset_tree=True),
        Page("release_group.png", f"/locations/{RELEASE_LOCATION}/asset-groups/release"),
        Page("release_run.png", f"/runs/{release_run_id}"),
        Page("installed_release.png", "/assets/installed_release"),
        Page("dormant_jobs.png", f"/locations/{DEPLOYMENT_LOCATION}/jobs"),
        Page("dormant_task.png", f"/locations/{DEPLOYMENT_LOCATION}/jobs/{refused_job}"),
        Page("refused_task_run.png", f"/runs/{refused_run_id}"),
    ]


def prepare_project_state(server: DagsterWebserver) -> tuple[str, str, str]:
    """Materialize the dbt group and the release group, then launch one dormant task (refused).

    Returns the release run id, the refused run id and the refused job's name."""
    dbt_run = server.launch_assets(RELEASE_LOCATION, group_asset_keys(server, "synthetic_dbt"))
    if server.wait_for_run(dbt_run, timeout=900) != "SUCCESS":
        raise WebserverError("the synthetic dbt group did not materialize")
    release_run = server.launch_job(RELEASE_LOCATION, RELEASE_JOB)
    if server.wait_for_run(release_run, timeout=900) != "SUCCESS":
        raise WebserverError("the release job did not succeed")
    server.reload_location(DEPLOYMENT_LOCATION)
    refused_job = dormant_jobs(server)["pre_hook"][0]
    refused = server.launch_job(DEPLOYMENT_LOCATION, refused_job)
    server.wait_for_run(refused)
    return release_run, refused, refused_job


SCREENSHOT_FORK = "wm-fork-screens"
FORK_DEFERRED = ["main", "staging", "stg_orders"]
FORK_BUILT = ["main", "raw", "raw_payments"]


def fork_pages() -> list[Page]:
    """The fork deployment's pages docs/ui.md shows: badges in the graph, a deferred observation, the Runs list."""
    return [
        Page("fork_lineage.png", "/asset-groups", expand_groups=True, hide_asset_tree=True, wait_for="synthetic_dbt"),
        Page(
            "fork_deferred_observation.png",
            "/assets/" + "/".join(FORK_DEFERRED) + "?view=events",
            wait_for="deferred to",
        ),
        Page("fork_materialized.png", "/assets/" + "/".join(FORK_BUILT), wait_for="fork_materialized"),
        Page("fork_runs.png", "/runs", wait_for="dpone/workspace"),
    ]


def _dpone(*args: str, env: Mapping[str, str]) -> str:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("dpone")), *args],
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise WebserverError(f"dpone {' '.join(args)} failed: {done.stderr[-1000:]}")
    return done.stdout


def workspace_dagster_home(env: Mapping[str, str]) -> Path:
    """The Dagster home `dpone dev` prepares for the workspace `env` names (a fork's: its state recorded)."""
    return Path(json.loads(_dpone("dev", "--dry-run", "--json", env=env))["dagster_home"])


def capture_fork(env: Mapping[str, str], out_dir: Path) -> list[Path]:
    """After prod built the dbt models: a fork, its own webserver and home, one model built in it, its pages."""
    _dpone("fork", "create", SCREENSHOT_FORK, "--parent", "prod", env=env)
    fork_env = {**env, "DPONE_WORKSPACE": SCREENSHOT_FORK}
    home = workspace_dagster_home(fork_env)
    with running_webserver(
        session_workspace(home / "workspace.yaml"), dagster_home=home, env=fork_env, inherit_env=False
    ) as fork:
        if fork.wait_for_run(fork.launch_assets(RELEASE_LOCATION, [FORK_BUILT]), timeout=900) != "SUCCESS":
            raise WebserverError(f"{FORK_BUILT} did not materialize in the fork")
        return capture(fork.base_url, fork_pages(), out_dir)


CHECKS_FORK = "wm-fork-checks"
CHECKED = ["main", "marts", "customer_lifetime_value"]
CHECKED_UPSTREAM = ["main", "marts", "fct_orders"]
_LAUNCH_CHECKS_SELECTOR = ("fork_staleness", "diff_against_parent")


def fork_check_pages() -> list[Page]:
    """A fork table's checks: `fork_staleness` (WARN once the parent moved on) and `diff_against_parent`."""
    base = "/assets/" + "/".join(CHECKED) + "?view=checks"
    return [
        Page("fork_check_staleness.png", base + "&checkDetail=fork_staleness", wait_for="fork_staleness"),
        Page("fork_check_diff.png", base + "&checkDetail=diff_against_parent", wait_for="diff_id"),
    ]


def _materialize_in(env: Mapping[str, str], key: list[str], *, upstream: bool = False) -> None:
    """`dagster asset materialize` in the workspace `env` names, on its own Dagster home."""
    run_env = {**env, "DAGSTER_HOME": str(workspace_dagster_home(env))}
    select = ("*" if upstream else "") + "/".join(key)
    dagster = str(Path(sys.executable).with_name("dagster"))
    done = subprocess.run(
        [dagster, "asset", "materialize", "-m", "dpone_dagster.definitions", "--select", select],
        env=run_env,
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
    )
    if done.returncode != 0:
        raise WebserverError(f"materializing {select} failed: {done.stderr[-1500:]}")


def capture_fork_checks(env: Mapping[str, str], out_dir: Path) -> list[Path]:
    """The fork lifecycle's checks: prod builds the model's upstream, a pinned fork builds the model on its
    webserver, prod rebuilds an upstream the fork built from, the fork re-runs the model's two checks
    (the checks tab's "Execute"), then the check pages. Prod's builds run through the CLI (no prod webserver)."""
    _materialize_in(env, CHECKED, upstream=True)
    _dpone("fork", "create", CHECKS_FORK, "--parent", "prod", "--pin", env=env)
    fork_env = {**env, "DPONE_WORKSPACE": CHECKS_FORK}
    home = workspace_dagster_home(fork_env)
    with running_webserver(
        session_workspace(home / "workspace.yaml"), dagster_home=home, env=fork_env, inherit_env=False
    ) as fork:
        if fork.wait_for_run(fork.launch_assets(RELEASE_LOCATION, [CHECKED]), timeout=900) != "SUCCESS":
            raise WebserverError(f"{CHECKED} did not materialize in the fork")
        _materialize_in(env, CHECKED_UPSTREAM)  # the parent moves on
        params = {
            "selector": {
                "repositoryLocationName": RELEASE_LOCATION,
                "repositoryName": "__repository__",
                "jobName": "__ASSET_JOB",
                "assetSelection": [],
                "assetCheckSelection": [{"assetKey": {"path": CHECKED}, "name": n} for n in _LAUNCH_CHECKS_SELECTOR],
            },
            "runConfigData": {},
        }
        launched = fork.graphql(_LAUNCH_RUN, {"params": params})["launchRun"]
        if launched["__typename"] != "LaunchRunSuccess":
            raise WebserverError(f"launching the fork checks failed: {launched}")
        fork.wait_for_run(launched["run"]["runId"], timeout=900)
        return capture(fork.base_url, fork_check_pages(), out_dir)


def main() -> int:
    """`make screenshots`: a throwaway state, the real webserver, the project pages as PNGs.

    `python -m bench.screenshots --fork-checks` renders only the fork checks pages (a loaded machine)."""
    if "--fork-checks" in sys.argv[1:]:
        with tempfile.TemporaryDirectory(prefix="dpone-screenshots-") as scratch:
            env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_") and k != "DAGSTER_HOME"}
            env.update({"DPONE_PROJECT_ROOT": str(REPO_ROOT), "DPONE_STATE_DIR": str(Path(scratch) / "state")})
            written = capture_fork_checks(env, IMAGES_DIR)
        for path in written:
            print(f"wrote {path.relative_to(REPO_ROOT)} ({path.stat().st_size} bytes)")
        return 0
    with tempfile.TemporaryDirectory(prefix="dpone-screenshots-") as scratch:
        root = Path(scratch)
        env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_") and k != "DAGSTER_HOME"}
        env.update({"DPONE_PROJECT_ROOT": str(REPO_ROOT), "DPONE_STATE_DIR": str(root / "state")})
        home = workspace_dagster_home(env)
        workspace = session_workspace(home / "workspace.yaml")
        with running_webserver(workspace, dagster_home=home, env=env, inherit_env=False) as server:
            written = capture(server.base_url, project_pages(*prepare_project_state(server)), IMAGES_DIR)
        written += capture_fork(env, IMAGES_DIR)
        written += capture_fork_checks(env, IMAGES_DIR)
    for path in written:
        print(f"wrote {path.relative_to(REPO_ROOT)} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
