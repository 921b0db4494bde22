"""A fork's life after creation: cleanup, maintenance, roles, diff and promotion."""
