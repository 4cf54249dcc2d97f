"""The image-to-video side of bench/tools/musubi_check.py: samples carrying `clip_image_embeds` and `image_cond_latent`
go through latentforge's own musubi export (export.targets.musubi_files, export.write.write_verified), and the
folder is loaded with musubi-tuner's own dataset code through the TOML of docs/export.md, as its Wan trainer does.

    python bench/tools/musubi_i2v_check.py MUSUBI_CHECKOUT

Samples are generated (seeded): 16-channel float16 latents [16, 3, 6, 8] of 9 frames at 64x48, y = Wan's
first-frame mask and a 16-channel latent, CLIP tokens [257, 1280], 4096-wide text. For each of musubi-tuner's I2V
tasks, i2v-14B (Wan2.1: CLIP and y) and i2v-A14B (Wan2.2: y only), the script
1. exports the samples (that task's streams only) and loads the folder with musubi's config_utils and VideoDataset;
   every batch must hold exactly the keys musubi's Wan trainer reads, in the shapes, dtypes and values we wrote,
   and latents + latents_image must fill the task's DiT input channels (WAN_CONFIGS[task].in_dim);
2. has musubi-tuner write the same samples itself, with wan_cache_latents.encode_and_save_batch (which builds the
   mask and y and names the tensors) around stand-ins for the VAE and CLIP that return the sample's tensors
   (no weights here); its files must equal ours: names, tensor keys, dtypes, values and metadata.
musubi's model modules (wan.modules: the VAE, CLIP, T5 and DiT) are replaced by empty stand-ins before import:
they need weights, and wan/modules/t5.py calls torch.cuda.current_device() at import, which a CPU torch refuses.

The interpreter needs latentforge (src/ first on PYTHONPATH) and musubi-tuner's dataset dependencies (toml,
voluptuous, opencv, easydict, accelerate, ftfy, wcwidth, regex: docs/export.md has the command). It prints a
table and exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import types
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from latentforge.export.musubi_i2v import CLIP_KEY, MUSUBI_I2V_TASKS, Y_KEY
from latentforge.export.targets import musubi_files
from latentforge.export.write import write_verified
from latentforge.pipeline.conditioning import wan_i2v_mask

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peer_checkout import checkout_commit  # noqa: E402  (a sibling module)
from musubi_check import _musubi_dataset_group, for_export, print_checks  # noqa: E402  (a sibling script)

FRAMES, WIDTH, HEIGHT = 9, 64, 48
LATENT_GRID = (3, 6, 8)  # Wan VAE: (9 - 1) / 4 + 1 frames, 48 / 8 x 64 / 8
CLIP_SHAPE = (257, 1280)
SAMPLES = 4
WANTED_KEYS = {"i2v-14B": {"latents", "latents_image", "clip", "t5", "timesteps"},
               "i2v-A14B": {"latents", "latents_image", "t5", "timesteps"}}


def synthetic_samples(count: int, seed: int = 0) -> list[dict]:
    """Sample dicts under the keys latentforge's training readers return, conditioning included."""
    generator = torch.Generator().manual_seed(seed)
    samples = []
    for index in range(count):
        latent = torch.randn(16, *LATENT_GRID, generator=generator).half()
        image_latent = torch.randn(16, *LATENT_GRID, generator=generator).half()
        length = 3 + index
        mask = wan_i2v_mask(1, *LATENT_GRID, torch.device("cpu"))[0].half()
        samples.append({"latent": latent, Y_KEY: torch.cat([mask, image_latent]),
                        CLIP_KEY: torch.randn(*CLIP_SHAPE, generator=generator).half(),
                        "text_embeddings": torch.randn(16, 4096, generator=generator).half(),
                        "text_length": torch.tensor(length), "prompt": f"prompt {index}",
                        "sample_id": f"synthetic-{index}", "pixels": torch.randint(0, 256, (FRAMES, HEIGHT, WIDTH, 3),
                                                                                  generator=generator).byte()})
    return samples


def for_task(sample: dict, task: str) -> dict:
    """The sample with only the conditioning `task` trains on (a cache built for it holds no other)."""
    return {key: value for key, value in sample.items() if key not in (CLIP_KEY, Y_KEY) or key in
            MUSUBI_I2V_TASKS[task]}


def export(samples: list[dict], task: str, folder: Path) -> None:
    config = SimpleNamespace(num_frames=FRAMES, width=WIDTH, height=HEIGHT)  # all musubi_files reads of it
    for index, sample in enumerate(samples):
        for file in musubi_files(config, index, for_task(sample, task), float("nan"), task):
            write_verified(folder, file)


def _stand_in_model_modules() -> None:
    """Empty musubi_tuner.wan.modules(.vae, .clip): wan_cache_latents imports them only for type names."""
    package = types.ModuleType("musubi_tuner.wan.modules")
    package.__path__ = []
    sys.modules["musubi_tuner.wan.modules"] = package
    for name, cls in (("vae", "WanVAE"), ("clip", "CLIPModel")):
        module = types.ModuleType(f"musubi_tuner.wan.modules.{name}")
        setattr(module, cls, type(cls, (), {}))
        sys.modules[module.__name__] = module


class _StandInVae:
    """Returns the clip's latent for the first encode of a batch, the y latent for the second, checking that the
    second input is [frame 0, zeros] as musubi builds it."""

    device, dtype = torch.device("cpu"), torch.float16

    def __init__(self, latents: list[torch.Tensor], image_latents: list[torch.Tensor]):
        self.outputs, self.first_input, self.problems = [latents, image_latents], None, []

    def encode(self, videos: torch.Tensor) -> list[torch.Tensor]:
        if self.first_input is None:
            self.first_input = videos.clone()
        elif not (torch.equal(videos[:, :, 0], self.first_input[:, :, 0]) and not videos[:, :, 1:].any()):
            self.problems.append("the y encode's input is not [frame 0, zeros]")
        return self.outputs.pop(0)


