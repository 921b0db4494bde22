"""The deployment code location's entry point (`dpone_deployment`): `defs`, for workspace.yaml.

What a reader could get wrong: importing this module reads the installed releases (and fails to load
when one fails integrity verification); everything else imports
`dpone_dagster.deployment.location` instead, which builds nothing on import.
"""

from dpone_dagster.deployment.location import location_definitions

defs = location_definitions()
