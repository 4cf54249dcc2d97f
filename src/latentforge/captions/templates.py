"""The prompts a captioner is asked with: named templates, or the text of a file (`captions.prompt`).

A template's text is part of each caption's cache key and of the row's provenance, so editing one here makes a
build generate its captions again instead of mixing captions of two prompts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

TEMPLATES = {
    "short": "Describe this video in one sentence.",
    "detailed": ("Describe this video in detail: the scene, the objects and people in it, what moves and how, the "
                 "camera's motion, the lighting and the style. Write one paragraph of plain sentences."),
    # the structure Cosmos' video captions follow: subject, action, setting, camera, style
    "cosmos": ("Describe this video for training a video generation model. In one paragraph say, in this order: the "
               "main subjects and what they look like; what they do, frame by frame, and how fast; the setting and "
               "background; the camera's position and motion; the lighting, colours and visual style. Describe only "
               "what is visible; do not guess names or intentions."),
}
# what an empty or over-long caption is asked again with, and its token budget in captions.max_new_tokens
FALLBACK = "short"
FALLBACK_BUDGET = 2


@dataclass(frozen=True)
class Prompt:
    """A prompt as a build uses it: the name it records (a template's name or the file's name) and its text."""

    name: str
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def resolve_prompt(setting: str) -> Prompt:
    """`captions.prompt` as a Prompt: a named template, else the stripped text of the file it names."""
    if setting in TEMPLATES:
        return Prompt(setting, TEMPLATES[setting])
    path = Path(setting).expanduser()
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"captions.prompt={setting!r}: cannot read it as a UTF-8 text file ({error}); give one of "
                          f"{', '.join(TEMPLATES)}, or a text file holding the prompt") from None
    if not text:
        raise ConfigError(f"captions.prompt={setting!r} is an empty file; write the prompt into it")
    return Prompt(path.name, text)


def fallback_prompt() -> Prompt:
    return Prompt(FALLBACK, TEMPLATES[FALLBACK])
