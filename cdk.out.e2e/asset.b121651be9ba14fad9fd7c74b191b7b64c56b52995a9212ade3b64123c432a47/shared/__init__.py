"""Code common to every outlast function: the domain, its ports and the AWS adapters."""
