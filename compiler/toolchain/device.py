"""Devices on this host and running a bundle on one of them (the health check is the device owner's:
workers/devices.py).

Discovery (in order):
1. `$TILEFARM_DEVICES_CONFIG`, a JSON file listing devices:
       {"devices": [{"id": "n150-0", "arch": "wormhole_b0", "node": "/dev/tenstorrent/0"},
                    {"id": "emu-0", "arch": "blackhole", "kind": "emulated", "node": "/var/tmp/emu-0"}]}
   `kind` is "pcie" (default: built with the real SDK from TT_METAL_HOME) or "emulated" (built with the emulator's
   CMake package; `node` is then an ordinary file the emulated runtime opens and locks like a device node).
2. Otherwise every `/dev/tenstorrent/<N>`, with the arch from `$TILEFARM_DEVICE_ARCH` (the driver's node does not say).

A program runs as `<program> <kernel_dir> <input_dir> <output_dir>` with the device selected by its environment
(`TT_VISIBLE_DEVICES=<N>` for the real runtime, `TTEMU_DEVICE=<node>` for the emulated one).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .cmake_project import BuildError, Sdk, build_program, emulated_sdk, metalium_sdk
from .environment import child_env

DEV_DIR = Path("/dev/tenstorrent")
DEVICE_EXIT_CODES = {7}                     # the emulated runtime's "device error" exit status
# What the real runtime prints when the device, not the program, is at fault (UMD / tt-metal messages).
DEVICE_ERROR_PATTERNS = re.compile(r"(cannot open device|No Tenstorrent devices|device .* is busy|"
                                   r"Timeout waiting for|Read 0xffffffff from ARC|PCIe.*error|chip.*not found)",
                                   re.IGNORECASE)


class DeviceConfigError(Exception):
    """The device configuration is unusable (bad JSON, unknown arch, missing field)."""


@dataclass(frozen=True)
class Device:
    id: str
    arch: str
    kind: str = "pcie"                       # "pcie" or "emulated"
    node: str | None = None                  # /dev/tenstorrent/N, or the emulated device's node file
    index: int = 0                           # physical device number for TT_VISIBLE_DEVICES

    def sdk(self) -> Sdk | None:
        return emulated_sdk() if self.kind == "emulated" else metalium_sdk()

    def run_env(self) -> dict[str, str]:
        if self.kind == "emulated":
            env = {"TTEMU_ARCH": self.arch}
            if self.node:
                env["TTEMU_DEVICE"] = self.node
            return env
        return {"TT_VISIBLE_DEVICES": str(self.index)}

    def to_dict(self) -> dict:
        return asdict(self)


def discover(config_path: str | None = None) -> list[Device]:
    """The devices of this host (see the module docstring)."""
    from ..target import DEVICES

    path = config_path or os.environ.get("TILEFARM_DEVICES_CONFIG")
    if path:
        try:
            config = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            raise DeviceConfigError(f"device config {path}: {error}") from None
        devices = []
        for i, entry in enumerate(config.get("devices", [])):
            if not isinstance(entry, dict) or "arch" not in entry:
                raise DeviceConfigError(f"device config {path}: devices[{i}] needs at least an `arch`")
            if entry["arch"] not in DEVICES or not DEVICES[entry["arch"]].supported_by_sdk:
                raise DeviceConfigError(f"device config {path}: devices[{i}] has arch {entry['arch']!r}; "
                                        f"TT-Metalium supports {', '.join(a for a, d in DEVICES.items() if d.supported_by_sdk)}")
            kind = entry.get("kind", "pcie")
            if kind not in ("pcie", "emulated"):
                raise DeviceConfigError(f"device config {path}: devices[{i}].kind must be pcie or emulated")
            node = entry.get("node")
            index = int(entry.get("index", _node_index(node) if node else i))
            devices.append(Device(id=str(entry.get("id") or f"{kind}-{i}"), arch=entry["arch"], kind=kind,
                                  node=node, index=index))
        return devices
    arch = os.environ.get("TILEFARM_DEVICE_ARCH")
    nodes = sorted(DEV_DIR.glob("*")) if DEV_DIR.is_dir() else []
    if not nodes or not arch:
        return []
    return [Device(id=f"tt{_node_index(str(n))}", arch=arch, node=str(n), index=_node_index(str(n))) for n in nodes
            if _node_index(str(n)) >= 0]


def _node_index(node: str) -> int:
    match = re.search(r"(\d+)$", node)
    return int(match.group(1)) if match else -1


# ------------------------------------------------------------------------------------------ running

@dataclass
class DeviceRun:
    device: str
    arch: str
    sdk: str
    outputs: dict[str, np.ndarray]          # float32, as the program wrote them
    exit_status: int | None                 # None: killed for exceeding the time limit
    stdout: str
    stderr: str
    wall_seconds: float                     # the program's run (not the build)
    build_seconds: float
    build_cache_hit: bool
    device_error: bool = False              # the device (not the program) failed: mark it unhealthy
    error: str | None = None
    started_at: float | None = None         # epoch seconds of the program's start and end on the device
    finished_at: float | None = None

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and self.error is None

    @property
    def log(self) -> str:
        head = (f"device {self.device} ({self.arch}, {self.sdk} SDK): host program built in {self.build_seconds:.2f} s"
                f"{' (cached)' if self.build_cache_hit else ''}, ran in {self.wall_seconds:.2f} s, "
                f"exit status {self.exit_status}\n")
        body = "".join(f"--- {name}\n{text.rstrip()}\n" for name, text in (("stdout", self.stdout), ("stderr", self.stderr))
                       if text.strip())
        return head + body + (f"error: {self.error}\n" if self.error else "")


class DeviceUnavailable(Exception):
    """No SDK to build with for this device (e.g. a /dev/tenstorrent node but no TT_METAL_HOME)."""


def run_bundle(artifacts: dict[str, bytes], inputs: dict[str, np.ndarray], device: Device, *,
               workdir: Path | None = None, timeout_s: float = 300, device_fd: int | None = None,
               program: Path | None = None) -> DeviceRun:
    """Build main.cpp against the device's SDK, run it with `inputs` (float32 arrays by buffer name), read outputs.
    `device_fd`: the emulated device's node, opened by whoever may (a sandboxed job cannot open it itself);
    `program`: main.cpp already built (a worker builds it apart, off the device's time)."""
    sdk = device.sdk()
    if sdk is None:
        raise DeviceUnavailable(f"device {device.id} has no TT-Metalium SDK: set TT_METAL_HOME to a tt-metal build")
    kernel = json.loads(artifacts["tt.plan.json"]).get("kernel", "main")
    with tempfile.TemporaryDirectory(prefix="tilefarm-device-") as tmp:
        work = Path(workdir) if workdir else Path(tmp)
        kernels, input_dir, output_dir = work / "kernels", work / "inputs", work / "outputs"
        for directory in (kernels, input_dir, output_dir):
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
        for name, data in artifacts.items():
            (kernels / name).write_bytes(data)
        for name, array in inputs.items():
            np.save(input_dir / f"{name}.npy", np.ascontiguousarray(array, dtype=np.float32))
        try:
            program, build_seconds, cached = (program, 0.0, True) if program else build_program(kernels, sdk,
                                                                                              kernel=kernel)
        except BuildError as error:
            return DeviceRun(device.id, device.arch, sdk.name, {}, None, "", error.log, 0.0, 0.0, False,
                             error=str(error))
        env = child_env(**sdk.env, **device.run_env())
        if device_fd is not None:
            env["TTEMU_DEVICE_FD"] = str(device_fd)
        started_at, t0 = time.time(), time.perf_counter()
        # its own process group, so a time limit or a cancel kills the program and whatever it started
        proc = subprocess.Popen([str(program), str(kernels), str(input_dir), str(output_dir)], cwd=work, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                                pass_fds=() if device_fd is None else (device_fd,))
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
            status: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            status = None
        except BaseException:  # cancelled or the stage's time limit: never leave the program holding the device
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        wall = time.perf_counter() - t0
        outputs = {p.stem: np.load(p) for p in sorted(output_dir.glob("*.npy"))}
    run = DeviceRun(device.id, device.arch, sdk.name, outputs, status, stdout, stderr, wall, build_seconds, cached,
                    started_at=started_at, finished_at=started_at + wall)
    if status is None:
        run.error, run.device_error = f"the program did not finish within {timeout_s:g} s (device hung?)", True
    elif status != 0:
        run.device_error = status in DEVICE_EXIT_CODES if sdk.emulated else \
            (status < 0 or bool(DEVICE_ERROR_PATTERNS.search(stderr + stdout)))
        run.error = f"the program exited with status {status}" + (" (device error)" if run.device_error else "")
    return run


@dataclass
class DeviceOutcome:
    """api.run_on_device's result: the run, typed outputs, and the comparison with the reference (when asked)."""
    run: DeviceRun
    outputs: dict[str, np.ndarray]
    inputs: dict[str, np.ndarray]
    verification: object | None = None     # compiler.verify.VerificationReport

    @property
    def passed(self) -> bool:
        return self.run.ok and (self.verification is None or self.verification.ok)

    @property
    def device_error(self) -> bool:
        return self.run.device_error

    @property
    def log(self) -> str:
        return self.run.log + (self.verification.render() if self.verification is not None else "")

    def report(self) -> dict:
        run = self.run
        return {"device": run.device, "arch": run.arch, "sdk": run.sdk, "exit_status": run.exit_status,
                "wall_seconds": run.wall_seconds, "build_seconds": run.build_seconds,
                "build_cache_hit": run.build_cache_hit, "device_error": run.device_error, "error": run.error,
                "started_at": run.started_at, "finished_at": run.finished_at,
                "passed": self.passed,
                "verification": self.verification.to_dict() if self.verification is not None else None}
