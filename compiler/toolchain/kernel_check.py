"""What a device kernel may be: C++ that reads no file but itself, the include directories it is compiled with and
the compiler's own standard headers, and holds no assembler. Decided on what the compiler really compiles, the
kernel preprocessed by the real preprocessor (`g++ -E -nostdinc`, only those directories visible), never on the
source text: a C++14 digit separator, a lone CR or a line splice reads one way to a pattern and another to g++.

Refused:
  * a file entered other than those (an absolute path, a `..` walk, a computed include, #include_next, #import...),
    and a line directive naming a file that was not entered (a disguise, or a way to make diagnostics quote a file);
  * assembler: `asm`, `__asm`, `__asm__` however the preprocessor came to produce them (token pasting included),
    the attributes whose strings go to the assembler (section, alias, weakref, symver, ifunc), `#ident`, and a string
    literal that, decoded and concatenated as the compiler does, holds an assembler directive that reads a file or
    builds other directives (.incbin, .include, .macro, .irp, .rept).

Two callers:
  * the sandbox's `check_kernels` op (workers/sandbox/ops.py) checks the kernels of a compile answer, each alone in
    an empty directory against the emulator's API headers, before the trusted side stores them (check_kernels);
    the whole preprocessed translation unit is scanned (the API headers hold no assembler);
  * the emulator's kernel JIT compiles every kernel through this module (TTEMU_KERNEL_CC, see main()): the kernel is
    preprocessed with the JIT's own flags and its files checked, the checked text (the .ii file) compiled to
    assembly, and the assembly checked before it is assembled: no asm statement (GCC brackets each with #APP), no
    directive that reads a file or builds others, however it got there. So nothing can differ between what was
    checked and what is built, and the C library's headers (asm labels, as glibc's redirections are) still compile
    for kernels that include them (ttnn's).
"""
from __future__ import annotations

import bisect
import hashlib
import os
import re
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .environment import child_env

TIMEOUT_S = 120                       # a preprocessor that reads /dev/zero stops at the memory limit long before
MEMORY_BYTES = 2 * 1024**3
OUTPUT_BYTES = 256 * 1024**2
KERNEL_FILES = ("reader.cpp", "compute.cpp", "writer.cpp")   # the device kernels of a bundle
ASSEMBLER_KEYWORDS = {"asm", "__asm", "__asm__"}
ASSEMBLER_ATTRIBUTES = {"section", "alias", "weakref", "symver", "ifunc"}
ASSEMBLER_DIRECTIVES = ("incbin", ".include", ".macro", ".irp", ".rept")
FILE_ARGUMENTS = ("-include", "-imacros")                       # options naming a file the preprocessor reads
DIR_ARGUMENTS = ("-I", "-isystem", "-iquote", "-idirafter")     # options naming a directory it searches
VALUE_OPTIONS = {"-o", "-x", "-D", "-U", "-MF", "-MT", "-MQ", *FILE_ARGUMENTS, *DIR_ARGUMENTS}


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    col: int
    message: str

    def render(self) -> str:
        where = ":".join([self.file, *(str(n) for n in (self.line, self.col)[:2 if self.col else 1] if self.line)])
        return f"{where}: {self.message}"


class KernelRefused(Exception):
    def __init__(self, kernel: str, findings: list[Finding]):
        self.kernel, self.findings = kernel, findings
        super().__init__(f"refused {kernel}: " + "; ".join(f.render() for f in findings[:5]))


# ------------------------------------------------------------------------------------------ the command

