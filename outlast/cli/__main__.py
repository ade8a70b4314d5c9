"""`python -m outlast.cli ...`: the command line, as the `outlast` script runs it."""

from outlast.cli.app import main

main()
