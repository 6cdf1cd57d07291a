"""The model zoo: catalogue entries (`models/*.toml`) and the models they build, registered with transformers."""

from benchbuild.zoo.catalogue import ModelEntry, build_model, list_entries, load_entry, register

__all__ = ["ModelEntry", "build_model", "list_entries", "load_entry", "register"]
