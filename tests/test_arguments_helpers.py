"""mgpu_lab.arguments: each check names the argument, what it expected and what it got, and
refuses the values Python would quietly accept (True as 1, "yes" as true)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mgpu_lab import arguments
from mgpu_lab.arguments import ArgumentError


@pytest.mark.parametrize("call, message", [
    (lambda: arguments.size("k", True, where="gemm"), "gemm: k must be a positive int, got True (a bool)"),
    (lambda: arguments.size("k", 6.5), "k must be a positive int, got 6.5 (a float)"),
    (lambda: arguments.size("m", 0), "m must be a positive int, got 0"),
    (lambda: arguments.count("stages", 1, minimum=2), "stages must be an int >= 2, got 1"),
    (lambda: arguments.count("block", 2048, minimum=1, maximum=1024), "block must be an int in [1, 1024], got 2048"),
    (lambda: arguments.count("group_m", False, minimum=1), "group_m must be an int >= 1, got False (a bool)"),
    (lambda: arguments.flag("causal", "yes"), "causal must be True or False, got 'yes' (a str)"),
    (lambda: arguments.flag("profile", 1), "profile must be True or False, got 1 (an int)"),
    (lambda: arguments.flag("isolate", "on", optional=True), "isolate must be True, False or None, got 'on' (a str)"),
    (lambda: arguments.number("scale", True, positive=True), "scale must be a positive finite number, got True (a bool)"),
    (lambda: arguments.number("scale", float("inf"), positive=True), "scale must be a positive finite number, got inf"),
    (lambda: arguments.number("a", "2"), "a must be a finite number, got '2' (a str)"),
    (lambda: arguments.number("f", 2, minimum=0, maximum=1), "f must be a number in [0, 1], got 2"),
    (lambda: arguments.choice("tile_m", 96, (64, 128, 256)), "tile_m must be one of (64, 128, 256), got 96"),
    (lambda: arguments.choice("cluster_m", True, (1, 2)), "cluster_m must be one of (1, 2), got True (a bool)"),
    (lambda: arguments.choice("persistent", 1, (False, True, "pingpong"),
                              expected=arguments.alternatives((False, True, "pingpong"))),
     "persistent must be False, True or 'pingpong', got 1 (an int)"),
    (lambda: arguments.shape("tile", (64,), 2), "tile must be a tuple of 2 positive ints, got (64,) (a tuple)"),
    (lambda: arguments.shape("tile", (64, -1), 2), "tile must be a tuple of 2 positive ints, got (64, -1)"),
])
def test_each_check_names_argument_expectation_and_value(call, message):
    with pytest.raises(ArgumentError, match=f"^{re.escape(message)}$"):
        call()


def test_an_argument_error_is_a_type_and_a_value_error():
    """Callers that caught ValueError (ranges) or TypeError (types) before keep working."""
    assert issubclass(ArgumentError, TypeError) and issubclass(ArgumentError, ValueError)


def test_good_values_come_back_as_plain_python_values():
    assert arguments.size("n", np.int64(5)) == 5 and type(arguments.size("n", np.int64(5))) is int
    assert arguments.count("stages", 2, minimum=2) == 2
    assert arguments.flag("causal", False) is False and arguments.flag("pingpong", None, optional=True) is None
    assert arguments.number("scale", np.float32(0.5), positive=True) == 0.5
    assert arguments.choice("dtype", "bfloat16", ("bfloat16", "float16")) == "bfloat16"
    assert arguments.shape("tile", [32, 64], 2) == (32, 64)


def test_a_long_value_is_cut_in_the_message():
    with pytest.raises(ArgumentError) as e:
        arguments.size("n", list(range(100)))
    assert len(str(e.value)) < 160 and str(e.value).endswith("... (a list)")
