"""The real TT-Metalium 0.81.1 device headers, taken from the ttnn wheel on PyPI (fetched as a file, never installed).

The wheel (~100 MB, built for Python 3.10 only) ships `ttnn/tt_metal/`: the device API (`hw/inc/api/...`), the firmware
wrappers the JIT compiles kernels through (`hw/firmware/src/tt-1xx/{brisck,ncrisck,trisck}.cc`), the LLK and the
ckernels. We extract only the members a host-side syntax check includes (~35 MB of 165 MB) into a versioned cache
directory, once per machine; concurrent workers serialise on a lock and publish with an atomic rename.

    root = ensure_headers()            # .../sdk-headers/ttnn-0.81.1/ttnn   (contains tt_metal/)
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .emulate import cache_root
from .locking import locked

TTNN_VERSION = "0.81.1"
WHEEL_REQUIREMENT = f"ttnn=={TTNN_VERSION}"
WHEEL_PLATFORM = "manylinux_2_34_x86_64"
WHEEL_PYTHON = "3.10"
# Members of ttnn/tt_metal/ that the kernel check includes (the rest is precompiled firmware, docs, tests).
EXTRACT_PREFIXES = tuple(f"ttnn/tt_metal/{p}" for p in (
    "hw/inc/", "hw/firmware/src/", "hw/ckernels/wormhole_b0/", "hw/ckernels/blackhole/",
    "hostdevcommon/", "api/", "include/", "sfpi-version",
    "tt-llk/common/", "tt-llk/tools/include/", "tt-llk/tt_llk_wormhole_b0/", "tt-llk/tt_llk_blackhole/",
))
EXTRACT_SKIP = ("/tests/", "/docs/")
# The files that prove an extraction is usable (checked on every use: cheap stats).
REQUIRED = ("tt_metal/hw/firmware/src/tt-1xx/brisck.cc", "tt_metal/hw/firmware/src/tt-1xx/ncrisck.cc",
            "tt_metal/hw/firmware/src/tt-1xx/trisck.cc", "tt_metal/hw/inc/api/dataflow/dataflow_api.h",
            "tt_metal/hw/inc/api/compute/matmul.h")
COMPLETE_MARKER = ".tilefarm-complete"


class SdkHeadersError(Exception):
    """The headers could not be fetched or extracted; the message says why and what to do."""


@dataclass
class FetchResult:
    root: Path                   # the extracted `ttnn` directory (holds tt_metal/)
    fetched: bool                # False when the cache already had it
    download_seconds: float = 0.0
    extract_seconds: float = 0.0
    wheel_bytes: int = 0
    members: int = 0

    @property
    def seconds(self) -> float:
        return self.download_seconds + self.extract_seconds


def headers_dir() -> Path:
    """Where the extracted headers live: `$TILEFARM_SDK_HEADERS_DIR`, else `<cache>/sdk-headers/ttnn-<version>`."""
    override = os.environ.get("TILEFARM_SDK_HEADERS_DIR")
    return Path(override) if override else cache_root() / "sdk-headers" / f"ttnn-{TTNN_VERSION}"


def installed_root() -> Path | None:
    """The `ttnn` root when a complete extraction is present, else None."""
    root = headers_dir() / "ttnn"
    if (headers_dir() / COMPLETE_MARKER).exists() and all((root / f).is_file() for f in REQUIRED):
        return root
    return None


def download_wheel(dest: Path) -> Path:
    """`pip download` the wheel as a file (it is cp310-only, so it can never be installed here).

    `$TILEFARM_TTNN_WHEEL` may name an already downloaded wheel file instead (offline machines)."""
    local = os.environ.get("TILEFARM_TTNN_WHEEL")
    if local:
        path = Path(local)
        if not path.is_file():
            raise SdkHeadersError(f"TILEFARM_TTNN_WHEEL={local} is not a file")
        return path
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", WHEEL_PYTHON,
           "--platform", WHEEL_PLATFORM, "--disable-pip-version-check", "-q", "-d", str(dest), WHEEL_REQUIREMENT]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(dest.glob(f"ttnn-{TTNN_VERSION}-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise SdkHeadersError(f"could not download {WHEEL_REQUIREMENT} from the package index "
                              f"(command: {' '.join(cmd)}):\n{proc.stdout}{proc.stderr}".rstrip())
    return wheels[0]


def _wanted(name: str) -> bool:
    return name.startswith(EXTRACT_PREFIXES) and not any(skip in name for skip in EXTRACT_SKIP) and not name.endswith("/")


def extract_headers(wheel: Path, dest: Path) -> int:
    """Extract the needed members of `wheel` under `dest` (as `dest/ttnn/tt_metal/...`); the member count."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [info for info in archive.infolist() if _wanted(info.filename)]
            for info in members:
                archive.extract(info, dest)
    except zipfile.BadZipFile as error:
        raise SdkHeadersError(f"{wheel} is not a valid wheel: {error}") from None
    missing = [f for f in REQUIRED if not (dest / "ttnn" / f).is_file()]
    if missing:
        raise SdkHeadersError(f"{wheel.name} lacks {', '.join(missing)}: not the TT-Metalium {TTNN_VERSION} layout")
    return len(members)


def fetch_headers(*, force: bool = False) -> FetchResult:
    """Download and extract unless a complete extraction exists (safe across concurrent processes)."""
    target = headers_dir()
    if not force and (root := installed_root()) is not None:
        return FetchResult(root=root, fetched=False)
    with locked(target.with_name(target.name + ".lock")):
        if not force and (root := installed_root()) is not None:
            return FetchResult(root=root, fetched=False)
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="tilefarm-ttnn-", dir=target.parent) as tmp:
            t0 = time.perf_counter()
            wheel = download_wheel(Path(tmp) / "download")
            t1 = time.perf_counter()
            staging = Path(tmp) / "staging"
            members = extract_headers(wheel, staging)
            (staging / COMPLETE_MARKER).write_text(f"{wheel.name}\n{members} members\n")
            t2 = time.perf_counter()
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
            return FetchResult(root=target / "ttnn", fetched=True, download_seconds=t1 - t0, extract_seconds=t2 - t1,
                               wheel_bytes=wheel.stat().st_size, members=members)


def ensure_headers() -> Path:
    """The `ttnn` root, fetching it on first use."""
    return installed_root() or fetch_headers().root
