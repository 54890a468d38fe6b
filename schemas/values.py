"""Values that stay storable: text UTF-8 can encode, finite numbers, standard JSON.

Every record tilefarm keeps is JSON (RFC 8259): no NaN or Infinity, and no lone surrogates (Python's json reads
`"\\udc80"` into a str that UTF-8 cannot encode). Untrusted input (API requests, the sandbox's answers) is held to
that before anything is stored, so that every stored record stays readable.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import AfterValidator

MAX_JSON_DEPTH = 64


def unicode_problem(text: str) -> str | None:
    """None when `text` encodes as UTF-8, else what is wrong with it (the first lone surrogate and where)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"invalid Unicode: lone surrogate U+{ord(text[error.start]):04X} at character {error.start}"
    return None


def _check_text(text: str) -> str:
    problem = unicode_problem(text)
    if problem:
        raise ValueError(problem)
    return text


Text = Annotated[str, AfterValidator(_check_text)]
"""A str that UTF-8 can encode (pydantic checks the type and length; this checks the code points)."""


def printable(value: object) -> str:
    """Any value as text that is safe to put in a message or a log line (lone surrogates escaped)."""
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def json_safe(value: Any, depth: int = 0) -> Any:
    """`value` made standard JSON, for a trusted writer: non-finite numbers as strings ("nan", "inf"), lone
    surrogates escaped, other objects as their str()."""
    if isinstance(value, str):
        return value if unicode_problem(value) is None else printable(value)
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth >= MAX_JSON_DEPTH:
        return printable(value)
    if isinstance(value, dict):
        return {json_safe(str(k)): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, depth + 1) for v in value]
    return printable(value)


def json_problems(value: Any, path: tuple = (), depth: int = 0) -> Iterator[tuple[tuple, str]]:
    """(path, problem) for every value JSON cannot hold: non-finite numbers, invalid Unicode in strings or keys,
    keys that are not strings, nesting deeper than MAX_JSON_DEPTH, types JSON does not have."""
    if depth > MAX_JSON_DEPTH:
        yield path, f"nested deeper than {MAX_JSON_DEPTH} levels"
    elif isinstance(value, str):
        if (problem := unicode_problem(value)) is not None:
            yield path, problem
    elif isinstance(value, bool) or value is None or isinstance(value, int):
        return
    elif isinstance(value, float):
        if not math.isfinite(value):
            yield path, f"{value} is not a finite number"
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                yield path, f"key {printable(key)!r} is not a string"
            elif (problem := unicode_problem(key)) is not None:
                yield (*path, printable(key)), f"key: {problem}"
            yield from json_problems(item, (*path, printable(key)), depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from json_problems(item, (*path, index), depth + 1)
    else:
        yield path, f"{type(value).__name__} is not a JSON value"


def where(path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "(the document)"


def check_json(value: Any) -> Any:
    """`value` if it is standard JSON all the way down, else ValueError naming the first bad place."""
    for path, problem in json_problems(value):
        raise ValueError(f"{where(path)}: {problem}")
    return value


JsonValue = Annotated[Any, AfterValidator(check_json)]


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # 1e999: valid JSON syntax, but no float holds it
        raise ValueError(f"{text[:40]} is out of range")
    return number


def loads_strict(data: bytes | str) -> Any:
    """json.loads for untrusted documents: no NaN/Infinity, no numbers that overflow, text UTF-8 can encode.
    ValueError otherwise."""
    try:
        value = json.loads(data, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError("the document is nested too deeply") from None
    return check_json(value)
