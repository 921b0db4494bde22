"""Every check of `open_bundle` (bundle.py), each proven on the real release with one forged change.

A byte flip is caught by the first digest on the way; it proves nothing about the checks behind it.
So most cases here are *resealed* forgeries: the changed document gets its new digest, every
reference to it (constituent id, member paths, sidecars, integrity subject) is rewritten, and the
parent is a valid, canonical, self-consistent `dpone.release-set.v3` again. Only the one check the
case is named after stands between the forgery and acceptance; removing it turns the test red.

What a reader could get wrong: `open_bundle` without `expected_release_id` must still refuse all of
these. A forger who reseals also gets a new release identity, which nobody granted; the refusal
may not depend on the caller knowing the identity in advance.
"""

from __future__ import annotations

import pytest

from dpone_dagster.contracts.canonical import dumps, loads_canonical
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.release_documents import (
    ORDINARY_CONSTITUENT_KIND,
    SELECTION_KIND,
    DbtDevelopmentReleaseSet,
    DevelopmentReleaseSetV3,
    NativeConstituent,
    OrdinaryConstituent,
    SourceSidecar,
    integrity_subject_for,
)
from dpone_dagster.release.build.bundle import PARENT_PATH, deployment_projection, open_bundle
from dpone_dagster.release.errors import IntegrityError


def _hex(constituent_id: str) -> str:
    return constituent_id.removeprefix("sha256:")


def parent_of(members) -> dict:
    return loads_canonical(members[PARENT_PATH])


def reseal(members: dict[str, bytes], parent: dict, rename: dict[str, str] | None = None) -> dict[str, bytes]:
    """Rename constituent ids (members and references), recompute the integrity subject, rewrite the parent."""
    members = dict(members)
    for old, new in (rename or {}).items():
        for path in [p for p in members if _hex(old) in p]:
            members[path.replace(_hex(old), _hex(new))] = members.pop(path)
        for key in ("native_constituents", "ordinary_constituents", "source_sidecars"):
            for item in parent[key]:
                if item["constituent_id"] == old:
                    item["constituent_id"] = new
    native = sorted(
        (NativeConstituent(**item) for item in parent["native_constituents"]), key=lambda c: c.constituent_id
    )
    ordinary = sorted(
        (OrdinaryConstituent(**item) for item in parent["ordinary_constituents"]), key=lambda c: c.pack_id
    )
    sidecars = sorted((SourceSidecar(**item) for item in parent["source_sidecars"]), key=SourceSidecar.sort_key)
    parent = {
        **parent,
        "native_constituents": [c.model_dump(mode="json") for c in native],
        "ordinary_constituents": [c.model_dump(mode="json") for c in ordinary],
        "source_sidecars": [s.model_dump(mode="json") for s in sidecars],
        "integrity_subject": integrity_subject_for(native, ordinary, sidecars),
    }
    members[PARENT_PATH] = DevelopmentReleaseSetV3.model_validate(parent).canonical_bytes()
    return members


def replace_native(members: dict[str, bytes], document: dict) -> dict[str, bytes]:
    """Put a changed native document in, under its own new digest, and reseal."""
    parent = parent_of(members)
    [constituent] = parent["native_constituents"]
    data = dumps(document)
    new_id = digest(DbtDevelopmentReleaseSet.KIND, data)
    members = dict(members)
    members[f"native/{_hex(constituent['constituent_id'])}.json"] = data
    return reseal(members, parent, {constituent["constituent_id"]: new_id})


def native_document(members) -> tuple[str, dict]:
    [path] = [p for p in members if p.startswith("native/") and p.count("/") == 1]
    return path, loads_canonical(members[path])


def refused(members, code: str = "release.integrity_mismatch", **kwargs) -> IntegrityError:
    with pytest.raises(IntegrityError) as raised:
        open_bundle(members, **kwargs)
    assert raised.value.code == code
    return raised.value


@pytest.fixture
def members(real_release) -> dict[str, bytes]:
    return dict(real_release.bundle.members)


