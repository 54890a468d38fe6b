"""main.cpp from the plan: the complete MeshDevice-style host program (buffers, CBs, kernels, runtime args,
input upload, launch, output download). The same file builds against the TT-Metalium SDK and the emulator."""
from __future__ import annotations

from functools import lru_cache

import jinja2

from ..version import COMPILER_VERSION


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.PackageLoader("compiler.codegen", "templates"),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    return env.get_template("main.cpp.j2")




def print_host(plan: dict) -> str:
    work_args = plan["work"]["work_args"]
    kernels = []
    for k in plan["kernels"]:
        args = []
        for a in k["runtime_args"]:
            if a["kind"] == "buffer_address":
                args.append(f"static_cast<uint32_t>({a['buffer']}->address())")
            else:
                args.append(f"w[{2 + work_args.index(a['name'])}]")
        kernels.append(dict(k, cpp_args=args))
    view = dict(plan, kernels=kernels)
    buffers = [b for b in plan["buffers"] if b["role"] != "unused"]
    return _template().render(
        version=COMPILER_VERSION, plan=view, buffers=buffers,
        inputs=[b for b in buffers if b["role"] == "input"], outputs=[b for b in buffers if b["role"] == "output"],
        dataflow=[k for k in kernels if k["role"] != "compute"])
