"""Adapters: the ports of shared.ports implemented on AWS services through injected boto3 clients."""
