"""The embedded demo model: a tiny FLUX.2-Klein-shaped transformer that ships with the app.

Not an mflux model: its weights ship with the app (no Hub, no download, no quantization, no LoRA,
no model folders), it is trained at one size and draws a closed vocabulary. Its pipeline is a
``Flux2Klein`` built by ``app.demo.pipeline``, so FLUX.2 Klein's adapter gates it (by class), and
it decodes its own previews exactly (``decode_preview``).
"""

from __future__ import annotations

from app.families.spec import Family

# Suggested calibration prompts in the demo's closed vocabulary (the general list would not parse):
# short, and as different as can be, as the reference recipe does (research §8).
CALIBRATION_PROMPTS = (
    "a red circle on a blue background",
    "two small yellow stars at the left on a black background",
    "a large green square at the centre on a white background",
    "three small blue triangles at the top on a yellow background",
    "a purple star at the right on a green background",
    "a large orange circle at the bottom on a purple background",
    "two white squares at the right on a black background",
    "a black triangle at the centre on a white background",
    "a small striped red star at the top on a green background",
    "a large dotted blue circle at the left on a yellow background",
)

FAMILY = Family(
    id="demo",
    display_name="Embedded demo",
    short_name="demo",
    order=0,
    activation_gb_per_megapixel=0.0,  # ``flat_working_gb`` below states the demo's own figure
    memory_measured_on=None,
    mflux=None,
    adapter=None,
    preview=None,
    random_weights=None,
    folders=None,
    sizes=((128, 128),),  # the demo model is trained at one size
    weights_shipped=True,
    loader="app.demo.pipeline:load_demo_pipeline",
    quantizable=False,
    prompt_check="app.demo.prompt:prompt_problem",
    calibration_prompts=CALIBRATION_PROMPTS,
    fixed_size=True,
    flat_working_gb=0.5,
    img2img=True,  # noised to the strength's step through its own codec (app.demo.pipeline)
)
