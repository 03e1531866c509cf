"""A request that starts from a picture: each bad input is one sentence, the size follows the
picture by mflux's rule, and the strength reaches mflux as its own ``image_strength``."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest
from PIL import Image

from app.engine.request import (
    DEFAULT_STRENGTH,
    MAX_SIDE,
    GenerationRequest,
    InputImage,
    RequestError,
    generate_kwargs,
    make_request,
)
from app.families import FAMILIES
from app.paths import DEMO_SKETCH
from app.variants.schedule import image_strength, steps_left_out

PROMPT = "a red circle at the left on a blue background"
SKETCH = DEMO_SKETCH


def picture(tmp_path: Path, size: tuple[int, int] = (40, 24), name: str = "in.png") -> Path:
    path = tmp_path / name
    Image.new("RGB", size, (200, 30, 30)).save(path)
    return path


def test_a_picture_is_hashed_and_sized_and_strength_defaults(tmp_path: Path) -> None:
    path = picture(tmp_path, (200, 120))
    request = make_request("flux2-klein-base-4b", "a cat", images=[path])
    (image,) = request.images
    assert image.path == str(path.resolve())
    assert image.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (image.width, image.height) == (200, 120)
    assert request.strength == DEFAULT_STRENGTH
    assert (request.width, request.height) == (192, 112)  # mflux's rule: down to 16s


def test_a_size_the_user_sets_wins_over_the_pictures(tmp_path: Path) -> None:
    path = picture(tmp_path)
    request = make_request("flux2-klein-base-4b", "a cat", images=[path], size=(64, 64))
    assert (request.width, request.height) == (64, 64)


def test_a_picture_larger_than_the_largest_side_is_scaled_down_keeping_its_shape(
    tmp_path: Path,
) -> None:
    path = picture(tmp_path, (4000, 3000))
    request = make_request("flux2-klein-base-4b", "a cat", images=[path])
    assert request.width == MAX_SIDE
    assert request.height == 1536  # 3000 × 2048 / 4000


def test_a_fixed_size_family_keeps_its_size(tmp_path: Path) -> None:
    request = make_request("demo", PROMPT, images=[picture(tmp_path, (300, 200))])
    assert (request.width, request.height) == (128, 128)


@pytest.mark.parametrize("strength", [0.0, -0.2, 1.01, math.nan, math.inf])
def test_strength_outside_zero_to_one_is_refused(tmp_path: Path, strength: float) -> None:
    with pytest.raises(RequestError, match="strength must be above 0 and at most 1") as info:
        make_request("demo", PROMPT, images=[picture(tmp_path)], strength=strength)
    assert "\n" not in str(info.value)


def test_strength_without_a_picture_is_refused() -> None:
    with pytest.raises(RequestError, match="give a picture or leave strength out"):
        make_request("demo", PROMPT, strength=0.5)


def test_a_missing_picture_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(RequestError, match=r"^the picture .*nope\.png does not exist$"):
        make_request("demo", PROMPT, images=[tmp_path / "nope.png"])


def test_a_folder_is_not_a_picture(tmp_path: Path) -> None:
    with pytest.raises(RequestError, match="is not a file"):
        make_request("demo", PROMPT, images=[tmp_path])


def test_a_file_that_is_not_an_image_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "notes.png"
    text.write_text("not a picture at all")
    with pytest.raises(RequestError, match="is not an image this app can read"):
        make_request("demo", PROMPT, images=[text])


def test_a_truncated_image_is_refused(tmp_path: Path) -> None:
    path = picture(tmp_path, (64, 64))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(RequestError, match="cannot read the picture") as info:
        make_request("demo", PROMPT, images=[path])
    assert "\n" not in str(info.value)


def test_a_picture_smaller_than_one_patch_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RequestError, match="at least 16 pixels a side"):
        make_request("demo", PROMPT, images=[picture(tmp_path, (12, 40))])


def test_a_family_without_an_img2img_path_refuses_a_picture(tmp_path: Path) -> None:
    with pytest.raises(RequestError, match="cannot start from a picture") as info:
        make_request("flux3-image-klein", "a cat", images=[picture(tmp_path)])
    message = str(info.value)
    takers = [f.short_name for f in FAMILIES.values() if f.img2img]
    assert all(name in message for name in takers)  # the sentence names where to go instead


def test_two_pictures_are_one_too_many_for_img2img(tmp_path: Path) -> None:
    pictures = [picture(tmp_path, name="a.png"), picture(tmp_path, name="b.png")]
    with pytest.raises(RequestError, match="starts from one picture, got 2"):
        make_request("demo", PROMPT, images=pictures)


def test_a_strength_that_leaves_no_step_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RequestError, match="leaves none of the 4 steps"):
        make_request("demo-turbo", PROMPT, images=[picture(tmp_path)], strength=1e-17)


def test_mflux_receives_its_own_image_strength(tmp_path: Path) -> None:
    request = make_request("demo", PROMPT, images=[picture(tmp_path)], strength=0.6)
    kwargs = generate_kwargs(request)
    assert kwargs["image_path"] == request.images[0].path
    assert kwargs["image_strength"] == image_strength(0.6) == 1.0 - 0.6
    assert request.steps_left_out == steps_left_out(28, 0.6) == 11
    assert request.active_steps == 17


def test_strength_one_runs_every_step_from_noise_and_mflux_gets_no_picture(
    tmp_path: Path,
) -> None:
    request = make_request("demo", PROMPT, images=[picture(tmp_path)], strength=1.0)
    assert request.steps_left_out == 0
    assert "image_path" not in generate_kwargs(request)


def test_without_a_picture_nothing_changes() -> None:
    request = make_request("demo", PROMPT)
    assert request.images == () and request.strength is None
    assert request.steps_left_out == 0 and request.active_steps == request.steps
    assert not {"image_path", "image_strength"} & set(generate_kwargs(request))


def test_the_vanilla_key_tells_pictures_and_strengths_apart(tmp_path: Path) -> None:
    a = make_request("demo", PROMPT, images=[picture(tmp_path, name="a.png")], strength=0.6)
    b = make_request("demo", PROMPT, images=[picture(tmp_path, (48, 24), "b.png")], strength=0.6)
    assert a.vanilla_key() != b.vanilla_key()
    weaker = make_request("demo", PROMPT, images=[a.images[0]], strength=0.5)
    assert a.vanilla_key() != weaker.vanilla_key()
    assert a.vanilla_key() == a.with_threshold(0.2).vanilla_key()


def test_the_request_round_trips_through_its_dict(tmp_path: Path) -> None:
    request = make_request("demo", PROMPT, images=[picture(tmp_path)], strength=0.4)
    again = GenerationRequest.from_dict(request.as_dict())
    assert again == request
    assert isinstance(again.images[0], InputImage)


def test_the_shipped_sketch_is_a_picture_the_demo_takes() -> None:
    request = make_request("demo", PROMPT, images=[SKETCH])
    assert request.images[0].width == request.images[0].height == 128


@pytest.mark.parametrize("steps", [1, 2, 4, 9, 20, 28, 50])
@pytest.mark.parametrize("strength", [0.05, 0.1, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0])
def test_the_steps_left_out_are_mflux_own(steps: int, strength: float) -> None:
    """The count the gate, the timeline and the schedule check use is mflux's ``init_time_step``
    on the very ``image_strength`` the request hands it (float rounding included)."""
    from mflux.models.common.config.config import Config
    from mflux.models.common.config.model_config import ModelConfig

    kept = image_strength(strength)
    config = Config(
        model_config=ModelConfig.flux2_klein_base_4b(),
        num_inference_steps=steps,
        width=64,
        height=64,
        image_path="unused.png" if kept > 0 else None,
        image_strength=kept if kept > 0 else None,
    )
    assert steps_left_out(steps, strength) == config.init_time_step
