"""A function process's entry point in local mode: its role's guard first, then awslambdaric.

`python -m outlast.local.iam.bootstrap HANDLER` (what local mode starts instead of
`python -m awslambdaric HANDLER`) installs the IAM guard in every botocore session the process
will create, then runs the Lambda runtime interface client as usual. The handler and shared/
know nothing of it: every boto3 client they make, however they make it, is checked against the
role file named by OUTLAST_IAM_ROLE_FILE. The fault hook (outlast.local.fault_hook), when set,
is only the handler string: it composes with this without either knowing of the other.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from outlast.local.iam.guard import Guard, announce_to_stderr
from outlast.local.iam.roles import ENV_ROLE_FILE


def main(argv: list[str]) -> None:
    """Install the guard, then hand over to awslambdaric (argv[1] is the handler string)."""
    Guard.of_file(Path(os.environ[ENV_ROLE_FILE]), announce_to_stderr()).install_in_every_session()
    from awslambdaric.__main__ import main as run_runtime  # noqa: PLC0415 - after the guard is in

    run_runtime(argv)


if __name__ == "__main__":
    main(sys.argv)
