"""Compile generated kernels against the real TT-Metalium 0.81.1 device headers, the way the JIT wraps them.

A kernel `.cpp` is never compiled alone on a device: the JIT writes per-kernel generated headers
(`kernel_includes.hpp` that includes the kernel, `chlkc_descriptors.h` with the CB formats and tile sizes,
`defines_generated.h`, `chlkc_{unpack,math,pack}.cpp`) and compiles a firmware wrapper TU
(`hw/firmware/src/tt-1xx/{brisck,ncrisck,trisck}.cc`) with -I/-D flags and `-DKERNEL_COMPILE_TIME_ARGS=...`.
We do the same with host `g++ -m32 -fsyntax-only` (reference sheet §6 and §9) and the JIT's warning policy, so a
removed API name, a wrong include, a sign-compare warning or a bad compile-time arg fails here, before a device.

Data-movement kernels are always checked. A compute kernel is checked in full (with the SFPI compiler itself, one
pass per TRISC) when an SDK with SFPI is found through `TT_METAL_HOME` (or /opt/tenstorrent/sfpi). Without SFPI it is
checked against the compute API alone (coverage `api`): the same trisck.cc wrapper and headers through host g++ with
none of TRISC_UNPACK / TRISC_MATH / TRISC_PACK defined, so the API's MATH(...) / PACK(...) / UNPACK(...) bodies and
the LLK and SFPU headers they include drop out, and every call the kernel makes (name, template arguments, argument
count and types), every include and every CB index is still compiled against the 0.81.1 declarations. What that
leaves unchecked -- the LLK bodies the API instantiates for the kernel's arguments -- needs SFPI. On Blackhole
ckernel.h includes SFPI's replay-buffer header `lltt.h` for any TRISC build and names two of its declarations in an
inline template; the check writes those two declarations (LLTT_DECLARATIONS) in its place.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..target import DATA_FORMATS
from .emulate import cache_root
from .environment import child_env
from .sdk_headers import TTNN_VERSION, ensure_headers

HOST_CXX = os.environ.get("TILEFARM_CHECK_CXX", "g++")
# The JIT's warning policy (tt_metal/jit_build/build.cpp), plus -Wno-attributes for the RISC-V-only attributes
# (rvtt_l1_ptr, rvtt_reg_ptr) that host g++ does not know.
WARNING_FLAGS = ("-Wall", "-Werror", "-Wno-unknown-pragmas", "-Wno-deprecated-declarations",
                 "-Wno-error=multistatement-macros", "-Wno-error=parentheses", "-Wno-error=unused-but-set-variable",
                 "-Wno-unused-variable", "-Wno-unused-function")
HOST_FLAGS = ("-m32", "-std=c++17", "-fsyntax-only", "-fno-exceptions", "-Wno-attributes")
COMMON_DEFINES = ("TENSIX_FIRMWARE", "LOCAL_MEM_EN=0", "KERNEL_BUILD", "DISPATCH_MESSAGE_ADDR=0", "NOC_MODE=0",
                  "PROGRAMMABLE_CORE_TYPE=0")


@dataclass(frozen=True)
class ArchFlags:
    """Per-arch names and the device defines the JIT derives from the SoC (values as on an n150 / p150)."""
    ckernels: str           # hw/ckernels/<ckernels>, tt-llk/tt_llk_<ckernels>
    internal: str           # hw/inc/internal/tt-1xx/<internal>
    extra_internal: tuple[str, ...]
    defines: tuple[str, ...]
    mcpu_dm: str
    mcpu_compute: str


ARCHES: dict[str, ArchFlags] = {
    "wormhole_b0": ArchFlags("wormhole_b0", "wormhole", ("wormhole/wormhole_b0_defines",),
                             ("ARCH_WORMHOLE", "NUM_DRAM_BANKS=12", "IS_NOT_POW2_NUM_DRAM_BANKS=1", "NUM_L1_BANKS=64",
                              "LOG_BASE_2_OF_NUM_L1_BANKS=6", "PCIE_NOC_X=0", "PCIE_NOC_Y=3"), "tt-wh", "tt-wh-tensix"),
    "blackhole": ArchFlags("blackhole", "blackhole", (),
                           ("ARCH_BLACKHOLE", "NUM_DRAM_BANKS=8", "LOG_BASE_2_OF_NUM_DRAM_BANKS=3", "NUM_L1_BANKS=130",
                            "IS_NOT_POW2_NUM_L1_BANKS=1", "PCIE_NOC_X=19", "PCIE_NOC_Y=24"), "tt-bh", "tt-bh-tensix"),
}
# Data-movement processors: the firmware wrapper and role defines the JIT uses for each.
DM_PROCESSORS = {
    "RISCV_0": ("brisc", "brisck.cc", ("COMPILE_FOR_BRISC", "PROCESSOR_INDEX=0")),
    "RISCV_1": ("ncrisc", "ncrisck.cc", ("COMPILE_FOR_NCRISC", "PROCESSOR_INDEX=1")),
}
TRISCS = (("unpack", "UNPACK", 0), ("math", "MATH", 1), ("pack", "PACK", 2))
MATH_FIDELITY = {"LoFi": 0, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}
INVALID_FORMAT = 0xFF
DIAGNOSTIC = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+): (?P<severity>fatal error|error|warning): "
                        r"(?P<message>.*)$")


class HeaderCheckUnavailable(Exception):
    """The check cannot run on this machine (no g++ -m32, headers not fetchable); a setup problem, not a kernel bug."""


@dataclass
class KernelCheck:
    kernel: str                             # reader.cpp / writer.cpp / compute.cpp
    role: str                               # reader / writer / compute
    processors: list[str]                   # brisc / ncrisc / trisc0..2 (one compile each)
    status: str                             # passed / failed / skipped
    messages: list[dict] = field(default_factory=list)   # {file, line, col, severity, message}; file = the kernel
    output: str = ""                        # the compiler's output, paths shown relative to the bundle / SDK
    reason: str | None = None               # why it was skipped, or what a partial check left out
    seconds: float = 0.0
    compiler: str = ""
    coverage: str = "full"                  # full / api (a compute kernel without SFPI: the API's declarations)

    def render(self) -> str:
        head = f"  {self.kernel:<12} {self.status:<7} ({', '.join(self.processors)})"
        if self.status == "skipped":
            return f"{head}: {self.reason}"
        head += f" {self.seconds * 1e3:.0f} ms"
        if self.coverage != "full":
            head += f" [{self.coverage} only: {self.reason}]"
        if self.status == "failed":
            head += "\n" + "\n".join("    " + line for line in self.output.rstrip().splitlines())
        return head


@dataclass
class HeaderCheckReport:
    arch: str
    headers: str                            # what was compiled against
    kernels: list[KernelCheck]
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(k.status != "failed" for k in self.kernels)

    @property
    def failed(self) -> list[KernelCheck]:
        return [k for k in self.kernels if k.status == "failed"]

    @property
    def compute_checked(self) -> bool:
        """Whether a compute kernel was checked in full (with SFPI), not only against the compute API."""
        return any(k.role == "compute" and k.status != "skipped" and k.coverage == "full" for k in self.kernels)

    def summary(self) -> dict[str, str]:
        return {k.kernel: k.status for k in self.kernels}

    def to_dict(self) -> dict:
        return {"arch": self.arch, "headers": self.headers, "passed": self.passed, "seconds": self.seconds,
                "compute_checked": self.compute_checked, "kernels": [asdict(k) for k in self.kernels]}

    @classmethod
    def from_dict(cls, data: dict) -> "HeaderCheckReport":
        """The inverse of to_dict (a report that crossed the sandbox boundary as JSON)."""
        fields = {f.name for f in KernelCheck.__dataclass_fields__.values()}
        kernels = [KernelCheck(**{k: v for k, v in kernel.items() if k in fields}) for kernel in data["kernels"]]
        return cls(arch=str(data["arch"]), headers=str(data["headers"]), kernels=kernels, seconds=float(data["seconds"]))

    def render(self) -> str:
        lines = [f"real-header check for {self.arch} against {self.headers}: "
                 f"{'passed' if self.passed else 'FAILED'} in {self.seconds * 1e3:.0f} ms"]
        lines += [k.render() for k in self.kernels]
        return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ generated-file stand-ins

def _format_value(name: str) -> int:
    spec = next((f for f in DATA_FORMATS.values() if f.name == name), None)
    if spec is None:
        raise ValueError(f"data format {name!r} has no TT-Metalium enum value in compiler/target.py")
    return spec.enum_value


def descriptors_header(plan: dict) -> str:
    """A `chlkc_descriptors.h` like genfiles.cpp writes: per-CB formats and tile geometry, compute scalars."""
    max_cbs = plan["target"]["num_cbs"]
    compute = plan.get("compute_config") or {}
    fp32_dest = bool(compute.get("fp32_dest_acc_en"))
    unpack_src = [INVALID_FORMAT] * max_cbs
    unpack_dst = [INVALID_FORMAT] * max_cbs
    pack_src = [INVALID_FORMAT] * max_cbs
    tile_size = [0] * max_cbs
    used = [0] * max_cbs
    for cb in plan["circular_buffers"]:
        index, value = cb["index"], _format_value(cb["data_format"])
        unpack_src[index] = value
        # source registers hold TF32 for fp32 data with an fp32 DST, else the L1 format; DST is fp32 or the L1 format
        unpack_dst[index] = 4 if (fp32_dest and value == 0) else value
        pack_src[index] = 0 if fp32_dest else value
        tile_size[index] = cb["page_bytes"]
        used[index] = 1

    def array(ctype: str, name: str, values: list[int]) -> str:
        return f"constexpr {ctype} {name}[{max_cbs}] = {{\n    {','.join(str(v) for v in values)}\n}};\n"

    def geometry(prefix: str) -> str:
        return "".join([
            array("uint8_t", f"{prefix}_tile_num_faces", [4 * u for u in used]),
            array("uint8_t", f"{prefix}_partial_face", [0] * max_cbs),
            array("uint8_t", f"{prefix}_tile_face_r_dim", [16 * u for u in used]),
            array("uint8_t", f"{prefix}_narrow_tile", [0] * max_cbs),
            array("uint8_t", f"{prefix}_tile_r_dim", [32 * u for u in used]),
            array("uint8_t", f"{prefix}_tile_c_dim", [32 * u for u in used]),
            array("uint16_t", f"{prefix}_tile_size", tile_size),
            array("uint8_t", f"{prefix}_num_faces_r_dim", [2 * u for u in used]),
            array("uint8_t", f"{prefix}_num_faces_c_dim", [2 * u for u in used]),
        ])

    fidelity = MATH_FIDELITY.get(compute.get("math_fidelity", "HiFi4"), 4)
    approx = "true" if compute.get("math_approx_mode") else "false"
    return "".join([
        "// chlkc_descriptors.h -- stand-in written by tilefarm's header check (the JIT's genfiles.cpp layout)\n",
        "#pragma once\n\n#if defined(UCK_CHLKC_MATH)\n#include \"llk_defs.h\"\n",
        f"constexpr ckernel::MathFidelity MATH_FIDELITY = static_cast<ckernel::MathFidelity>({fidelity});\n",
        f"constexpr bool APPROX = {approx};\n#endif\n\n",
        "#if !defined(UCK_CHLKC_PACK)\n",
        array("std::int32_t", "unpack_src_format", unpack_src), array("std::int32_t", "unpack_dst_format", unpack_dst),
        geometry("unpack"), "#endif\n\n",
        "#if !defined(UCK_CHLKC_MATH) && !defined(UCK_CHLKC_UNPACK)\n",
        array("unsigned char", "pack_src_format", pack_src), array("unsigned char", "pack_dst_format", unpack_src),
        geometry("pack"),
        "#if defined(UCK_CHLKC_PACK)\n", array("std::int32_t", "unpack_src_format", unpack_src), "#endif\n#endif\n\n",
        "#if defined(UCK_CHLKC_MATH) || defined(UCK_CHLKC_PACK) || defined(UCK_CHLKC_UNPACK)\n",
        f"constexpr bool DST_ACCUM_MODE = {'true' if fp32_dest else 'false'};\n",
        f"#define DST_SYNC_MODE DstSync::Sync{'Full' if compute.get('dst_full_sync_en') else 'Half'}\n#endif\n",
    ])


# ------------------------------------------------------------------------------------------ compiler lookup

@lru_cache(maxsize=1)
def host_compiler_problem() -> str | None:
    """None when host g++ can build -m32 (the Debian g++-multilib package), else what is wrong (checked once)."""
    if shutil.which(HOST_CXX) is None:
        return f"{HOST_CXX} is not installed"
    probe = subprocess.run([HOST_CXX, "-m32", "-x", "c++", "-fsyntax-only", "-"], input="#include <cstdint>\n",
                           capture_output=True, text=True, env=child_env())
    if probe.returncode != 0:
        return f"{HOST_CXX} cannot compile for -m32 (install g++-multilib): {probe.stderr.strip()[:300]}"
    return None


def find_sfpi() -> tuple[Path, Path] | None:
    """(riscv-tt-elf-g++, sfpi include dir) from an SDK with SFPI, looked up where the JIT looks; else None."""
    roots = []
    if home := os.environ.get("TT_METAL_HOME"):
        roots.append(Path(home) / "runtime" / "sfpi")
    roots.append(Path("/opt/tenstorrent/sfpi"))
    for root in roots:
        cxx = root / "compiler" / "bin" / "riscv-tt-elf-g++"
        if cxx.is_file() and os.access(cxx, os.X_OK) and (root / "include").is_dir():
            return cxx, root / "include"
    return None


# ------------------------------------------------------------------------------------------ the check

def _include_flags(root: Path, arch: ArchFlags, *, compute: bool) -> list[str]:
    metal = root / "tt_metal"
    internal = metal / "hw/inc/internal/tt-1xx"
    llk = metal / f"tt-llk/tt_llk_{arch.ckernels}"
    dirs = [root, metal, metal / "include", metal / "hw/inc", metal / "hostdevcommon/api", metal / "hw/inc/debug",
            metal / "api", metal / f"hw/ckernels/{arch.ckernels}/metal/common",
            metal / f"hw/ckernels/{arch.ckernels}/metal/llk_io", internal, internal / arch.internal,
            *(internal / extra for extra in arch.extra_internal), internal / arch.internal / "noc",
            llk / "common/inc", llk / "llk_lib", metal / "hw/firmware/src/tt-1xx"]
    if compute:
        dirs += [metal / "tt-llk/tools/include", metal / "tt-llk/common", llk / "common/inc/sfpu",
                 metal / f"hw/ckernels/{arch.ckernels}/metal/llk_api",
                 metal / f"hw/ckernels/{arch.ckernels}/metal/llk_api/llk_sfpu"]
    return [f"-I{d}" for d in dirs]


def _compile_time_args(kernel: dict) -> str:
    words = [w for arg in kernel.get("compile_time_args", []) for w in arg.get("words", [])]
    return ",".join(str(int(w)) for w in words)


def _noc_index(kernel: dict, processor: str) -> int:
    noc = str(kernel.get("noc") or "")
    if noc in ("NOC_0", "RISCV_0_default"):
        return 0
    if noc in ("NOC_1", "RISCV_1_default"):
        return 1
    return 0 if processor == "RISCV_0" else 1


def _clean(output: str, gen_dir: Path, root: Path) -> str:
    """Paths in the compiler's output: the kernel by its bundle name, SDK files relative to the wheel's ttnn/."""
    return output.replace(f"{gen_dir}/", "").replace(f"{root}/", "")


def _messages(output: str, kernel: str) -> list[dict]:
    found, seen = [], set()
    for line in output.splitlines():
        match = DIAGNOSTIC.match(line)
        if not match:
            continue
        item = {"file": match["file"], "line": int(match["line"]), "col": int(match["col"]),
                "severity": "error" if match["severity"] == "fatal error" else match["severity"],
                "message": match["message"], "in_kernel": match["file"] == kernel}
        key = (item["file"], item["line"], item["col"], item["message"])
        if key not in seen:
            seen.add(key)
            found.append(item)
    return found


def _run(commands: list[list[str]], cwd: Path) -> tuple[bool, str]:
    outputs, ok = [], True
    for cmd in commands:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=child_env())
        if proc.returncode != 0:
            ok = False
            outputs.append(proc.stdout + proc.stderr)
    return ok, "".join(outputs)


def _data_movement_inputs(kernel: dict, source: bytes, plan: dict, root: Path, arch: ArchFlags,
                          gen: Path) -> tuple[dict[str, bytes], list[str]]:
    """What a data-movement kernel's check compiles: the files written into `gen` (name -> bytes) and the command."""
    name = kernel["file"]
    short, wrapper, role_defines = DM_PROCESSORS[kernel.get("processor")]
    files = {name: source, "chlkc_descriptors.h": descriptors_header(plan).encode(),
             "kernel_includes.hpp": f'#include "{name}"\n'.encode()}
    defines = [*COMMON_DEFINES, *arch.defines, f"KERNEL_COMPILE_TIME_ARGS={_compile_time_args(kernel)}"]
    command = [HOST_CXX, *HOST_FLAGS, *WARNING_FLAGS, f"-I{gen}", *_include_flags(root, arch, compute=False),
               *(f"-D{d}" for d in defines), *(f"-D{d}" for d in role_defines),
               f"-DNOC_INDEX={_noc_index(kernel, kernel.get('processor'))}",
               str(root / "tt_metal/hw/firmware/src/tt-1xx" / wrapper)]
    return files, command


