"""What benchmarks of several areas share: the fake model and the probe plugin."""
