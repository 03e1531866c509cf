"""The demo model's closed vocabulary, its prompt parser and its tokenizer (what the running app
needs to read a prompt). The procedural scenes the model was trained on, and their rasteriser, are
research code in ``lab.demo.scenes``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

SIZE = 128  # pixels per side
MAX_CLAUSES = 2
MAX_PER_CLAUSE = 3
MAX_OBJECTS = MAX_CLAUSES * MAX_PER_CLAUSE
MAX_TOKENS = 24

# Palette (linear RGB in [0, 1]); chosen far apart so a nearest-colour checker separates them.
COLOURS: dict[str, tuple[float, float, float]] = {
    "red": (0.85, 0.10, 0.10),
    "green": (0.10, 0.68, 0.20),
    "blue": (0.10, 0.25, 0.90),
    "yellow": (0.98, 0.90, 0.10),
    "orange": (1.00, 0.55, 0.00),
    "purple": (0.55, 0.10, 0.70),
    "white": (0.97, 0.97, 0.97),
    "black": (0.05, 0.05, 0.05),
}
SHAPES = ("circle", "square", "triangle", "star")
SIZES = ("small", "large")
POSITIONS = ("left", "right", "top", "bottom", "centre")
TEXTURES = ("plain", "striped", "dotted", "checked")
COUNT_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3}
NUMBER_WORDS = {1: "one", 2: "two", 3: "three"}
ALIASES = {"center": "centre", "grey": None}  # None: reserved, not an alias
FUNCTION_WORDS = ("at", "the", "and", "on", "background", "outlined")


def _plural(shape: str) -> str:
    return shape + "s"


def vocabulary() -> tuple[str, ...]:
    """Every word the tokenizer knows, in token-id order (id 0 is padding)."""
    words = [
        *COUNT_WORDS,
        *SIZES,
        *TEXTURES,
        *COLOURS,
        *SHAPES,
        *(_plural(s) for s in SHAPES),
        *POSITIONS,
        *FUNCTION_WORDS,
    ]
    return tuple(dict.fromkeys(words))


VOCAB: tuple[str, ...] = vocabulary()
PAD_ID = 0
TOKEN_IDS: dict[str, int] = {w: i + 1 for i, w in enumerate(VOCAB)}
VOCAB_SIZE = len(VOCAB) + 1


# --------------------------------------------------------------------------------------------
# Scene description


@dataclass(frozen=True, slots=True)
class Clause:
    """One group of identical objects. ``None`` fields are unspecified (only in parsed prompts)."""

    shape: str | None
    colour: str | None = None
    count: int | None = None
    size: str | None = None
    position: str | None = None
    texture: str | None = None
    outlined: bool | None = None


@dataclass(frozen=True, slots=True)
class PromptSpec:
    """What a prompt asks for; the checker scores an image against it."""

    clauses: tuple[Clause, ...]
    background: str | None = None
    text: str = field(default="", compare=False)


# --------------------------------------------------------------------------------------------
# Vocabulary errors, parsing and tokenizing


class PromptError(ValueError):
    """A prompt the demo model cannot read; the message lists what it can."""


def vocabulary_help() -> str:
    return (
        "colours: "
        + ", ".join(COLOURS)
        + "; shapes: "
        + ", ".join(SHAPES)
        + " (plural with -s)"
        + "; sizes: "
        + ", ".join(SIZES)
        + "; textures: "
        + ", ".join(TEXTURES)
        + ", outlined"
        + "; counts: a, one, two, three"
        + "; positions: at the "
        + "/".join(POSITIONS)
        + "; background: on a <colour> background; joined by: and"
    )


def normalize_words(text: str) -> list[str]:
    words = re.findall(r"[a-z]+", text.lower())
    out = []
    for w in words:
        alias = ALIASES.get(w, w)
        out.append(alias if alias is not None else w)
    return out


def _check_vocabulary(words: list[str]) -> None:
    unknown = [w for w in words if w not in TOKEN_IDS]
    if unknown:
        listed = ", ".join(repr(w) for w in dict.fromkeys(unknown))
        raise PromptError(
            f"the demo model does not know {listed}. It understands only: {vocabulary_help()}. "
            "Example: 'two small red stars at the left and a large striped blue circle at the "
            "right on a white background'"
        )


def parse_prompt(text: str) -> PromptSpec:
    """Read a prompt in the demo's closed vocabulary. Raises :class:`PromptError`."""
    words = normalize_words(text)
    if not words:
        raise PromptError(f"the prompt is empty; the demo model understands: {vocabulary_help()}")
    if re.search(r"[^a-zA-Z\s,.;!-]", text):
        bad = "".join(sorted(set(re.findall(r"[^a-zA-Z\s,.;!-]", text))))
        raise PromptError(
            f"the demo model reads words only, not {bad!r}. It understands: {vocabulary_help()}"
        )
    _check_vocabulary(words)
    background = None
    if "background" in words:
        i = words.index("background")
        if i == 0 or words[i - 1] not in COLOURS or words[i + 1 :]:
            raise PromptError(
                "write the background last, as 'on a <colour> background' "
                f"(colours: {', '.join(COLOURS)})"
            )
        background = words[i - 1]
        words = words[: i - 1]
        while words and words[-1] in ("a", "an", "on"):
            words.pop()
    groups: list[list[str]] = [[]]
    for w in words:
        if w == "and":
            groups.append([])
        else:
            groups[-1].append(w)
    groups = [g for g in groups if g]
    if not groups:
        raise PromptError("describe at least one shape, e.g. 'a red circle at the left'")
    if len(groups) > MAX_CLAUSES:
        raise PromptError(f"the demo model draws at most {MAX_CLAUSES} groups of shapes")
    clauses = tuple(_parse_clause(g) for g in groups)
    return PromptSpec(clauses=clauses, background=background, text=text)


