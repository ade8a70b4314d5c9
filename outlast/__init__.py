"""The outlast command line and local mode (not deployed: nothing here ships to Lambda)."""
