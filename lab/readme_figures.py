"""The README's measured figures, rendered from the committed result files they come from.

    uv run python -m lab.readme_figures            # lists where README.md differs (exit 1 if any)
    uv run python -m lab.readme_figures --write    # rewrites those figures from the files

Two kinds: a ``Block`` is a whole table between ``<!-- name:start … -->`` and ``<!-- name:end -->``
markers; a ``Passage`` is a sentence of prose whose ``{fields}`` are figures (the README wraps
lines anywhere, so whitespace is matched loosely). Each result's own module renders its figures
(``lab.gates.compare``, ``lab.gates.fill``, ``lab.img2img.strength``,
``lab.target.local_diff_survey``, ``lab.target.readme_examples``, ``lab.bench.previews``,
``lab.bench.preview_phase``, ``lab.bench.window_timing``, ``lab.calibrate.demo_timing``,
``lab.bench.device_figures``); after a
re-measurement, ``--write`` carries the new numbers into the README and
tests/lab/test_readme_figures.py holds them equal.
The words around the figures stay the author's: where a new measurement changes what they should
say, the test's other assertions (the claims they make) fail too.
"""

from __future__ import annotations

import argparse
import re
import string
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


@dataclass(frozen=True)
class Passage:
    """README prose whose ``{fields}`` are the figures ``values`` gives (already formatted)."""

    source: str  # the committed file(s) the figures come from
    template: str  # the README's words, fields in braces; ends with words, not a field
    values: Mapping[str, str]

    def rendered(self) -> str:
        return self.template.format(**self.values)

    def pattern(self) -> re.Pattern[str]:
        """The passage with any figure in each field's place; a field used twice is matched
        twice (groups ``name``, ``name__1``, …)."""
        parts: list[str] = []
        seen: dict[str, int] = {}
        for literal, field, _, _ in string.Formatter().parse(self.template):
            words = literal.split()
            gap = r"\s+"
            piece = gap.join(re.escape(w) for w in words)
            if words and literal[:1].isspace():
                piece = gap + piece
            if words and literal[-1:].isspace():
                piece += gap
            if not words and literal:
                piece = gap
            parts.append(piece)
            if field is not None:
                group = f"{field}__{seen[field]}" if field in seen else field
                seen[field] = seen.get(field, 0) + 1
                # A figure is short (a bounded field cannot swallow the text between passages)
                # and a number is taken whole (not 0 of 0.83 before a full stop).
                parts.append(f"(?P<{group}>.{{1,40}}?)(?![\\d]|[.,]\\d)")
        return re.compile("".join(parts), re.DOTALL)

    def _spans(self, match: re.Match[str]) -> list[tuple[str, str, tuple[int, int]]]:
        """(field, the README's figure, its span) for every place a field appears."""
        return [
            (group.split("__")[0], text, match.span(group))
            for group, text in match.groupdict().items()
        ]

    def problems(self, readme: str) -> list[str]:
        match = _only(self.pattern(), readme)
        if match is None:
            return [f"{self.source}: README.md holds no one passage like:\n{self.rendered()}"]
        return [
            f"{self.source}: README.md says {_squash(text)!r} where it gives {self.values[field]!r}"
            for field, text, _ in self._spans(match)
            if _squash(text) != _squash(self.values[field])
        ]

    def written(self, readme: str) -> str:
        """``readme`` with this passage's figures set (its words and line breaks kept)."""
        match = _only(self.pattern(), readme)
        if match is None:
            return readme
        for field, _, (start, end) in sorted(self._spans(match), key=lambda s: -s[2][0]):
            readme = readme[:start] + self.values[field] + readme[end:]
        return readme


@dataclass(frozen=True)
class Block:
    """A table the README holds whole between its markers."""

    name: str
    source: str
    text: str

    def pattern(self) -> re.Pattern[str]:
        name = re.escape(self.name)
        return re.compile(
            rf"<!-- {name}:start[^>]*-->\n(?P<body>.*?)\n<!-- {name}:end -->", re.DOTALL
        )

    def problems(self, readme: str) -> list[str]:
        match = _only(self.pattern(), readme)
        if match is None:
            return [
                f"{self.source}: README.md holds no one <!-- {self.name}:start --> … "
                f"<!-- {self.name}:end --> block"
            ]
        if match["body"] != self.text:
            return [f"{self.source}: README.md's {self.name} table differs; it gives:\n{self.text}"]
        return []

    def written(self, readme: str) -> str:
        match = _only(self.pattern(), readme)
        if match is None:
            return readme
        start, end = match.span("body")
        return readme[:start] + self.text + readme[end:]


Figure = Passage | Block
WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def fixed(value: float, digits: int) -> str:
    """``value`` to ``digits`` decimals as a person rounds the number the file shows: half up
    from its shortest form (3.55 → 3.6; ``f"{3.55:.1f}"`` gives 3.5, the float being 3.5499…)."""
    exact = Decimal(repr(float(value)))
    return str(exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def count_word(n: int) -> str:
    """A small count as the README's prose writes it."""
    return WORDS[n] if 0 <= n < len(WORDS) else str(n)


def _only(pattern: re.Pattern[str], readme: str) -> re.Match[str] | None:
    found = list(pattern.finditer(readme))
    return found[0] if len(found) == 1 else None


def _squash(text: str) -> str:
    return " ".join(text.split())


def differences(readme: str, figures: Sequence[Figure]) -> list[str]:
    """One line per figure README.md does not hold as its source renders it."""
    return [problem for figure in figures for problem in figure.problems(readme)]


def rewrite(readme: str, figures: Sequence[Figure]) -> str:
    """README.md with every figure it holds once set from its source."""
    for figure in figures:
        readme = figure.written(readme)
    return readme


def all_figures() -> list[Figure]:
    from lab.bench import device_figures, preview_phase, previews, window_timing
    from lab.calibrate import demo_timing
    from lab.gates import compare, fill
    from lab.img2img import strength
    from lab.target import local_diff_survey, readme_examples

    return [
        *compare.readme_figures(),
        *fill.readme_figures(),
        *strength.readme_figures(),
        *local_diff_survey.readme_figures(),
        *readme_examples.readme_figures(),
        *previews.readme_figures(),
        *preview_phase.readme_figures(),
        *window_timing.readme_figures(),
        *demo_timing.readme_figures(),
        *device_figures.readme_figures(),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", action="store_true", help="rewrite README.md's figures")
    args = parser.parse_args(argv)
    readme = README.read_text(encoding="utf-8")
    figures = all_figures()
    if args.write:
        readme = rewrite(readme, figures)
        README.write_text(readme, encoding="utf-8")
    problems = differences(readme, figures)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
