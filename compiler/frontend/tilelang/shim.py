"""The module objects a user's file sees as `tilelang`, `tilelang.language`, `tilelang.utils.target`, ...

They exist only inside one evaluation (handed out by the restricted importer in evaluate.py); nothing is ever
installed under the name `tilelang`. Unknown attributes are stubs that fail, with a location, when used.
"""
from __future__ import annotations

import types

from .diagnostics import fail
from .language import build_module

TENSTORRENT_TARGET = "tenstorrent"


class Missing:
    """Stands for something tilefarm does not provide (torch, tilelang.profiler...): fails only when used."""

    def __init__(self, name: str, why: str):
        self._name, self._why = name, why

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Missing(f"{self._name}.{attr}", self._why)

    def _fail(self, *args, **kwargs):
        fail(f"`{self._name}` is used while building the kernel, but {self._why}",
             hint="the compile service evaluates only what the entry needs: keep host-side code (torch, profiling, "
                  "benchmarks) out of the kernel factory")

    __call__ = __getitem__ = __iter__ = __bool__ = __index__ = __int__ = __float__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = _fail
    __mro_entries__ = _fail

    def __repr__(self):
        return f"<unavailable {self._name}>"


class JitFactory:
    """`@tilelang.jit(...)` on a kernel factory: calling it builds (here: returns) the prim_func."""

    def __init__(self, fn, options: dict):
        self.fn, self.options = fn, options
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__wrapped__ = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


_JIT_OPTIONS = {"out_idx", "target", "target_host", "execution_backend", "verbose", "pass_configs", "debug_root_path",
                "compile_flags", "func", "tune_cache"}


def jit(func=None, **options):
    unknown = sorted(set(options) - _JIT_OPTIONS)
    if unknown:
        fail(f"tilelang.jit option(s) {', '.join(unknown)} are not supported by tilefarm")
    if func is not None and callable(func):
        return JitFactory(func, options)
    return lambda fn: JitFactory(fn, options)


def compile(func, out_idx=None, target=None, target_host=None, execution_backend=None, pass_configs=None, **_):  # noqa: A001
    """`tilelang.compile(prim_func, ...)`: the prim_func is what tilefarm compiles."""
    return func


def autotune(*args, **kwargs):
    """Autotuning needs the device; the request's parameters choose the configuration."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Missing(f"{self.__name__}.{name}", "tilefarm's tilelang provides only the kernel language subset")


def build_modules() -> dict[str, types.ModuleType]:
    """Fresh module objects for one evaluation, keyed by their dotted names."""
    root, utils, target, autotuner = (_Module(n) for n in ("tilelang", "tilelang.utils", "tilelang.utils.target",
                                                            "tilelang.autotuner"))
    language = build_module()
    root.language, root.utils, root.autotuner = language, utils, autotuner
    root.jit, root.compile, root.autotune = jit, compile, autotune
    root.__version__ = "0.0.0+tilefarm"
    utils.target = target
    target.TENSTORRENT_TARGET = TENSTORRENT_TARGET
    autotuner.autotune = autotune
    jit_module = _Module("tilelang.jit")
    jit_module.jit = jit
    return {"tilelang": root, "tilelang.language": language, "tilelang.utils": utils,
            "tilelang.utils.target": target, "tilelang.autotuner": autotuner, "tilelang.jit": jit_module}
