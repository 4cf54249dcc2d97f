"""From decoded pixels to tokenizer input: the frame window, mask palettes, depth normalisation."""
