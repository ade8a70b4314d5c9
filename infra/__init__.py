"""The CDK app that deploys outlast: one stack composed of one construct per capability."""