@dataclass
class Command:
    """A compiler command line as the JIT gives it: `CXX FLAGS... SOURCE -o OUTPUT`."""
    cxx: str
    flags: list[str]                 # everything but the source and `-o OUTPUT`
    source: str
    output: str

    @classmethod
    def parse(cls, argv: list[str]) -> "Command":
        if not argv:
            raise ValueError("no compiler command")
        flags, sources, output, args = [], [], None, iter(argv[1:])
        for arg in args:
            if arg == "-o":
                output = next(args, None)
            elif arg in VALUE_OPTIONS:
                flags += [arg, next(args, "")]
            elif arg.startswith("-") and arg != "-":
                flags.append(arg)
            else:
                sources.append(arg)
        if len(sources) != 1 or output is None:
            raise ValueError(f"expected one source and -o OUTPUT: {' '.join(argv)}")
        return cls(argv[0], flags, sources[0], output)

    def searched(self) -> tuple[list[str], list[str]]:
        """(directories searched, files read) that the command itself names."""
        dirs, files, flags = [], [], iter(self.flags)
        for flag in flags:
            if flag in DIR_ARGUMENTS:
                dirs.append(next(flags, ""))
            elif flag in FILE_ARGUMENTS:
                files.append(next(flags, ""))
            elif flag in VALUE_OPTIONS:
                next(flags, "")
            else:
                joined = next((o for o in DIR_ARGUMENTS if flag.startswith(o) and flag != o), None)
                if joined:
                    dirs.append(flag[len(joined):])
        return dirs, files


@lru_cache(maxsize=8)
def standard_include_dirs(cxx: str) -> tuple[str, ...]:
    """Where `cxx` finds its own headers (the C++ standard library, libc), as `cxx -v` lists them."""
    done = subprocess.run([cxx, "-x", "c++", "-E", "-v", "-"], input="", capture_output=True, text=True,
                          env=child_env(), timeout=TIMEOUT_S)
    dirs, listing = [], False
    for line in done.stderr.splitlines():
        if line.startswith("#include ") and line.endswith("search starts here:"):
            listing = True
        elif line.startswith("End of search list"):
            listing = False
        elif listing and line.startswith(" ") and os.path.isdir(line.strip()):
            dirs.append(os.path.realpath(line.strip()))
    return tuple(dict.fromkeys(dirs))


def _limit_resources() -> None:
    """In the preprocessor's child: memory, output size and CPU bounded (only ever lowered: a sandboxed caller's
    own limits may be lower already)."""
    for which, value in ((resource.RLIMIT_AS, MEMORY_BYTES), (resource.RLIMIT_FSIZE, OUTPUT_BYTES),
                         (resource.RLIMIT_CPU, TIMEOUT_S)):
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


# ------------------------------------------------------------------------------------------ files entered

def dependencies(text: str) -> list[str]:
    """The prerequisites of a make rule as `-MD` writes it (continuations joined, `\\ ` and `$$` unescaped)."""
    body = text.replace("\\\n", " ").split(": ", 1)[-1]
    return [re.sub(r"\\(.)", r"\1", word).replace("$$", "$") for word in re.findall(r"(?:\\.|[^\s\\])+", body)]


class Allowed:
    """The files a kernel's compile may read: itself, what the command names, the compiler's standard headers."""

    def __init__(self, command: Command):
        dirs, files = command.searched()
        self.source = os.path.realpath(command.source)
        self.files = {self.source, *(os.path.realpath(f) for f in files if f)}
        self.dirs = [os.path.realpath(d) for d in (*dirs, *standard_include_dirs(command.cxx)) if d]

    def __contains__(self, path: str) -> bool:
        real = os.path.realpath(path)
        return real in self.files or any(real.startswith(d.rstrip("/") + "/") for d in self.dirs)


def check_dependencies(deps: list[str], allowed: Allowed, shown_as: str) -> list[Finding]:
    return [Finding(shown_as, 0, 0, f"reads {path!r}, which a kernel may not include: only the SDK's headers")
            for path in deps if path not in allowed]


# ------------------------------------------------------------------------------------------ the preprocessed text

