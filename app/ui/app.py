"""The composition root: everything the window shows and acts on, built once, outside any widget.

``Studio.build`` makes the stores (settings, history, model weights), the view-models (form, the
picture to start from, run, target quality), the engine thread (``EngineHost``), the downloads, and
connects the window's Qt-free actions (``connect_actions``): the run's ``Session``,
``Availability``, ``GateAdvice``, ``Notices``, ``Exporter``, ``ModelFolders``,
``ThresholdComparer``, ``ModelCalibrator`` and the one ``EventRouter`` that hands the engine's
events to them. The models talk to each other only through what is connected here (and the router),
never through another model's attributes. ``MainWindow`` receives a ``Studio`` and only lays out
widgets and wires them to it (as krita-ai-diffusion's ``Root`` owns its models apart from its docker
widgets); ``app.ui.window.open_window`` builds both, the one call the launcher, the lab's screenshot
scripts and the tests make.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.storage.history import HistoryStore
from app.storage.settings import Settings, SettingsStore
from app.ui.availability_model import Availability, DownloadLink
from app.ui.calibrate_model import ModelCalibrator
from app.ui.downloads import DownloadController, ModelStore, default_model_store
from app.ui.event_router import EventRouter
from app.ui.export_model import Exporter
from app.ui.form_model import FormModel
from app.ui.gate_advice_model import GateAdvice
from app.ui.input_model import InputModel
from app.ui.model_folders_model import ModelFolders
from app.ui.notices_model import Notices
from app.ui.quality_model import QualityModel
from app.ui.run_model import RunModel
from app.ui.session import Session
from app.ui.threshold_compare_model import ThresholdComparer, comparison_saver
from app.ui.worker import EngineFactory, EngineHost


@dataclass
class Actions:
    """The window's Qt-free actions, connected (``connect_actions``)."""

    session: Session
    availability: Availability
    gate_advice: GateAdvice
    notices: Notices
    exporter: Exporter
    folders: ModelFolders
    comparer: ThresholdComparer
    calibrator: ModelCalibrator
    router: EventRouter


def connect_actions(
    form: FormModel,
    run: RunModel,
    downloads: DownloadLink,
    *,
    settings: Settings,
    settings_store: SettingsStore,
    history: HistoryStore,
    model_store: ModelStore,
    quality: QualityModel | None = None,
) -> Actions:
    """The actions over ``form`` and ``run``, on the run's engine link (``run.slot.engine``):
    each built once, each told of the others only here."""
    engine = run.slot.engine
    availability = Availability(form, model_store, downloads)
    gate_advice = GateAdvice(form, run)
    session = Session(
        form,
        run,
        availability,
        settings=settings,
        settings_store=settings_store,
        quality=quality,
    )
    notices = Notices(
        form,
        run,
        gate_advice,
        availability,
        select_variant=session.select_variant,
        warnings=settings_store.warnings,
    )
    # A new run, or another model, brings back the banners the user dismissed.
    session.run_starting.append(notices.run_starting)
    session.variant_selected.append(notices.variant_selected)
    comparer = ThresholdComparer(form, run, availability, engine, remember=session.remember_inputs)
    calibrator = ModelCalibrator(form, availability, engine, adopt=session.adopt_calibration)
    return Actions(
        session=session,
        availability=availability,
        gate_advice=gate_advice,
        notices=notices,
        exporter=Exporter(form, run, history),
        folders=ModelFolders(form, session, notices),
        comparer=comparer,
        calibrator=calibrator,
        router=EventRouter(session, run, comparer, quality, calibrator),
    )


@dataclass
class Studio:
    """The parts of one window's application, connected (see the module docstring)."""

    settings_store: SettingsStore
    settings: Settings
    history: HistoryStore
    model_store: ModelStore
    form: FormModel
    inputs: InputModel
    run: RunModel
    quality: QualityModel
    host: EngineHost
    downloads: DownloadController
    session: Session
    availability: Availability
    gate_advice: GateAdvice
    notices: Notices
    exporter: Exporter
    folders: ModelFolders
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
        host = EngineHost(engine_factory, history.save, save_comparison=comparison_saver(history))
        form = FormModel(settings)
        inputs = InputModel(form)  # the form's request takes its picture from here
        run = RunModel(engine=host)
        quality = QualityModel()
        downloads = DownloadController(model_store)
        actions = connect_actions(
            form,
            run,
            downloads,
            settings=settings,
            settings_store=settings_store,
            history=history,
            model_store=model_store,
            quality=quality,
        )
        host.event_received.connect(actions.router.route)  # the one subscriber of engine events
        return cls(
            settings_store=settings_store,
            settings=settings,
            history=history,
            model_store=model_store,
            form=form,
            inputs=inputs,
            run=run,
            quality=quality,
            host=host,
            downloads=downloads,
            session=actions.session,
            availability=actions.availability,
            gate_advice=actions.gate_advice,
            notices=actions.notices,
            exporter=actions.exporter,
            folders=actions.folders,
            comparer=actions.comparer,
            calibrator=actions.calibrator,
            router=actions.router,
        )
