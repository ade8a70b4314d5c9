"""One chaos run end to end: the stack (started or attached), the plan, the drive, the checks."""

from __future__ import annotations

from outlast.chaos.driver import DriverOptions, drive_plan, new_run_id
from outlast.chaos.plan import make_plan
from outlast.chaos.report import ChaosReport
from outlast.chaos.spec import ChaosSpec
from outlast.chaos.target import StackProcess, Target, attach
from outlast.chaos.verify import Verifier
from outlast.local.stack import STATE_DIR


def _drive_and_verify(target: Target, options: DriverOptions, run_id: str) -> ChaosReport:
    plan = make_plan(options.jobs, options.seed, run_id)
    driver = drive_plan(target, plan, options)
    options.log("verifying...")
    return Verifier(driver).verify()


def run_chaos(options: DriverOptions) -> ChaosReport:
    """Drive `options.jobs` jobs through a chaos stack and report; the stack it started is stopped."""
    run_id = options.run_id or new_run_id()
    if options.port is not None:
        return _drive_and_verify(attach(options.port), options, run_id)
    spec = ChaosSpec(state_dir=STATE_DIR / "chaos" / run_id, seed=options.seed).prepare()
    stack = StackProcess(spec, options.cdk_out)
    options.log(f"starting the local stack with chaos on (its log: {stack.log_path})...")
    try:
        target = stack.start()
        return _drive_and_verify(target, options, run_id)
    finally:
        options.log("stopping the local stack...")
        stack.stop()