# A preprocessed translation unit (no comments or splices left) as runs of code, literals, line markers and numbers.
# A run of code holds no quote, no `#`, no number and no identifier a quote follows (it may be a literal's prefix);
# literals (their encoding prefixes start a token only where no identifier goes on) and pp-numbers (a digit separator
# is no character literal) are exactly C++'s. Runs (atomic: no backtracking) keep this fast: a few thousand tokens,
# ~50 ms, for the 400 KB a kernel and its headers preprocess to.
_TOKEN = re.compile(r"""
    (?P<code>(?:(?>(?:[^\W\d]|\$)[\w$]*+)(?![\w$"'])|[^\w$"'\#]++)++)
  | (?P<raw>(?<![\w$])(?:u8|[uUL])?R"(?P<delim>[^()\\\s"]{0,16})\((?P<rawbody>.*?)\)(?P=delim)")
  | (?P<string>(?:(?<![\w$])(?:u8|[uUL]))?"(?P<body>(?:\\.|[^"\\\n])*+)")
  | (?P<char>(?:(?<![\w$])(?:u8|[uUL]))?'(?:\\.|[^'\\\n])*+')
  | (?P<marker>^\#\ (?P<line>\d+)\ "(?P<file>(?:[^"\\\n]|\\.)*)"[^\n]*$)
  | (?P<word>(?:[^\W\d]|\$)[\w$]*)
  | (?P<number>(?<![\w$])\.?\d(?:[eEpP][+-]|'\w|[\w.])*)
  | (?P<other>.)
""", re.S | re.X | re.M)
_MARKER_LINE = re.compile(r'^\# \d+ "(?P<file>(?:[^"\\\n]|\\.)*)"', re.M)
_ASM = re.compile(r"(?<![\w$])(?:asm|__asm|__asm__)(?![\w$])")
_ATTRIBUTE = re.compile(r"(?<![\w$])__attribute(?:__)?(?![\w$])\s*\(|(?:\[|<:)\s*(?:\[|<:)")
_DIRECTIVE = re.compile(r"(?:\#|%:)\s*(ident|sccs|assert|unassert)(?![\w$])")
_IDENTIFIER = re.compile(r"(?:[^\W\d]|\$)[\w$]*")
_PARENS = re.compile(r"[()]")
_CLOSE_BRACKETS = re.compile(r"(?:\]|:>)\s*(?:\]|:>)")
_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9A-Fa-f]+)|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.S)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "e": "\x1b"}


def _decoded(body: str) -> str:
    def one(match: re.Match) -> str:
        octal, hexa, short, long, other = match.groups()
        if other is not None:
            return _SIMPLE.get(other, other)
        return chr(min(int(octal, 8) if octal else int(hexa or short or long, 16), 0x10FFFF))
    return _ESCAPE.sub(one, body)


