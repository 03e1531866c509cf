"""PyInstaller hook for MLX (pyinstaller-hooks-contrib has none).

1. ``mlx.core`` is a nanobind extension that imports ``mlx._reprlib_fix`` and
   ``mlx.__array_api_info`` from C, which static analysis cannot see: without them the frozen
   app dies with "Encountered an error while initializing the extension".
2. ``libmlx`` (and ``libjaccl`` on macOS) live in ``mlx/lib``; keep them there, once.
3. macOS: the Metal kernels are a separate ``mlx.metallib`` (~150-180 MB). MLX finds it with
   ``dladdr()`` on its own code, next to the ``libmlx.dylib`` that was actually loaded
   (``get_colocated_mtllib_path``). It must therefore sit in ``mlx/lib`` beside the only copy of
   ``libmlx.dylib``; a second copy elsewhere in the bundle loaded first gives "Failed to load the
   default metallib" although the file is present (stenolabs/stenoai#515, #287).
   ``packaging/verify_bundle.py`` checks this contract on the built app.
"""

from __future__ import annotations

from pathlib import Path

# PyInstaller is the optional `packaging` extra (the bundle step installs it): pyright sees its
# stubs but not its source here.
from PyInstaller.utils.hooks import (  # pyright: ignore[reportMissingModuleSource]
    collect_dynamic_libs,
    collect_submodules,
    copy_metadata,
    get_all_package_paths,
)


def _wanted(name: str) -> bool:
    # mlx.extension builds C++ extensions (imports setuptools); the others are the
    # `mlx.launch` distributed launcher. The app uses none of them.
    return not (
        name in ("mlx.extension", "mlx.__main__") or name.startswith("mlx._distributed_utils")
    )


hiddenimports = collect_submodules("mlx", filter=_wanted)
hiddenimports += ["mlx._reprlib_fix", "mlx.__array_api_info"]  # named for the reader

binaries = collect_dynamic_libs("mlx")  # keeps the wheel's layout: mlx/lib/libmlx.{so,dylib}

datas = copy_metadata("mlx")
for package_dir in get_all_package_paths("mlx"):
    metallib = Path(package_dir, "lib", "mlx.metallib")
    if metallib.is_file():
        datas.append((str(metallib), "mlx/lib"))

excludedimports = ["setuptools"]
