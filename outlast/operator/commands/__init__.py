"""The operator commands' bodies (`outlast ops ...`): each takes the parsed options and the console
and returns an exit code. They import the functions' adapters, so they run from a checkout; the
command line (outlast.cli.ops) loads them only when one runs."""