class _Scan:
    """One pass over the preprocessed text; findings located by its line markers."""
    MAX_FINDINGS = 50

    def __init__(self, text: str, entered: set[str], shown: dict[str, str]):
        self.text, self.entered, self.shown = text, entered, shown
        self.findings: list[Finding] = []
        self.markers: list[tuple[int, str, int]] = []   # (offset of the line after it, file, that line's number)

    def add(self, position: int, message: str) -> None:
        if len(self.findings) >= self.MAX_FINDINGS:
            return
        at = bisect.bisect_right(self.markers, (position, "\uffff")) - 1
        start, file, line = self.markers[at] if at >= 0 else (0, "<built-in>", 1)
        line += self.text.count("\n", start, position)
        col = position - (self.text.rfind("\n", 0, position) + 1) + 1
        self.findings.append(Finding(self.shown.get(file, os.path.basename(file)), line, col, message))

    def run(self) -> list[Finding]:
        code, offsets, length = [], [], 0   # the code with each literal as `"`; where each piece starts in the text
        literal: list[str] = []
        literal_at, named = 0, {}
        for match in _TOKEN.finditer(self.text):
            kind = match.lastgroup
            if kind == "marker":
                name = _decoded(match.group("file"))
                if name not in named:
                    named[name] = name.startswith("<") or os.path.realpath(name) in self.entered
                    if not named[name]:
                        self.add(match.start(), f"a line directive names {name!r}, a file this kernel does not include")
                self.markers.append((match.end() + 1, name, int(match.group("line"))))
                continue
            if kind in ("string", "raw"):  # adjacent literals are one string to the compiler
                literal_at = literal_at if literal else match.start()
                literal.append(_decoded(match.group("body")) if kind == "string" else match.group("rawbody"))
            elif literal and not (kind == "code" and match.group(0).isspace()):
                self._literal("".join(literal), literal_at)
                literal = []
            piece = '"' if kind in ("string", "raw") else "'" if kind == "char" else match.group(0)
            offsets.append((length, match.start()))
            code += (piece, " ")
            length += len(piece) + 1
        if literal:
            self._literal("".join(literal), literal_at)
        self._code("".join(code), offsets)
        return sorted(self.findings, key=lambda f: (f.line, f.col))

    def markers_only(self) -> list[Finding]:
        """Only the line-marker rule (the assembly is checked instead of the tokens)."""
        for match in _MARKER_LINE.finditer(self.text):
            name = _decoded(match.group("file"))
            if not name.startswith("<") and os.path.realpath(name) not in self.entered:
                self.add(match.start(), f"a line directive names {name!r}, a file this kernel does not include")
        return self.findings

    def _code(self, code: str, offsets: list[tuple[int, int]]) -> None:
        def at(index: int) -> int:  # where code[index] is in the text
            piece = bisect.bisect_right(offsets, (index, 1 << 62)) - 1
            return offsets[piece][1] + (index - offsets[piece][0]) if piece >= 0 else 0

        for match in _ASM.finditer(code):
            self.add(at(match.start()), f"`{match.group(0)}`: assembler is not allowed in a device kernel")
        for match in _DIRECTIVE.finditer(code):
            self.add(at(match.start()), f"#{match.group(1)} is not allowed in a device kernel")
        position = 0
        while (match := _ATTRIBUTE.search(code, position)) is not None:
            end = self._attribute_end(code, match)
            for name in _IDENTIFIER.finditer(code, match.end(), end):
                if name.group(0).strip("_") in ASSEMBLER_ATTRIBUTES:
                    self.add(at(name.start()), f"the `{name.group(0)}` attribute reaches the assembler: not allowed "
                                               "in a device kernel")
            position = max(end, match.end())

    @staticmethod
    def _attribute_end(code: str, match: re.Match) -> int:
        """Where an attribute list that `match` opens ends (its closing parenthesis or ]]), or the text's end."""
        if match.group(0).startswith("__attribute"):
            depth = 1
            for paren in _PARENS.finditer(code, match.end()):
                depth += 1 if paren.group(0) == "(" else -1
                if depth == 0:
                    return paren.end()
            return len(code)
        close = _CLOSE_BRACKETS.search(code, match.end())
        return close.end() if close else len(code)

    def _literal(self, text: str, position: int) -> None:
        lowered = text.lower()
        found = next((d for d in ASSEMBLER_DIRECTIVES if d in lowered), None)
        if found:
            self.add(position, f"a string holding the assembler directive {found!r} is not allowed in a device kernel")


def scan(text: str, entered: set[str], shown: dict[str, str] | None = None) -> list[Finding]:
    """Assembler and disguises in a preprocessed translation unit; `entered`: the real paths of the files the
    preprocessor read (line markers may name only those), `shown`: how to name a file in a finding."""
    return _Scan(text, entered, shown or {}).run()


# ------------------------------------------------------------------------------------------ checking a kernel

def _own_diagnostics(stderr: str, allowed: Allowed) -> str:
    """The preprocessor's messages located in files a kernel may read; those located elsewhere are dropped (their
    text may quote a file the kernel had no business reading)."""
    kept, dropped = [], 0
    for line in stderr.splitlines():
        located = re.match(r"^(?:In file included from |\s+from )?(?P<file>[^:\n]+):\d+(?::\d+)?[:,]", line)
        if located is None or located.group("file") in allowed:
            kept.append(line)
        else:
            dropped += 1
    return "\n".join(kept + ([f"({dropped} messages about files a kernel may not read left out)"] if dropped else []))


