"""The `outlast` command line (click): the root is outlast.cli.app, one module per group of verbs,
and the support every command shares (console, errors, session, framework) in its own modules."""
