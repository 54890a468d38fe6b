"""The module objects a user's file sees as `tilelang`, `tilelang.language`, `tilelang.autotuner`, ...

They exist only inside one evaluation (handed out by the restricted importer in evaluate.py); nothing is ever
installed under the name `tilelang`. Unknown attributes are stubs that fail, with a location, when used.
"""
from __future__ import annotations

import types

from .base import Missing, Names, dtype_name
from .diagnostics import fail
from .language import build_module, ceildiv

TENSTORRENT_TARGET = "tenstorrent"


class JitFactory:
    """`@tilelang.jit(...)` on a kernel factory: calling it builds (here: returns) the prim_func."""

    def __init__(self, fn, options: dict):
        self.fn, self.options = fn, options
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__wrapped__ = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


_JIT_OPTIONS = {"out_idx", "target", "target_host", "execution_backend", "verbose", "pass_configs", "debug_root_path",
                "compile_flags", "func", "tune_cache", "lazy_jit"}


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
    """`@autotune(configs=...)`: tuning needs the device; the factory keeps its defaults and the request's
    parameters choose the configuration."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


def cdiv(a, b):
    return ceildiv(a, b)


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Missing(f"{self.__name__}.{name}", "tilefarm's tilelang provides only the kernel language subset")


def _module(name: str, **attrs) -> _Module:
    mod = _Module(name)
    for key, value in attrs.items():
        setattr(mod, key, value)
    return mod


class DataType:
    """`from tvm import DataType`: what TileLang kernels ask of a dtype while they are built (its bits, lanes)."""

    def __init__(self, dtype):
        self.name = dtype_name(str(dtype))
        digits = "".join(ch for ch in self.name if ch.isdigit())
        self.bits = int(digits) if digits else 32
        self.lanes = 1

    def __str__(self):
        return self.name


def _num_sms(cores: int):
    def get_num_sms(*_args, **_kwargs) -> int:
        """`driver.get_num_sms()` (persistent kernels launch one block per SM): the target's worker cores."""
        return cores
    return get_num_sms


def build_modules(cores: int = 64) -> dict[str, types.ModuleType]:
    """Fresh module objects for one evaluation, keyed by their dotted names; `cores` is the target's worker count
    (what `tilelang.carver.arch.driver.get_num_sms()` answers)."""
    language = build_module()
    target = _module("tilelang.utils.target", TENSTORRENT_TARGET=TENSTORRENT_TARGET)
    utils = _module("tilelang.utils", target=target)
    autotuner = _module("tilelang.autotuner", autotune=autotune, __all__=["autotune"])
    jit_module = _module("tilelang.jit", jit=jit)
    testing = _module("tilelang.testing")
    root = _module("tilelang", language=language, utils=utils, autotuner=autotuner, testing=testing, jit=jit,
                   compile=compile, autotune=autotune, cdiv=cdiv, PassConfigKey=Names("PassConfigKey"),
                   TensorSupplyType=Names("TensorSupplyType"), __version__="0.0.0+tilefarm")
    tvm = _module("tvm", DataType=DataType)
    driver = _module("tilelang.carver.arch.driver", get_num_sms=_num_sms(cores))
    arch = _module("tilelang.carver.arch", driver=driver)
    carver = _module("tilelang.carver", arch=arch)
    root.carver = carver
    return {"tilelang": root, "tilelang.language": language, "tilelang.utils": utils,
            "tilelang.utils.target": target, "tilelang.autotuner": autotuner, "tilelang.jit": jit_module,
            "tilelang.testing": testing, "tvm": tvm, "tilelang.carver": carver, "tilelang.carver.arch": arch,
            "tilelang.carver.arch.driver": driver}
