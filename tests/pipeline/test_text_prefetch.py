"""A unit's prompts are encoded while its batches run; every staged row still gets its own prompt's row."""

from __future__ import annotations

import h5py
import numpy as np

from helpers.builds import build_quietly, read_manifest, tiny_config, tiny_t5, tiny_world, write_table
from helpers.media import write_text_file
from latentforge.text.t5 import T5TextEncoder


def test_rows_follow_their_samples_around_a_rejected_one(tmp_path):
    world = tmp_path / "world"
    rows = tiny_world(world, clips=4)  # the last clip is too short: not used
    write_text_file(world / "videos" / "broken.mp4")
    bad = {**rows[0], "id": "clip_0005", "caption": "a prompt no row may carry", "video": "videos/broken.mp4"}
    table = write_table([rows[0], rows[1], bad, rows[2]], world / "samples.csv")
    model = tiny_t5(tmp_path / "tiny-t5", rows + [bad], d_model=64)
    root = tmp_path / "cache"
    # One unit of four: the prompts start before the decode finds the broken clip.
    result = build_quietly(tiny_config(table, root, text_path=model, overrides=("output.unit_size=4",)))
    assert result.num_samples == 3 and result.rejects_by_reason == {"unreadable": 1}
    encoder = T5TextEncoder(str(model))
    for row in read_manifest(root):
        with h5py.File(root / row["shard_path"], "r") as shard:
            stored = shard["t5_text_embeddings"][row["cache_row"]]
            length = int(shard["t5_text_length"][row["cache_row"]])
        alone = encoder.encode([row["prompt"]])
        assert length == int(alone.lengths[0])
        # a row depends on its prompt alone: bit for bit what the prompt gives encoded by itself
        np.testing.assert_array_equal(stored, alone.embeddings[0].astype(stored.dtype))


def test_the_text_thread_gives_the_rows_of_the_calling_thread(tmp_path):
    import threading

    from latentforge.pipeline.text_prefetch import TextPrefetch, select_rows
    from latentforge.pipeline.text_stage import TextSource
    from latentforge.text.prompt_cache import PromptCache

    world = tmp_path / "world"
    rows = tiny_world(world, clips=2)
    model = tiny_t5(tmp_path / "tiny-t5", rows, d_model=64)
    config = tiny_config(write_table(rows, world / "samples.csv"), tmp_path / "cache", text_path=model)
    prompts = [rows[1]["caption"], rows[0]["caption"], rows[1]["caption"]]
    threads: list[str] = []
    encoder = T5TextEncoder(str(model))
    encoder.model.register_forward_pre_hook(lambda *args: threads.append(threading.current_thread().name))
    inline = TextPrefetch(TextSource(config, PromptCache(encoder)), encoder.device, threaded=False)
    threaded = TextPrefetch(TextSource(config, PromptCache(encoder)), encoder.device, threaded=True)
    (here, _), (there, seconds) = inline.submit(prompts).result(), threaded.submit(prompts).result()
    threaded.close()
    assert threads[:2] == ["MainThread"] * 2 and all(t.startswith("text-encoder") for t in threads[2:])
    assert len(threads) == 4 and seconds > 0  # two distinct prompts, once per encoder call
    np.testing.assert_array_equal(here.batch.embeddings, there.batch.embeddings)
    picked = select_rows(there, [2, 0])
    np.testing.assert_array_equal(picked.batch.embeddings, there.batch.embeddings[[2, 0]])
    np.testing.assert_array_equal(picked.batch.lengths, there.batch.lengths[[2, 0]])
