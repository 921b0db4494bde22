"""Platform settings and adapters shared by every entry point (the release group, the deployment
location and the CLI): where the release surface's inputs and outputs live (`settings`), and the
protected target, authority documents and object stores (`target`).

What a reader could get wrong: this package sits below `defs/` and `deployment/`, never above
them; it imports services and adapters only, so either entry point can use it without loading
the other.
"""
