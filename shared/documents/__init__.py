"""Documents (DESIGN.md, "Documents: upload once, run jobs on them"): the record, its keys and
transitions, the extraction port and the limits. No boto3, and no parser: the format modules
live with the ingest function, whose layer alone carries pypdf and defusedxml."""
