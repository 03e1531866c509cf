"""Image comparison shared by the engine, the benchmarks, the demo calibration and the window.

No Qt and no MLX; scikit-image is imported on first use (about 0.5 s), not at start-up.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """SSIM of two same-shape 8-bit images (RGB or grey), with the data range given explicitly:
    scikit-image's float default would guess it from the dtype."""
    from skimage.metrics import structural_similarity

    value: Any = structural_similarity(
        np.asarray(a, dtype=np.uint8),
        np.asarray(b, dtype=np.uint8),
        channel_axis=-1 if np.ndim(a) == 3 else None,
        data_range=255,
    )
    return float(value)
