"""The project's benchmarks, in folders by area (benchmarks/README.md). Scripts, run by path
from the repository root; imported by each other as ``benchmarks.<area>.<module>``."""
