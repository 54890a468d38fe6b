"""ttemu: a functional and approximately-timed emulator of Tenstorrent Wormhole and Blackhole devices behind the
TT-Metalium 0.81.1 host and kernel API -- a product of its own (README.md here), with its CMake package (cmake/).

This Python package only says where its parts are; building and running programs against it is the compiler's
toolchain (compiler/toolchain/emulate.py, cmake_project.py).
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parent
INCLUDE_DIR = ROOT / "include"      # the device and host API headers kernels and host programs compile against
SOURCE_DIR = ROOT / "src"           # libttemu
CMAKE_DIR = ROOT / "cmake"          # find_package(TT-Metalium) against the emulator

__all__ = ["CMAKE_DIR", "INCLUDE_DIR", "ROOT", "SOURCE_DIR"]