def prompt_problem(text: str) -> str | None:
    """Why the demo model cannot draw ``text``, in one sentence; None where it can (the demo
    family's prompt check, ``app.families.demo``)."""
    try:
        parse_prompt(text)
    except PromptError as exc:
        return str(exc)
    return None


def _parse_clause(words: list[str]) -> Clause:
    fields: dict[str, Any] = {}

    def put(name: str, value: object, word: str) -> None:
        if name in fields:
            raise PromptError(f"'{' '.join(words)}' names its {name} twice ('{word}')")
        fields[name] = value

    plural_of = {_plural(s): s for s in SHAPES}
    i = 0
    while i < len(words):
        w = words[i]
        if w in COUNT_WORDS:
            put("count", COUNT_WORDS[w], w)
        elif w in SIZES:
            put("size", w, w)
        elif w in TEXTURES:
            put("texture", w, w)
        elif w == "outlined":
            put("outlined", True, w)
        elif w in COLOURS:
            put("colour", w, w)
        elif w in SHAPES:
            put("shape", w, w)
        elif w in plural_of:
            put("shape", plural_of[w], w)
            fields.setdefault("count", None)
            fields["_plural"] = True
        elif w == "at":
            rest = words[i + 1 :]
            if rest[:1] == ["the"]:
                rest = rest[1:]
            if len(rest) < 1 or rest[0] not in POSITIONS:
                raise PromptError(f"after 'at the' write one of: {', '.join(POSITIONS)}")
            put("position", rest[0], rest[0])
            i = len(words) - len(rest) + 1
            continue
        elif w in POSITIONS:
            put("position", w, w)
        elif w == "the":
            pass
        else:
            raise PromptError(
                f"'{w}' cannot go there; write e.g. 'two small red stars at the left'"
            )
        i += 1
    if "shape" not in fields:
        raise PromptError(f"'{' '.join(words)}' names no shape; use one of: {', '.join(SHAPES)}")
    plural = fields.pop("_plural", False)
    if fields.get("count") is None:
        fields["count"] = None if plural else 1
    if plural and fields["count"] == 1:
        raise PromptError(f"'{' '.join(words)}': a plural shape needs two or three")
    return Clause(**fields)


def tokenize(text: str) -> list[int]:
    """Word-level token ids, padded with 0 to :data:`MAX_TOKENS`. A blank text (the negative
    prompt " ") is all padding: the unconditional input used for classifier-free guidance."""
    words = normalize_words(text)
    _check_vocabulary(words)
    if len(words) > MAX_TOKENS:
        raise PromptError(f"the prompt is too long: at most {MAX_TOKENS} words")
    ids = [TOKEN_IDS[w] for w in words]
    return ids + [PAD_ID] * (MAX_TOKENS - len(ids))
