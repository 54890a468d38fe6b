"""The emulate, verify and kernel-check steps, written once. They run in this process (executors.InProcess,
TILEFARM_SANDBOX=0) or in the sandbox's child (sandbox/ops.py), which sends what they return back as its answer; the
trusted side rebuilds the same objects from it once answers.py has held it to its schema (sandbox/client.py). The
verdicts (a device run's comparison, a kernel's refusal) are made on the trusted side, by the same functions.

A program that misbehaves on the emulator is a CompileError(stage="emulate") whichever way it runs: the emulator's
EmulationError is turned into one in one place, compiler/toolchain/verification.py.
"""
from __future__ import annotations

import io
from dataclasses import dataclass


@dataclass
class Emulated:
    """An emulated run, as a stage keeps it: outputs as .npy bytes (float32), the emulator's report and log, the
    comparison with the reference (rendered), whether it matched and, if not, where first."""
    passed: bool
    outputs: dict[str, bytes]
    report: dict
    log: str
    verification: str                 # "" without a reference to compare with
    first_mismatch: str | None
    checks: list[dict]                # per output: compiler.verify.OutputCheck.verdict() (schemas.jobs.Verdict.of)


@dataclass
class Checked:
    """Outputs of a device run compared with the reference of the user's kernel."""
    passed: bool
    log: str
    first_mismatch: str | None
    report: dict                      # VerificationReport.to_dict()


def npy(array) -> bytes:
    """An output as a stage stores it: .npy of float32."""
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array, dtype=np.float32), allow_pickle=False)
    return buffer.getvalue()


def _first_mismatch(verification) -> str | None:
    first = next((c for c in verification.outputs if not c.ok), None) if verification is not None else None
    return first.first_mismatch_text() if first is not None else None


def emulate(artifacts: dict[str, bytes], inputs: dict, *, target, source: str | None, filename: str,
            entry: str | None, params: dict | None, workdir=None, program=None) -> Emulated:
    """compiler.api.emulate: build (`program`: built already) and run the program on the emulated device, then
    compare its outputs with the NumPy reference of `source`."""
    from compiler import api

    result = api.emulate(artifacts, inputs=inputs or None, target=target, source=source, filename=filename,
                         entry=entry, params=params or None, workdir=workdir, program=program)
    verification = result.verification
    return Emulated(bool(result.passed), {name: npy(array) for name, array in result.outputs.items()}, result.report,
                    result.log, verification.render() if verification is not None else "",
                    None if result.passed else _first_mismatch(verification),
                    [c.verdict() for c in verification.outputs] if verification is not None else [])


def checked(report) -> Checked:
    """A device run's comparison with the reference (compiler.verify.VerificationReport), as the stage keeps it."""
    return Checked(bool(report.ok), report.render(), _first_mismatch(report), report.to_dict())


def verify(plan: dict, inputs: dict, outputs: dict, *, source: str, filename: str, entry: str | None,
           params: dict | None) -> Checked:
    """A device run's outputs against the reference, in this process (building it evaluates the user's source; the
    sandbox builds only the reference and the worker compares: sandbox/client.py verify)."""
    from compiler.toolchain.verification import verify_outputs

    return checked(verify_outputs(plan, inputs, outputs, source, filename=filename, entry=entry, params=params or None))


def kernel_findings(artifacts: dict[str, bytes]) -> dict[str, list[str]]:
    """Each kernel through the real preprocessor, against the emulator's API headers as the JIT compiles it
    (compiler/toolchain/kernel_check.py): what it was refused for, by kernel (nothing: taken). Every kernel of
    KERNEL_FILES given (a sandboxed check is sent those whose verdict is not kept: client.check_kernels), and the plan."""
    import json

    from compiler.toolchain.emulate import CXX, INCLUDE_DIR
    from compiler.toolchain.kernel_check import KERNEL_FILES, check_kernels, jit_defines

    plan = json.loads(artifacts["tt.plan.json"])
    roles = {kernel["file"]: kernel for kernel in plan["kernels"]}
    kernels = {name: (artifacts[name], jit_defines(roles.get(name, {"role": name.removesuffix(".cpp")}),
                                                   plan["target"]["arch"])) for name in KERNEL_FILES if name in artifacts}
    found = check_kernels(kernels, cxx=CXX, include_dirs=[str(INCLUDE_DIR)])
    return {name: [f.render()[:4000] for f in findings] for name, findings in found.items()}


def refuse_kernels(findings: dict[str, list[str]]) -> None:
    """ForgedAnswer naming each kernel refused and why: the compiler never writes such a kernel."""
    from schemas.values import printable
    from workers.sandbox.answers import ForgedAnswer

    refused = {name: found for name, found in findings.items() if found}
    if refused:
        raise ForgedAnswer("compile", "; ".join(f"{name}: {'; '.join(printable(f) for f in found[:3])}"
                                                for name, found in refused.items()))
