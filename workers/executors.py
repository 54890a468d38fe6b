"""Where a stage's work runs: in a sandboxed child (the default: parsing runs the user's Python, the emulator
builds and runs native code derived from it) or in this process (TILEFARM_SANDBOX=0, for development). Both give
the stage the same answers, so each stage is written once (workers/runner.py) and the sandbox is only an executor.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Protocol

from schemas.jobs import JobRecord


@dataclass
class Emulated:
    """An emulated run, as a stage keeps it: outputs as .npy bytes (float32), the emulator's report, the log (with
    the verification), whether it matched the reference and, if not, where first."""
    passed: bool
    outputs: dict[str, bytes]
    report: dict
    log: str
    first_mismatch: str | None
    checks: list[dict]                # per output: compiler.verify.OutputCheck.verdict() (schemas.jobs.Verdict.of)


@dataclass
class Checked:
    """Outputs of a device run compared with the reference of the user's kernel."""
    passed: bool
    log: str
    first_mismatch: str | None
    report: dict                      # VerificationReport.to_dict()


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

    def run_on_device(self, job: JobRecord, artifacts: dict[str, bytes], inputs: dict, device, timeout_s: float,
                      stop=None):
        """compiler.toolchain.device.DeviceRun of the program on `device` (its kernels are the job's C++)."""


class InProcess:
    def compile(self, job: JobRecord, stop=None):
        from compiler import api

        return api.compile_source(job.source, filename=job.filename, entry=job.entry, target=job.target,
                                  dump_ir=job.dump_ir, params=job.params)

    def emulate(self, job: JobRecord, artifacts: dict[str, bytes], inputs: dict, stop=None) -> Emulated:
        import numpy as np

        from compiler import api

        result = api.emulate(artifacts, inputs=inputs or None, target=job.target, source=job.source,
                             filename=job.filename, entry=job.entry, params=job.params)
        outputs = {}
        for name, array in result.outputs.items():
            buffer = io.BytesIO()
            np.save(buffer, np.asarray(array, dtype=np.float32))
            outputs[name] = buffer.getvalue()
        first = next((c for c in result.verification.outputs if not c.ok), None) if not result.passed else None
        return Emulated(result.passed, outputs, result.report,
                        result.log + (result.verification.render() if result.verification is not None else ""),
                        first.first_mismatch_text() if first is not None else None,
                        [c.verdict() for c in result.verification.outputs] if result.verification is not None else [])

    def header_check(self, job: JobRecord, artifacts: dict[str, bytes], stop=None):
        from compiler import api

        return api.header_check(artifacts, target=job.target)

    def verify(self, job: JobRecord, artifacts: dict[str, bytes], inputs: dict, outputs: dict, stop=None) -> Checked:
        import json

        from compiler.toolchain.verification import verify_outputs

        report = verify_outputs(json.loads(artifacts["tt.plan.json"]), inputs, outputs, job.source,
                                filename=job.filename, entry=job.entry, params=job.params)
        first = next((c for c in report.outputs if not c.ok), None)
        return Checked(report.ok, report.render(), first.first_mismatch_text() if first is not None else None,
                       report.to_dict())


    def check_kernels(self, job: JobRecord, artifacts: dict[str, bytes], stop=None) -> None:
        import json

        from compiler.toolchain.emulate import CXX, INCLUDE_DIR
        from compiler.toolchain.kernel_check import KERNEL_FILES, check_kernels, jit_defines
        from workers.sandbox.answers import ForgedAnswer

        plan = json.loads(artifacts["tt.plan.json"])
        roles = {kernel["file"]: kernel for kernel in plan["kernels"]}
        found = check_kernels({name: (artifacts[name], jit_defines(roles.get(name, {"role": name.removesuffix(".cpp")}),
                                                                   plan["target"]["arch"])) for name in KERNEL_FILES},
                              cxx=CXX, include_dirs=[str(INCLUDE_DIR)])
        refused = {name: findings for name, findings in found.items() if findings}
        if refused:
            raise ForgedAnswer("compile", "; ".join(f"{name}: {findings[0].render()[:300]}"
                                                    for name, findings in refused.items()))

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

        answer = sandbox.emulate(self.settings, artifacts={n: artifacts[n] for n in api.ARTIFACTS if n in artifacts},
                                 inputs=inputs, target=job.target, source=job.source, filename=job.filename,
                                 entry=job.entry, params=job.params, stop=stop)
        return Emulated(answer.passed, answer.outputs, answer.report, answer.log, answer.first_mismatch, answer.checks)

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
        first = next((c for c in report.outputs if not c.ok), None)
        return Checked(report.ok, report.render(), first.first_mismatch_text() if first is not None else None,
                       report.to_dict())

    def check_kernels(self, job: JobRecord, artifacts: dict[str, bytes], stop=None) -> None:
        from workers import sandbox

        sandbox.check_kernels(self.settings, artifacts)

    def run_on_device(self, job: JobRecord, artifacts: dict[str, bytes], inputs: dict, device, timeout_s: float,
                      stop=None):
        from workers import sandbox

        return sandbox.run_on_device(self.settings, artifacts=artifacts, inputs=inputs, device=device,
                                     timeout_s=timeout_s, stop=stop)


def executor_for(settings) -> Executor:
    return Sandboxed(settings) if settings.sandbox else InProcess()
