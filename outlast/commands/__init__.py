"""The `outlast` subcommands, one module per group; each registers itself on the parser."""