def test_the_resealing_helper_alone_changes_nothing(members):
    """A reseal with no change gives back the same bytes: every forgery below differs only by its change."""
    assert reseal(members, parent_of(members)) == members
    path, document = native_document(members)
    assert replace_native(members, document) == members


# -- the parent ------------------------------------------------------------------------------


def test_a_release_without_a_parent_is_refused(members):
    members.pop(PARENT_PATH)
    assert "no parent document" in refused(members).message


def test_a_parent_of_another_family_is_refused(members):
    from devtools.synthetic_documents import synthetic_documents

    members[PARENT_PATH] = synthetic_documents()["dpone.release-set.v2"].canonical_bytes()
    refused(members, "release.not_development_family")


def test_a_non_canonical_parent_is_refused(members):
    members[PARENT_PATH] = members[PARENT_PATH] + b" "
    assert "parent document is invalid" in refused(members).message


def test_a_development_document_that_is_not_a_parent_is_refused(members):
    members[PARENT_PATH] = members[native_document(members)[0]]
    assert "not a release parent" in refused(members, "release.not_development_family").message


def test_another_identity_than_expected_is_refused(members, real_release):
    refused(members, expected_release_id="sha256:" + "0" * 64)
    assert (
        open_bundle(members, expected_release_id=real_release.bundle.release_id).release_id
        == real_release.bundle.release_id
    )


# -- native constituent ------------------------------------------------------------------------


def test_a_native_constituent_naming_other_projects_than_its_document_is_refused(members):
    parent = parent_of(members)
    parent["native_constituents"][0]["project_names"] = ["another_project"]
    assert "names other projects" in refused(reseal(members, parent)).message


def test_a_missing_native_document_is_refused(members):
    members.pop(native_document(members)[0])
    assert "native constituent document is missing or altered" in refused(members).message


def test_an_altered_native_document_is_refused_by_its_digest(members):
    path, document = native_document(members)
    document["projects"][0]["nodes"][0]["checksum"]["checksum"] = "0" * 64
    members[path] = dumps(document)
    assert "native constituent document is missing or altered" in refused(members).message


def test_a_native_member_that_is_not_json_is_a_typed_refusal(members):
    members[native_document(members)[0]] = b"\xff not json"
    refused(members)


def test_a_native_document_that_is_not_a_dbt_release_set_is_refused_after_its_digest(members):
    parent = parent_of(members)
    [constituent] = parent["native_constituents"]
    data = dumps({"schema": "dpone.dbt-release-set.development.v1", "projects": []})
    members[f"native/{_hex(constituent['constituent_id'])}.json"] = data
    forged = reseal(members, parent, {constituent["constituent_id"]: digest(DbtDevelopmentReleaseSet.KIND, data)})
    assert "constituent document is invalid" in refused(forged).message


@pytest.mark.parametrize(
    "field", ["policy_digest", "grant_digest", "source_repository_digest", "source_snapshot_digest", "source_commit"]
)
def test_a_native_document_bound_to_other_authority_or_source_is_refused(members, field):
    _, document = native_document(members)
    document[field] = "f" * 40 if field == "source_commit" else "sha256:" + "f" * 64
    assert "built under other authority or source" in refused(replace_native(members, document)).message


# -- selections ----------------------------------------------------------------------------------


def selection_member(members) -> str:
    return next(p for p in members if p.endswith(".selection.json"))


def test_a_missing_selection_is_refused(members):
    members.pop(selection_member(members))
    assert "is missing or altered" in refused(members).message


def test_an_altered_selection_is_refused_by_its_fingerprint(members):
    path = selection_member(members)
    selection = loads_canonical(members[path])
    selection["nodes"][0]["compiled_sha256"] = "0" * 64
    members[path] = dumps(selection)
    assert "is missing or altered" in refused(members).message


def test_a_selection_naming_other_nodes_than_the_native_document_is_refused(members):
    """The selection is resealed under a new fingerprint; only the node comparison catches it."""
    path = selection_member(members)
    selection = loads_canonical(members[path])
    selection["nodes"] = selection["nodes"][1:]
    members[path] = dumps(selection)
    _, document = native_document(members)
    document["projects"][0]["selection_fingerprint"] = digest(SELECTION_KIND, members[path])
    assert "names other nodes" in refused(replace_native(members, document)).message


