"""`latentforge build --tokenizer wan2.1` stores exactly what a direct encode of the recorded frames gives:
frames decoded here with PyAV at the manifest's frame indices, encoded by the official Wan2.1 VAE module and by
Wan21Tokenizer in fp32, cast to float16 and compared bit for bit with the shard rows read by h5py."""

from __future__ import annotations

import av
import h5py
import numpy as np
import pytest
import torch
from av.video.reformatter import ColorRange, Colorspace, Interpolation

from helpers.builds import read_manifest
from helpers.media import pattern_frames, write_video
from helpers.wan_reference import official_vae_module, randomise_parameters
from latentforge import registry
from latentforge.cli.main import main
from latentforge.config import TokenizerConfig
from latentforge.tokenizers.wan.wan21 import LATENTS_MEAN, LATENTS_STD

SIZE, FRAMES, CLIP_FRAMES = 16, 5, 7
WAN21 = dict(dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
             temperal_downsample=[False, True, True], dropout=0.0)  # fmt: skip
# docs/frames.md: untagged H.264 is BT.601 limited range, converted by swscale with these flags
SWSCALE = Interpolation.BICUBIC | Interpolation.ACCURATE_RND | Interpolation.FULL_CHR_H_INT | Interpolation.BITEXACT


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    """The official WanVAE_ with random weights (gammas and biases spread), saved as Wan2.1_VAE.pth."""
    with torch.device("meta"):
        model = official_vae_module().WanVAE_(**WAN21)
    model = model.to_empty(device="cpu").eval().requires_grad_(False)
    randomise_parameters(model, seed=11)
    path = tmp_path_factory.mktemp("wan") / "Wan2.1_VAE.pth"
    torch.save(model.state_dict(), path)
    return model, path


def recorded_frames(video, indices) -> np.ndarray:
    """uint8 [T, H, W, 3] of the frames at `indices` (presentation order), decoded and converted by PyAV."""
    with av.open(str(video)) as container:
        frames = sorted(container.decode(video=0), key=lambda f: f.pts)
        return np.stack([frames[i].reformat(format="rgb24", src_colorspace=Colorspace.ITU601,
                                            src_color_range=ColorRange.MPEG, dst_color_range=ColorRange.JPEG,
                                            interpolation=SWSCALE).to_ndarray() for i in indices])


def test_build_latents_equal_a_direct_encode_of_the_recorded_frames(tmp_path, official):
    model, checkpoint = official
    dataset = tmp_path / "data"
    (dataset / "videos").mkdir(parents=True)
    (dataset / "metas").mkdir()
    for i in range(2):
        write_video(dataset / "videos" / f"clip_{i}.mp4", pattern_frames(CLIP_FRAMES, SIZE, SIZE, seed=i), fps=8)
        (dataset / "metas" / f"clip_{i}.txt").write_text(f"clip {i}", encoding="utf-8")
    root = tmp_path / "cache"
    code = main(["build", "--dataset", str(dataset), "--out", str(root), "--tokenizer", "wan2.1",
                 "--tokenizer-checkpoint", str(checkpoint), "--precision", "fp32", "--text", "none", "--quiet",
                 "--set", f"frames.num_frames={FRAMES}", "--set", f"frames.height={SIZE}",
                 "--set", f"frames.width={SIZE}", "--set", "frames.resize=stretch", "--set", "frames.window=center",
                 "--set", "output.batch_size=1", "--set", "output.min_free_bytes=0",
                 "--set", "run.workers_per_gpu=0"])
    assert code == 0

    tokenizer = registry.resolve("tokenizer", "wan2.1").from_config(
        TokenizerConfig(name="wan2.1", checkpoint=str(checkpoint), precision="fp32"), "cpu")
    scale = [torch.tensor(list(LATENTS_MEAN)), 1.0 / torch.tensor(list(LATENTS_STD))]  # Wan2_1_VAE's scale
    manifest = read_manifest(root)
    assert len(manifest) == 2
    for row in manifest:
        indices = row["provenance"]["frame_indices"]
        assert indices == [1, 2, 3, 4, 5]  # the centre window of 7 frames: a start of 0 would hide an offset
        pixels = recorded_frames(dataset / row["source_path"], indices)
        video = torch.from_numpy((pixels.astype(np.float64) / 127.5 - 1.0).astype(np.float32))
        video = video.permute(3, 0, 1, 2)[None].contiguous()  # [1, 3, T, H, W]
        with torch.no_grad():
            ours = tokenizer.encode(video)
            reference = model.encode(video, scale)
        assert torch.equal(ours, reference)
        with h5py.File(root / row["shard_path"], "r") as shard:
            stored = shard["video_latent_state"][row["cache_row"]]
        assert stored.dtype == np.float16 and stored.shape == (16, 2, 2, 2)
        np.testing.assert_array_equal(stored, reference[0].numpy().astype(np.float16))
        assert np.abs(stored).max() > 0.1  # a live network, not constants
