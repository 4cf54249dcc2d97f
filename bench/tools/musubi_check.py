"""Loads a `latentforge export --to musubi` folder with musubi-tuner's own dataset code, through the dataset TOML
that docs/export.md documents, the way musubi-tuner's trainer does (training/trainer_base.py, _build_dataset).

    python bench/tools/musubi_check.py MUSUBI_CHECKOUT EXPORT_DIR

MUSUBI_CHECKOUT is a musubi-tuner source tree; its src/ goes first on sys.path. The interpreter needs
musubi-tuner's dataset dependencies (torch, numpy, pillow, av, opencv, safetensors, toml, voluptuous), not
latentforge. The script fills the documented TOML in for EXPORT_DIR (its paths, and the resolution and frame
count read from the file names) and then:
1. loads it with musubi's load_user_config, validates it with ConfigSanitizer and BlueprintGenerator
   (architecture wan) and builds the dataset group for training (its prepare_for_training globs the cache);
2. reads every batch and checks what musubi's Wan trainer takes from it: `latents` [B, C, F', H', W'] and `t5`,
   a list of [length, D];
3. loads the same TOML without `video_directory` and shows musubi's error: the entry is then an image dataset.
It prints a table and exits 1 when a check fails. The documented-TOML helpers import nothing from musubi, so
the test suite reads the same TOML through them. bench/tools/musubi_i2v_check.py does the same for exports with
image-to-video conditioning, bench/tools/musubi_hunyuanvideo_check.py for `--to musubi-hunyuanvideo` exports.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peer_checkout import checkout_commit  # noqa: E402  (a sibling module)

DOC = Path(__file__).resolve().parents[2] / "docs" / "export.md"
TOML_FENCE = "```toml"
WAN_TEXT_WIDTH = 4096  # Wan DiT's text_dim: what the exported t5 rows must be for training to run
_SETTING = re.compile(r"^(?P<key>\w+)\s*=\s*(?P<value>.*?)(?P<comment>\s+#.*)?$")


def documented_toml(doc: Path = DOC) -> str:
    """The one ```toml block of docs/export.md, as written there."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == TOML_FENCE]
    if len(starts) != 1:
        raise ValueError(f"{doc} holds {len(starts)} ```toml blocks; the musubi check reads exactly one")
    end = next(i for i in range(starts[0] + 1, len(lines)) if lines[i].startswith("```"))
    return "\n".join(lines[starts[0] + 1:end]) + "\n"


def export_geometry(export_dir: Path, architecture: str = "wan") -> tuple[int, int, int]:
    """(width, height, frames) from a latent file's name, as musubi's VideoDataset.prepare_for_training reads it."""
    names = sorted(path.name for path in export_dir.glob(f"*_{architecture}.safetensors"))
    if not names:
        raise ValueError(f"{export_dir} holds no *_{architecture}.safetensors latent files")
    tokens = names[0].split("_")
    width, height = map(int, tokens[-2].split("x"))
    return width, height, int(tokens[-3].split("-")[1])


def filled_toml(text: str, overrides: dict[str, object], drop: tuple[str, ...] = ()) -> str:
    """`text` with the values of the keys in `overrides` replaced (JSON is TOML for strings, ints and lists of
    them) and the lines of `drop` left out; comments are kept."""
    out = []
    for line in text.splitlines():
        match = _SETTING.match(line)
        if match and match["key"] in drop:
            continue
        if match and match["key"] in overrides:
            line = f"{match['key']} = {json.dumps(overrides[match['key']])}{match['comment'] or ''}"
        out.append(line)
    return "\n".join(out) + "\n"


def for_export(export_dir: Path, video_dir: Path, drop: tuple[str, ...] = (), architecture: str = "wan") -> str:
    width, height, frames = export_geometry(export_dir, architecture)
    return filled_toml(documented_toml(), {"cache_directory": str(export_dir), "video_directory": str(video_dir),
                                           "resolution": [width, height], "target_frames": [frames]}, drop)


def _musubi_dataset_group(config_path: Path, architecture: str = "wan"):
    from multiprocessing import Value

    from musubi_tuner.dataset import config_utils
    from musubi_tuner.dataset.config_utils import BlueprintGenerator, ConfigSanitizer

    user_config = config_utils.load_user_config(str(config_path))
    blueprint = BlueprintGenerator(ConfigSanitizer()).generate(user_config, argparse.Namespace(debug_dataset=False),
                                                              architecture=architecture)
    return config_utils.generate_dataset_group_by_blueprint(blueprint.dataset_group, training=True,
                                                            shared_epoch=Value("i", 0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("musubi_checkout", type=Path)
    parser.add_argument("export_dir", type=Path)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.musubi_checkout / "src"))
    export_dir = args.export_dir.resolve()
    rows: list[tuple[str, str, bool]] = []
    with tempfile.TemporaryDirectory() as scratch:
        videos = Path(scratch) / "no_videos"
        videos.mkdir()
        config = Path(scratch) / "dataset.toml"
        config.write_text(for_export(export_dir, videos), encoding="utf-8")
        print(config.read_text(encoding="utf-8"))
        group = _musubi_dataset_group(config)
        samples = len(list(export_dir.glob("*_wan.safetensors")))
        rows.append(("training items found", f"{group.num_train_items} of {samples} latent files",
                     group.num_train_items == samples))
        shapes, widths, lengths, bad, seen = set(), set(), set(), 0, 0
        for index in range(len(group)):
            batch = group[index]
            latents, t5 = batch["latents"], batch["t5"]
            bad += not (latents.dim() == 5 and len(t5) == latents.shape[0] and all(t.dim() == 2 for t in t5))
            shapes.add(f"{list(latents.shape)} {latents.dtype}")
            widths |= {int(t.shape[1]) for t in t5}
            lengths |= {int(t.shape[0]) for t in t5}
            seen += latents.shape[0]
        rows.append(("batches read", f"{len(group)}; latents {', '.join(sorted(shapes))}; t5 a list of [length, D], "
                     f"lengths {min(lengths)}..{max(lengths)}", bad == 0 and seen == samples))
        rows.append((f"t5 width (a Wan DiT takes {WAN_TEXT_WIDTH})", ", ".join(map(str, sorted(widths))),
                     widths == {WAN_TEXT_WIDTH}))
        config.write_text(for_export(export_dir, videos, drop=("video_directory",)), encoding="utf-8")
        try:
            _musubi_dataset_group(config)
            rows.append(("without video_directory", "accepted", False))
        except Exception as error:  # voluptuous' MultipleInvalid: the entry was validated as an image dataset
            refused = f"{type(error).__name__}: {error}"
            rows.append(("without video_directory", f"refused: {refused}", "extra keys not allowed" in refused))
    print(f"musubi-tuner {checkout_commit(args.musubi_checkout)}, export {export_dir}")
    return print_checks(rows)


def print_checks(rows: list[tuple[str, str, bool]]) -> int:
    """The checks as a table; the exit code: 0 when every one is as expected."""
    print("| check | result | as expected |\n|---|---|---|")
    for name, result, ok in rows:
        print(f"| {name} | {result} | {'yes' if ok else 'NO'} |")
    return 0 if all(ok for _, _, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