# ckernel.h (Blackhole) includes SFPI's lltt.h for TRISC builds and uses these two names in load_replay_buf.
LLTT_DECLARATIONS = """// lltt.h stands in for the SFPI toolchain's replay-buffer header: the two declarations ckernel.h names
#pragma once
#include <cstdint>
namespace lltt {
enum ExecBool : bool { NoExec, Exec };
template <ExecBool E = NoExec> void record(std::uint32_t start, std::uint32_t len);
}  // namespace lltt
"""
API_ONLY = ("NOT CHECKED in full: the LLK bodies the compute API instantiates need the SFPI headers, which no "
            "package registry ships; set TT_METAL_HOME to an SDK with runtime/sfpi to check them")


def _compute_api_inputs(kernel: dict, source: bytes, plan: dict, root: Path, arch: ArchFlags,
                        gen: Path) -> tuple[dict[str, bytes], list[str]]:
    """What a compute kernel's check without SFPI compiles: trisck.cc through host g++ with no TRISC_* define (the
    kernel included as the unpack thread's source, whose name trisck.cc's chlkc_list.h needs), so only the compute
    API's declarations and the kernel itself are compiled (the module docstring says what that leaves out)."""
    name = kernel["file"]
    thread, upper, index = TRISCS[0]
    files = {name: source, "chlkc_descriptors.h": descriptors_header(plan).encode(),
             "defines_generated.h": b"// no user defines\n", "lltt.h": LLTT_DECLARATIONS.encode(),
             f"chlkc_{thread}.cpp": f'#include "defines_generated.h"\n#include "{name}"\n'.encode()}
    defines = [*COMMON_DEFINES, *arch.defines, f"KERNEL_COMPILE_TIME_ARGS={_compile_time_args(kernel)}"]
    command = [HOST_CXX, *HOST_FLAGS, *WARNING_FLAGS, f"-I{gen}", *_include_flags(root, arch, compute=True),
               *(f"-D{d}" for d in defines), f"-DUCK_CHLKC_{upper}", f"-DNAMESPACE=chlkc_{thread}",
               f"-DCOMPILE_FOR_TRISC={index}", f"-DPROCESSOR_INDEX={index + 2}", "-DNOC_INDEX=0",
               str(root / "tt_metal/hw/firmware/src/tt-1xx/trisck.cc")]
    return files, command


