"""The asset graph as the webserver serves it: stage assets, their edges, and the dbt assets."""

from __future__ import annotations

from bench.screenshots import DEPLOYMENT_LOCATION, RELEASE_LOCATION

ASSET_NODES = """
{ assetNodes { assetKey { path } groupName dependencyKeys { path }
    repository { location { name } } } }
"""


def _graph(webserver) -> dict[str, dict]:
    nodes = webserver.graphql(ASSET_NODES)["assetNodes"]
    return {"/".join(node["assetKey"]["path"]): node for node in nodes}


def test_every_location_loads(webserver):
    statuses = webserver.location_statuses()
    assert set(statuses) >= {RELEASE_LOCATION, DEPLOYMENT_LOCATION}
    for name, status in statuses.items():
        assert status["locationOrLoadError"]["__typename"] == "RepositoryLocation", (name, status)


def test_dbt_assets_are_in_the_synthetic_dbt_group(webserver):
    graph = _graph(webserver)
    dbt = {key: node for key, node in graph.items() if node["groupName"] == "synthetic_dbt"}
    assert "main/marts/fct_orders" in dbt
    assert {"main/staging/stg_orders"} <= {"/".join(d["path"]) for d in dbt["main/marts/fct_orders"]["dependencyKeys"]}
