"""PyInstaller hook for mflux 0.24: the mflux package of every model family the app runs (read
from the family registry, ``app.families``: a new family is collected by its module alone), and
the tokenizers they load.

mflux imports model code lazily and picks tokenizer classes by name
(``getattr(transformers, "Qwen2Tokenizer")``, ``AutoTokenizer`` resolving a model type), which
static analysis cannot follow. Collect what the families need; skip training code and the other
mflux models (SeedVR2, Fibo, Depth Pro, ...) the app never offers.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

# PyInstaller is the optional `packaging` extra (the bundle step installs it): pyright sees its
# stubs but not its source here.
from PyInstaller.utils.hooks import collect_submodules, copy_metadata  # pyright: ignore[reportMissingModuleSource]


def _bundle_config():
    """packaging/bundle_config.py, as the spec registered it (or loaded by path: packaging/ is no
    package)."""
    loaded = sys.modules.get("teacache_bundle_config")
    if loaded is not None:
        return loaded
    location = Path(__file__).resolve().parents[1] / "bundle_config.py"
    spec = importlib.util.spec_from_file_location("teacache_bundle_config", location)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _wanted(name: str) -> bool:
    return ".training" not in name and ".cli" not in name


hiddenimports: list[str] = []
for package in (
    *_bundle_config().family_mflux_packages(),
    "mflux.models.common",
    "mflux.callbacks",
):
    hiddenimports += collect_submodules(package, filter=_wanted)

# Tokenizers by family: FLUX.1 CLIP + T5; FLUX.2 Klein, Z-Image and Qwen-Image Qwen2/Qwen3;
# FLUX.3 Klein, Qwen-Image 2.1 and Krea 2 Qwen2's tokenizer over a Qwen3-VL text encoder
# (AutoTokenizer reads the model type from the config, so the configuration modules too).
hiddenimports += [
    "transformers.models.auto.tokenization_auto",
    "transformers.models.auto.configuration_auto",
    "transformers.models.clip.tokenization_clip",
    "transformers.models.clip.configuration_clip",
    "transformers.models.t5.tokenization_t5",
    "transformers.models.t5.configuration_t5",
    "transformers.models.qwen2.tokenization_qwen2",
    "transformers.models.qwen2.configuration_qwen2",
    "transformers.models.qwen3.configuration_qwen3",
    "transformers.models.qwen3_vl.configuration_qwen3_vl",
]

datas = copy_metadata("mflux")  # mflux.utils.version_util asks importlib.metadata

# Optional paths the app never takes (PyTorch checkpoints, ControlNet, concept-attention plots).
excludedimports = ["torch", "cv2", "matplotlib"]
