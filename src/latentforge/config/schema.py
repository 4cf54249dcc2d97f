"""The typed build configuration: one dataclass per section, each key with its default and what it does.

Parsing lives in parse.py, the checks that need no model in checks.py, and load.py puts them together.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

MODALITIES = ("rgb", "mask", "depth")
# The field of a section that names a backend (tokenizer, output, run) holding that backend's own keys, parsed into
# the dataclass the backend declares (config/loading/backend_options.py); to_dict lists them among the section's keys.
BACKEND_OPTIONS = "options"


@dataclass(frozen=True)
class NoOptions:
    """The options of a backend that has no keys of its own."""
TEXT_STORAGES = ("padded", "trimmed")  # how shards hold text rows (cache/text_rows.py)
# what the text encoder runs over: each prompt's own tokens (none), or Cosmos' call padded to text.max_length with
# the attention mask (max_length; text/hf_encoder.py)
TEXT_PADDINGS = ("none", "max_length")
# what a build does with a caption the text encoder's tokenizer mostly cannot read (text/hf_encoder.py)
TEXT_ON_UNKNOWN = ("warn", "reject")


@dataclass
class DatasetConfig:
    reader: str = "auto"  # auto | cosmos_dir | table; auto: a folder -> cosmos_dir, .csv/.jsonl/.parquet -> table
    path: list[str] = field(default_factory=list)  # folder (cosmos_dir) or table files / globs (table)
    on_missing_caption: str = "reject"  # reject | empty (an absent caption becomes the empty prompt)
    limit: int | None = None  # keep the first N candidate samples of the plan
    # the reader's own keys (dataset.id_column, dataset.video_column, ... for table: readers/table.TableOptions)
    options: Any = field(default_factory=NoOptions)


@dataclass
class FramesConfig:
    num_frames: int = 93
    height: int = 480
    width: int = 832
    fps: str = "source"  # "source" or a target frame rate such as "16"
    window: str = "start"  # start | center | random (seeded by sample_id)
    windows: str = "one"  # "one" or "every N" (one sample per N frames, id suffixed @<start_frame>)
    resize: str = "cover_crop"  # cover_crop | stretch
    # swscale (in the decoder, from the source pixels) | torch (from uint8 RGB) | device (the torch backend's
    # steps on the encoder's device, from 8-bit 4:2:0 planes the decode workers copy; docs/frames.md)
    resize_backend: str = "swscale"
    resize_filter: str = "bicubic"  # swscale: bilinear | bicubic | area | lanczos; torch, device: no lanczos
    decoder: str = "cpu"  # cpu | nvdec (GPU video engine via FFmpeg's CUDA hwaccel)
    # nvdec only: a video NVDEC cannot decode is rejected (reject), or decoded on the CPU (cpu: the cache then
    # mixes decoders; each row records its own)
    nvdec_fallback: str = "reject"
    # Mixed shapes: [num_frames, height, width] per bucket; each sample goes to one bucket (docs/frames.md) and
    # the build writes one cache per bucket. Empty: one cache of num_frames x height x width.
    buckets: list[list[int]] = field(default_factory=list)
    bucket_upscale: bool = False  # let a sample go to a bucket larger than its source (upscaled)


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


@dataclass
class MaskConfig:
    ids: list[int] | None = None  # the declared id set; None allows every id of the source's bit depth
    palette: str = "golden"  # how ids map to colours; see docs/modalities.md
    # the rate of a PNG folder's frames: "source" (frame i goes with video frame i), or F (frame j shows at j / F s
    # from the video's first frame, matched to the window by time); a video source always uses its own timestamps
    fps: str = "source"


@dataclass
class DepthConfig:
    png_scale: float = 1000.0  # 16-bit PNG: depth = value / png_scale (e.g. millimetres -> metres)
    video_near: float = 0.0  # depth video: depth = near + (far - near) * luma / max_luma
    video_far: float = 1.0
    normalize: str = "minmax"  # minmax: per-row [lo, hi] -> [-1, 1]; params stored so it can be inverted
    fps: str = "source"  # as modalities.mask.fps, for PNG folders and .npz/.npy arrays


@dataclass
class ModalitiesConfig:
    names: list[str] = field(default_factory=lambda: ["rgb"])
    mask: MaskConfig = field(default_factory=MaskConfig)
    depth: DepthConfig = field(default_factory=DepthConfig)


@dataclass
class TokenizerConfig:
    name: str = "haar-4x8x8"
    # .pth state dict, diffusers folder or hub id (wan2.1, wan2.2); a hub folder of .jit or a diffusers folder (cosmos)
    checkpoint: str | None = None
    sha256: str | None = None  # refuse a checkpoint whose SHA-256 differs
    precision: str = "fp32"  # fp32 | bf16 | cosmos-bf16 (wan2.1 only)
    # the tokenizer's own keys (tokenizer.temporal_window, tokenizer.conv_kernels, ... for wan2.1 and wan2.2:
    # tokenizers/wan/common.WanOptions)
    options: Any = field(default_factory=NoOptions)


@dataclass
class TextConfig:
    name: str = "t5"  # t5 | umt5 | none
    path: str | None = None  # local model folder (config.json, weights, tokenizer files)
    precision: str = "fp32"  # fp32 | bf16 (fp16 overflows T5)
    max_length: int = 512
    empty_prompt: bool = True  # write empty_prompt.h5
    source: str = "encoder"  # encoder | pickles | pickles+encoder: where rows come from (docs/text.md)
    # padded: every row [max_length, D], zero past its length; trimmed: only the valid tokens are stored, and
    # readers restore the same zero-padded rows bit for bit (docs/cache-format.md). The default stays padded for a
    # config without a preset: its shards are then read by any HDF5 reader as [max_length, D] rows, as every cache
    # built before trimmed storage was; every preset but the perception one sets trimmed.
    storage: str = "padded"
    padding: str = "none"  # none | max_length: bit-identical to Cosmos' own encoder call (docs/text.md)
    # a caption with more than this fraction of tokens the tokenizer does not know (<unk>): the build warns once
    # with their count (warn), or rejects those samples as unknown_tokens (reject)
    max_unknown_fraction: float = 0.1
    on_unknown: str = "warn"  # warn | reject


IMAGE_LATENTS = ("none", "wan-i2v", "first-frame")  # what conditioning.image_latent may name (docs/conditioning.md)
CONDITIONING_PRECISIONS = ("fp32", "bf16")


@dataclass
class ConditioningConfig:
    """What an image-to-video trainer needs beside the clip's latent, built from the clip's own frame 0."""

    # a registered image encoder (clip-vit-h14: CLIP ViT-H/14 image tokens, as Wan2.1 I2V) or none
    image_embeds: str = "none"
    # the image encoder's weights: a diffusers Wan I2V pipeline folder, its image_encoder/ folder, or the official
    # models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth
    image_encoder_path: str | None = None
    image_encoder_sha256: str | None = None  # refuse image encoder weights whose SHA-256 differs
    # wan-i2v: the 4-channel frame mask + the VAE encode of [frame 0, zeros] (Wan2.1 I2V, Wan2.2 I2V-A14B);
    # first-frame: latent frame 0 of the clip (Wan2.2 TI2V-5B; nothing extra stored); none
    image_latent: str = "none"
    precision: str = "fp32"  # fp32 | bf16: the conditioning encodes (the extra VAE encode, the image encoder)


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


@dataclass
class OutputConfig:
    root: str = ""
    latent_dataset: str = "video_latent_state"
    rows_per_shard: int = 3000
    storage_dtype: str = "float16"  # float16 | bfloat16-as-uint16 is not supported; float16 | float32
    unit_size: int = 256  # samples per unit of work
    batch_size: int = 1  # samples per tokenizer call within a unit
    min_free_bytes: int = 1 << 30  # free-disk margin kept on top of the estimate
    # hdf5: sharded HDF5 in a local folder; webdataset: tar shards at a local folder or an fsspec URL (s3://...)
    sink: str = "hdf5"
    # a sink whose root may be a URL (webdataset): node-local folder for the build records and staged units;
    # empty: one under the system temp dir named by a digest of output.root (docs/webdataset.md)
    staging_dir: str = ""
    # an fsspec URL (s3://..., file://...) where encoder processes stage units and the commit reads them, so Ray
    # workers need no shared filesystem; empty: the build records folder's staging/ (docs/execution.md)
    staging_url: str = ""
    # the sink's own keys (output.shard_bytes for webdataset: sinks/webdataset/sink.WebDatasetSinkOptions)
    options: Any = field(default_factory=NoOptions)


@dataclass
class RunConfig:
    device: str = "cpu"  # cpu | cuda | cuda:N
    seed: int = 0
    # stop (before encoding, and again before commit) when more than this fraction of the planned samples is
    # rejected; a build that keeps no sample always stops
    max_reject_fraction: float = 0.5
    # resume a build whose staged units were encoded in another environment (GPU model, driver, CUDA, cuDNN,
    # torch) instead of refusing; the cache then mixes two environments and verify warns (docs/execution.md)
    allow_mixed_environments: bool = False
    # Execution only: never part of the output (docs/execution.md).
    procs: int = 1  # encoder processes on run.device when run.gpus is empty
    gpus: str = ""  # "all" or "0,1": one encoder process per GPU (indices within CUDA_VISIBLE_DEVICES)
    # CPU decode workers per encoder process: auto (from the host's cores, docs/execution.md) or N; 0 decodes on
    # the encoder thread
    workers_per_gpu: str = "auto"
    # FFmpeg threads per video decode; 0 lets FFmpeg choose (one per core: many workers then oversubscribe)
    decode_threads: int = 1
    # processes the probe decodes videos in before any GPU work: auto (from the host's cores, once there are enough
    # videos to pay for starting them) or N; 1 probes in the main process
    probe_workers: str = "auto"
    executor: str = "local"  # local | ray (docs/execution.md)
    # Prometheus endpoints: the main process on metrics_port, rank r on metrics_port + 1 + r; 0 serves none
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"  # the address they bind; 0.0.0.0 lets other machines scrape them
    # the executor's own keys (run.ray_address, run.max_unit_tries for ray: executor/ray/connection.RayOptions)
    options: Any = field(default_factory=NoOptions)


@dataclass
class BuildConfig:
    preset: str | None = None
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    frames: FramesConfig = field(default_factory=FramesConfig)
    modalities: ModalitiesConfig = field(default_factory=ModalitiesConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    text: TextConfig = field(default_factory=TextConfig)
    conditioning: ConditioningConfig = field(default_factory=ConditioningConfig)
    segments: SegmentsConfig = field(default_factory=SegmentsConfig)
    captions: CaptionsConfig = field(default_factory=CaptionsConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)
    audio: AudioConfig = field(default_factory=AudioConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def to_dict(self) -> dict[str, Any]:
        """Every section as a mapping of its keys, a backend's own keys among its section's (as they are set)."""
        data = dataclasses.asdict(self)
        for section in data.values():
            if isinstance(section, dict) and BACKEND_OPTIONS in section:
                section.update(section.pop(BACKEND_OPTIONS))
        return data


BUCKET_KEYS = ("buckets", "bucket_upscale")  # how samples are spread over caches, not how one cache is made


def single_shape_frames(frames: FramesConfig) -> dict[str, Any]:
    """The frames settings one cache is made with: every key but the bucket ones."""
    return {k: v for k, v in vars(frames).items() if k not in BUCKET_KEYS}


def target_fps(frames: FramesConfig) -> float | None:
    """None for the source rate, else the target frame rate."""
    return None if frames.fps == "source" else float(frames.fps)


def window_step(frames: FramesConfig) -> int | None:
    """None for `windows: one`, else N of `every N`."""
    return None if frames.windows == "one" else int(frames.windows.split()[1])