def _check_one(kernel: dict, source: bytes, plan: dict, root: Path, arch: ArchFlags, work: Path,
               sfpi: tuple[Path, Path] | None, cache_dir: Path | None = None) -> KernelCheck:
    name, role = kernel["file"], kernel["role"]
    gen = work / role
    gen.mkdir(parents=True, exist_ok=True)
    if role == "compute" and sfpi is not None:
        return _sfpi_check(kernel, source, plan, root, arch, gen, sfpi)
    if role == "compute":
        files, command = _compute_api_inputs(kernel, source, plan, root, arch, gen)
        processors, coverage, reason = [], "api", API_ONLY
    else:
        processor = kernel.get("processor")
        if processor not in DM_PROCESSORS:
            return KernelCheck(name, role, [str(processor)], "failed",
                               output=f"tt.plan.json: unknown data-movement processor {processor!r}")
        files, command = _data_movement_inputs(kernel, source, plan, root, arch, gen)
        processors, coverage, reason = [DM_PROCESSORS[processor][0]], "full", None
    # host g++ over files all named in the key: the verdict is kept per machine (cache_dir None: a sandboxed check)
    t0 = time.perf_counter()
    key = check_key(files, command, gen, root) if cache_dir is not None else None
    if key is not None and (kept := cached_check(cache_dir, key)) is not None:
        kept.seconds = time.perf_counter() - t0
        return kept
    for file_name, data in files.items():
        (gen / file_name).write_bytes(data)
    result = _verdict(name, role, processors, [command], gen, root, f"host {HOST_CXX} -m32", coverage, reason)
    if key is not None:
        keep_check(cache_dir, key, result)
    return result


