"""The sections that turn raw video into clips before anything is encoded (docs/long-videos.md, docs/audio.md,
docs/captions.md, docs/dedup.md): segments, audio, captions and dedup, each key with its default and what it does.
At their defaults a build is what it was without them; their checks are raw_video_checks.py's."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SegmentsConfig:
    """Long videos cut into shots before windows are placed (docs/long-videos.md). Everything at its default: no
    analysis pass, windows as frames.window(s) place them in the whole video."""

    # none | content | adaptive: PySceneDetect's ContentDetector / AdaptiveDetector on low-resolution frames;
    # transnetv2: the TransNetV2 network on 48x27 frames, with the weights of transnetv2_weights
    detect: str = "none"
    # the detector's threshold; unset: its default (content 27, adaptive 3, transnetv2 0.5)
    threshold: float | None = None
    min_shot_frames: int = 15  # the detector's minimum shot length (a cut closer to the previous one is dropped)
    margin_frames: int = 2  # frames dropped on each side of every cut (and around a gradual transition's frames)
    analysis_width: int = 128  # width the analysis decode scales frames to (height by the source's aspect)
    # gradual transitions (dissolves, fades) up to about this many frames are cuts too; 0 finds hard cuts only
    dissolve_frames: int = 8
    quality: bool = False  # the analysis pass and the rows' quality scores without shot detection
    min_motion: float | None = None  # reject windows whose mean frame difference (0..255) is below this
    max_black_fraction: float | None = None  # reject windows with a larger share of black or blank frames
    # detect=transnetv2: its weights, a local file (none is downloaded): the PyTorch state dict the official
    # repository's convert_weights.py makes from the TensorFlow release, or the same tensors as .safetensors
    transnetv2_weights: str | None = None
    transnetv2_sha256: str | None = None  # refuse weights whose SHA-256 differs


AUDIO_PARTIAL = ("pad", "reject")  # a window audio covers only in part: silence for the rest, or rejected
AUDIO_RESAMPLERS = ("swr",)  # FFmpeg's libswresample with its settings pinned (decode/audio.py)
AUDIO_PRECISIONS = ("fp32", "bf16")  # the audio tokenizer's compute dtype


@dataclass
class AudioConfig:
    """Each window's sound, cut by presentation time and stored as float32 PCM beside its latent (docs/audio.md)."""

    enabled: bool = False
    sample_rate: int = 16000  # LTX-2's audio VAE rate
    channels: int = 1  # 1 (FFmpeg's default downmix of the source) or 2
    partial: str = "pad"  # pad | reject (audio_partial)
    resampler: str = "swr"
    # frames.fps=source only: the longest window the cache holds (windows last num_frames / each video's own rate);
    # a longer one is rejected (audio_too_long). With a target fps every window lasts num_frames / fps.
    max_seconds: float | None = None
    # none, or the registered audio tokenizer (ltx2-audio) whose latent of each window's PCM is stored beside it
    tokenizer: str = "none"
    checkpoint: str | None = None  # its diffusers folder (or a pipeline folder's audio_vae/)
    sha256: str | None = None  # refuse weights whose SHA-256 differs, checked before they are read
    precision: str = "fp32"  # fp32 | bf16


CAPTION_MODES = ("keep", "generate_missing", "generate_all")
CAPTION_TEMPLATES = ("short", "detailed", "cosmos")  # named prompts (captions/templates.py); else a text file


@dataclass
class CaptionsConfig:
    """Captions made by a vision-language model from each window's frames (docs/captions.md). At the default mode
    (keep) nothing is generated and the build is what it was without this section."""

    # keep: the listing's captions only; generate_missing: a caption for each sample without one (missing or blank);
    # generate_all: every sample's caption generated, the listing's ignored
    mode: str = "keep"
    name: str = "qwen2.5-vl"  # the registered captioner
    model: str | None = None  # a local transformers folder of a Qwen2.5-VL-class model
    sha256: str | None = None  # refuse weights whose SHA-256 (of the folder's sha256sum listing) differs
    frames: int = 8  # frames sampled evenly over the window
    resolution: int = 448  # the short side the sampled frames are resized to
    prompt: str = "detailed"  # short | detailed | cosmos, or the path of a text file holding the prompt
    max_new_tokens: int = 128  # a generation that reaches it without ending is over-long (retried, then rejected)
    batch_size: int = 4  # windows per generate call


@dataclass
class DedupConfig:
    """Near-duplicate windows dropped before captioning and encoding (docs/dedup.md): the CLIP image embedding of a
    few frames per window, one window kept per group whose cosine similarity reaches the threshold. Disabled, the
    build is what it was without this section."""

    enabled: bool = False
    # windows whose cosine similarity to an earlier kept window is at least this are near duplicates of it
    threshold: float = 0.95
    frames: int = 4  # frames sampled evenly over the window; their normalised embeddings are averaged
    # the CLIP ViT-H/14 checkpoint: a diffusers Wan I2V pipeline folder, its image_encoder/ folder, or the official
    # models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth (the routes of conditioning.image_encoder_path)
    model: str | None = None
    sha256: str | None = None  # refuse weights whose SHA-256 differs
    batch_size: int = 16  # windows per encoder call
