"""Which models are on this machine, and their downloads: the picker's badges, the sidebar's model
line and download row, the "not downloaded" banner. Qt-free.

Weights on disk are the ``ModelStore``'s to say (``app.ui.downloads``); a model folder is checked
again when it loads. Downloads run through ``DownloadLink`` (``DownloadController`` in the app, a
plain fake in tests).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from app.ui.analysis import BannerFix, Notice, NoticeAction, NoticeKind
from app.variants import DEFAULT_VARIANT, Variant, all_variants, get_variant

if TYPE_CHECKING:
    from app.ui.downloads import ModelStore
    from app.ui.form_model import FormModel

log = logging.getLogger(__name__)


class DownloadLink(Protocol):
    """Weight downloads as the window sees them (``app.ui.downloads.DownloadController``)."""

    @property
    def busy(self) -> bool: ...

    @property
    def variant_id(self) -> str | None: ...

    def start(self, variant: Variant) -> bool: ...

    def shutdown(self, timeout_ms: int = 3000) -> None: ...


class Availability:
    """See the module docstring."""

    def __init__(self, form: FormModel, model_store: ModelStore, downloads: DownloadLink) -> None:
        self.form = form
        self.model_store = model_store
        self.downloads = downloads

    def is_available(self, variant_id: str) -> bool:
        try:
            variant = get_variant(variant_id)
            if variant.model_path is not None:  # a model folder: checked again when it loads
                return Path(variant.model_path).is_dir()
            return self.model_store.is_available(variant)
        except Exception:  # treat a broken check as "not on disk"
            log.exception("availability check failed for %s", variant_id)
            return False

    def download_label(self, variant: Variant) -> str:
        from app.ui.downloads import format_bytes

        return format_bytes(self.model_store.download_size(variant))

    def availability_badges(self) -> dict[str, str]:
        """The variant picker's badge per real model: on disk, or its download size."""
        badges: dict[str, str] = {}
        for variant in all_variants().values():
            if variant.family.weights_shipped:
                continue
            on_disk = self.is_available(variant.id)
            if variant.model_path is not None:
                badges[variant.id] = "folder" if on_disk else "folder missing"
                continue
            badges[variant.id] = "on disk" if on_disk else f"≈{self.download_label(variant)} ↓"
        return badges

    def variant_info(self) -> str:
        variant = self.form.variant
        parts = []
        if variant.family.weights_shipped:
            parts.append("Built in, runs offline")
        elif variant.model_path is not None:
            missing = "" if self.is_available(variant.id) else " (missing)"
            parts.append(f"Model folder {variant.model_path}{missing}")
        elif self.is_available(variant.id):
            parts.append("Downloaded")
        else:
            parts.append(f"Not downloaded · {self.download_label(variant)}")
            # Said before the download starts too (``Variant.licence_note``).
            if variant.gated_repo:
                parts.append("licence to accept on Hugging Face first")
            elif variant.licence is not None:
                parts.append(f"under the {variant.licence}")
        if variant.distilled:
            parts.append("distilled")
        parts.append(f"{variant.default_steps} steps by default")
        return " · ".join(parts)

    def needs_download(self) -> bool:
        variant = self.form.variant
        return not variant.family.weights_shipped and not self.is_available(variant.id)

    def download_current(self) -> bool:
        variant = self.form.variant
        if self.is_available(variant.id) or self.downloads.busy:
            return False
        return self.downloads.start(variant)

    def not_downloaded_notice(self, variant_id: str) -> Notice:
        """The banner of a Generate refused for weights not on disk, with its two fixes."""
        variant = get_variant(variant_id)
        return Notice(
            NoticeKind.error,
            f"{variant.display_name} is not downloaded",
            f"Download it first ({self.download_label(variant)}), or pick the built-in demo model."
            + (f" {variant.licence_note}." if variant.licence_note is not None else ""),
            actions=(
                NoticeAction("Download", BannerFix.download()),
                NoticeAction("Use the demo model", BannerFix.use_variant(DEFAULT_VARIANT)),
            ),
            key="error",
        )

    def shutdown(self) -> None:
        """Stop the download going on (bounded)."""
        self.downloads.shutdown()
