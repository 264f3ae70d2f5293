"""The checkpoint gate and the run summary's statistics: calibration, and what compare costs."""