class Preprocessing:
    """`command`'s preprocessing alone into `out`, with no include directory but its own and the compiler's standard
    ones; started at once (several run side by side), then checked (findings())."""

    def __init__(self, command: Command, out: str, shown_as: str | None = None, tokens: bool = True):
        self.command, self.out, self.shown_as = command, out, shown_as or os.path.basename(command.source)
        self.tokens = tokens  # scan the translation unit's tokens (else only its line markers)
        self.allowed = Allowed(command)
        self.deps, self.messages = out + ".d", out + ".messages"
        standard = [arg for d in standard_include_dirs(command.cxx) for arg in ("-isystem", d)]
        argv = [command.cxx, *command.flags, "-E", "-nostdinc", *standard, "-fdiagnostics-plain-output",
                "-MD", "-MF", self.deps, command.source, "-o", out]
        with open(self.messages, "wb") as messages:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=messages,
                                            env=child_env(), preexec_fn=_limit_resources)

    def findings(self) -> tuple[list[Finding], str]:
        """(what is refused, the preprocessor's own messages about files a kernel may read)."""
        try:
            status = self.process.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait()
        try:
            messages = _own_diagnostics(Path(self.messages).read_text(errors="replace"), self.allowed)
            entered = dependencies(Path(self.deps).read_text(errors="replace")) if os.path.exists(self.deps) else []
        finally:
            for path in (self.deps, self.messages):
                Path(path).unlink(missing_ok=True)
        findings = check_dependencies(entered, self.allowed, self.shown_as)
        if status != 0:
            return findings or [Finding(self.shown_as, 0, 0, "the kernel does not preprocess")], messages
        if not findings:
            entered_real = {os.path.realpath(p) for p in entered} | {self.allowed.source}
            text = Path(self.out).read_text(encoding="utf-8", errors="surrogateescape")
            shown = {self.command.source: self.shown_as}
            findings = scan(text, entered_real, shown) if self.tokens else _Scan(text, entered_real, shown).markers_only()
        return findings, messages


def jit_defines(kernel: dict, arch: str) -> list[str]:
    """The defines the emulator's JIT gives a kernel of the plan (src/jit.cpp compile_command), but those whose
    values come from the program at run time (compile-time arguments, CB formats)."""
    common = ["KERNEL_BUILD", "TTEMU_EMULATOR=1", f"ARCH_{arch.split('_')[0].upper()}"]
    if kernel.get("role") == "compute":
        return [*common, "TTEMU_COMPUTE_KERNEL=1", "UCK_CHLKC_MATH"]
    writer = kernel.get("processor") == "RISCV_0"
    return [*common, "COMPILE_FOR_BRISC" if writer else "COMPILE_FOR_NCRISC", f"PROCESSOR_INDEX={0 if writer else 1}"]


def check_kernels(kernels: dict[str, tuple[bytes, list[str]]], *, cxx: str,
                  include_dirs: list[str]) -> dict[str, list[Finding]]:
    """Kernels of a compile answer ({name: (text, defines)}), each alone in an empty directory (no neighbour to
    include), preprocessed side by side against `include_dirs` with its defines, as the JIT compiles it."""
    with tempfile.TemporaryDirectory(prefix="tilefarm-kernel-check-") as tmp:
        started = {}
        for name, (text, defines) in kernels.items():
            (Path(tmp) / name).mkdir()
            source = Path(tmp) / name / name
            source.write_bytes(text)
            command = Command(cxx, ["-std=c++20", "-Werror", *(f"-I{d}" for d in include_dirs),
                                    *(f"-D{d}" for d in defines)],
                              str(source), str(source.with_suffix(".o")))
            started[name] = Preprocessing(command, str(source.with_suffix(".ii")), shown_as=name)
        found = {}
        for name, preprocessing in started.items():
            findings, messages = preprocessing.findings()
            if findings and messages and findings[0].message == "the kernel does not preprocess":
                findings = [Finding(name, 0, 0, f"the kernel does not preprocess:\n{messages[-4000:]}")]
            found[name] = findings
    return found


# ------------------------------------------------------------------------------------------ the JIT's compiler