# -- ordinary constituents -----------------------------------------------------------------------


def ordinary_member(members, parent, index: int = 0) -> tuple[str, dict]:
    constituent = parent["ordinary_constituents"][index]
    return f"ordinary/{_hex(constituent['constituent_id'])}.json", constituent


def test_a_missing_ordinary_document_is_refused(members):
    path, constituent = ordinary_member(members, parent_of(members))
    members.pop(path)
    assert f"ordinary constituent {constituent['pack_id']!r} is missing or altered" in refused(members).message


def test_an_altered_ordinary_document_is_refused_by_its_digest(members):
    path, _ = ordinary_member(members, parent_of(members))
    workload = loads_canonical(members[path])
    workload["runtime_command"] = [*workload["runtime_command"], "--dry-run"]
    members[path] = dumps(workload)
    assert "is missing or altered" in refused(members).message


def test_an_ordinary_document_that_is_not_a_workload_is_refused_after_its_digest(members):
    parent = parent_of(members)
    path, constituent = ordinary_member(members, parent)
    data = dumps({"pack_id": constituent["pack_id"]})
    members[path] = data
    forged = reseal(members, parent, {constituent["constituent_id"]: digest(ORDINARY_CONSTITUENT_KIND, data)})
    assert "constituent document is invalid" in refused(forged).message


@pytest.mark.parametrize("field", ["pack_id", "selector", "dag_id", "fingerprint", "dag_content_sha256", "hook_ids"])
def test_a_parent_disagreeing_with_an_ordinary_document_is_refused(members, field):
    """The parent's constituent entry is changed in one field; the ordinary document is untouched."""
    parent = parent_of(members)
    index = next(i for i, c in enumerate(parent["ordinary_constituents"]) if c["hook_ids"])
    constituent = parent["ordinary_constituents"][index]
    constituent[field] = {
        "pack_id": constituent["pack_id"] + "_renamed",
        "selector": constituent["selector"] + "_renamed",
        "dag_id": constituent["dag_id"] + "_renamed",
        "fingerprint": "sha256:" + "e" * 64,
        "dag_content_sha256": "e" * 64,
        "hook_ids": list(reversed(constituent["hook_ids"])) if len(constituent["hook_ids"]) > 1 else [],
    }[field]
    assert "disagrees with the parent" in refused(reseal(members, parent)).message


# -- sources and membership --------------------------------------------------------------------


def source_member(members, name: str) -> str:
    return next(p for p in members if p.startswith("sources/") and p.endswith(name))


@pytest.mark.parametrize("name", ["models/marts/fct_orders.sql", "flows/orders_snapshot/pack.json"])
def test_a_missing_source_file_is_refused(members, name):
    members.pop(source_member(members, name))
    assert "is missing or altered" in refused(members).message


@pytest.mark.parametrize("name", ["models/marts/fct_orders.sql", "flows/orders_snapshot/pack.json"])
def test_a_changed_source_file_is_refused(members, name):
    path = source_member(members, name)
    members[path] = (
        members[path].replace(b"select", b"SELECT", 1) if b"select" in members[path] else members[path][:-1] + b"}"
    )
    assert "is missing or altered" in refused(members).message


def test_a_member_the_parent_does_not_bind_is_refused(members):
    members["sources/extra/models/unbound.sql"] = b"select 1"
    assert "does not bind" in refused(members).message


def test_the_deployment_projection_refuses_authority_of_another_grant(real_release, target):
    from tests.release.fabricated import synthetic_release

    other = synthetic_release(target).authority
    with pytest.raises(IntegrityError) as raised:
        deployment_projection(real_release.bundle, other)
    assert raised.value.code == "release.integrity_mismatch"
    projection = deployment_projection(real_release.bundle, real_release.authority)
    assert (
        projection.release_id == real_release.bundle.release_id
        and projection.environment == real_release.authority.environment
    )