def _sfpi_check(kernel: dict, source: bytes, plan: dict, root: Path, arch: ArchFlags, gen: Path,
                sfpi: tuple[Path, Path]) -> KernelCheck:
    """A compute kernel in full: the SFPI compiler, one pass per TRISC, as the JIT builds it (not kept)."""
    name = kernel["file"]
    (gen / name).write_bytes(source)
    (gen / "chlkc_descriptors.h").write_text(descriptors_header(plan))
    defines = [*COMMON_DEFINES, *arch.defines, f"KERNEL_COMPILE_TIME_ARGS={_compile_time_args(kernel)}"]
    firmware = root / "tt_metal/hw/firmware/src/tt-1xx"
    cxx, sfpi_include = sfpi
    (gen / "defines_generated.h").write_text("// no user defines\n")
    commands = []
    for thread, upper, index in TRISCS:
        (gen / f"chlkc_{thread}.cpp").write_text(
            f'#define TRISC_{upper}\n#include "defines_generated.h"\n#include "{name}"\n')
        commands.append([str(cxx), f"-mcpu={arch.mcpu_compute}", "-std=c++17", "-fsyntax-only", "-fno-exceptions",
                         *WARNING_FLAGS, f"-I{gen}", f"-I{sfpi_include}", *_include_flags(root, arch, compute=True),
                         *(f"-D{d}" for d in defines), f"-DUCK_CHLKC_{upper}", f"-DNAMESPACE=chlkc_{thread}",
                         f"-DCOMPILE_FOR_TRISC={index}", f"-DPROCESSOR_INDEX={index + 2}", "-DNOC_INDEX=0",
                         str(firmware / "trisck.cc")])
    return _verdict(name, "compute", ["trisc0", "trisc1", "trisc2"], commands, gen, root, str(cxx), "full", None)


