"""Calibration measured as a user meets it: ``teacache-studio calibrate`` on the demo."""
