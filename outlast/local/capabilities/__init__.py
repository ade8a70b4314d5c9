"""One starter per capability of the local stack, each named after the construct it emulates.

outlast.local.stack composes them; each module's docstring names the infra/constructs/*.py it
emulates, and docs/architecture.md ("Local mode: one starter per capability") has the map.
"""
