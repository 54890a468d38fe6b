"""The emulator's bundle fixtures, for the element-function tests' hand-written compute programs."""
from tests.emulator.conftest import make_bundle, run  # noqa: F401
