"""Self-check that runs inside the built bundle (a second executable beside the app).

One real MLX operation on the default device (the GPU through Metal on macOS), which libmlx
was loaded and whether ``mlx.metallib`` sits beside it, the OpenBLAS preload on Linux, the
app's own resource lookup and its family registry, and every model family importable (its mflux
classes and its tokenizer classes). Prints one JSON object; exits 0 only when
every check passed. ``packaging/verify_bundle.py`` runs it. Usage:
``teacache-studio-selfcheck [--allow-cpu]``.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from pathlib import Path
from typing import Any


def _loaded_libraries() -> list[str]:
    """Paths of the shared libraries mapped into this process, as the loader recorded them."""
    if sys.platform == "darwin":
        libc = ctypes.CDLL(None)
        libc._dyld_image_count.restype = ctypes.c_uint32
        libc._dyld_get_image_name.restype = ctypes.c_char_p
        libc._dyld_get_image_name.argtypes = [ctypes.c_uint32]
        names = (libc._dyld_get_image_name(i) for i in range(libc._dyld_image_count()))
        return [name.decode() for name in names if name]
    maps = Path("/proc/self/maps")
    if not maps.exists():
        return []
    paths = {line.split(None, 5)[-1] for line in maps.read_text().splitlines() if "/" in line}
    return sorted(path.strip() for path in paths)


def _mlx_check(allow_cpu: bool) -> dict[str, Any]:
    import mlx.core as mx

    result: dict[str, Any] = {"mlx_version": getattr(mx, "__version__", "unknown")}
    metal = bool(mx.metal.is_available())
    result["metal_available"] = metal
    device = mx.gpu if metal else mx.cpu
    if sys.platform == "darwin" and not metal and not allow_cpu:
        result["error"] = "Metal is not available: MLX cannot use the GPU here"
    a = mx.arange(12, dtype=mx.float32).reshape(3, 4)
    b = mx.ones((4, 2), dtype=mx.float32)
    with mx.stream(device):
        product = mx.softmax(a @ b, axis=-1) * 2.0 + (a @ b)
    mx.eval(product)
    values = product.tolist()
    expected = [[7.0, 7.0], [23.0, 23.0], [39.0, 39.0]]  # row sums (6, 22, 38) + softmax(=0.5)*2
    result["device"] = str(device)
    result["result"] = values
    result["matmul_ok"] = values == expected

    libmlx = [path for path in _loaded_libraries() if Path(path).name.startswith("libmlx.")]
    result["libmlx_loaded"] = libmlx
    if sys.platform == "darwin":
        # MLX looks for its kernels next to the libmlx image that dladdr() reports.
        beside = [str(Path(path).parent / "mlx.metallib") for path in libmlx]
        result["metallib_beside_libmlx"] = all(Path(path).is_file() for path in beside) and bool(
            beside
        )
    return result


def _resources_check() -> dict[str, Any]:
    from app.families import FAMILIES
    from app.paths import DEMO_DIR, RESOURCES_DIR
    from app.variants import DEMO_DIR as VARIANTS_DEMO_DIR
    from app.variants import VARIANTS, get_variant

    result: dict[str, Any] = {
        "resources_dir": str(RESOURCES_DIR),
        "demo_files": sorted(path.name for path in DEMO_DIR.glob("*")) if DEMO_DIR.is_dir() else [],
        "variants_demo_dir": str(VARIANTS_DEMO_DIR),
        "variants_demo_dir_exists": VARIANTS_DEMO_DIR.is_dir(),
        # the family registry walks its package: frozen, that walk must still find every module
        "families": list(FAMILIES),
        "variant_families": sorted({v.family.id for v in VARIANTS.values()}),
    }
    # Reads resources/demo/demo.calibration.json the way the app does.
    demo = get_variant("demo")
    params = demo.params_for(demo.default_gate())
    result["demo_gate_coefficients"] = len(getattr(params, "coefficients", ()))
    return result


def _families_check() -> dict[str, Any]:
    """Each model family mflux loads, imported as the app would: its mflux classes (pipeline,
    weight definition, LoRA mapping) and its tokenizer classes, resolved by name on
    ``transformers`` as mflux's tokenizer loader does. A family whose mflux package the bundle
    lacks fails here, not at its first download. (Not its gate adapter: this executable's own
    archive holds only what it imports, and ``app`` modules named by path are the app's;
    check_analysis.py checks the app holds every one.)"""
    import transformers

    from app.families import FAMILIES

    imported: list[str] = []
    failures: dict[str, str] = {}
    for family in FAMILIES.values():
        if family.mflux is None:
            continue
        try:
            family.mflux.pipeline()
            family.mflux.weight_definition()
            if family.mflux.lora_mapping is not None:
                family.mflux.lora_mapping()
            for tokenizer in family.mflux.tokenizers():  # none where the repo names none (Lens)
                getattr(transformers, tokenizer.tokenizer_class)
        except Exception as exc:  # report every family, not the first failure only
            failures[family.id] = f"{type(exc).__name__}: {exc}"
        else:
            imported.append(family.id)
    return {"imported": imported, "failures": failures}


def main(argv: list[str]) -> int:
    allow_cpu = "--allow-cpu" in argv
    report: dict[str, Any] = {
        "frozen": bool(getattr(sys, "frozen", False)),
        "bundle_root": getattr(sys, "_MEIPASS", None),
        "platform": sys.platform,
        "python": sys.version.split()[0],
    }
    failures: list[str] = []

    from app.blas import preload_openblas

    report["openblas"] = preload_openblas()
    if sys.platform.startswith("linux") and not os.environ.get("TEACACHE_STUDIO_NO_OPENBLAS"):
        if report["openblas"] is None:
            failures.append(
                "no OpenBLAS found to preload: MLX-CPU would use its slow reference BLAS"
            )

    try:
        report["mlx"] = mlx = _mlx_check(allow_cpu)
        if "error" in mlx:
            failures.append(mlx["error"])
        if not mlx["matmul_ok"]:
            failures.append(f"MLX computed {mlx['result']}, expected the row sums")
        if not mlx["libmlx_loaded"]:
            failures.append("no libmlx among the loaded libraries")
        if mlx.get("metallib_beside_libmlx") is False:
            failures.append(f"mlx.metallib is not beside the loaded libmlx {mlx['libmlx_loaded']}")
    except Exception as exc:  # report, don't crash: the JSON is the verifier's evidence
        failures.append(f"MLX failed: {type(exc).__name__}: {exc}")

    try:
        report["resources"] = resources = _resources_check()
        if not resources["demo_files"]:
            failures.append(f"no demo resources in {resources['resources_dir']}/demo")
        if not resources["variants_demo_dir_exists"]:
            failures.append(
                f"app.variants looks for the demo in a missing folder: "
                f"{resources['variants_demo_dir']}"
            )
        unregistered = sorted(set(resources["variant_families"]) - set(resources["families"]))
        if unregistered:
            failures.append(
                f"the family registry found {resources['families']} in the bundle, not "
                f"{', '.join(unregistered)}"
            )
    except Exception as exc:
        failures.append(f"resource lookup failed: {type(exc).__name__}: {exc}")

    try:
        report["families"] = families = _families_check()
        failures += [
            f"the {family} family cannot be imported: {why}"
            for family, why in families["failures"].items()
        ]
    except Exception as exc:
        failures.append(f"the family check failed: {type(exc).__name__}: {exc}")

    report["failures"] = failures
    report["ok"] = not failures
    print(json.dumps(report, indent=2))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
