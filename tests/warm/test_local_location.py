"""Which code locations the warm launcher starts workers for: the ones its own process tree serves.

`dagster-webserver -w` serves a managed location; `dagster dev` (what `dpone dev` runs) hands its
webserver `grpc_server` entries on a local socket that carry the managed server's load target. A
`grpc_server` entry without it (a code server started elsewhere) or on another host is not warmed.
"""

from __future__ import annotations

import sys

from dagster._core.remote_origin import GrpcServerCodeLocationOrigin, ManagedGrpcPythonEnvCodeLocationOrigin
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from dpone_dagster.integration.warm.launcher import started_here

TARGET = LoadableTargetOrigin(executable_path=sys.executable, module_name="warm_location", attribute="defs")


def test_a_managed_location_and_dagster_devs_local_servers_are_warmed():
    assert started_here(ManagedGrpcPythonEnvCodeLocationOrigin(TARGET, location_name="a"), sys.executable)
    dev = GrpcServerCodeLocationOrigin(
        host="localhost", socket="/tmp/x.sock", location_name="a", additional_metadata=TARGET.as_dict
    )
    assert started_here(dev, sys.executable)


def test_a_code_server_started_elsewhere_or_on_another_host_is_not():
    bare = GrpcServerCodeLocationOrigin(host="localhost", port=4000, location_name="a")
    assert not started_here(bare, sys.executable)
    remote = GrpcServerCodeLocationOrigin(
        host="code.internal", port=4000, location_name="a", additional_metadata=TARGET.as_dict
    )
    assert not started_here(remote, sys.executable)
    assert not started_here(ManagedGrpcPythonEnvCodeLocationOrigin(TARGET, location_name="a"), "/no/such/python")
