"""The typed build configuration: one dataclass per section, each key with its default and what it does (the
sections that turn raw video into clips are raw_video_sections.py's).

Parsing lives in parse.py, the checks that need no model in checks.py, and load.py puts them together.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .raw_video_sections import AudioConfig, CaptionsConfig, DedupConfig, SegmentsConfig

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
