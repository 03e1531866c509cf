"""The composition root: everything the window shows and acts on, built once, outside any widget.

``Studio.build`` makes the stores (settings, history, model weights), the view-models (form, run,
target quality), the engine thread (``EngineHost``), the downloads, the Qt-free actions
(``Session``, ``ThresholdComparer``, ``ModelCalibrator``) and the one ``EventRouter`` that hands
the engine's events to them. ``MainWindow`` receives a ``Studio`` and only lays out widgets and
wires them to it (as krita-ai-diffusion's ``Root`` owns its models apart from its docker widgets);
``app.ui.window.open_window`` builds both, the one call the launcher, the lab's screenshot scripts
and the tests make.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.storage.history import HistoryStore
from app.storage.settings import Settings, SettingsStore
from app.ui.calibrate_model import ModelCalibrator
from app.ui.downloads import DownloadController, ModelStore, default_model_store
from app.ui.event_router import EventRouter
from app.ui.form_model import FormModel
from app.ui.quality_model import QualityModel
from app.ui.run_model import RunModel
from app.ui.session import Session
from app.ui.threshold_compare_model import ThresholdComparer, comparison_saver
from app.ui.worker import EngineFactory, EngineHost


@dataclass
class Studio:
    """The parts of one window's application, connected (see the module docstring)."""

    settings_store: SettingsStore
    settings: Settings
    history: HistoryStore
    model_store: ModelStore
    form: FormModel
    run: RunModel
    quality: QualityModel
    host: EngineHost
    downloads: DownloadController
    session: Session
    comparer: ThresholdComparer
    calibrator: ModelCalibrator
    router: EventRouter

    @classmethod
    def build(
        cls,
        engine_factory: EngineFactory,
        *,
        settings_store: SettingsStore | None = None,
        history: HistoryStore | None = None,
        model_store: ModelStore | None = None,
    ) -> Studio:
        settings_store = settings_store or SettingsStore()
        settings = settings_store.load()
        history = history or HistoryStore()
        model_store = model_store or default_model_store()
        form = FormModel(settings)
        run = RunModel()
        quality = QualityModel()
        host = EngineHost(engine_factory, history.save, save_comparison=comparison_saver(history))
        downloads = DownloadController(model_store)
        session = Session(
            form,
            run,
            host,
            downloads,
            settings=settings,
            settings_store=settings_store,
            history=history,
            model_store=model_store,
            quality=quality,
        )
        comparer = ThresholdComparer(session, host)
        calibrator = ModelCalibrator(session, host)
        router = EventRouter(session, run, comparer, quality, calibrator)
        host.event_received.connect(router.route)  # the one subscriber of engine events
        return cls(
            settings_store=settings_store,
            settings=settings,
            history=history,
            model_store=model_store,
            form=form,
            run=run,
            quality=quality,
            host=host,
            downloads=downloads,
            session=session,
            comparer=comparer,
            calibrator=calibrator,
            router=router,
        )
