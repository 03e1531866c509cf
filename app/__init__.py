"""TeaCache Studio: explore TeaCache step-skipping on MLX image models."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("teacache-studio")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+source"
