"""The data formats are numbered in one place: the emulator's tt::DataFormat (ttemu/include/ttemu/common_types.h),
which host programs, device kernels and the emulator's own packers (ttemu/src/formats.h takes its codes from it)
share. The compiler writes the same numbers into the programs it generates (compiler/target.py DATA_FORMATS): they
must be that enum's, name for name."""
from __future__ import annotations

import re
from pathlib import Path

from compiler.target import DATA_FORMATS

TTEMU = Path(__file__).resolve().parents[2] / "ttemu"
ENUM = re.compile(r"enum\s+class\s+DataFormat\s*:\s*std::uint8_t\s*\{(?P<body>[^}]*)\}")


def data_format_enum() -> dict[str, int]:
    found = ENUM.search((TTEMU / "include" / "ttemu" / "common_types.h").read_text())
    assert found is not None, "tt::DataFormat is no longer in ttemu/common_types.h"
    return {name: int(value, 0) for name, value in re.findall(r"(\w+)\s*=\s*(\w+)", found["body"])}


def test_the_compilers_format_codes_are_the_emulators_enum():
    enum = data_format_enum()
    assert {spec.name: spec.enum_value for spec in DATA_FORMATS.values()} == \
        {spec.name: enum.get(spec.name) for spec in DATA_FORMATS.values()}


def test_the_emulator_numbers_its_data_formats_once():
    """Every place in the emulator's sources that gives a data format its number: only tt::DataFormat's enumerators
    (a second enum, such as the packers' own list that formats.h once had, could number them differently)."""
    formats = [name for name in data_format_enum() if name != "Invalid"]  # other enums have an Invalid too
    numbered = re.compile(rf"\b({'|'.join(formats)})\s*=\s*(?:0x)?\d")
    places = sorted({str(path.relative_to(TTEMU)) for path in TTEMU.rglob("*")
                     if path.suffix in (".h", ".hpp", ".cpp", ".def") and numbered.search(path.read_text())})
    assert places == ["include/ttemu/common_types.h"]
