"""Honest measurement from the command line: benchmarks, threshold sweeps and calibration.

The rule every module here follows (seeds 000/003): a speed number is published only with the
mechanism's engagement beside it (skip count, pattern and longest skip streak next to every time),
and only from cold, isolated runs — each (condition, repetition) in a fresh subprocess, repetitions
interleaved so host drift hits every condition alike.
"""
