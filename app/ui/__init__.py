"""The PySide6 window. Importing this package imports no Qt; ``launch.launch`` does."""

import os

os.environ.setdefault("QT_API", "pyside6")  # superqt and pyqtgraph go through qtpy
