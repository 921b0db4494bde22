"""Resolution: (workspace, lake) -> the ATTACH statements and defer views a job runs.

`seam.py` is the one entry (`resolve`), `plan.py` the plan data (table names, defer views), `fork.py` the
builder for an isolated fork (`ancestors.py`: its ancestor attaches alone), `apply.py` the resolved lake and
what executes it, `views.py` the one view shape.
"""
