"""Example kernels, used by the demo and the tests. Each `make_*` returns a compiled Kernel
and each `reference_*` computes the expected result with numpy in float64."""
