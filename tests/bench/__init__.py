"""Tests of the benchmarks' own instruments (bench/support): the CPU sampler and the retrieval
metrics whose numbers the benchmarks print. The only tests that import bench/."""
