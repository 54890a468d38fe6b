"""The real-header check: generated kernels compiled against the ttnn 0.81.1 wheel headers as the JIT wraps them."""
from __future__ import annotations

import zipfile

import pytest

from compiler.toolchain import sdk_headers
from compiler.toolchain.header_check import HeaderCheckUnavailable, check_bundle, descriptors_header, find_sfpi
from tests.conftest import good_examples, shared_copies

EXAMPLES = good_examples() + shared_copies()
SDK_ARCHS = ("wormhole_b0", "blackhole")


@pytest.mark.parametrize("arch", SDK_ARCHS)
@pytest.mark.parametrize("example", EXAMPLES, ids=[f"{p.parent.name}/{p.stem}" for p in EXAMPLES])
def test_every_example_passes_the_real_header_check(compiled, example, arch):
    report = check_bundle(compiled(example, arch).artifacts)
    assert report.passed, report.render()
    by_role = {k.role: k for k in report.kernels}
    assert by_role["reader"].status == by_role["writer"].status == "passed"
    assert by_role["reader"].processors == ["ncrisc"] and by_role["writer"].processors == ["brisc"]
    assert by_role["compute"].status == "passed"
    if find_sfpi() is None:  # no SFPI on this machine: checked against the compute API, and the report says so
        assert by_role["compute"].coverage == "api" and not report.compute_checked
        assert "NOT CHECKED in full" in by_role["compute"].reason and "SFPI" in by_role["compute"].reason
        assert "api only" in report.render()
    else:
        assert by_role["compute"].coverage == "full" and report.compute_checked


def _broken(compiled, kernel: str, old: bytes, new: bytes, arch: str = "wormhole_b0"):
    artifacts = dict(compiled(EXAMPLES[0].parent / "gemm_single_tile.py", arch).artifacts)
    assert old in artifacts[kernel], f"the fixture no longer contains {old!r}"
    artifacts[kernel] = artifacts[kernel].replace(old, new, 1)
    report = check_bundle(artifacts)
    assert not report.passed
    (failed,) = report.failed
    assert failed.kernel == kernel
    return failed


@pytest.mark.parametrize("arch", SDK_ARCHS)
def test_old_include_path_fails_with_the_compilers_message(compiled, arch):
    failed = _broken(compiled, "reader.cpp", b'"api/dataflow/dataflow_api.h"', b'"dataflow_api.h"', arch)
    (error,) = [m for m in failed.messages if m["severity"] == "error"]
    assert error["file"] == "reader.cpp" and error["in_kernel"] and error["line"] == 3
    assert "dataflow_api.h: No such file or directory" in error["message"]
    assert "reader.cpp:3:10:" in failed.output   # mapped to the generated file, not the temp dir
    assert "/tmp/" not in failed.output


@pytest.mark.parametrize("arch", SDK_ARCHS)
@pytest.mark.parametrize("old, new, message", [
    (b"tile_regs_acquire();", b"tile_regs_acquire(0);", "too many arguments to function 'void ckernel::tile_regs_acquire()'"),
    (b"matmul_init(", b"mm_init(", "'mm_init' was not declared"),
    (b'#include "api/compute/matmul.h"', b'#include "compute_kernel_api/matmul.h"',
     "compute_kernel_api/matmul.h: No such file or directory"),
], ids=["arity", "removed-name", "old-include"])
def test_a_compute_kernels_api_misuse_fails_at_its_line(compiled, arch, old, new, message):
    """Without SFPI a compute kernel is still compiled against the compute API: a wrong argument count, a name
    0.81.1 does not have or a pre-0.81 include path fails at the kernel's own line."""
    artifacts = dict(compiled(EXAMPLES[0].parent / "gemm_single_tile.py", arch).artifacts)
    source = artifacts["compute.cpp"]
    assert old in source, f"the fixture no longer contains {old!r}"
    line = source[:source.index(old)].count(b"\n") + 1
    artifacts["compute.cpp"] = source.replace(old, new, 1)
    report = check_bundle(artifacts)
    (failed,) = report.failed
    assert failed.kernel == "compute.cpp"
    errors = [m for m in failed.messages if m["severity"] == "error" and m["in_kernel"]]
    assert errors and errors[0]["line"] == line, failed.output
    assert message.replace("'", "") in failed.output.replace("‘", "").replace("’", "").replace("'", ""), \
        failed.output


def test_removed_api_name_fails(compiled):
    """`mm_init` (a 2024 name) does not exist in 0.81.1."""
    failed = _broken(compiled, "writer.cpp", b"void kernel_main() {", b"void kernel_main() {\n    mm_init(0, 1, 16);")
    assert any("mm_init" in m["message"] and "not declared" in m["message"] and m["file"] == "writer.cpp"
               for m in failed.messages), failed.output


