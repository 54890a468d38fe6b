"""Where a stage's work runs: in a sandboxed child (the default: parsing runs the user's Python, the emulator
builds and runs native code derived from it) or in this process (TILEFARM_SANDBOX=0, for development). Both give
the stage the same answers, so each stage is written once (workers/runner.py) and the sandbox is only an executor.
"""
from __future__ import annotations

from typing import Protocol

from schemas.jobs import JobRecord
from workers import steps
from workers.steps import Checked, Emulated


class Executor(Protocol):
    """Each call takes the stage's `stop` (workers.stopping.Stop): the sandbox kills the job's child as soon as it is
    set; work in this process (TILEFARM_SANDBOX=0, trusted development only) runs to its end, and the stage then ends
    as the stop says."""

    def compile(self, job: JobRecord, stop=None):
        """compiler.api.CompileResult of the job's source."""

    def emulate(self, job: JobRecord, artifacts: dict[str, bytes], inputs: dict, stop=None) -> Emulated: ...

    def header_check(self, job: JobRecord, artifacts: dict[str, bytes], stop=None):
        """compiler.toolchain.header_check.HeaderCheckReport of the generated kernels."""

    def verify(self, job: JobRecord, artifacts: dict[str, bytes], inputs: dict, outputs: dict, stop=None) -> Checked:
        """A device run's outputs against the reference (building it evaluates the user's source)."""

    def check_kernels(self, job: JobRecord, artifacts: dict[str, bytes], stop=None) -> None:
        """The kernels through the real preprocessor (what they include, no assembler); ForgedAnswer if refused."""

    def build_program(self, job: JobRecord, artifacts: dict[str, bytes], device, stop=None) -> tuple[float, bool] | None:
        """main.cpp built for devices like `device` ahead of their lease (cached), so that a device's time is its
        runs', not its builds': (seconds, from the cache), or None when the run builds it itself."""

    def run_on_device(self, job: JobRecord, artifacts: dict[str, bytes], inputs: dict, device, timeout_s: float,
                      stop=None):
        """compiler.toolchain.device.DeviceRun of the program on `device` (its kernels are the job's C++)."""


class InProcess:
    def compile(self, job: JobRecord, stop=None):
        from compiler import api

        return api.compile_source(job.source, filename=job.filename, entry=job.entry, target=job.target,
                                  dump_ir=job.dump_ir, params=job.params)

    def emulate(self, job: JobRecord, artifacts: dict[str, bytes], inputs: dict, stop=None) -> Emulated:
        return steps.emulate(artifacts, inputs, target=job.target, source=job.source, filename=job.filename,
                             entry=job.entry, params=job.params)

    def header_check(self, job: JobRecord, artifacts: dict[str, bytes], stop=None):
        from compiler import api

        return api.header_check(artifacts, target=job.target)

    def verify(self, job: JobRecord, artifacts: dict[str, bytes], inputs: dict, outputs: dict, stop=None) -> Checked:
        import json

        return steps.verify(json.loads(artifacts["tt.plan.json"]), inputs, outputs, source=job.source,
                            filename=job.filename, entry=job.entry, params=job.params)

    def check_kernels(self, job: JobRecord, artifacts: dict[str, bytes], stop=None) -> None:
        steps.refuse_kernels(steps.kernel_findings(artifacts))

    def build_program(self, job: JobRecord, artifacts: dict[str, bytes], device, stop=None) -> None:
        return None  # run_bundle builds it, cached (trusted development only)

    def run_on_device(self, job: JobRecord, artifacts: dict[str, bytes], inputs: dict, device, timeout_s: float,
                      stop=None):
        from compiler.toolchain.device import run_bundle

        return run_bundle(artifacts, inputs, device, timeout_s=timeout_s)


class Sandboxed:
    def __init__(self, settings):
        self.settings = settings

    def compile(self, job: JobRecord, stop=None):
        from workers import sandbox

        return sandbox.compile_source(self.settings, source=job.source, filename=job.filename, entry=job.entry,
                                      target=job.target, dump_ir=job.dump_ir, params=job.params, stop=stop)

    def emulate(self, job: JobRecord, artifacts: dict[str, bytes], inputs: dict, stop=None) -> Emulated:
        from compiler import api
        from workers import sandbox

        return sandbox.emulate(self.settings, artifacts={n: artifacts[n] for n in api.ARTIFACTS if n in artifacts},
                               inputs=inputs, target=job.target, source=job.source, filename=job.filename,
                               entry=job.entry, params=job.params, stop=stop)

    def header_check(self, job: JobRecord, artifacts: dict[str, bytes], stop=None):
        from compiler import api
        from compiler.toolchain.header_check import HeaderCheckReport, HeaderCheckUnavailable, host_compiler_problem
        from compiler.toolchain.sdk_headers import ensure_headers
        from workers import sandbox

        problem = host_compiler_problem()
        if problem:
            raise HeaderCheckUnavailable(problem)
        ensure_headers()  # fetched (once) on the trusted side; the job sees them read-only
        return HeaderCheckReport.from_dict(sandbox.header_check(
            self.settings, artifacts={n: artifacts[n] for n in api.ARTIFACTS if n in artifacts}, target=job.target,
            stop=stop))

    def verify(self, job: JobRecord, artifacts: dict[str, bytes], inputs: dict, outputs: dict, stop=None) -> Checked:
        from workers import sandbox

        report = sandbox.verify(self.settings, plan=artifacts["tt.plan.json"], inputs=inputs, outputs=outputs,
                                source=job.source, filename=job.filename, entry=job.entry, params=job.params,
                                stop=stop)  # the verdict is made here, from the sandbox's validated reference
        return steps.checked(report)

    def check_kernels(self, job: JobRecord, artifacts: dict[str, bytes], stop=None) -> None:
        from workers import sandbox

        sandbox.check_kernels(self.settings, artifacts)

    def build_program(self, job: JobRecord, artifacts: dict[str, bytes], device, stop=None) -> tuple[float, bool]:
        import json

        from workers import sandbox

        _, seconds, cached = sandbox.device_program(self.settings, artifacts, json.loads(artifacts["tt.plan.json"]),
                                                    device, stop)
        return seconds, cached

    def run_on_device(self, job: JobRecord, artifacts: dict[str, bytes], inputs: dict, device, timeout_s: float,
                      stop=None):
        from workers import sandbox

        return sandbox.run_on_device(self.settings, artifacts=artifacts, inputs=inputs, device=device,
                                     timeout_s=timeout_s, stop=stop)


def executor_for(settings) -> Executor:
    return Sandboxed(settings) if settings.sandbox else InProcess()
