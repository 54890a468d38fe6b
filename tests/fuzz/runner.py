"""Compile and run one generated kernel; classify what happened.

    verified    the emulator's outputs match the generator's own NumPy evaluation (and tilefarm's verify agrees)
    refused     a located CompileError at the user's line (the subset tilefarm does not accept, said clearly)
    unlocated   a refusal without a source location (a diagnostic bug)
    crash       an internal compiler error, or a program that misbehaved on the emulator (deadlock, CB misuse,
                a page written where compute did not mean it)
    wrong       outputs that differ from the NumPy evaluation: silently wrong code
    disagree    outputs right, but tilefarm's own verification failed them (a tolerance that cries wolf)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.api import compile_source, emulate
from compiler.errors import CompileError
from schemas.target import TargetConfig

from .kernelgen import Kernel, tolerance

BAD = ("unlocated", "crash", "wrong", "disagree")


@dataclass
class Result:
    seed: int
    family: str
    arch: str
    status: str
    detail: str = ""


def _refusal(kernel: Kernel, arch: str, error: CompileError) -> Result:
    text = error.render()
    if "internal compiler error" in error.message or error.message.startswith("emulation failed"):
        return Result(kernel.seed, kernel.family, arch, "crash", text)
    if error.location is None or not error.location.line:
        return Result(kernel.seed, kernel.family, arch, "unlocated", text)
    return Result(kernel.seed, kernel.family, arch, "refused", error.message.split("\n")[0])


def compile_case(kernel: Kernel, arch: str):
    """(artifacts, None) or (None, Result) for a refusal or crash."""
    target = TargetConfig(arch=arch)
    try:
        return compile_source(kernel.source, filename=f"gen{kernel.seed}.py", entry=kernel.entry,
                              params=kernel.params, target=target).artifacts, None
    except CompileError as error:
        return None, _refusal(kernel, arch, error)


def run_case(kernel: Kernel, arch: str) -> Result:
    artifacts, refused = compile_case(kernel, arch)
    if refused is not None:
        return refused
    inputs = kernel.inputs(np.random.default_rng(kernel.seed)) if kernel.inputs is not None else None
    try:
        outcome = emulate(artifacts, target=TargetConfig(arch=arch), source=kernel.source, inputs=inputs,
                          filename=f"gen{kernel.seed}.py", entry=kernel.entry, params=kernel.params)
    except CompileError as error:
        return _refusal(kernel, arch, error)
    expected = kernel.expected(outcome.inputs)
    for name in kernel.outputs:
        got = np.asarray(outcome.outputs[name], np.float64).reshape(expected[name].shape)
        rtol, atol = tolerance(kernel, name, expected[name], outcome.inputs)
        bad = ~np.isclose(got, expected[name], rtol=rtol, atol=atol)
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            return Result(kernel.seed, kernel.family, arch, "wrong",
                          f"{name}: {int(bad.sum())} of {bad.size} elements off (rtol {rtol:.2g}, atol "
                          f"{float(np.max(atol)):.2g}); "
                          f"first at {at}: expected {expected[name][at]:.6g}, got {got[at]:.6g}")
    if not outcome.passed:
        return Result(kernel.seed, kernel.family, arch, "disagree", outcome.verification.render())
    return Result(kernel.seed, kernel.family, arch, "verified")
