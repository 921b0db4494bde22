"""Pure, closed, frozen document contracts and canonical JSON.

Nothing in this package performs I/O, reads the environment or looks at a clock: callers pass
bytes in and `now` in. Identities are domain-separated digests over RFC 8785 bytes (`identity`).
"""
