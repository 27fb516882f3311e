"""pytest setup for kiln's Python tests: CTest and scripts/test.sh put build/python on
PYTHONPATH; run by hand, the tests fall back to ../../build/python.  The persistent kernel
cache is off (KILN_CACHE_DIR=off) so that kiln.stats() counts real compiles."""
import os
import pathlib
import sys

os.environ["KILN_CACHE_DIR"] = "off"
try:
    import kiln  # noqa: F401
except ImportError:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "build" / "python"))
    import kiln  # noqa: F401