class _StandInClip:
    device = torch.device("cpu")

    def __init__(self, tokens: torch.Tensor):
        self.tokens = tokens

    def visual(self, images: torch.Tensor) -> torch.Tensor:
        return self.tokens


def musubi_writes(samples: list[dict], task: str, folder: Path) -> list[str]:
    """musubi-tuner's own latent files for `samples` (its encode_and_save_batch and save_latent_cache_wan)."""
    from musubi_tuner.dataset.image_video_dataset import ItemInfo
    from musubi_tuner.wan_cache_latents import encode_and_save_batch

    items = []
    for index, sample in enumerate(samples):
        name = f"{index:09d}_00000-{FRAMES:03d}_{WIDTH:04d}x{HEIGHT:04d}_wan.safetensors"
        items.append(ItemInfo(f"{index:09d}", sample["prompt"], (WIDTH, HEIGHT), frame_count=FRAMES,
                              content=sample["pixels"].numpy(), latent_cache_path=str(folder / name)))
    vae = _StandInVae([s["latent"] for s in samples], [s[Y_KEY][4:] for s in samples])
    clip = _StandInClip(torch.stack([s[CLIP_KEY] for s in samples])) if CLIP_KEY in MUSUBI_I2V_TASKS[task] else None
    encode_and_save_batch(vae, clip, True, items)
    return vae.problems


def _same_files(ours: Path, theirs: Path) -> list[str]:
    problems = []
    for path in sorted(theirs.glob("*_wan.safetensors")):
        mine, upstream = load_file(ours / path.name), load_file(path)
        if sorted(mine) != sorted(upstream):
            problems.append(f"{path.name}: keys {sorted(mine)}, musubi's {sorted(upstream)}")
            continue
        problems += [f"{path.name}: {key} differs" for key in upstream if not (
            mine[key].dtype == upstream[key].dtype and torch.equal(mine[key], upstream[key]))]
        with safe_open(str(ours / path.name), "pt") as a, safe_open(str(path), "pt") as b:
            if a.metadata() != b.metadata():
                problems.append(f"{path.name}: metadata {a.metadata()}, musubi's {b.metadata()}")
    return problems


def check_task(samples: list[dict], task: str, scratch: Path) -> list[tuple[str, str, bool]]:
    from musubi_tuner.wan.configs import WAN_CONFIGS

    folder, videos, theirs = scratch / task / "export", scratch / task / "no_videos", scratch / task / "musubi"
    for path in (folder, videos, theirs):
        path.mkdir(parents=True)
    export(samples, task, folder)
    config = scratch / task / "dataset.toml"
    config.write_text(for_export(folder, videos), encoding="utf-8")
    group = _musubi_dataset_group(config)
    by_latent = {s["latent"].numpy().tobytes(): s for s in samples}
    keys, shapes, bad = set(), set(), []
    for index in range(len(group)):
        batch = group[index]
        keys.add(" ".join(sorted(batch)))
        sample = by_latent[batch["latents"][0].numpy().tobytes()]
        wanted = {"latents_image": sample[Y_KEY], **({"clip": sample[CLIP_KEY]} if "clip" in WANTED_KEYS[task] else {})}
        for key, value in wanted.items():
            got = batch[key][0]
            shapes.add(f"{key} {list(batch[key].shape)} {batch[key].dtype}")
            if not (got.dtype == value.dtype and torch.equal(got, value)):
                bad.append(f"{key} of {sample['sample_id']}")
        if not torch.equal(batch["t5"][0], sample["text_embeddings"][: int(sample["text_length"])]):
            bad.append(f"t5 of {sample['sample_id']}")
    in_dim = WAN_CONFIGS[task].in_dim
    channels = int(batch["latents"].shape[1] + batch["latents_image"].shape[1])
    problems = musubi_writes([for_task(s, task) for s in samples], task, theirs)
    problems += _same_files(folder, theirs)
    uses_clip = not WAN_CONFIGS[task].v2_2  # wan_train_network.py reads batch["clip"] only when not v2_2
    return [
        (f"{task}: batches", f"{len(group)} of {len(samples)}; keys {' | '.join(sorted(keys))}",
         len(group) == len(samples) and keys == {" ".join(sorted(WANTED_KEYS[task]))}),
        (f"{task}: tensors as exported", "; ".join(sorted(shapes)) + (f"; differ: {bad}" if bad else ""), not bad),
        (f"{task}: DiT input channels", f"latents + latents_image = {channels}, in_dim {in_dim}; CLIP read by the "
         f"trainer: {uses_clip}", channels == in_dim and uses_clip == ("clip" in WANTED_KEYS[task])),
        (f"{task}: musubi's own writer", "identical files" if not problems else "; ".join(problems), not problems),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("musubi_checkout", type=Path)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.musubi_checkout / "src"))
    _stand_in_model_modules()
    samples = synthetic_samples(SAMPLES)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for task in MUSUBI_I2V_TASKS:
            rows += check_task(samples, task, Path(scratch))
    print(f"musubi-tuner {checkout_commit(args.musubi_checkout)}; torch {torch.__version__}, numpy {np.__version__}")
    return print_checks(rows)


if __name__ == "__main__":
    sys.exit(main())
