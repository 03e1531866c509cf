"""TeaCache Studio: explore TeaCache step-skipping on MLX image models."""

import logging
from importlib.metadata import PackageNotFoundError, version

# A library-style default: the window adds a log file; the command line reports errors itself.
logging.getLogger("app").addHandler(logging.NullHandler())

try:
    __version__ = version("teacache-studio")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+source"