def _verdict(name: str, role: str, processors: list[str], commands: list[list[str]], gen: Path, root: Path,
             compiler: str, coverage: str, reason: str | None) -> KernelCheck:
    t0 = time.perf_counter()
    ok, output = _run(commands, gen)
    output = _clean(output, gen, root)
    return KernelCheck(name, role, processors, "passed" if ok else "failed", messages=_messages(output, name),
                       output=output, reason=reason, seconds=time.perf_counter() - t0, compiler=compiler,
                       coverage=coverage)


# ------------------------------------------------------------------------------------------ the machine's kept verdicts

# A data-movement kernel's check is g++ -fsyntax-only of files that are all named in its key, so its verdict and
# messages are kept per machine (<cache>/header-checks/<key>.json, sealed as compiler/toolchain/cache.py says), as
# the host programs and kernel objects are. Only trusted code (the CLI, the API in process, tests) reads and writes
# them: a sandboxed job's check (keep=False) compiles its kernels and answers for that job alone.
CACHE_SUBDIR = "header-checks"
CHECK_CODE = Path(__file__)


def cache_dir() -> Path:
    return cache_root() / CACHE_SUBDIR


@lru_cache(maxsize=None)
def compiler_identity(cxx: str) -> str:
    """What says which compiler (and so which libstdc++ and C headers) runs: `g++ -v`'s version and configuration,
    and the size and time of its cc1plus (a rebuild of the same version)."""
    env = child_env()
    version = subprocess.run([cxx, "-v"], capture_output=True, text=True, env=env).stderr
    cc1plus = subprocess.run([cxx, "-m32", "-print-prog-name=cc1plus"], capture_output=True, text=True,
                             env=env).stdout.strip()
    try:
        st = os.stat(cc1plus)
        stamp = f"{st.st_size} {st.st_mtime_ns}"
    except OSError:
        stamp = "no cc1plus"
    return f"{version}\n{cc1plus} {stamp}"


