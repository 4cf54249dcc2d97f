"""Imported by conftest.py before anything loads torch: a vector width lowered with ATEN_CPU_CAPABILITY (to imitate
an older CPU) is applied to oneDNN and MKL too. Lowered for torch alone, oneDNN still picks the CPU's widest bf16
kernels, which torch then refuses ("pack_vnni2 is only supported when avx512 is supported"): a combination no real
CPU has. Widths set explicitly for oneDNN or MKL are left as they are."""

import os

# ATEN_CPU_CAPABILITY -> (ONEDNN_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS)
NARROWER_LIBRARIES = {"default": ("SSE41", "SSE4_2"), "avx2": ("AVX2", "AVX2"), "avx512": ("AVX512_CORE", "AVX512")}

_width = os.environ.get("ATEN_CPU_CAPABILITY", "").lower()
if _width in NARROWER_LIBRARIES:
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", NARROWER_LIBRARIES[_width][0])
    os.environ.setdefault("MKL_ENABLE_INSTRUCTIONS", NARROWER_LIBRARIES[_width][1])
