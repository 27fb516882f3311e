"""pip install ./python: builds kiln._kiln with the project's CMake (the library is linked
in statically; the module needs libLLVM-19 at run time) and installs the package.

    python3 -m pip install ./python

Environment: KILN_CMAKE_ARGS adds arguments to the CMake configure step; the build
directory is pip's temporary build directory."""
import os
import pathlib
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if not (ROOT / "include" / "kiln.h").exists():
            raise RuntimeError("kiln's source tree is not beside python/: install from a checkout")
        target = pathlib.Path(self.get_ext_fullpath(ext.name)).resolve()
        build = pathlib.Path(self.build_temp).resolve() / "cmake"
        configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                     "-DKILN_PYTHON=ON", "-DKILN_BUILD_TESTS=OFF",
                     f"-DPython3_EXECUTABLE={sys.executable}"]
        configure += shlex.split(os.environ.get("KILN_CMAKE_ARGS", ""))
        subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", str(build), "--target", "kiln_python",
                               "-j", str(os.cpu_count() or 1)])
        built = sorted((build / "python" / "kiln").glob("_kiln*.so"))
        if not built:
            raise RuntimeError("CMake did not build kiln._kiln")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[0], target)


setup(
    name="kiln",
    version="0.1.0",
    description="kiln: JIT-compiled tensor graphs from Python (@kiln.jit over NumPy arrays)",
    packages=["kiln"],
    ext_modules=[Extension("kiln._kiln", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.10",
    install_requires=["numpy"],
    zip_safe=False,
)