_TREE_DIGESTS: dict[str, tuple[tuple, str]] = {}


def headers_digest(root: Path) -> str:
    """sha256 over every file of the headers tree (name and content; ~1200 files, 15 MB, ~0.1 CPU s), hashed again
    only when a file's size or time has changed since this process last hashed it."""
    from . import cache

    entries = []
    for directory, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(directory, name)
            try:
                st = os.stat(path)
                entries.append((os.path.relpath(path, root), st.st_size, st.st_mtime_ns, st.st_ino))
            except OSError:  # a dangling link: a name without content, as g++ sees it
                entries.append((os.path.relpath(path, root), -1, -1, -1))
    stamp = tuple(entries)
    known = _TREE_DIGESTS.get(str(root))
    if known is not None and known[0] == stamp:
        return known[1]
    parts = []
    for relative, size, *_ in entries:
        parts += [relative, (Path(root) / relative).read_bytes() if size >= 0 else b"<none>"]
    digest = cache.key(*parts)
    _TREE_DIGESTS[str(root)] = (stamp, digest)
    return digest


def check_key(files: dict[str, bytes], command: list[str], gen: Path, root: Path) -> str:
    """The one place a kept check's name comes from: everything that decides what g++ -fsyntax-only says. The check's
    own code (flags, defines, the descriptors it writes), the compiler, every file of the headers tree, the command
    (with the work and headers directories written as <gen> and <headers>: the output names neither) and every file
    it reads from the work directory (the kernel, its descriptors, kernel_includes.hpp)."""
    from . import cache

    normalized = [arg.replace(str(gen), "<gen>").replace(str(root), "<headers>") for arg in command]
    parts = ["tilefarm header check", CHECK_CODE.read_bytes(), compiler_identity(command[0]), headers_digest(root),
             json.dumps(normalized)]
    for name in sorted(files):
        parts += [name, files[name]]
    return cache.key(*parts)


