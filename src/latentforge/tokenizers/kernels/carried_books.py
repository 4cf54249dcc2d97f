"""A plan book carried from another machine (`tokenizer.conv_plans_file`): the plans a build there decided, so
that a build here on the same GPU model and software runs the same kernels and writes the same bytes.

The file is either a build's book, ROOT/build/conv_plans/<environment digest>.json ({signature: plan}), or a
cache's cache_config.json, whose `conv_plans` holds one book per environment digest. From a cache_config.json the
book of this process's environment is taken; when the cache records no book of this environment but exactly
one book, that one is taken: naming the file is the user's explicit choice, and environments that differ only in
what does not change cuDNN's plans (a driver version) still agree. A plan name this cuDNN does not offer stops
the encode with its own error (tokenizers/kernels/planned_convs.py). Several books, none of this environment: the user
picks one by passing its ROOT/build/conv_plans/<digest>.json instead.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...errors import ConfigError, DamagedFile

CACHE_CONFIG_KEY = "conv_plans"  # the books' key in cache_config.json
PLAIN_BOOK = ""  # read_carried_plans' key for a file that is one book, valid whatever the environment
FIX = ("tokenizer.conv_plans_file must name a build's book (ROOT/build/conv_plans/<digest>.json) or a cache's "
       "cache_config.json; copy it again from the machine that wrote it")


def _is_book(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def read_carried_plans(path: str | Path) -> dict[str, dict[str, str]]:
    """{environment digest: {signature: plan}} of a cache_config.json, or {PLAIN_BOOK: book} of a book file;
    ConfigError when the file is missing or records no plans, DamagedFile when it is neither format."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"tokenizer.conv_plans_file={str(path)!r} does not exist; {FIX}") from None
    except (OSError, ValueError) as error:
        raise DamagedFile(path, str(error), FIX) from None
    if isinstance(data, dict) and (CACHE_CONFIG_KEY in data or "tokenizer" in data):  # a cache_config.json
        books = data.get(CACHE_CONFIG_KEY) or {}
        if not isinstance(books, dict) or not all(_is_book(book) for book in books.values()):
            raise DamagedFile(path, "its conv_plans is not a map of environment digests to plan books", FIX)
        books = {digest: book for digest, book in books.items() if book}
        if not books:
            raise ConfigError(f"tokenizer.conv_plans_file={str(path)!r} records no kernel plans (its cache was built "
                              "without recorded plans: on the CPU, or with tokenizer.conv_kernels=heuristics)")
        return books
    if _is_book(data):
        return {PLAIN_BOOK: data}
    raise DamagedFile(path, "neither a plan book (convolution signatures to plan names) nor a cache_config.json "
                      "with conv_plans", FIX)


def carried_book(path: str | Path, digest: str) -> dict[str, str]:
    """The book of `path` that a process of environment `digest` runs (the rule in this module's docstring)."""
    books = read_carried_plans(path)
    if PLAIN_BOOK in books:
        return dict(books[PLAIN_BOOK])
    if digest in books:
        return dict(books[digest])
    if len(books) == 1:
        return dict(next(iter(books.values())))
    raise ConfigError(f"tokenizer.conv_plans_file={str(path)!r} records books of the environments "
                      f"{', '.join(sorted(books))}, none of this one ({digest}); pass the one to run as a file: "
                      "ROOT/build/conv_plans/<digest>.json of that build, or that entry of the cache_config.json's "
                      "conv_plans saved on its own")
