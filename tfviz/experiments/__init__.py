"""Does W_o matter? The experiment over seeds and the atlas over architectures, with their
statistics.

experiment (learned W_o against identity or block-diagonal, several seeds), verdict and
experiment_report (what a comparison shows, as values and in English), stats (Welch's interval
without scipy), atlas* (the sweep over cells and arms: cells and names, runs, rows on disk,
statistics, the report, a sweep started from the app). This file imports nothing.
"""
