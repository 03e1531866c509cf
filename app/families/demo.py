"""The embedded demo model: a tiny FLUX.2-Klein-shaped transformer that ships with the app.

Not an mflux model: no Hub weights, no LoRA, no model folders. Its pipeline is a ``Flux2Klein``
built by ``app.demo.pipeline``, so FLUX.2 Klein's adapter gates it (by class), and it decodes
its own previews exactly (``decode_preview``).
"""

from __future__ import annotations

from app.families.spec import Family

FAMILY = Family(
    id="demo",
    display_name="Embedded demo",
    short_name="demo",
    order=0,
    activation_gb_per_megapixel=0.0,  # ``Variant.working_gb`` states the demo's own figure
    memory_measured_on=None,
    mflux=None,
    adapter=None,
    preview=None,
    random_weights=None,
    folders=None,
    sizes=((128, 128),),  # the demo model is trained at one size
)
