"""The engine: Qt-free. One frozen ``GenerationRequest`` in, typed ``EngineEvent``s out."""
