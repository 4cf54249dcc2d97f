"""Reading pixels from sources: video probing and windowed decoding (PyAV, NVDEC), mask and depth sources,
and the resize geometry every modality shares."""
