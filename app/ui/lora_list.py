"""The form's LoRA list: add a .safetensors file, set its scale, remove it.

A view bound to ``FormModel.loras``: ``set_loras`` shows the model's list, and every edit the user
makes emits ``loras_edited`` with the whole new list. A picked file is checked at once, as the
command line checks ``--lora`` (``check_lora_file``): one that is not a readable .safetensors file
is refused with its sentence under the list. Generate checks the list again (a file can go); a row
whose file has gone says so here.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)
from superqt import QElidingLabel

from app.engine.request import (
    LORA_SCALE_RANGE,
    MAX_LORAS,
    LoraSpec,
    RequestError,
    check_lora_file,
)
from app.families import family_names
from app.ui.theme import mute, small_font

UNAVAILABLE = (
    f"LoRA needs an mflux model ({family_names(lambda f: f.supports_lora, 'or')}); "
    "the built-in demo model is not one"
)
AVAILABLE = (
    "Add LoRA files (.safetensors) with a scale each; both the gated and the vanilla pass use "
    "them, so the comparison stays paired. The gate plot says when this model's calibration was "
    "made without them."
)


class LoraRow(QWidget):
    """One file: its name (full path in the tooltip), its scale, and Remove."""

    changed = Signal()
    remove_requested = Signal()

    def __init__(self, spec: LoraSpec, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.path = spec.path
        stem = Path(spec.path).stem  # every LoRA here is .safetensors: the suffix says nothing
        self.name = QElidingLabel(stem)
        self.name.setElideMode(Qt.TextElideMode.ElideMiddle)  # keeps a version at the end
        self.name.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        missing = not Path(spec.path).is_file()
        self.name.setToolTip(spec.path + ("\n(this file is missing)" if missing else ""))
        if missing:
            self.name.setText(f"{stem} (missing)")
            self.name.setStyleSheet("color: #c62828;")
        self.scale = QDoubleSpinBox()
        self.scale.setRange(*LORA_SCALE_RANGE)  # the range make_request accepts
        self.scale.setSingleStep(0.05)
        self.scale.setDecimals(2)
        self.scale.setValue(spec.scale)
        self.scale.setToolTip("How strongly the LoRA is applied (1 = as trained)")
        self.remove = QToolButton()
        self.remove.setText("Remove")
        self.remove.setToolTip(f"Remove {spec.name}")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.name, 1)
        layout.addWidget(self.scale)
        layout.addWidget(self.remove)
        self.scale.valueChanged.connect(lambda _v: self.changed.emit())
        self.remove.clicked.connect(self.remove_requested.emit)

    def spec(self) -> LoraSpec:
        return LoraSpec(self.path, round(float(self.scale.value()), 4))


class LoraList(QWidget):
    loras_edited = Signal(object)  # tuple[LoraSpec, ...]

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[LoraRow] = []
        self._rows_box = QVBoxLayout()
        self._rows_box.setContentsMargins(0, 0, 0, 0)
        self._rows_box.setSpacing(4)
        self.add_button = QToolButton()
        self.add_button.setText("Add LoRA…")
        self.empty_label = QLabel("None")
        self.empty_label.setFont(small_font(self.empty_label.font()))
        mute(self.empty_label)
        add_row = QHBoxLayout()
        add_row.setContentsMargins(0, 0, 0, 0)
        add_row.addWidget(self.empty_label)
        add_row.addStretch(1)
        add_row.addWidget(self.add_button)
        self.problem = QLabel()  # why the last picked file was refused
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #c62828;")
        self.problem.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addLayout(self._rows_box)
        layout.addLayout(add_row)
        layout.addWidget(self.problem)
        self.add_button.clicked.connect(self.pick_file)
        self._available = True
        self.set_available(True)

    def loras(self) -> tuple[LoraSpec, ...]:
        return tuple(row.spec() for row in self.rows)

    def set_loras(self, loras: object) -> None:
        """Show ``loras`` (the model's list); emits nothing."""
        specs = tuple(loras) if isinstance(loras, tuple) else ()
        if specs == self.loras():
            return
        for row in self.rows:
            self._rows_box.removeWidget(row)
            row.deleteLater()
        self.rows = []
        for spec in specs:
            row = LoraRow(spec, self)
            row.changed.connect(self._edited)
            row.remove_requested.connect(lambda r=row: self._remove(r))
            self._rows_box.addWidget(row)
            self.rows.append(row)
        self._refresh()

    def set_available(self, available: bool) -> None:
        """Off for the demo models: disabled, with the reason in the tooltip."""
        self._available = available
        self.setToolTip(AVAILABLE if available else UNAVAILABLE)
        self.add_button.setToolTip(
            f"Add a LoRA file (at most {MAX_LORAS})" if available else UNAVAILABLE
        )
        self.empty_label.setText("None" if available else "Not for the demo model")
        self.show_problem("")  # another model: the last refusal is no longer news
        self._refresh()

    def add_file(self, path: str | Path, scale: float = 1.0) -> bool:
        """Append a file at ``scale`` (what the file dialog does) once it passes the check;
        False, with the reason under the list, where it does not."""
        resolved = Path(path).expanduser().resolve()
        try:
            check_lora_file(resolved)
        except RequestError as exc:
            self.show_problem(f"{resolved.name} was not added: {exc}.")
            return False
        self.show_problem("")
        spec = LoraSpec(str(resolved), scale)
        if any(row.path == spec.path for row in self.rows) or len(self.rows) >= MAX_LORAS:
            return False
        self._commit((*self.loras(), spec))
        return True

    def show_problem(self, text: str) -> None:
        self.problem.setText(text)
        self.problem.setVisible(bool(text))

    def pick_file(self) -> None:
        path, _filter = QFileDialog.getOpenFileName(
            self, "Add a LoRA", "", "LoRA files (*.safetensors);;All files (*)"
        )
        if path:
            self.add_file(path)

    def _remove(self, row: LoraRow) -> None:
        self.show_problem("")
        self._commit(tuple(r.spec() for r in self.rows if r is not row))

    def _commit(self, specs: tuple[LoraSpec, ...]) -> None:
        self.set_loras(specs)  # shown first: the binding does not echo the edit back
        self.loras_edited.emit(specs)

    def _edited(self) -> None:
        self.loras_edited.emit(self.loras())

    def _refresh(self) -> None:
        self.setEnabled(self._available)
        self.add_button.setEnabled(self._available and len(self.rows) < MAX_LORAS)
        self.empty_label.setVisible(not self.rows)
