"""Screenshots of the quantization picker, the memory banner and the Add Model Folder dialog.

FLUX.1 dev at full precision on a machine said to have 24 GB (the banner and its "Use 6-bit"
fix), at 1600×1000 and 1024×700, then the dialog on a tiny 4-bit FLUX.2 Klein folder written by
mflux's own saver. Nothing runs. Usage::

    QT_QPA_PLATFORM=offscreen uv run python -m lab.ui.model_screenshots OUT_DIR
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

GB = 1024**3


def tiny_klein_folder(root: Path) -> Path:
    import mlx.core as mx
    from mflux.models.common.weights.saving.model_saver import ModelSaver
    from mlx import nn

    from app.adapters import common, flux2
    from app.families.flux2 import Flux2Dims
    from app.variants import get_variant, weights

    definition = weights._weight_definition(get_variant("flux2-klein-4b"))
    with common.use_precision(mx.float32):
        shell = flux2.shell("flux2-klein-4b", dims=Flux2Dims(5, 1, 4, 32, 64, (8, 8, 8, 8)))

    def quantizable(_path: str, module: nn.Module) -> bool:
        weight = getattr(module, "weight", None)
        return hasattr(module, "to_quantized") and weight is not None and weight.shape[-1] % 64 == 0

    nn.quantize(shell.transformer, group_size=64, bits=4, class_predicate=quantizable)
    parts = {"tokenizers": {}, "transformer": shell.transformer}
    parts |= {"vae": nn.Linear(4, 4), "text_encoder": nn.Linear(4, 4)}
    ModelSaver.save_model(SimpleNamespace(**parts), 4, str(root), definition)
    (root / "tokenizer").mkdir(exist_ok=True)
    (root / "tokenizer" / "tokenizer.json").write_text("{}", encoding="utf-8")
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    from app.blas import preload_openblas

    preload_openblas()  # before anything imports MLX, as the app's launcher does
    os.environ.setdefault("TEACACHE_STUDIO_HOME", tempfile.mkdtemp(prefix="teacache-shots-"))

    # Before the window: its engine thread imports transformers too, and two threads importing
    # transformers' lazy module at once can fail.
    folder = tiny_klein_folder(Path(tempfile.mkdtemp(prefix="klein-q4-")) / "klein-q4")
    from PySide6.QtWidgets import QApplication

    from app.ui.launch import configure_application, default_engine_factory
    from app.ui.model_folders_view import AddModelFolderDialog
    from app.ui.window import open_window

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    configure_application(app)
    window = open_window(default_engine_factory())
    window.form.memory_bytes = 24 * GB
    window.session.select_variant("flux1-dev")
    window.form.quantize = None
    window.show()
    args.out.mkdir(parents=True, exist_ok=True)
    for w, h in ((1600, 1000), (1024, 700)):
        window.resize(w, h)
        for _ in range(20):
            app.processEvents()
        path = args.out / f"quantize-{w}x{h}.png"
        window.grab().save(str(path))
        print(f"saved {path}", flush=True)
    # The weights fit 36 GB, the estimated peak (an upper bound) does not: the yellow warning.
    window.form.memory_bytes = 36 * GB
    window.form.quantize = 8
    window.form.quantize = None
    for _ in range(20):
        app.processEvents()
    path = args.out / "memory-warning-1024x700.png"
    window.grab().save(str(path))
    print(f"saved {path}", flush=True)
    dialog = AddModelFolderDialog(window, str(folder))
    dialog.show()
    while dialog.shown_check is None or dialog.shown_check.folder != str(folder):  # off-thread
        app.processEvents()
    for _ in range(20):
        app.processEvents()
    path = args.out / "add-model-folder.png"
    dialog.grab().save(str(path))
    print(f"saved {path}", flush=True)
    window.model_folders.add_folder(str(folder), dialog.base_variant())
    for _ in range(20):
        app.processEvents()
    path = args.out / "model-folder-selected-1024x700.png"
    window.grab().save(str(path))
    print(f"saved {path}", flush=True)
    window.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