# In GCC's assembly output: an asm statement (always between #APP and #NO_APP, its source line after), and the
# assembler directives that read a file or build other directives (GAS takes `;` between statements too).
_APP = re.compile(r'^#APP\n(?:# (?P<line>\d+) "(?P<file>(?:[^"\\\n]|\\.)*)")?', re.M)
_READING = re.compile(r"(?<![\w$.])\.(?P<directive>incbin|include|macro|irpc?|rept|altmacro|purgem)(?![\w$])", re.I)


def check_assembly(text: str, shown_as: str) -> list[Finding]:
    """What the assembler would be given: no asm statement, no directive that reads a file or builds others."""
    found = []
    for match in _APP.finditer(text):
        file = _decoded(match.group("file") or shown_as)
        found.append(Finding(os.path.basename(file), int(match.group("line") or 0), 0,
                             "an asm statement: assembler is not allowed in a device kernel"))
    for match in _READING.finditer(text):
        found.append(Finding(shown_as, 0, 0, f"the assembler would be given `.{match.group('directive')}` (from a "
                                             "string of the kernel's): not allowed in a device kernel"))
    return found[:20]


def _compile_flags(command: Command) -> list[str]:
    """The command's flags for compiling text already preprocessed: no include, define or language again."""
    kept, flags = [], iter(command.flags)
    for flag in flags:
        if flag in VALUE_OPTIONS:
            value = next(flags, "")
            if flag not in (*FILE_ARGUMENTS, *DIR_ARGUMENTS, "-D", "-U", "-x"):
                kept += [flag, value]
        elif not flag.startswith(("-I", "-D", "-U")):
            kept.append(flag)
    return kept


RULES_SOURCES = (Path(__file__), Path(__file__).with_name("environment.py"))  # what decides what the check does


def rules_digest(sources: tuple[Path, ...] = RULES_SOURCES) -> str:
    """The check's rules, named by the SHA-256 of the sources that decide them (this module and the environment it
    gives the compiler): the launcher carries it, so the JIT's cache key changes whenever the check does."""
    digest = hashlib.sha256()
    for source in sources:
        content = source.read_bytes()
        digest.update(f"{source.name}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    """`python -m compiler.toolchain.kernel_check --rules=DIGEST CXX FLAGS... SOURCE -o OUTPUT`: the emulator's
    kernel JIT runs every kernel compile through this (TTEMU_KERNEL_CC). Preprocess and check the files entered;
    compile the checked text to assembly and check it; assemble exactly that."""
    argv = list(sys.argv[1:] if argv is None else argv)
    named = argv.pop(0).removeprefix("--rules=") if argv and argv[0].startswith("--rules=") else None
    if named != rules_digest():
        print(f"tilefarm kernel check: the launcher names rules {named or '(none)'}, this check's are "
              f"{rules_digest()}: a launcher of another tilefarm (its cached kernels were checked by other rules)",
              file=sys.stderr)
        return 2
    try:
        command = Command.parse(argv)
    except ValueError as error:
        print(f"tilefarm kernel check: {error}", file=sys.stderr)
        return 2
    name = os.path.basename(command.source)
    checked, assembly = command.output + ".ii", command.output + ".s"

    def refuse(findings: list[Finding], messages: str = "") -> int:
        print(f"tilefarm refused {name}:", file=sys.stderr)
        for finding in findings[:20]:
            print(f"  {finding.render()}", file=sys.stderr)
        if messages:
            print(messages[-4000:], file=sys.stderr)
        return 1

    try:
        findings, messages = Preprocessing(command, checked, tokens=False).findings()
        if findings:
            return refuse(findings, messages)
        if messages:
            print(messages, file=sys.stderr)
        flags = _compile_flags(command)
        compiled = subprocess.run([command.cxx, *flags, "-fno-diagnostics-show-caret", "-S", checked, "-o", assembly],
                                  env=child_env())
        if compiled.returncode != 0:
            return compiled.returncode
        findings = check_assembly(Path(assembly).read_text(errors="replace"), name)
        if findings:
            return refuse(findings)
        return subprocess.run([command.cxx, *flags, assembly, "-o", command.output], env=child_env()).returncode
    finally:
        for path in (checked, assembly):
            Path(path).unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
