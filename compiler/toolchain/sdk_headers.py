"""The real TT-Metalium 0.81.1 device headers, taken from the ttnn wheel on PyPI (fetched as a file, never installed).

The wheel (~100 MB, built for Python 3.10 only) ships `ttnn/tt_metal/`: the device API (`hw/inc/api/...`), the firmware
wrappers the JIT compiles kernels through (`hw/firmware/src/tt-1xx/{brisck,ncrisck,trisck}.cc`), the LLK and the
ckernels. We extract only the members a host-side syntax check includes (~35 MB of 165 MB) into a versioned cache
directory, once per machine; concurrent workers serialise on a lock and publish with an atomic rename.

It also ships ttnn's own device kernels (`ttnn/cpp/ttnn/operations/**/kernels/`, ~1,600 files) and the op headers
they include; the emulator runs them unmodified. Those go to a second cache entry (~31 MB), filled from the same
download when both are missing, so neither is fetched twice:

    root = ensure_headers()            # .../sdk-headers/ttnn-0.81.1/ttnn           (contains tt_metal/)
    home = ensure_kernels()            # .../sdk-headers/ttnn-0.81.1-kernels/ttnn   (contains ttnn/cpp/ttnn/...)
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
# ttnn's op sources: the device kernels and the headers they include (`ttnn/operations/...`), laid out as under
# TT_METAL_HOME, so a kernel path such as "ttnn/cpp/ttnn/operations/eltwise/..." resolves against the root.
KERNEL_PREFIXES = ("ttnn/ttnn/cpp/ttnn/",)
KERNEL_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".inl", ".inc")
KERNELS_REQUIRED = (
    "ttnn/cpp/ttnn/operations/matmul/device/kernels/dataflow/reader_bmm_tile_layout_in0_sender_padding.cpp",
    "ttnn/cpp/ttnn/operations/matmul/device/kernels/compute/bmm_large_block_zm_fused_bias_activation.cpp",
)


class SdkHeadersError(Exception):
    """The headers could not be fetched or extracted; the message says why and what to do."""


@dataclass
class FetchResult:
    root: Path                   # the extracted `ttnn` directory (holds tt_metal/)
    fetched: bool                # False when the cache already had it (headers and kernels)
    kernels_root: Path | None = None  # TT_METAL_HOME-like root of ttnn's kernels (holds ttnn/cpp/ttnn/)
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


def kernels_dir() -> Path:
    """Where ttnn's kernels live: `$TILEFARM_SDK_KERNELS_DIR`, else `<cache>/sdk-headers/ttnn-<version>-kernels`."""
    override = os.environ.get("TILEFARM_SDK_KERNELS_DIR")
    return Path(override) if override else headers_dir().with_name(f"ttnn-{TTNN_VERSION}-kernels")


def _complete(directory: Path, required: tuple[str, ...]) -> Path | None:
    root = directory / "ttnn"
    if (directory / COMPLETE_MARKER).exists() and all((root / f).is_file() for f in required):
        return root
    return None


def installed_root() -> Path | None:
    """The `ttnn` root when a complete extraction is present, else None."""
    return _complete(headers_dir(), REQUIRED)


def installed_kernels_root() -> Path | None:
    """The root holding `ttnn/cpp/ttnn/operations/...` when ttnn's kernels are extracted, else None."""
    return _complete(kernels_dir(), KERNELS_REQUIRED)


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


def _wanted_kernel(name: str) -> bool:
    return name.startswith(KERNEL_PREFIXES) and name.endswith(KERNEL_SUFFIXES)


def _extract(wheel: Path, dest: Path, wanted, required: tuple[str, ...]) -> int:
    """Extract the members `wanted` accepts under `dest`; the member count."""
    count = 0
    try:
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                if not wanted(info.filename):
                    continue
                target = dest / info.filename
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
                count += 1
    except zipfile.BadZipFile as error:
        raise SdkHeadersError(f"{wheel} is not a valid wheel: {error}") from None
    missing = [f for f in required if not (dest / "ttnn" / f).is_file()]
    if missing:
        raise SdkHeadersError(f"{wheel.name} lacks {', '.join(missing)}: not the TT-Metalium {TTNN_VERSION} layout")
    return count


def extract_headers(wheel: Path, dest: Path) -> int:
    """Extract the needed members of `wheel` under `dest` (as `dest/ttnn/tt_metal/...`); the member count."""
    return _extract(wheel, dest, _wanted, REQUIRED)


def extract_kernels(wheel: Path, dest: Path) -> int:
    """Extract ttnn's op sources under `dest` (as `dest/ttnn/ttnn/cpp/ttnn/...`: `dest/ttnn` is the kernels' root)."""
    return _extract(wheel, dest, _wanted_kernel, KERNELS_REQUIRED)


def _publish(staging: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)


def fetch_headers(*, force: bool = False, kernels: bool = True) -> FetchResult:
    """Download the wheel once and extract what is missing: the device headers and (with `kernels`) ttnn's kernels.

    Safe across concurrent processes: one lock for both entries; each is published with an atomic rename."""
    target, ktarget = headers_dir(), kernels_dir()

    def present() -> FetchResult | None:
        root, kroot = installed_root(), installed_kernels_root()
        if force or root is None or (kernels and kroot is None):
            return None
        return FetchResult(root=root, fetched=False, kernels_root=kroot)

    if (done := present()) is not None:
        return done
    with locked(target.with_name(target.name + ".lock")):
        if (done := present()) is not None:
            return done
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="tilefarm-ttnn-", dir=target.parent) as tmp:
            t0 = time.perf_counter()
            wheel = download_wheel(Path(tmp) / "download")
            t1 = time.perf_counter()
            members = 0
            if force or installed_root() is None:
                staging = Path(tmp) / "staging"
                count = extract_headers(wheel, staging)
                (staging / COMPLETE_MARKER).write_text(f"{wheel.name}\n{count} members\n")
                _publish(staging, target)
                members += count
            if kernels and (force or installed_kernels_root() is None):
                staging = Path(tmp) / "staging-kernels"
                count = extract_kernels(wheel, staging)
                (staging / COMPLETE_MARKER).write_text(f"{wheel.name}\n{count} members\n")
                _publish(staging, ktarget)
                members += count
            t2 = time.perf_counter()
            return FetchResult(root=target / "ttnn", fetched=True, kernels_root=installed_kernels_root(),
                               download_seconds=t1 - t0, extract_seconds=t2 - t1,
                               wheel_bytes=wheel.stat().st_size, members=members)


def ensure_headers() -> Path:
    """The `ttnn` root, fetching it on first use."""
    return installed_root() or fetch_headers(kernels=False).root


def ensure_kernels() -> Path:
    """The root of ttnn's kernels (use it as TT_METAL_HOME), fetching it on first use."""
    return installed_kernels_root() or fetch_headers().kernels_root
