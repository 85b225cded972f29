"""runtime/streams.py: a CuPy stream over a raw handle, without CuPy 14's deprecated ExternalStream."""

import warnings

import pytest

cupy = pytest.importorskip("cupy")


def test_external_stream_wraps_the_handle_without_a_deprecation_warning():
    from mgpu_lab.runtime.streams import external_stream

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # CuPy 14 deprecates ExternalStream
        stream = external_stream(0x1234)
    assert isinstance(stream, cupy.cuda.Stream)
    assert stream.ptr == 0x1234  # the existing stream itself: nothing created

