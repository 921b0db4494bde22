"""Kernel confinement of every process that acts for a fork on the embedded default (issue 19).

`landlock.py` (the ctypes binding) and `status.py` (is this process confined? marker + kernel probe)
sit low, so the lake's resolution can ask; `policy.py` (which trees a fork may write) and
`launcher.py` (confine, then exec) sit above the lake and the workspaces. What a reader could get
wrong: confinement is a property of a process tree, decided at its root; nothing here can lift it.
"""
