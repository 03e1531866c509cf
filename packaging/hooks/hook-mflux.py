"""PyInstaller hook for mflux 0.24: the four model families the app runs, and their tokenizers.

mflux imports model code lazily and picks tokenizer classes by name
(``getattr(transformers, "Qwen2Tokenizer")``, ``AutoTokenizer`` resolving a model type), which
static analysis cannot follow. Collect what the families need; skip training code and the other
families (SeedVR2, Fibo, Depth Pro, ...) the app never offers.
"""

from __future__ import annotations

# PyInstaller is the optional `packaging` extra (the bundle step installs it): pyright sees its
# stubs but not its source here.
from PyInstaller.utils.hooks import collect_submodules, copy_metadata  # pyright: ignore[reportMissingModuleSource]

FAMILIES = ("flux", "flux2", "z_image", "qwen")


def _wanted(name: str) -> bool:
    return ".training" not in name and ".cli" not in name


hiddenimports: list[str] = []
for package in (
    *(f"mflux.models.{family}" for family in FAMILIES),
    "mflux.models.common",
    "mflux.callbacks",
):
    hiddenimports += collect_submodules(package, filter=_wanted)

# Tokenizers by family: FLUX.1 CLIP + T5; FLUX.2 Klein, Z-Image and Qwen-Image Qwen2/Qwen3
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
]

datas = copy_metadata("mflux")  # mflux.utils.version_util asks importlib.metadata

# Optional paths the app never takes (PyTorch checkpoints, ControlNet, concept-attention plots).
excludedimports = ["torch", "cv2", "matplotlib"]
