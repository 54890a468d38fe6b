from tvm.script import tirx as T
# ÿşÃ( invalid