def test_the_jit_warning_policy_applies(compiled):
    """-Wall -Werror: a signed/unsigned comparison is an error on the device compiler, so it is one here."""
    failed = _broken(compiled, "reader.cpp", b"for (uint32_t k = 0; k < 3; ++k)",
                     b"for (int k = 0; k < 3 && k < block_count; ++k)")
    assert "sign-compare" in failed.output


def test_compile_time_args_come_from_the_plan(compiled):
    """TensorAccessorArgs<0> needs the real (2, page_bytes) words; without them the accessor does not compile."""
    import json

    artifacts = dict(compiled(EXAMPLES[0].parent / "gemm_single_tile.py").artifacts)
    plan = json.loads(artifacts["tt.plan.json"])
    for kernel in plan["kernels"]:
        kernel["compile_time_args"] = []
    artifacts["tt.plan.json"] = json.dumps(plan).encode()
    report = check_bundle(artifacts)
    assert {k.kernel for k in report.failed} == {"reader.cpp", "writer.cpp"}


def test_descriptors_carry_cb_formats_and_tile_sizes(compiled):
    import json

    plan = json.loads(compiled(EXAMPLES[0].parent / "gemm_single_tile.py").artifacts["tt.plan.json"])
    text = descriptors_header(plan)
    sizes = text.split("constexpr uint16_t unpack_tile_size[32] = {\n    ")[1].split("\n")[0].split(",")
    assert sizes[0] == "2048" and sizes[16] == "4096" and sizes[2] == "0"
    assert "constexpr bool DST_ACCUM_MODE = true;" in text


def test_grayskull_is_refused_clearly(compiled):
    with pytest.raises(HeaderCheckUnavailable, match="grayskull"):
        check_bundle(compiled(EXAMPLES[0].parent / "gemm_single_tile.py", "grayskull").artifacts)


def test_extraction_rejects_a_wheel_without_the_headers(tmp_path):
    wheel = tmp_path / "ttnn-0.81.1-cp310-cp310-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("ttnn/tt_metal/hw/inc/api/dataflow/dataflow_api.h", "// only one header\n")
        archive.writestr("ttnn/tt_metal/pre-compiled/firmware.elf", "not extracted")
    with pytest.raises(sdk_headers.SdkHeadersError, match="brisck.cc"):
        sdk_headers.extract_headers(wheel, tmp_path / "out")
    assert not (tmp_path / "out/ttnn/tt_metal/pre-compiled").exists()


def test_fetch_uses_a_local_wheel_and_caches(tmp_path, monkeypatch):
    """The fetch path end to end on the real wheel (from the cache the other tests filled), into a fresh directory."""
    root = sdk_headers.ensure_headers()
    kernels = sdk_headers.ensure_kernels()
    wheel = tmp_path / "ttnn-0.81.1-cp310-cp310-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path in (root / "tt_metal").rglob("*"):
            if path.is_file():
                archive.write(path, "ttnn/" + str(path.relative_to(root)))
        for path in (kernels / "ttnn" / "cpp" / "ttnn" / "operations" / "matmul").rglob("*"):
            if path.is_file():
                archive.write(path, "ttnn/" + str(path.relative_to(kernels)))
    monkeypatch.setenv("TILEFARM_TTNN_WHEEL", str(wheel))
    monkeypatch.setenv("TILEFARM_SDK_HEADERS_DIR", str(tmp_path / "headers"))
    monkeypatch.setenv("TILEFARM_SDK_KERNELS_DIR", str(tmp_path / "kernels"))
    first = sdk_headers.fetch_headers()
    assert first.fetched and first.members > 500 and sdk_headers.installed_root() == first.root
    assert first.kernels_root == sdk_headers.installed_kernels_root() == tmp_path / "kernels" / "ttnn"
    matmul = "ttnn/cpp/ttnn/operations/matmul/device/kernels/dataflow/reader_bmm_tile_layout_in0_sender_padding.cpp"
    assert (first.kernels_root / matmul).read_bytes() == (kernels / matmul).read_bytes()
    again = sdk_headers.fetch_headers()
    assert not again.fetched and again.root == first.root


def test_kernel_extraction_rejects_a_wheel_without_ttnn_kernels(tmp_path):
    wheel = tmp_path / "ttnn-0.81.1-cp310-cp310-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("ttnn/ttnn/cpp/ttnn/operations/eltwise/binary/device/kernels/compute/k.cpp", "// one kernel\n")
    with pytest.raises(sdk_headers.SdkHeadersError, match="reader_bmm_tile_layout_in0_sender_padding.cpp"):
        sdk_headers.extract_kernels(wheel, tmp_path / "out")
