"""Published latent→RGB factor tables: the live previews' linear projection of a latent space.

Data only. Each family's module names the table of the latent space its mflux loop holds.
"""

from __future__ import annotations

from app.families.spec import RGBFactors

# Source of all three tables: ComfyUI, comfy/latent_formats.py, commit
# 9a9a69fd745de98e89b0f1a629cd3bc43d513a42 (github.com/Comfy-Org/ComfyUI), classes ``Flux``,
# ``Flux2`` and ``Wan21``: ``rgb = latent · factors + bias`` on the sampler's latent space, then
# (rgb + 1) / 2 clipped to [0, 1]. The sampler's space there is the one mflux's loop holds:
# FLUX.1 and Z-Image shifted and scaled (``Flux.process_in``; ComfyUI's ZImage model uses the Flux
# format, comfy/supported_models.py ``Lumina2.latent_format``), FLUX.2 BatchNorm-normalized and
# 2×2-patchified (``Flux2.process_in`` is the identity; its ``latent_rgb_factors_reshape`` is
# mflux's ``Flux2VAE._unpatchify_latents``), Qwen-Image's Wan-2.1 latents normalized by the
# per-channel mean and std that ``Wan21.process_in`` uses and mflux's ``QwenVAE`` undoes.

FLUX1_FACTORS: RGBFactors = (  # 16 channels (FLUX.1, Z-Image)
    (-0.0346, 0.0244, 0.0681),
    (0.0034, 0.0210, 0.0687),
    (0.0275, -0.0668, -0.0433),
    (-0.0174, 0.0160, 0.0617),
    (0.0859, 0.0721, 0.0329),
    (0.0004, 0.0383, 0.0115),
    (0.0405, 0.0861, 0.0915),
    (-0.0236, -0.0185, -0.0259),
    (-0.0245, 0.0250, 0.1180),
    (0.1008, 0.0755, -0.0421),
    (-0.0515, 0.0201, 0.0011),
    (0.0428, -0.0012, -0.0036),
    (0.0817, 0.0765, 0.0749),
    (-0.1264, -0.0522, -0.1103),
    (-0.0280, -0.0881, -0.0499),
    (-0.1262, -0.0982, -0.0778),
)
FLUX1_BIAS: tuple[float, float, float] = (-0.0329, -0.0718, -0.0851)

FLUX2_FACTORS: RGBFactors = (  # 32 channels (FLUX.2), after unpatchifying the 128 packed ones
    (0.0058, 0.0113, 0.0073),
    (0.0495, 0.0443, 0.0836),
    (-0.0099, 0.0096, 0.0644),
    (0.2144, 0.3009, 0.3652),
    (0.0166, -0.0039, -0.0054),
    (0.0157, 0.0103, -0.0160),
    (-0.0398, 0.0902, -0.0235),
    (-0.0052, 0.0095, 0.0109),
    (-0.3527, -0.2712, -0.1666),
    (-0.0301, -0.0356, -0.0180),
    (-0.0107, 0.0078, 0.0013),
    (0.0746, 0.0090, -0.0941),
    (0.0156, 0.0169, 0.0070),
    (-0.0034, -0.0040, -0.0114),
    (0.0032, 0.0181, 0.0080),
    (-0.0939, -0.0008, 0.0186),
    (0.0018, 0.0043, 0.0104),
    (0.0284, 0.0056, -0.0127),
    (-0.0024, -0.0022, -0.0030),
    (0.1207, -0.0026, 0.0065),
    (0.0128, 0.0101, 0.0142),
    (0.0137, -0.0072, -0.0007),
    (0.0095, 0.0092, -0.0059),
    (0.0000, -0.0077, -0.0049),
    (-0.0465, -0.0204, -0.0312),
    (0.0095, 0.0012, -0.0066),
    (0.0290, -0.0034, 0.0025),
    (0.0220, 0.0169, -0.0048),
    (-0.0332, -0.0457, -0.0468),
    (-0.0085, 0.0389, 0.0609),
    (-0.0076, 0.0003, -0.0043),
    (-0.0111, -0.0460, -0.0614),
)
FLUX2_BIAS: tuple[float, float, float] = (-0.0329, -0.0718, -0.0851)

WAN21_FACTORS: RGBFactors = (  # 16 channels (Qwen-Image's Wan-2.1 VAE)
    (-0.1299, -0.1692, 0.2932),
    (0.0671, 0.0406, 0.0442),
    (0.3568, 0.2548, 0.1747),
    (0.0372, 0.2344, 0.1420),
    (0.0313, 0.0189, -0.0328),
    (0.0296, -0.0956, -0.0665),
    (-0.3477, -0.4059, -0.2925),
    (0.0166, 0.1902, 0.1975),
    (-0.0412, 0.0267, -0.1364),
    (-0.1293, 0.0740, 0.1636),
    (0.0680, 0.3019, 0.1128),
    (0.0032, 0.0581, 0.0639),
    (-0.1251, 0.0927, 0.1699),
    (0.0060, -0.0633, 0.0005),
    (0.3477, 0.2275, 0.2950),
    (0.1984, 0.0913, 0.1861),
)
WAN21_BIAS: tuple[float, float, float] = (-0.1835, -0.0868, -0.3360)
