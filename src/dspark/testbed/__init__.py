"""Small real and random targets we can build here, for demos and tests."""
