"""mgpu_lab: write, run, profile and ship NVIDIA Hopper kernels from Python and notebooks."""
