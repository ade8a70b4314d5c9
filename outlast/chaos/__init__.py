"""Fault injection ("chaos") for the local stack: the spec the shim obeys, the driver, the report.

`make chaos` (`python -m outlast.chaos`) drives jobs through a local stack started with
`outlast local up --chaos`; docs/chaos.md says what each fault proves. Nothing here ships to
Lambda, and the package root stays import-light: function processes import `outlast.chaos.spec`.
"""
