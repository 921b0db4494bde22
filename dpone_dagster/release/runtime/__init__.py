"""The standard runtime's services: task catalogue, ports, the synthetic-family release and the rollout gate.

What a reader could get wrong: this is a service layer. It imports contracts, release services and
configuration helpers only; the Dagster entry points (`defs/`, `deployment/`) call it, never the
other way round.
"""
