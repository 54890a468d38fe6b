"""A kernel may include only the SDK's headers and may hold no assembler: checked by the real preprocessor, not by
reading the text. Each trick below hides an include or assembler from a naive reader of the source (a C++14 digit
separator, a lone CR ending a // comment, .incbin, token pasting, attributes that reach the assembler, line
markers...). A compile answer carrying one is refused when it comes back from the sandbox, before anything of it is
stored, and by the emulator's kernel JIT itself (which compiles exactly the text it checked), whoever runs it.
Neither shows a byte of the file it aimed at."""
from __future__ import annotations

import os
import secrets

import numpy as np
import pytest

from compiler.toolchain import emulate, kernel_check
from farm.settings import Settings
from schemas.target import TargetConfig
from tests.security.forging import compile_forgery, forging_kernel, genuine_compile
from workers import sandbox

INCLUDES = {
    "digit-separator": '''constexpr int tilefarm_x = 1'2 + sizeof("'/*");\n#include "{secret}"\n// */\n''',
    "carriage-return": '// a comment\r#include "{secret}"\n',
    "carriage-return-splice": '#inc\\\r\nlude "{secret}"\n',
    "absolute": '#include "{secret}"\n',
    "angle-brackets": "#include <{secret}>\n",
    "traversal": '#include "api/../../../../../../../../../..{secret}"\n',
    "computed": '#define TILEFARM_LEAK "{secret}"\n#include TILEFARM_LEAK\n',
    "pasted-name": '#define TILEFARM_Q(x) #x\n#define TILEFARM_S(x) TILEFARM_Q(x)\n#include TILEFARM_S({secret})\n',
    "digraph": '%:include "{secret}"\n',
    "spliced": '#inc\\\nlude "{secret}"\n',
    "include-next": '#include_next "{secret}"\n',
    "import": '#import "{secret}"\n',
    "raw-string-decoy": 'const char* tilefarm_s = R"x(")x";\n#include "{secret}"\n',
    "has-include": '#if __has_include("{secret}")\n#include "{secret}"\n#endif\n',
    "block-comment-decoy": '/* "*/ #include "{secret}" /*" */\n',
    "proc-environ": '#include "/proc/self/environ"\n',
    "comment-inside-directive": '# /* a comment */ include "{secret}"\n',
    "endless-device": '#include "/dev/zero"\n',
}
ASSEMBLER = {
    "incbin": 'asm(".pushsection .rodata\\n.globl tilefarm_leak\\ntilefarm_leak:\\n.incbin \\"{secret}\\"\\n.byte 0\\n'
              '.popsection");\nextern "C" const char tilefarm_leak[];\nextern "C" int puts(const char*);\n'
              'static int tilefarm_shown = puts(tilefarm_leak);\n',
    "dunder-asm": '__asm__(".include \\"{secret}\\"");\n',
    "asm-volatile-in-function": 'inline void tilefarm_f() {{ __asm volatile (".incbin \\"{secret}\\""); }}\n'
                                'static int tilefarm_g = (tilefarm_f(), 0);\n',
    "token-pasted-asm": '#define TILEFARM_CAT(a, b) a##b\nTILEFARM_CAT(__as, m__)(".incbin \\"{secret}\\"");\n',
    # a symbol's name goes to the assembler as it is written
    "asm-label": 'extern "C" int tilefarm_label asm("tilefarm_other\\n.incbin \\"{secret}\\"\\n#");\n'
                 'int tilefarm_read() {{ return tilefarm_label; }}\n',
    "escaped-incbin": 'asm("\\x2e\\x69ncbin \\"{secret}\\"");\n',
    "section-attribute": '__attribute__((used, section(".rodata\\n.incbin \\"{secret}\\"\\n#"))) const char tilefarm_a[1] = {{0}};\n',
    # no "incbin" anywhere in the text: the assembler's own macro pastes it together
    "section-gas-macro": '__attribute__((used, __section__(".text\\n.macro tilefarm_m a, b\\n\\\\a\\\\b \\"{secret}\\"\\n'
                         '.endm\\ntilefarm_m .inc, bin\\n#"))) const char tilefarm_b[1] = {{0}};\n',
    "gnu-section": '[[gnu::used, gnu::section(".rodata\\n.incbin \\"{secret}\\"\\n#")]] const char tilefarm_c[1] = {{0}};\n',
    "symver": '__attribute__((symver("tilefarm@V1\\n.incbin \\"{secret}\\"\\n#"))) void tilefarm_d() {{}}\n',
    "line-marker-disguise": '# 1 "/usr/include/stdint.h" 1 3\nasm(".incbin \\"{secret}\\"");\n',
    "line-directive-disguise": '#line 1 "/usr/include/stdint.h"\n__asm__(".incbin \\"{secret}\\"");\n',
    "pragma-operator": '_Pragma("GCC diagnostic push") asm(".incbin \\"{secret}\\"");\n',
}
TRICKS = {**INCLUDES, **ASSEMBLER}


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("kernel-check") / "host.secret"
    path.write_text(f"HOST-SECRET-{secrets.token_hex(8)}\n")
    os.chmod(path, 0o600)
    return path


@pytest.fixture(scope="module")
def genuine():
    return genuine_compile()


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    # the sandbox's process limit as served (512): RLIMIT_NPROC counts every process and thread of the sandbox user
    # on the machine, so a smaller one here failed a compile's g++ (EAGAIN) while the suite's other process ran an
    # emulation (a thread per core) in a sandbox of its own
    return Settings(data_dir=tmp_path_factory.mktemp("kernel-check-data"), compile_time_limit_s=30,
                    sandbox_memory_bytes=1024**3)


