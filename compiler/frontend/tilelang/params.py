"""Factory parameters, typed from the factory's signature: `--param` and the API send text or JSON scalars.

    causal=true|false|1|0         -> bool      (when the default or the annotation is a bool, or the text is a word)
    M=256, scale=0.125            -> int, float (by the default's type; an int default refuses "0.5")
    block=64,128                  -> [64, 128] (a list default, or any text with commas)
    sizes=(64,128) / [64,128]     -> (64, 128) / [64, 128] (brackets say tuple or list; a tuple default makes a tuple)
    dtype=bfloat16                -> the dtype T.bfloat16 (a dtype default or annotation)
    A=float16[256,128]            -> a tensor argument of an eager-JIT factory (dtype and shape)

A value that does not fit the parameter's type is a located error at the factory, naming the parameter.
"""
from __future__ import annotations

import inspect
import re

from ...errors import CompileError, SourceLocation
from .base import dtype_name, is_dtype_text
from .diagnostics import STAGE
from .expr import DType
from .language import TensorArg

TENSOR = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\[\s*(\d+(?:\s*,\s*\d+)*)\s*\]\s*$")
TRUE, FALSE = {"true", "True", "TRUE", "yes", "on"}, {"false", "False", "FALSE", "no", "off"}


class _Bad(Exception):
    pass


def _bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        if value in TRUE or value == "1":
            return True
        if value in FALSE or value == "0":
            return False
    raise _Bad("a bool (true/false/1/0)")


def _int(value):
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise _Bad("an integer")


def _float(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise _Bad("a number")


def _dtype(value):
    if isinstance(value, str) and is_dtype_text(value.strip()):
        return DType(dtype_name(value.strip()))
    raise _Bad("a dtype name (float16, bfloat16, float32, ...)")


def _tensor(value):
    m = TENSOR.match(value) if isinstance(value, str) else None
    if m is None:
        return None
    dtype = m.group(1)
    if not is_dtype_text(dtype):
        raise _Bad(f"a tensor DTYPE[D0,D1,...] with a known dtype, not `{dtype}`")
    return TensorArg(dtype_name(dtype), tuple(int(d) for d in m.group(2).split(",")))


def _infer(value):
    """No default and no annotation to go by: the text says what it is."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    if text == "None":
        return None
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    if _bracketed(text) or "," in text:
        return _sequence(text)
    if text[:1] in "([" or text[-1:] in ")]":
        raise _Bad("a list of numbers such as 64,128 or (64,128) (its brackets do not match)")
    if is_dtype_text(text):
        return DType(dtype_name(text))
    return value


def _bracketed(text: str) -> bool:
    return len(text) >= 2 and (text[0], text[-1]) in (("(", ")"), ("[", "]"))


def _sequence(text: str, item=None):
    """`64,128`, `(64, 128)` or `[64, 128]` -> a list (a tuple for parentheses) of the items, each converted by
    `item` (inferred when None: numbers, bools or dtypes; any other word is refused, naming it)."""
    body = text.strip()
    kind = tuple if body.startswith("(") else list
    if not _bracketed(body) and (body[:1] in "([" or body[-1:] in ")]"):
        raise _Bad("a list of numbers such as 64,128 or (64,128) (its brackets do not match)")
    if _bracketed(body):
        body = body[1:-1]
    parts = [p.strip() for p in body.split(",")]
    if parts and not parts[-1]:
        parts.pop()                       # `(64,)`: a trailing comma
    if any(not p for p in parts) or any(c in p for p in parts for c in "()[]"):
        raise _Bad("a list of numbers such as 64,128 or (64,128) (no empty or nested items)")
    items = []
    for p in parts:
        if item is not None:
            items.append(item(p))
            continue
        v = _infer(p)
        if not isinstance(v, DType) and isinstance(v, (str, list, tuple)) or v is None:
            raise _Bad(f"a list of numbers such as 64,128 or (64,128); `{p}` is not a number")
        items.append(v)
    return kind(items)


def _by_example(example, value):
    """Convert `value` to the type of `example` (a default value)."""
    if isinstance(example, bool):
        return _bool(value)
    if isinstance(example, DType) or (isinstance(example, str) and is_dtype_text(example)):
        return _dtype(value) if isinstance(value, str) else value
    if isinstance(example, int):
        return _int(value)
    if isinstance(example, float):
        return _float(value)
    if isinstance(example, (list, tuple)):
        if isinstance(value, (list, tuple)):
            return type(example)(value)
        if not isinstance(value, str):
            value = str(value)
        return type(example)(_sequence(value, (lambda p: _by_example(example[0], p)) if example else None))
    if isinstance(example, str):
        return value if isinstance(value, str) else str(value)
    return _infer(value)


_ANNOTATIONS = {bool: _bool, "bool": _bool, int: _int, "int": _int, float: _float, "float": _float}


def scalar_annotation(annotation):
    """T.float32 / T.int32 / T.bool (or their text, with `from __future__ import annotations`) -> the converter."""
    if not isinstance(annotation, str):
        return None
    text = annotation.strip()
    text = text.split(".", 1)[1] if text.startswith(("T.", "tl.")) else text
    if not is_dtype_text(text):
        return None
    name = dtype_name(text)
    if name == "bool":
        return _bool
    if name.startswith(("int", "uint")):
        return _int
    if name.startswith(("float", "bfloat")):
        return _float
    return None


def type_value(param: inspect.Parameter | None, value):
    if isinstance(value, TensorArg):
        return value
    tensor = _tensor(value)
    if tensor is not None:
        return tensor
    if param is None:
        return _infer(value)
    annotation = param.annotation
    if annotation is not inspect.Parameter.empty:
        if annotation in _ANNOTATIONS:
            return _ANNOTATIONS[annotation](value)
        if getattr(annotation, "__name__", None) == "dtype" or str(annotation).endswith("dtype"):
            return _dtype(value) if isinstance(value, str) else value
        scalar = scalar_annotation(annotation)   # `data: T.float32 = 1`: a scalar argument of that dtype
        if scalar is not None:
            return scalar(value)
    if param.default is not inspect.Parameter.empty and param.default is not None:
        return _by_example(param.default, value)
    return _infer(value)


def type_params(signature: inspect.Signature, params: dict, factory: str, location: SourceLocation) -> dict:
    typed = {}
    for name, value in params.items():
        param = signature.parameters.get(name)
        try:
            typed[name] = type_value(param, value)
        except _Bad as e:
            raise CompileError(f"parameter `{name}` of `{factory}` takes {e}, got `{value}`", stage=STAGE,
                               location=location) from None
    return typed
