"""The Lambda functions: one package each, every one a thin handler over a use case."""
