"""A kernel's own names never clash with the generated code's: tensors named like the host program's variables
(`w`, `m`, `cq`, `mesh`, `program`) or like C++ keywords that Python allows (`new`, `this`). Against NumPy on both
archs."""
from __future__ import annotations

import numpy as np
import pytest

from schemas.target import TargetConfig

from .test_frontend import run_kernel, src

NAMES = src('''
    @T.prim_func
    def main(w: T.Tensor((64, 64), "float32"), m: T.Tensor((64, 64), "float32"), new: T.Tensor((64, 64), "float32"),
             cq: T.Tensor((64, 64), "float32"), program: T.Tensor((64, 64), "float32")):
        with T.Kernel(2) as mesh:
            this = T.alloc_fragment((32, 64), "float32")
            core = T.alloc_fragment((32, 64), "float32")
            T.copy(w[mesh * 32, 0], this)
            T.copy(m[mesh * 32, 0], core)
            for i, j in T.Parallel(32, 64):
                this[i, j] = this[i, j] + core[i, j]
            T.copy(this, new[mesh * 32, 0])
            T.copy(core, cq[mesh * 32, 0])
            T.copy(this, program[mesh * 32, 0])
''')


@pytest.mark.parametrize("arch", ("wormhole_b0", "blackhole"))
def test_tensors_named_like_the_generated_codes_variables(arch):
    _, outcome = run_kernel(NAMES, seed=5, target=TargetConfig(arch=arch))
    w, m = outcome.inputs["w"], outcome.inputs["m"]
    np.testing.assert_array_equal(outcome.outputs["new"], w + m)
    np.testing.assert_array_equal(outcome.outputs["cq"], m)
    np.testing.assert_array_equal(outcome.outputs["program"], w + m)
    assert outcome.passed, outcome.verification.render()
