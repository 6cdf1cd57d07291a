"""The model zoo: catalogue entries (`models/*.toml`) and the models they build, registered with transformers.

Importing `benchbuild.zoo` registers every zoo model type with `AutoConfig` / `AutoModelForSeq2SeqLM`, so after
`import benchbuild.zoo` a run folder loads with `AutoModelForSeq2SeqLM.from_pretrained(run_dir)`. (This loads torch
and transformers; the dataset side of the package never imports the zoo.)
"""

from benchbuild.zoo.catalogue import ModelEntry, build_model, list_entries, load_entry, register

__all__ = ["ModelEntry", "build_model", "list_entries", "load_entry", "register"]

register()