@pytest.fixture(scope="module")
def zygote(process_zygote, settings):
    return process_zygote(settings)  # the test process's (tests/conftest.py), closed at the session's end


@pytest.mark.parametrize("name", sorted(TRICKS))
def test_a_compile_answer_with_the_trick_is_refused(zygote, settings, genuine, name):
    """The target is a file every sandboxed child has (its own /etc/passwd): the check reads what a compile would."""
    answer, files = genuine
    reader = TRICKS[name].format(secret="/etc/passwd") + files["reader.cpp"].decode()
    source = forging_kernel({"compile": compile_forgery(answer, files, reader_cpp=reader.encode())})
    with pytest.raises(sandbox.ForgedAnswer, match="reader.cpp") as refused:
        sandbox.compile_source(settings, source=source, filename="forge.py", entry=None, target=TargetConfig(),
                               dump_ir=False, params=None)
    assert "root:x:0:0" not in str(refused.value)


LOOKALIKES = ('// #include "/etc/passwd" is only a comment\n/* #include </etc/shadow> */\n'
              'constexpr const char* tilefarm_words = "asm(x) #include </etc/shadow> [[section]]";\n'
              'constexpr unsigned tilefarm_million = 1\'000\'000;  // a digit separator, as C++14 has them\n'
              'inline unsigned tilefarm_section(unsigned asm_count) { return asm_count; }\n'
              '__attribute__((always_inline)) inline void tilefarm_inline() {}\n')


@pytest.mark.parametrize("extra", ["", LOOKALIKES], ids=["genuine", "lookalikes"])
def test_the_genuine_answer_is_taken(zygote, settings, genuine, extra):
    """The same forging kernel answering the genuine artifacts, or with words that only look like the tricks (in
    comments and strings, as parts of names, harmless attributes): the check refuses tricks, not kernels."""
    answer, files = genuine
    reader = (extra + files["reader.cpp"].decode()).encode()
    source = forging_kernel({"compile": compile_forgery(answer, files, reader_cpp=reader)})
    result = sandbox.compile_source(settings, source=source, filename="forge.py", entry=None, target=TargetConfig(),
                                    dump_ir=False, params=None)
    assert result.artifacts["reader.cpp"] == reader


@pytest.mark.parametrize("junk", ["/*a" * 350_000, '"a\\' * 250_000, "__attribute__((" * 100_000, "[[" * 200_000],
                         ids=["open-comments", "open-strings", "open-attributes", "open-brackets"])
def test_a_megabyte_of_hostile_text_is_checked(zygote, settings, genuine, junk):
    """Text that never closes what it opens is read once, not once per opening: the check answers (refused, or
    taken as the harmless text it is) within the compile's limits, never a timeout."""
    answer, files = genuine
    source = forging_kernel({"compile": compile_forgery(answer, files,
                                                        reader_cpp=files["reader.cpp"] + junk.encode())})
    try:
        sandbox.compile_source(settings, source=source, filename="forge.py", entry=None, target=TargetConfig(),
                               dump_ir=False, params=None)
    except sandbox.ForgedAnswer as refused:
        assert "reader.cpp" in str(refused)
@pytest.mark.parametrize("name", sorted(TRICKS))
def test_the_emulators_kernel_jit_refuses_the_trick(genuine, secret_file, tmp_path, name):
    """The emulator run as the CLI runs it (no sandbox): the JIT checks and compiles each kernel itself."""
    answer, files = genuine
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    for artifact, file in answer["artifacts"].items():
        (bundle / artifact).write_bytes(files[file])
    (bundle / "reader.cpp").write_text(TRICKS[name].format(secret=secret_file) + files["reader.cpp"].decode())
    inputs = {"A": np.ones((64, 64), np.float32)}
    with pytest.raises(emulate.EmulationError) as refused:
        emulate.run_program(bundle, inputs, tmp_path / "run", timeout_s=120)
    assert refused.value.kind == "kernel-compile", refused.value
    assert "reader.cpp" in refused.value.message and "refused" in refused.value.message, refused.value.message
    assert secret_file.read_text().strip() not in str(refused.value) + refused.value.log


def test_a_launcher_naming_other_rules_is_refused(capsys):
    """The JIT's launcher names the check's rules; a launcher naming others (or none) compiles nothing."""
    command = ["g++", "kernel.cpp", "-o", "kernel.so"]
    for named in (["--rules=" + "0" * 64], []):
        assert kernel_check.main([*named, *command]) == 2
        assert "a launcher of another tilefarm" in capsys.readouterr().err


def test_the_launcher_names_the_rules_its_check_holds(tmp_path):
    """The rules' digest follows the check's sources byte for byte, and the emulator's launcher carries it, so the
    JIT's object cache (keyed on the launcher's words) never serves an object another check let through."""
    copies = []
    for source in kernel_check.RULES_SOURCES:
        copy = tmp_path / source.name
        copy.write_bytes(source.read_bytes())
        copies.append(copy)
    assert kernel_check.rules_digest(tuple(copies)) == kernel_check.rules_digest()
    copies[0].write_bytes(copies[0].read_bytes() + b"\n# one more rule\n")
    assert kernel_check.rules_digest(tuple(copies)) != kernel_check.rules_digest()
    launcher = emulate.kernel_compiler_env()["TTEMU_KERNEL_CC"].split()
    assert launcher[-1] == f"--rules={kernel_check.rules_digest()}"
