"""Local mode: the whole system on one machine, built from the synthesized CDK template."""
