"""Typed refusals of the release pipeline (compile, compose, publish, install, admit).

Every class declares its closed set of stable codes with the sentence an operator reads
(`CodedError`); operators and tests key on the code, so codes are never renamed once released.
What a reader could get wrong: `DurabilityUncertainError` is not a refusal but an honest "we do not
know": some bytes may have reached storage. It lists what is known (`written`, `pending`) and is
never reported as success; the remedy is an identical retry, which converges on the same identity.
"""

from __future__ import annotations

from collections.abc import Sequence

from dpone_dagster.contracts.coded import CodedError


class NativeCompileError(CodedError):
    codes = {
        "release.native_no_project": (
            "The source snapshot holds no publishing dbt project; there is nothing native to deliver."
        ),
        "release.native_compile_failed": (
            "dbt could not parse or compile a publishing project from the exact "
            "snapshot inputs; fix the project and rebuild."
        ),
        "release.native_unsupported_project": (
            "A dbt project needs something a sealed offline compile cannot provide "
            "(package downloads, a nested project path)."
        ),
    }


class AuthorityMissingError(CodedError):
    codes = {
        "release.authority_missing": (
            "No verified development authority receipt was supplied; nothing is composed, "
            "published or installed without one."
        ),
    }


class MembershipError(CodedError):
    codes = {
        "release.membership_empty": (
            "A project, selector or the release as a whole has no members; empty membership is refused."
        ),
        "release.membership_mismatch": (
            "The compiled or captured membership differs from the membership the grant names."
        ),
        "release.membership_duplicate": "Two constituents claim the same workload id, selector, pack id or hook id.",
    }


class SourceClosureError(CodedError):
    codes = {
        "release.source_closure_mismatch": (
            "A compiled node or constituent refers to bytes that are missing from, or "
            "differ from, the verified source snapshot."
        ),
    }


class LogicalWriteCollisionError(CodedError):
    codes = {
        "release.logical_write_collision": (
            "Two constituents (native or ordinary) write the same logical relation; rename one."
        ),
    }


class IntegrityError(CodedError):
    codes = {
        "release.integrity_mismatch": (
            "Release bytes disagree with the integrity subject, the parent or the release "
            "identity; the copy is corrupt or was altered."
        ),
        "release.not_development_family": (
            "The document is not a development-family release parent; this pipeline only delivers development releases."
        ),
    }


class BudgetExceededError(CodedError):
    codes = {
        "release.budget_exceeded": (
            "The release exceeds the combined workload or byte budget (the minimum of policy, "
            "grant and workload limits)."
        ),
    }


class RegistryError(CodedError):
    codes = {
        "release.registry_conflict": (
            "The registry already holds different bytes under this release's content address; it was tampered with."
        ),
        "release.registry_unavailable": "The release registry could not be read; nothing was changed.",
        "release.invalid_key": "An object key is not a safe relative key.",
        "release.not_found": "No committed release with that identity exists in the registry or cache.",
    }


class DurabilityUncertainError(CodedError):
    codes = {
        "release.durability_uncertain": (
            "A write failed part way; some bytes may be stored but the release is not "
            "committed. Retry the identical operation: it converges on the same identity."
        ),
    }

    def __init__(
        self,
        message: str,
        *,
        release_id: str,
        stage: str,
        written: Sequence[str] = (),
        pending: Sequence[str] = (),
    ) -> None:
        super().__init__("release.durability_uncertain", message)
        self.release_id = release_id
        self.stage = stage
        self.written = tuple(written)
        self.pending = tuple(pending)


class ActivationError(CodedError):
    codes = {
        "release.activation_recovery_required": (
            "An activation stopped after preparation; run activation recovery before any other activation."
        ),
        "release.not_installed": "The release is not in the local cache; install it before activating.",
        "release.no_previous_deployment": "There is no earlier immutable deployment to roll back to.",
        "release.audit_log_corrupt": (
            "The activation audit log's hash chain is broken; stop and investigate before activating."
        ),
    }


class StateTransitionError(CodedError):
    codes = {
        "release.state_transition_invalid": "The release state machine does not allow this transition.",
    }