def cached_check(directory: Path, key: str) -> KernelCheck | None:
    """The kept verdict of `key`, or None when there is none or it is damaged (its seal does not match)."""
    from . import cache

    path = Path(directory) / f"{key}.json"
    if not cache.intact(path):
        return None
    try:
        data = json.loads(path.read_bytes())
        fields = {f.name for f in KernelCheck.__dataclass_fields__.values()}
        return KernelCheck(**{k: v for k, v in data.items() if k in fields})
    except (OSError, ValueError, TypeError):
        return None


def keep_check(directory: Path, key: str, result: KernelCheck) -> None:
    """Keep a verdict; a cache this process cannot write is left as it is (the check still ran)."""

    from . import cache

    path = Path(directory) / f"{key}.json"
    try:
        cache.store(path, json.dumps(asdict(result)).encode())
    except OSError:
        pass


def check_bundle(artifacts: dict[str, bytes], *, arch: str | None = None, headers_root: Path | None = None,
                 workdir: Path | None = None, keep: bool = True) -> HeaderCheckReport:
    """Check every kernel of a compiled bundle (artifact name -> bytes, as compile_source produces). With `keep`,
    data-movement verdicts come from and go to the machine's cache (cache_dir()); a sandboxed check passes False.

    Raises HeaderCheckUnavailable when this machine cannot run the check; kernel failures are in the report."""
    t0 = time.perf_counter()
    plan = json.loads(artifacts["tt.plan.json"])
    arch = arch or plan["target"]["arch"]
    if arch not in ARCHES:
        raise HeaderCheckUnavailable(f"arch {arch!r} has no TT-Metalium {TTNN_VERSION} device headers "
                                     f"(supported: {', '.join(ARCHES)})")
    if problem := host_compiler_problem():
        raise HeaderCheckUnavailable(problem)
    root = headers_root or ensure_headers()
    sfpi = find_sfpi()
    kernels = plan["kernels"]
    missing = [k["file"] for k in kernels if k["file"] not in artifacts]
    if missing:
        raise ValueError(f"bundle lacks {', '.join(missing)} named in tt.plan.json")
    with tempfile.TemporaryDirectory(prefix="tilefarm-check-") as tmp:
        work = Path(workdir) if workdir else Path(tmp)
        with ThreadPoolExecutor(max_workers=len(kernels)) as pool:
            results = list(pool.map(lambda k: _check_one(k, artifacts[k["file"]], plan, root, ARCHES[arch], work, sfpi,
                                                         cache_dir() if keep else None), kernels))
    return HeaderCheckReport(arch=arch, headers=f"ttnn {TTNN_VERSION} wheel headers", kernels=results,
                             seconds=time.perf_counter() - t0)
