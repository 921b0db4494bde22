"""Delivery of a composed release: the immutable registry, install, leases, deployments, operator operations."""
