"""What the benchmarks share and never run on their own: runs through a real broker, CPU
sampling, the peer application, the retrieval benchmark's dataset and metrics, the seam sets.
"""
