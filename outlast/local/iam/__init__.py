"""Local mode's IAM: each function's role from the template, enforced on every AWS call it makes."""
